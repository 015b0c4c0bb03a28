package sweep

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

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
