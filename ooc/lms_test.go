package ooc_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm"
)

func TestLMSPlacesSwapsByDistance(t *testing.T) {
	n := chainNet(tensor.Float64, 1)
	// A threshold beyond the graph's length swaps nothing.
	p, err := ooc.Plan(n.g, ooc.WithScheduler(ooc.LMS{SwapoutThreshold: 1000, SwapinAhead: 1}))
	require.NoError(t, err)
	in, out := swaps(p)
	require.Empty(t, in)
	require.Empty(t, out)
	// A short threshold swaps the forward activations the backward reads,
	// and each comes back exactly SwapinAhead functions before its use.
	const ahead = 2
	p, err = ooc.Plan(chainNet(tensor.Float64, 1).g, ooc.WithScheduler(ooc.LMS{SwapoutThreshold: 10, SwapinAhead: ahead}))
	require.NoError(t, err)
	in, _ = swaps(p)
	require.NotEmpty(t, in)
	fn := -1
	for _, x := range p.Instrs {
		switch x.Op {
		case vm.Exec:
			fn = x.Func
		case vm.SwapIn:
			// the next function to read it is `ahead` functions later
			use := -1
			for j := fn + 1; j < len(p.Funcs); j++ {
				if contains(p.Funcs[j].Inputs, x.Var) {
					use = j
					break
				}
			}
			// issued before f_{use-ahead}, i.e. after f_{use-ahead-1} ran
			require.Equal(t, ahead+1, use-fn, "swap-in of %s", p.Vars[x.Var].Name)
		}
	}
}

func TestLMSTunesInTheSimulator(t *testing.T) {
	prof, err := vm.LookupProfile("v100-pcie")
	require.NoError(t, err)
	dev, err := vm.NewSim(prof)
	require.NoError(t, err)
	defer dev.Close()
	g := chainNet(tensor.Float32, 1).g
	inCore, err := ooc.Plan(g, ooc.Baseline(), ooc.WithDevice(dev))
	require.NoError(t, err)
	tr, err := ooc.NewTrace(g)
	require.NoError(t, err)
	best, trials, err := ooc.TuneLMS(&ooc.Problem{Trace: tr, Budget: inCore.Peak * 6 / 10, Device: dev})
	require.NoError(t, err)
	var fits int
	for _, x := range trials {
		if x.Err == nil {
			fits++
			require.LessOrEqual(t, x.Peak, inCore.Peak*6/10)
			require.Positive(t, x.StepTime)
		}
	}
	require.Positive(t, fits)
	m, err := ooc.Compile(g, ooc.WithDevice(dev), ooc.WithBudget(inCore.Peak*6/10), ooc.WithScheduler(ooc.LMS{}))
	require.NoError(t, err)
	defer m.Close()
	require.NoError(t, m.RunAll())
	require.LessOrEqual(t, m.Stats().PeakDeviceBytes, inCore.Peak*6/10)
	t.Logf("tuned LMS %+v over %d trials (%d fit)", best, len(trials), fits)
}

func TestLMSMatchesTapeMachine(t *testing.T) {
	for _, name := range sortedNames(handBuilt) {
		build := handBuilt[name]
		ref := build(tensor.Float32, 1)
		bm, err := ooc.Compile(ref.g, ooc.Baseline())
		require.NoError(t, err)
		wantL, wantG, wantW := trainSteps(t, ref, bm, 2)
		bm.Close()
		got := build(tensor.Float32, 1)
		m, err := ooc.Compile(got.g, ooc.WithScheduler(ooc.LMS{SwapoutThreshold: 4, SwapinAhead: 2}), ooc.WithPoison())
		require.NoError(t, err, name)
		gotL, gotG, gotW := trainSteps(t, got, m, 2)
		m.Close()
		require.Equal(t, wantL, gotL, name)
		require.Equal(t, wantG, gotG, name)
		require.Equal(t, wantW, gotW, name)
	}
}

// An LMS auto-tune that finds nothing says what its number is (the
// scheduling budget, not the device's capacity) and the least budget that
// any of its settings would have needed, which then plans.
func TestLMSInfeasibleSaysWhatTheBudgetIs(t *testing.T) {
	prof, err := vm.LookupProfile("v100-pcie")
	require.NoError(t, err)
	dev, err := vm.NewSim(prof) // a 16 GiB device: far more than the budget
	require.NoError(t, err)
	defer dev.Close()
	g := chainNet(tensor.Float32, 1).g
	inCore, err := ooc.Plan(g, ooc.Baseline(), ooc.WithDevice(dev))
	require.NoError(t, err)
	tr, err := ooc.NewTrace(g)
	require.NoError(t, err)
	_, trials, err := ooc.TuneLMS(&ooc.Problem{Trace: tr, Budget: inCore.Peak / 10, Device: dev})
	require.Error(t, err)
	require.Contains(t, err.Error(), "scheduling budget")
	require.Contains(t, err.Error(), "not the device's capacity")
	least := int64(-1)
	for _, tr := range trials {
		require.Positive(t, tr.Peak, "every trial has its whole tape's peak")
		if least < 0 || tr.Peak < least {
			least = tr.Peak
		}
	}
	require.Contains(t, err.Error(), fmt.Sprintf("the least peak among them is %d bytes", least))
	_, _, err = ooc.TuneLMS(&ooc.Problem{Trace: tr, Budget: least, Device: dev})
	require.NoError(t, err, "the least peak named plans")
}
