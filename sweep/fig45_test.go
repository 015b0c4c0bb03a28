package sweep

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Fig. 4 and Fig. 5 plots, the reserved-memory table and the gains from a hand-made sweep.
func TestFig45(t *testing.T) {
	pt := func(s, a string, batch int, ok bool, ips float64, reserved int64) Result {
		return Result{Model: "m", Image: 8, Width: 16, Batch: batch, Scheduler: s, Allocator: a, OK: ok, IPS: ips,
			Reserved: reserved, Capacity: 4 << 30, Simulated: true, Device: "sim:x"}
	}
	rs := []Result{
		pt("baseline", "bestfit", 2, true, 5, 3<<30), pt("window", "bestfit", 2, true, 5, 3<<30), pt("window", "va", 2, true, 5, 4<<30),
		pt("baseline", "bestfit", 4, false, 0, 0), pt("window", "bestfit", 4, true, 4, 4<<30), pt("window", "va", 4, true, 4, 4<<30),
		pt("baseline", "bestfit", 8, false, 0, 0), pt("window", "bestfit", 8, false, 0, 0), pt("window", "va", 8, true, 3, 4<<30-(100<<20)),
	}
	dir := t.TempDir()
	for name, plot := range map[string]func([]Result, string) error{"fig4.svg": PlotSpeed, "fig5.svg": PlotReserved} {
		require.NoError(t, plot(rs, dir+"/"+name))
		raw, err := os.ReadFile(dir + "/" + name)
		require.NoError(t, err)
		require.Contains(t, string(raw), "window + va")
		require.Contains(t, string(raw), "SIMULATED on sim:x")
		require.Error(t, plot(nil, dir+"/"+name))
	}
	var buf bytes.Buffer
	require.NoError(t, WriteReservedTable(&buf, rs))
	require.Contains(t, buf.String(), "m 8x16, GiB reserved by the allocator")
	require.Contains(t, buf.String(), "3.90")

	g := Summarize(rs)
	require.Equal(t, 2, g.InCore)
	require.Equal(t, 8, g.Largest["window + va"])
	require.Equal(t, 4, g.Largest["window + bestfit"])
	require.InDelta(t, 100.0/4096, g.Spread("window + va"), 1e-12)
	buf.Reset()
	require.NoError(t, g.Write(&buf))
	require.True(t, strings.Contains(buf.String(), "window + va          largest batch 8 = 4.00x the in-core largest (2); reserved 3.90..4.00 GiB (spread 2.4%)"), buf.String())
}
