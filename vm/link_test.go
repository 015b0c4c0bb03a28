package vm

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSharedSwitchDividesBandwidth: a transfer gets min(its link, switch
// / transfers in flight) at every moment, per direction.
func TestSharedSwitchDividesBandwidth(t *testing.T) {
	prof := Profile{Name: "t", Capacity: 1 << 30, PeakFLOPS: 1e12, MemBandwidth: 1e11, LinkBandwidth: 10e9, DevicesPerSwitch: 2}
	for _, c := range []struct {
		name     string
		switchBW float64
		others   []span // the other device's D2H transfers
		dir      int
		want     time.Duration
	}{
		{"alone", 10e9, nil, dirD2H, 2 * time.Millisecond},
		{"half shared", 10e9, []span{{0, time.Millisecond}}, dirD2H, 2500 * time.Microsecond},
		{"all shared", 10e9, []span{{0, time.Second}}, dirD2H, 4 * time.Millisecond},
		{"later", 10e9, []span{{time.Millisecond, 2 * time.Millisecond}}, dirD2H, 2500 * time.Microsecond},
		{"other direction", 10e9, []span{{0, time.Second}}, dirH2D, 2 * time.Millisecond},
		{"wide switch", 20e9, []span{{0, time.Second}}, dirD2H, 2 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := prof
			p.SwitchBandwidth = c.switchBW
			sims, err := NewSimGroup(p, 3)
			require.NoError(t, err)
			require.Equal(t, 2, sims[0].GroupSize())
			require.Equal(t, 1, sims[2].GroupSize(), "the third device is behind a switch of its own")
			sims[1].link.last[dirD2H] = c.others
			sims[2].link.last[dirD2H] = []span{{0, time.Second}} // another switch: no effect
			got := sims[0].transfer(c.dir, 0, 20e6)
			require.InDelta(t, float64(c.want), float64(got), 2)
			require.Equal(t, 2*time.Millisecond, sims[0].Alone().transfer(c.dir, 0, 20e6))
		})
	}
}

func TestNewDevices(t *testing.T) {
	ds, err := NewDevices("sim:v100-pcie*3,cpu", 1<<20)
	require.NoError(t, err)
	require.Len(t, ds, 4)
	require.Equal(t, "cpu", ds[3].Name())
	require.Equal(t, int64(1<<20), ds[0].Capacity())
	require.Equal(t, 0, ds[0].(*Sim).GroupSize(), "v100-pcie gives every device its own link")
	for _, d := range ds {
		require.NoError(t, d.Close())
	}
	for _, bad := range []string{"cpu*0", "sim:nope*2", "cpu,,cpu", "cpu*x"} {
		_, err := NewDevices(bad, 0)
		require.Error(t, err, bad)
	}
}
