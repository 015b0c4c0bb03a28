package ooc_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm"
)

// TestRecomputeMatchesTapeMachine: Checkpoint's tapes, at half the
// in-core peak and at the least budget it plans for, recompute dropped
// activations and still equal gorgonia's TapeMachine bit for bit; the
// device never holds more than the budget.
func TestRecomputeMatchesTapeMachine(t *testing.T) {
	for _, name := range sortedNames(handBuilt) {
		build := handBuilt[name]
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			ref := build(dt, 1)
			tm := G.NewTapeMachine(ref.g, G.BindDualValues(ref.params...))
			wantL, wantG, wantW := trainSteps(t, ref, tm, 3)
			tm.Close()
			inCore, err := ooc.Plan(build(dt, 1).g, ooc.Baseline())
			require.NoError(t, err)
			sc := ooc.WithScheduler(ooc.Checkpoint{})
			least := minFeasibleWith(t, build, dt, inCore.Peak, sc)
			for _, budget := range []int64{inCore.Peak / 2, least} {
				got := build(dt, 1)
				m, err := ooc.Compile(got.g, ooc.BindDualValues(got.params...), ooc.WithPoison(), ooc.WithBudget(budget), sc)
				if budget < least {
					require.Error(t, err)
					continue
				}
				require.NoError(t, err)
				gotL, gotG, gotW := trainSteps(t, got, m, 3)
				require.Equal(t, wantL, gotL, "loss")
				require.Equal(t, wantG, gotG, "gradients")
				require.Equal(t, wantW, gotW, "weights after 3 Adam steps")
				st := m.Stats()
				n, _ := m.Program().Count(vm.Recompute)
				t.Logf("%s %v budget %d (in-core %d, least %d): peak %d, %d recomputes in the tape", name, dt, budget, inCore.Peak, least, st.PeakDeviceBytes, n)
				require.LessOrEqual(t, st.PeakDeviceBytes, budget)
				require.Zero(t, st.SwapInBytes)
				m.Close()
			}
		}
	}
}
