package ooc

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorgonia-ooc/outofcore/models"
	"github.com/gorgonia-ooc/outofcore/vm"
)

// swapOnlyBound is a second bound on any swap-only tape in the simulator:
// each function whose in-core need exceeds the budget starts with need -
// budget bytes off the device, copied out on the one device-to-host engine
// before it starts, and everything from it on runs after.
func swapOnlyBound(t *Trace, sim *vm.Sim, budget int64) (time.Duration, error) {
	tm, err := deviceTiming(t, sim)
	if err != nil {
		return 0, err
	}
	need, err := execNeeds(t, baseline{}.plan(t))
	if err != nil {
		return 0, err
	}
	var bound, after time.Duration
	after = tm.update
	for k := len(t.Funcs) - 1; k >= 0; k-- {
		after += tm.op[k]
		if need[k] > budget {
			bound = max(bound, sim.CopyTime(need[k]-budget)+after)
		}
	}
	return bound, nil
}

// TestSwapOnlyBoundResNet50 (opt-in: OOC_RECOMPUTE_FULL=1, about a
// minute): on ResNet-50 224 batch 32, sim:v100-pcie, at 80% of the compare
// range no swap-only tape can come within 1.10 x the lower bound, and the
// window scheduler and DynProg respect the bound above.
func TestSwapOnlyBoundResNet50(t *testing.T) {
	if os.Getenv("OOC_RECOMPUTE_FULL") == "" {
		t.Skip("opt-in (OOC_RECOMPUTE_FULL=1): plans ResNet-50 at 224x224")
	}
	m, err := models.Build("resnet50", models.Config{Batch: 32, Channels: 3, Height: 224, Width: 224, Classes: 1000, Seed: 1})
	require.NoError(t, err)
	tr, err := NewTrace(m.Graph)
	require.NoError(t, err)
	peak, err := tracePeak(tr)
	require.NoError(t, err)
	lo, least := int64(0), peak
	for least-lo > peak/2000+1 {
		mid := (lo + least) / 2
		if _, err := (Window{}).Plan(&Problem{Trace: tr, Budget: mid}); err == nil {
			least = mid
		} else {
			lo = mid
		}
	}
	prof, err := vm.LookupProfile("v100-pcie")
	require.NoError(t, err)
	prof.Capacity = 2*peak + 4<<30
	sim, err := vm.NewSim(prof)
	require.NoError(t, err)
	defer sim.Close()
	budget := least + (peak-least)*80/100
	lb, err := LowerBound(tr, sim, budget)
	require.NoError(t, err)
	bound, err := swapOnlyBound(tr, sim, budget)
	require.NoError(t, err)
	t.Logf("80%%: budget %d, LB %v, swap-only bound %v = %.3f x LB (simulated, v100-pcie)", budget, lb, bound, float64(bound)/float64(lb))
	require.Greater(t, float64(bound)/float64(lb), 1.10)
	for _, sc := range []Scheduler{Window{}, DynProg{}} {
		s, err := sc.Plan(&Problem{Trace: tr, Budget: budget, Device: sim})
		require.NoError(t, err)
		prog, err := Lower(tr, s)
		require.NoError(t, err)
		d, err := simulate(prog, sim, budget)
		require.NoError(t, err)
		t.Logf("%s: %.3f x LB", sc.Name(), float64(d)/float64(lb))
		require.GreaterOrEqual(t, d, bound, sc.Name())
	}
}
