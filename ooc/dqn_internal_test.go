package ooc

import (
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/vm"
)

// dqnChain is a chain of elementwise layers (tanh(h * w)) whose trace the
// DQN tests plan: big activations, cheap ops, so on the gtx1080ti profile
// swapping stalls and recomputing is cheap.
func dqnChain(t *testing.T, layers int) *Trace {
	t.Helper()
	g := G.NewGraph()
	shape := []int{64, 1024, 256}
	h := G.NewTensor(g, tensor.Float32, 3, G.WithShape(shape...), G.WithName("x"))
	var params G.Nodes
	for i := range layers {
		w := G.NewTensor(g, tensor.Float32, 3, G.WithShape(shape...), G.WithName(fmt.Sprintf("w%d", i)))
		params = append(params, w)
		h = G.Must(G.Tanh(G.Must(G.HadamardProd(h, w))))
	}
	cost := G.Must(G.Mean(G.Must(G.Square(h))))
	_, err := G.Grad(cost, params...)
	require.NoError(t, err)
	tr, err := NewTrace(g)
	require.NoError(t, err)
	return tr
}

func dqnSim(t *testing.T) *vm.Sim {
	t.Helper()
	prof, err := vm.LookupProfile("gtx1080ti")
	require.NoError(t, err)
	sim, err := vm.NewSim(prof)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sim.Close() })
	return sim
}

// bruteForce returns the fastest plan over every keep/offload/drop choice
// of every candidate that fits the budget.
func bruteForce(t *testing.T, e *dqnEnv) (best *dqnEval, least int64) {
	t.Helper()
	least = -1
	act := make([]int8, len(e.cands))
	var walk func(k int)
	walk = func(k int) {
		if k == len(act) {
			ev, err := e.eval(act)
			require.NoError(t, err)
			peak, err := Verify(ev.sched.tape, 0)
			require.NoError(t, err)
			if least < 0 || peak < least {
				least = peak
			}
			if ev.fits && (best == nil || ev.step < best.step) {
				best = ev
			}
			return
		}
		for a := int8(dqnKeep); a <= dqnDrop; a++ {
			if a == dqnDrop && !e.canDrp[k] {
				continue
			}
			act[k] = a
			walk(k + 1)
		}
	}
	walk(0)
	return best, least
}

// TestDQNConvergesToBruteForceOptimum: on tiny chains, at budgets where
// the choice matters, the greedy policy of a DQN trained for a fixed
// number of seeded episodes plans a step as fast (simulated, gtx1080ti)
// as the best of every keep/offload/drop plan. The 3-layer chain at the
// tight budget needs 150 episodes (about 20 s here): it runs with
// OOC_DQN_LONG=1.
func TestDQNConvergesToBruteForceOptimum(t *testing.T) {
	sim := dqnSim(t)
	for _, tc := range []struct {
		layers   int
		frac     float64 // budget: the least any plan needs, plus this fraction of the rest up to the in-core peak
		episodes int
		long     bool
	}{{2, 0.3, DefaultDQNEpisodes, false}, {3, 0.7, DefaultDQNEpisodes, false}, {3, 0.3, 150, true}} {
		t.Run(fmt.Sprintf("%dlayers/%.0f%%", tc.layers, 100*tc.frac), func(t *testing.T) {
			if tc.long && os.Getenv("OOC_DQN_LONG") == "" {
				t.Skip("trains 150 episodes (about 20 s on 2 shared vCPUs); set OOC_DQN_LONG=1 to run")
			}
			tr := dqnChain(t, tc.layers)
			in, err := Lower(tr, NewSchedule(len(tr.Funcs)))
			require.NoError(t, err)
			peak, err := Verify(in, 0)
			require.NoError(t, err)
			e, err := newDQNEnv(tr, sim, 0)
			require.NoError(t, err)
			_, least := bruteForce(t, e)
			budget := least + int64(float64(peak-least)*tc.frac)
			e, err = newDQNEnv(tr, sim, budget)
			require.NoError(t, err)
			opt, _ := bruteForce(t, e)
			require.NotNil(t, opt, "some plan fits")
			a, err := newDQNAgent(e, NewDQNWeights(16, 4, 1))
			require.NoError(t, err)
			_, err = a.train(tc.episodes, 1)
			require.NoError(t, err)
			act, _, _, err := a.greedy()
			require.NoError(t, err)
			got, err := e.eval(act)
			require.NoError(t, err)
			t.Logf("%d candidates, budget %d MiB of %d: optimum %v %v, dqn %v %v (fits %v), %d plans simulated",
				len(e.cands), budget>>20, peak>>20, opt.step, opt.act, got.step, act, got.fits, len(e.memo))
			require.True(t, got.fits)
			require.Equal(t, opt.step, got.step)
		})
	}
}

// TestDQNInferMatchesGraph: the plain-Go Q the planner acts on is the
// gorgonia graph's Q, for a few states of a chain.
func TestDQNInferMatchesGraph(t *testing.T) {
	tr := dqnChain(t, 3)
	e, err := newDQNEnv(tr, dqnSim(t), 1<<30)
	require.NoError(t, err)
	w := NewDQNWeights(8, 3, 5)
	a, err := newDQNAgent(e, w)
	require.NoError(t, err)
	for _, st := range []struct {
		act []int8
		k   int
	}{{nil, 0}, {[]int8{dqnOffload}, 1}, {[]int8{dqnDrop, dqnKeep, dqnOffload}, 3}} {
		got, err := a.q(st.act, st.k)
		require.NoError(t, err)
		qg, all := w.infer(e, e.features(st.act, st.k), 1+3*st.k)
		nodes, _ := e.valid(st.k)
		for i, nd := range nodes {
			require.InDelta(t, got[i], qg+all[nd], 1e-9, "state %v at %d, node %d", st.act, st.k, nd)
		}
	}
}
