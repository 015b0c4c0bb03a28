package models

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"

	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm"
)

// TestRecomputeBitForBit: every family trains under tapes that drop
// activations and recompute them (batch norm included, its running
// statistics restored): ooc.Checkpoint at the least budget it plans for and
// at half the in-core peak, or, where recomputation alone cannot fit half,
// ooc.Hybrid there, planned with the times of a GPU whose host link is
// slow (so it recomputes as well as swaps). Its steps equal gorgonia's
// TapeMachine bit for bit, and the running statistics too. The heavy cases,
// and more steps, run with OOC_RECOMPUTE_FULL=1.
func TestRecomputeBitForBit(t *testing.T) {
	full := os.Getenv("OOC_RECOMPUTE_FULL") != ""
	seen := map[string]bool{}
	for _, c := range append(append([]trainCase{}, trainCases...), netTrainCases...) {
		if (c.heavy || seen[c.name]) && !full {
			continue // one case per family by default
		}
		seen[c.name] = true
		if !full {
			c.same = 1
		}
		t.Run(fmt.Sprintf("%s/%v/width-div%d", c.name, c.cfg, c.div), func(t *testing.T) { checkRecomputeBitForBit(t, c) })
	}
}

func checkRecomputeBitForBit(t *testing.T, c trainCase) {
	start := time.Now()
	x, y := trainData(t, c)
	ref, err := buildNarrow(t, c.name, c.cfg, c.div)
	require.NoError(t, err)
	require.NoError(t, G.Let(ref.Input, x))
	require.NoError(t, G.Let(ref.Labels, y))
	tm := G.NewTapeMachine(ref.Graph, G.BindDualValues(ref.Learnables...))
	defer tm.Close()
	_, want := train(t, ref, tm, c.same, c.same, c.lr)
	wantStats := runningStats(ref)

	got, err := buildNarrow(t, c.name, c.cfg, c.div)
	require.NoError(t, err)
	require.NoError(t, G.Let(got.Input, x))
	require.NoError(t, G.Let(got.Labels, y))
	inCore, err := ooc.Plan(got.Graph, ooc.Baseline())
	require.NoError(t, err)
	sc := ooc.WithScheduler(ooc.Checkpoint{})
	lo, least := int64(0), inCore.Peak
	for least-lo > inCore.Peak/64 {
		mid := (lo + least) / 2
		if _, err := ooc.Plan(got.Graph, ooc.WithBudget(mid), sc); err == nil {
			least = mid
		} else {
			lo = mid
		}
	}
	type run struct {
		budget int64
		opts   []ooc.Option
	}
	runs := []run{{inCore.Peak / 2, []ooc.Option{sc}}, {least, []ooc.Option{sc}}}
	if inCore.Peak/2 < least {
		runs[0].opts = []ooc.Option{ooc.WithScheduler(ooc.Hybrid{}), ooc.WithPlanningTimes(slowLinkGPU(t))}
	}
	for k, r := range runs {
		budget := r.budget
		if k > 0 {
			// A fresh graph: the first machine's run moved the weights.
			if got, err = buildNarrow(t, c.name, c.cfg, c.div); err != nil {
				t.Fatal(err)
			}
			require.NoError(t, G.Let(got.Input, x))
			require.NoError(t, G.Let(got.Labels, y))
		}
		machine, err := ooc.Compile(got.Graph, append(r.opts, ooc.BindDualValues(got.Learnables...), ooc.WithBudget(budget))...)
		require.NoError(t, err)
		_, have := train(t, got, machine, c.same, c.same, c.lr)
		for s := 0; s < c.same; s++ {
			require.Equal(t, -1, firstBitDiff(t, want[s].loss, have[s].loss), "step %d: loss %v, TapeMachine %v", s, have[s].loss, want[s].loss)
			for i, p := range got.Learnables {
				require.Equal(t, -1, firstBitDiff(t, want[s].grads[i], have[s].grads[i]), "step %d: gradient of %s", s, p.Name())
				require.Equal(t, -1, firstBitDiff(t, want[s].weights[i], have[s].weights[i]), "step %d: %s after Adam", s, p.Name())
			}
		}
		require.Equal(t, wantStats, runningStats(got), "running statistics advance once per step")
		st := machine.Stats()
		n, _ := machine.Program().Count(vm.Recompute)
		require.LessOrEqual(t, st.PeakDeviceBytes, budget)
		require.Positive(t, n, "the tape recomputes")
		t.Logf("%s: in-core peak %.2f MiB, budget %.2f MiB (checkpoint's least %.2f): peak %.2f MiB, %d recomputes (%d run), %.2f MiB swapped in, %v",
			machine.Program().Scheduler, mib(inCore.Peak), mib(budget), mib(least), mib(st.PeakDeviceBytes), n, st.Recomputes, mib(st.SwapInBytes), time.Since(start).Round(time.Millisecond))
		require.NoError(t, machine.Close())
	}
}

// runningStats are the running means and variances of a model's batch norms.
func runningStats(m *Model) [][]float64 {
	var out [][]float64
	for _, n := range m.Graph.AllNodes() {
		if rs, ok := n.Op().(vm.RunningStatser); ok {
			mean, variance := rs.RunningStats()
			out = append(out, mean, variance)
		}
	}
	return out
}

// slowLinkGPU is the gtx1080ti profile with no per-op launch cost and a
// 100 MB/s host link: for the tiny test models, recomputing then beats
// swapping as it does for full-size ones on PCIe.
func slowLinkGPU(t *testing.T) *vm.Sim {
	prof, err := vm.LookupProfile("gtx1080ti")
	require.NoError(t, err)
	prof.Launch, prof.LinkBandwidth = 0, 1e8
	sim, err := vm.NewSim(prof)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sim.Close() })
	return sim
}
