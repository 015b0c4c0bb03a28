package ooc_test

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm"
)

// TestRecomputeMatchesTapeMachine: Checkpoint's and Hybrid's tapes, at
// half the in-core peak and at the least budget each plans for, recompute
// dropped activations and still equal gorgonia's TapeMachine bit for bit;
// the device never holds more than the budget. Hybrid plans with the
// gtx1080ti profile's times (a slow host link for these tiny ops, so it
// recomputes as well as swaps) and runs on the CPU device.
func TestRecomputeMatchesTapeMachine(t *testing.T) {
	for _, name := range sortedNames(handBuilt) {
		build := handBuilt[name]
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			for _, sched := range []ooc.Scheduler{ooc.Checkpoint{}, ooc.Hybrid{}} {
				if _, ok := sched.(ooc.Hybrid); ok && dt == tensor.Float64 {
					continue // TestHybridMixMatchesTapeMachine covers float64
				}
				t.Run(name+"/"+dt.String()+"/"+sched.Name(), func(t *testing.T) { checkRecompute(t, build, dt, sched) })
			}
		}
	}
}

func checkRecompute(t *testing.T, build builder, dt tensor.Dtype, sched ooc.Scheduler) {
	{
		{
			ref := build(dt, 1)
			tm := G.NewTapeMachine(ref.g, G.BindDualValues(ref.params...))
			wantL, wantG, wantW := trainSteps(t, ref, tm, 3)
			tm.Close()
			inCore, err := ooc.Plan(build(dt, 1).g, ooc.Baseline())
			require.NoError(t, err)
			opts := []ooc.Option{ooc.WithScheduler(sched)}
			var least int64
			if _, ok := sched.(ooc.Hybrid); ok {
				opts = append(opts, ooc.WithPlanningTimes(gtx1080ti(t)))
				// Its plans include the window scheduler's: bisecting on
				// the window's plans is cheaper.
				least = minFeasible(t, build, dt, inCore.Peak)
			} else {
				least = minFeasibleWith(t, build, dt, inCore.Peak, opts...)
			}
			for _, budget := range []int64{inCore.Peak / 2, least} {
				got := build(dt, 1)
				m, err := ooc.Compile(got.g, append(opts, ooc.BindDualValues(got.params...), ooc.WithPoison(), ooc.WithBudget(budget))...)
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
				t.Logf("budget %d (in-core %d, least %d): peak %d, %d recomputes in the tape, %d run, swapped in %d B",
					budget, inCore.Peak, least, st.PeakDeviceBytes, n, st.Recomputes, st.SwapInBytes)
				require.LessOrEqual(t, st.PeakDeviceBytes, budget)
				if _, ok := sched.(ooc.Checkpoint); ok {
					require.Zero(t, st.SwapInBytes, "checkpoint never swaps")
					require.Positive(t, n, "checkpoint below the in-core peak recomputes")
				}
				m.Close()
			}
		}
	}
}

func gtx1080ti(t *testing.T) *vm.Sim {
	t.Helper()
	prof, err := vm.LookupProfile("gtx1080ti")
	require.NoError(t, err)
	sim, err := vm.NewSim(prof)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sim.Close() })
	return sim
}

// elementwiseChain is a chain of cheap elementwise layers on large
// activations, h' = tanh(h ⊙ w) with w learnable: each rebuild is one
// memory-bound pass, while a swap moves the same bytes over the host link
// twice. Without values it only plans and simulates.
func elementwiseChain(dt tensor.Dtype, layers int, values bool, shape ...int) *net {
	rng := rand.New(rand.NewSource(3))
	g := G.NewGraph()
	value := func(scale float64) G.NodeConsOpt {
		if !values {
			return func(*G.Node) {}
		}
		return G.WithValue(randT(rng, dt, scale, shape...))
	}
	x := G.NewTensor(g, dt, len(shape), G.WithShape(shape...), G.WithName("x"), value(1))
	h := x
	var params G.Nodes
	for i := 0; i < layers; i++ {
		w := G.NewTensor(g, dt, len(shape), G.WithShape(shape...), G.WithName(fmt.Sprintf("w%d", i)), value(0.5))
		params = append(params, w)
		h = G.Must(G.Tanh(G.Must(G.HadamardProd(h, w))))
	}
	cost := G.Must(G.Mean(G.Must(G.Square(h))))
	if _, err := G.Grad(cost, params...); err != nil {
		panic(err)
	}
	return &net{g: g, x: x, cost: cost, params: params}
}

