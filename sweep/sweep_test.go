package sweep

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSimulatedSweep: on a small simulated device a small ResNet runs out of
// memory in-core at the larger batches and still trains with the window
// scheduler, whose budget stays within the device.
func TestSimulatedSweep(t *testing.T) {
	rs, err := Run(Config{
		Model: "resnet18", Image: 32, Classes: 10, Batches: []int{128, 512},
		Device: "sim:v100-pcie", Capacity: 320 << 20, ChunkSize: 2 << 20,
		Schedulers: []string{"baseline", "window"}, Allocators: []string{"va"},
	})
	require.NoError(t, err)
	require.Len(t, rs, 4)
	byKey := map[string]Result{}
	for _, r := range rs {
		require.True(t, r.Simulated)
		require.Equal(t, "sim:v100-pcie", r.Device)
		byKey[fmt.Sprintf("%s/%d", r.Scheduler, r.Batch)] = r
		if r.OK {
			require.Positive(t, r.IPS)
			require.LessOrEqual(t, r.Budget, r.Capacity)
			require.LessOrEqual(t, r.Reserved, r.Capacity)
		}
	}
	require.True(t, byKey["baseline/128"].OK)
	require.False(t, byKey["baseline/512"].OK, "in-core batch 512 does not fit 320 MiB")
	require.Contains(t, byKey["baseline/512"].Error, "out of memory")
	w := byKey["window/512"]
	require.True(t, w.OK, w.Error)
	require.Positive(t, w.Swap)
	require.Less(t, w.Budget, w.Capacity, "the budget that works leaves room for weights and fragmentation")
	var buf bytes.Buffer
	require.NoError(t, WriteTable(&buf, rs))
	out := buf.String()
	require.Contains(t, out, "SIMULATED on sim:v100-pcie")
	require.True(t, strings.Contains(out, "window + va"))
	t.Log("\n" + out)
}

// TestSweepContext: a sweep whose context is done stops between points and
// returns the points measured before.
func TestSweepContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var log bytes.Buffer
	cfg := Config{
		Model: "smallcnn", Image: 16, Classes: 4, Batches: []int{2, 4},
		Device: "sim:v100-pcie", Capacity: 64 << 20, ChunkSize: 2 << 20,
		Schedulers: []string{"baseline", "window"}, Allocators: []string{"va"},
		Context: ctx, Log: &log,
	}
	rs, err := Run(cfg)
	require.NoError(t, err)
	require.Len(t, rs, 4, "a live context runs every point")
	cancel()
	rs, err = Run(cfg)
	require.NoError(t, err)
	require.Empty(t, rs, "a done context runs none")
}

func TestPlotBudgets(t *testing.T) {
	rs := []Result{
		{Model: "m", Image: 32, Batch: 8, Scheduler: "window", Allocator: "va", OK: true, Budget: 1 << 30, Reserved: 3 << 29, Capacity: 2 << 30, Simulated: true, Device: "sim:x"},
		{Model: "m", Image: 32, Batch: 16, Scheduler: "window", Allocator: "va", OK: true, Budget: 3 << 29, Reserved: 2 << 30, Capacity: 2 << 30, Simulated: true, Device: "sim:x"},
		{Model: "m", Image: 32, Batch: 16, Scheduler: "baseline", Allocator: "va", Capacity: 2 << 30, Simulated: true, Device: "sim:x"},
	}
	file := t.TempDir() + "/fig3.svg"
	require.NoError(t, PlotBudgets(rs, file))
	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Contains(t, string(raw), "<svg")
	require.Contains(t, string(raw), "window+va budget")
	require.Error(t, PlotBudgets(nil, file))
}

