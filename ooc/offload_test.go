package ooc_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm"
)

// TestOffloadPlannersMatchBaseline: Greedy, DynProg and vDNN plans pass the verifier
// (Compile refuses any that does not), keep the device within the budget and
// give the baseline's numbers bit for bit. On the CPU device the first step
// runs the window scheduler's tape while op times are measured, and the
// planner replans with them: the program says so.
func TestOffloadPlannersMatchBaseline(t *testing.T) {
	for _, name := range sortedNames(handBuilt) {
		build := handBuilt[name]
		ref := build(tensor.Float32, 1)
		bm, err := ooc.Compile(ref.g, ooc.Baseline())
		require.NoError(t, err)
		wantL, wantG, wantW := trainSteps(t, ref, bm, 2)
		peak := bm.Program().Peak
		bm.Close()
		for _, sc := range []ooc.Scheduler{ooc.Greedy{}, ooc.DynProg{}, ooc.VDNN{}} {
			t.Run(fmt.Sprintf("%s/%s", name, sc.Name()), func(t *testing.T) {
				budget := peak * 6 / 10
				if need, f := mostOneFunctionNeeds(t, build(tensor.Float32, 1)); need > budget {
					t.Skipf("no schedule exists: %s alone needs %d bytes, budget %d", f, need, budget)
				}
				got := build(tensor.Float32, 1)
				m, err := ooc.Compile(got.g, ooc.WithScheduler(sc), ooc.WithBudget(budget), ooc.WithPoison())
				require.NoError(t, err)
				defer m.Close()
				require.Equal(t, "window", m.Program().Scheduler)
				require.Contains(t, m.Program().Timing, "while op times are measured on cpu")
				gotL, gotG, gotW := trainSteps(t, got, m, 2)
				require.Equal(t, sc.Name(), m.Program().Scheduler)
				require.Contains(t, m.Program().Timing, "measured on cpu in the first step")
				require.NotContains(t, m.Program().Timing, "failed")
				require.Equal(t, wantL, gotL)
				require.Equal(t, wantG, gotG)
				require.Equal(t, wantW, gotW)
				st := m.Stats()
				require.LessOrEqual(t, st.PeakDeviceBytes, budget)
				require.Positive(t, st.SwapInBytes)
			})
		}
	}
}

// TestGreedyOffloadsTheFirstActivations: on a chain, Greedy offloads a
// prefix of the forward's activations, the fewest whose sizes cover the
// excess of the peak over the budget, each brought back before its use.
func TestGreedyOffloadsTheFirstActivations(t *testing.T) {
	n := chainNet(tensor.Float64, 1)
	tr, err := ooc.NewTrace(n.g)
	require.NoError(t, err)
	peak, err := ooc.InCorePeak(n.g)
	require.NoError(t, err)
	budget := peak * 7 / 10
	s, err := ooc.Greedy{}.Plan(&ooc.Problem{Trace: tr, Budget: budget})
	require.NoError(t, err)
	var out []int
	for i := range s.SwapOut {
		out = append(out, s.SwapOut[i]...)
	}
	require.NotEmpty(t, out)
	var sum int64
	for k, v := range out {
		sum += tr.DeviceBytes(v)
		if k > 0 {
			require.Less(t, tr.Vars[out[k-1]].Producer, tr.Vars[v].Producer, "offloaded in forward order")
		}
	}
	require.GreaterOrEqual(t, sum, peak-budget)
	p, err := ooc.Lower(tr, s)
	require.NoError(t, err)
	_, err = ooc.Verify(p, budget)
	require.NoError(t, err)
	ins, _ := p.Count(vm.SwapIn)
	require.Equal(t, len(out), ins, "each offloaded activation comes back once")
}