// TestHybridRecomputesWhereSwappingStalls: on a chain of elementwise
// layers, simulated on the gtx1080ti profile at half the in-core peak,
// Hybrid drops activations for recomputation, and its step is shorter
// than the swap-only window scheduler's, which stalls on the PCIe link.
func TestHybridRecomputesWhereSwappingStalls(t *testing.T) {
	n := elementwiseChain(tensor.Float32, 8, false, 64, 1024, 256) // 64 MiB activations
	sim := gtx1080ti(t)
	inCore, err := ooc.Plan(n.g, ooc.Baseline(), ooc.WithDevice(sim))
	require.NoError(t, err)
	budget := inCore.Peak / 2
	step := func(sc ooc.Scheduler) (vm.Stats, *vm.Program) {
		m, err := ooc.Compile(n.g, ooc.WithDevice(sim), ooc.WithBudget(budget), ooc.WithScheduler(sc))
		require.NoError(t, err)
		defer m.Close()
		require.NoError(t, m.RunAll())
		return m.Stats(), m.Program()
	}
	win, _ := step(ooc.Window{})
	hyb, prog := step(ooc.Hybrid{})
	recomputes, _ := prog.Count(vm.Recompute)
	t.Logf("simulated on gtx1080ti, budget %d MiB of %d: window %v (stall %v), hybrid %v (stall %v, %d recomputes taking %v, %d MiB swapped in)",
		budget>>20, inCore.Peak>>20, win.StepTime, win.StallTime, hyb.StepTime, hyb.StallTime, recomputes, hyb.RecomputeTime, hyb.SwapInBytes>>20)
	require.Positive(t, recomputes, "hybrid recomputes")
	require.Equal(t, recomputes, hyb.Recomputes)
	require.Positive(t, hyb.RecomputeTime)
	require.Less(t, hyb.StepTime, win.StepTime, "recomputing beats swapping here")
	require.LessOrEqual(t, hyb.PeakDeviceBytes, budget)
}

// TestHybridMixMatchesTapeMachine: a Hybrid tape that both swaps and
// recomputes, planned with the times of a device whose host link is slow
// and whose ops have no launch cost, runs on the CPU device bit for bit as
// gorgonia's TapeMachine.
func TestHybridMixMatchesTapeMachine(t *testing.T) {
	build := func(dt tensor.Dtype, _ int64) *net { return elementwiseChain(dt, 6, true, 4, 16, 16) }
	prof, err := vm.LookupProfile("gtx1080ti")
	require.NoError(t, err)
	prof.Launch, prof.LinkBandwidth = 0, 1e8
	slow, err := vm.NewSim(prof)
	require.NoError(t, err)
	defer slow.Close()
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		ref := build(dt, 1)
		tm := G.NewTapeMachine(ref.g, G.BindDualValues(ref.params...))
		wantL, wantG, wantW := trainSteps(t, ref, tm, 3)
		tm.Close()
		inCore, err := ooc.Plan(build(dt, 1).g, ooc.Baseline())
		require.NoError(t, err)
		least := minFeasible(t, build, dt, inCore.Peak)
		for _, budget := range []int64{inCore.Peak / 2, least} {
			got := build(dt, 1)
			m, err := ooc.Compile(got.g, ooc.BindDualValues(got.params...), ooc.WithPoison(), ooc.WithBudget(budget),
				ooc.WithScheduler(ooc.Hybrid{}), ooc.WithPlanningTimes(slow))
			require.NoError(t, err)
			gotL, gotG, gotW := trainSteps(t, got, m, 3)
			require.Equal(t, wantL, gotL, "loss")
			require.Equal(t, wantG, gotG, "gradients")
			require.Equal(t, wantW, gotW, "weights after 3 Adam steps")
			st := m.Stats()
			t.Logf("%v budget %d (in-core %d, least %d): peak %d, %d recomputes, %d B swapped in", dt, budget, inCore.Peak, least, st.PeakDeviceBytes, st.Recomputes, st.SwapInBytes)
			require.LessOrEqual(t, st.PeakDeviceBytes, budget)
			require.Positive(t, st.Recomputes)
			m.Close()
		}
	}
}