// TestPlotCompareAndOverhead: both compare figures draw a line per scheduler that planned, and
// refuse an empty result set.
func TestPlotCompareAndOverhead(t *testing.T) {
	rs := []CompareResult{
		{Model: "m", Image: 32, Batch: 8, Device: "sim:x", Scheduler: "window", Percent: 0, OK: true, Ratio: 1.2, Saved: 0.6, Overhead: 0.2},
		{Model: "m", Image: 32, Batch: 8, Device: "sim:x", Scheduler: "window", Percent: 100, OK: true, Ratio: 1, Saved: 0, Overhead: 0},
		{Model: "m", Image: 32, Batch: 8, Device: "sim:x", Scheduler: "checkpoint", Percent: 0},
		{Model: "m", Image: 32, Batch: 8, Device: "sim:x", Scheduler: "checkpoint", Percent: 100, OK: true, Ratio: 1, Saved: 0, Overhead: 0},
	}
	for name, plot := range map[string]func([]CompareResult, string) error{"compare.svg": PlotCompare, "overhead.svg": PlotOverhead} {
		file := t.TempDir() + "/" + name
		require.NoError(t, plot(rs, file))
		raw, err := os.ReadFile(file)
		require.NoError(t, err)
		for _, want := range []string{"<svg", ">window<", ">checkpoint<"} {
			require.Contains(t, string(raw), want, name)
		}
		require.Error(t, plot(nil, file))
	}
}

// TestSweepStops: with StopAtOOM a row is not tried past the first batch it
// failed at, and the sweep ends when every row has failed, even with
// UntilStop; hybrid sweeps as any named scheduler does; OnPoint sees every point
// as it comes; with a TimeLimit that has passed, no point runs and Run says
// so with a *TimeLimitError.
func TestSweepStops(t *testing.T) {
	base := Config{
		Model: "smallcnn", Image: 32, Classes: 4, Batches: []int{16, 256, 320},
		Device: "sim:v100-pcie", Capacity: 64 << 20, ChunkSize: 2 << 20,
		Schedulers: []string{"baseline"}, Allocators: []string{"va"},
	}
	for _, tc := range []struct {
		name      string
		stop      bool
		baselines []int // the batches the baseline row was tried at
	}{
		{"every batch", false, []int{16, 256, 320}},
		{"stop at OOM", true, []int{16, 256}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			cfg.StopAtOOM = tc.stop
			cfg.Schedulers = []string{"baseline", "window"} // window trains on: the sweep goes on without the baseline
			var seen int
			cfg.OnPoint = func(sofar []Result) { seen = len(sofar) }
			rs, err := Run(cfg)
			require.NoError(t, err)
			require.Equal(t, len(rs), seen, "OnPoint saw every point")
			var tried []int
			for _, r := range rs {
				if r.Scheduler == "baseline" {
					tried = append(tried, r.Batch)
				} else {
					require.True(t, r.OK, "window at batch %d: %s", r.Batch, r.Error)
				}
			}
			require.Equal(t, tc.baselines, tried)
		})
	}
	t.Run("hybrid", func(t *testing.T) {
		cfg := base
		cfg.Batches, cfg.Schedulers = []int{16}, []string{"hybrid"}
		rs, err := Run(cfg)
		require.NoError(t, err)
		require.Len(t, rs, 1)
		require.True(t, rs[0].OK, rs[0].Error)
	})
	t.Run("every row stopped", func(t *testing.T) {
		cfg := base
		cfg.Batches, cfg.UntilStop, cfg.StopAtOOM, cfg.Schedulers = []int{16, 256}, true, true, []string{"baseline"}
		rs, err := Run(cfg)
		require.NoError(t, err)
		require.Len(t, rs, 2, "UntilStop adds no batch once every row has failed")
		require.False(t, rs[1].OK)
	})
	t.Run("time limit", func(t *testing.T) {
		cfg := base
		cfg.TimeLimit = time.Nanosecond
		rs, err := Run(cfg)
		var limited *TimeLimitError
		require.ErrorAs(t, err, &limited)
		require.Equal(t, 16, limited.Batch)
		require.LessOrEqual(t, len(rs), 1, "at most the point under way when the limit passed")
		require.Contains(t, err.Error(), "time limit 1ns reached")
	})
	t.Run("bad config", func(t *testing.T) {
		for _, c := range []Config{
			{Batches: []int{1}, Schedulers: []string{"fifo"}},
			{Batches: []int{1}, TimeLimit: -time.Second},
		} {
			require.Error(t, c.Check())
		}
	})
}
