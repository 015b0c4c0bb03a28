package ooc_test

import (
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm"
)

// TestLowerBoundBelowMakespans: over random graphs, budgets, links and
// schedulers, the bound is never above a simulated makespan, and equals
// the in-core makespan when nothing must move.
func TestLowerBoundBelowMakespans(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	checked := 0
	for trial := 0; trial < 40; trial++ {
		data := make([]byte, 24)
		rng.Read(data)
		n, ok := randomDAG(data)
		if !ok {
			continue
		}
		prof, err := vm.LookupProfile("v100-pcie")
		require.NoError(t, err)
		prof.LinkBandwidth = []float64{1e8, 1e9, 12.2e9, 1e11}[trial%4]
		dev, err := vm.NewSim(prof)
		require.NoError(t, err)
		tr, err := ooc.NewTrace(n.g)
		require.NoError(t, err)
		peak, err := ooc.InCorePeak(n.g)
		require.NoError(t, err)
		budget := peak * int64(30+rng.Intn(71)) / 100
		lb, err := ooc.LowerBound(tr, dev, budget)
		require.NoError(t, err)
		for _, sc := range []ooc.Scheduler{ooc.Window{}, ooc.LMS{SwapoutThreshold: 2, SwapinAhead: 1}, ooc.Greedy{}, ooc.DynProg{}, ooc.VDNN{}} {
			m, err := ooc.Compile(n.g, ooc.WithDevice(dev), ooc.WithBudget(budget), ooc.WithScheduler(sc), ooc.WithChunkSize(2<<20))
			if err != nil {
				continue // the budget is below what this scheduler can plan
			}
			require.NoError(t, m.RunAll())
			st := m.Stats()
			require.LessOrEqual(t, lb, st.StepTime, "%s, budget %d of peak %d", sc.Name(), budget, peak)
			if budget >= peak && sc.Name() == "window" {
				require.Equal(t, lb, st.StepTime, "in core the bound is the compute")
			}
			checked++
			require.NoError(t, m.Close())
		}
		require.NoError(t, dev.Close())
	}
	require.Greater(t, checked, 20)
}