// TestTraceMarksRecomputable: gorgonia's batch norm (saved statistics),
// dropout (its RNG) and max pooling (its argmax mask) are never
// recomputable, models/layers' batch norm is (the machine restores its
// running statistics), and plain arithmetic is.
func TestTraceMarksRecomputable(t *testing.T) {
	g := G.NewGraph()
	x := G.NewTensor(g, tensor.Float64, 4, G.WithShape(2, 3, 4, 4), G.WithName("x"), G.WithInit(G.GlorotN(1)))
	bn, _, _, bnOp, err := G.BatchNorm(x, nil, nil, 0.9, 1e-5)
	require.NoError(t, err)
	_ = bnOp
	h := G.Must(G.Tanh(bn))
	h = G.Must(G.MaxPool2D(h, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}))
	h = G.Must(G.Dropout(h, 0.5))
	G.Must(G.Sum(G.Must(G.Reshape(h, tensor.Shape{24}))))
	tr, err := ooc.NewTrace(g)
	require.NoError(t, err)
	want := map[string]bool{"BatchNorm": false, "tanh": true, "MaxPool": false, "Dropout": false}
	found := map[string]bool{}
	for _, f := range tr.Funcs {
		op := f.Op.String()
		for k, r := range want {
			if strings.Contains(strings.ToLower(op), strings.ToLower(k)) {
				found[k] = true
				require.Equal(t, r, f.Recomputable, "%s", op)
			}
		}
	}
	require.Len(t, found, len(want), "ops found: %v", found)
}

// TestVerifyRefusesBadRecomputes: a recompute of a function that cannot be
// recomputed, or of a variable never computed, is refused.
func TestVerifyRefusesBadRecomputes(t *testing.T) {
	n := chainNet(tensor.Float32, 1)
	p, err := ooc.Plan(n.g, ooc.WithScheduler(ooc.Checkpoint{}), ooc.WithBudget(120000))
	require.NoError(t, err)
	at := -1
	for i, in := range p.Instrs {
		if in.Op == vm.Recompute {
			at = i
			break
		}
	}
	require.GreaterOrEqual(t, at, 0, "the tape recomputes")
	_, err = ooc.Verify(p, p.Budget)
	require.NoError(t, err)

	bad := *p
	bad.Funcs = append([]vm.Func(nil), p.Funcs...)
	bad.Funcs[p.Instrs[at].Func].Recomputable = false
	_, err = ooc.Verify(&bad, p.Budget)
	require.ErrorContains(t, err, "is not recomputable")

	// The same recompute before anything ran: its variable was never computed.
	early := *p
	early.Instrs = append([]vm.Instr{p.Instrs[at]}, p.Instrs...)
	_, err = ooc.Verify(&early, p.Budget)
	require.ErrorContains(t, err, "instruction 0 (recompute")
}

// TestHybridMeasuredOnCPU: without planning times, Hybrid on the CPU
// device runs its first step on the window scheduler's tape while the ops
// are timed, then replans with the measured times; every step equals
// gorgonia's TapeMachine bit for bit.
func TestHybridMeasuredOnCPU(t *testing.T) {
	build := residualNet
	ref := build(tensor.Float32, 1)
	tm := G.NewTapeMachine(ref.g, G.BindDualValues(ref.params...))
	wantL, wantG, wantW := trainSteps(t, ref, tm, 3)
	tm.Close()
	inCore, err := ooc.Plan(build(tensor.Float32, 1).g, ooc.Baseline())
	require.NoError(t, err)
	got := build(tensor.Float32, 1)
	m, err := ooc.Compile(got.g, ooc.BindDualValues(got.params...), ooc.WithPoison(), ooc.WithBudget(inCore.Peak/2),
		ooc.WithScheduler(ooc.Hybrid{}))
	require.NoError(t, err)
	defer m.Close()
	gotL, gotG, gotW := trainSteps(t, got, m, 3)
	require.Equal(t, wantL, gotL, "loss")
	require.Equal(t, wantG, gotG, "gradients")
	require.Equal(t, wantW, gotW, "weights after 3 Adam steps")
	p := m.Program()
	require.Equal(t, "hybrid", p.Scheduler)
	require.Contains(t, p.Timing, "measured on cpu")
	require.LessOrEqual(t, m.Stats().PeakDeviceBytes, inCore.Peak/2)
}
