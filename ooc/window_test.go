package ooc_test

import (
	"fmt"
	"math/rand"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm"
)

// Hand-built graphs whose activations are all the same size, so that a
// budget in activations is easy to reason about.
const width, rows = 32, 64

func dense(g *G.ExprGraph, rng *rand.Rand, dt tensor.Dtype, name string, r, c int, scale float64) *G.Node {
	return G.NewMatrix(g, dt, G.WithShape(r, c), G.WithName(name), G.WithValue(randT(rng, dt, scale, r, c)))
}

func finish(g *G.ExprGraph, rng *rand.Rand, dt tensor.Dtype, x *G.Node, h *G.Node, params G.Nodes) *net {
	y := G.NewMatrix(g, dt, G.WithShape(rows, 4), G.WithName("y"), G.WithValue(onehot(rng, dt, rows, 4)))
	wo := dense(g, rng, dt, "wout", width, 4, 0.2)
	params = append(params, wo)
	cost := softmaxCE(G.Must(G.Mul(h, wo)), y)
	if _, err := G.Grad(cost, params...); err != nil {
		panic(err)
	}
	return &net{g: g, x: x, y: y, cost: cost, params: params}
}

// depth makes the in-core peak several times what any one function needs,
// so that a quarter of it is a feasible budget.
const depth = 24

// chainNet: h_{i+1} = tanh(h_i W_i).
func chainNet(dt tensor.Dtype, seed int64) *net {
	rng := rand.New(rand.NewSource(seed))
	g := G.NewGraph()
	x := dense(g, rng, dt, "x", rows, width, 1)
	h := x
	var ps G.Nodes
	for i := 0; i < depth; i++ {
		w := dense(g, rng, dt, fmt.Sprintf("w%d", i), width, width, 0.3)
		ps = append(ps, w)
		h = G.Must(G.Tanh(G.Must(G.Mul(h, w))))
	}
	return finish(g, rng, dt, x, h, ps)
}

// residualNet: h_{i+1} = tanh(h_i W_i) + h_i.
func residualNet(dt tensor.Dtype, seed int64) *net {
	rng := rand.New(rand.NewSource(seed))
	g := G.NewGraph()
	x := dense(g, rng, dt, "x", rows, width, 1)
	h := x
	var ps G.Nodes
	for i := 0; i < depth; i++ {
		w := dense(g, rng, dt, fmt.Sprintf("w%d", i), width, width, 0.1)
		ps = append(ps, w)
		h = G.Must(G.Add(G.Must(G.Tanh(G.Must(G.Mul(h, w)))), h))
	}
	return finish(g, rng, dt, x, h, ps)
}

// unetNet: a long skip from the first activation to the last, as U-Net's
// encoder-decoder connections.
func unetNet(dt tensor.Dtype, seed int64) *net {
	rng := rand.New(rand.NewSource(seed))
	g := G.NewGraph()
	x := dense(g, rng, dt, "x", rows, width, 1)
	w0 := dense(g, rng, dt, "w0", width, width, 0.3)
	skip := G.Must(G.Tanh(G.Must(G.Mul(x, w0))))
	ps := G.Nodes{w0}
	h := skip
	for i := 1; i < depth; i++ {
		w := dense(g, rng, dt, fmt.Sprintf("w%d", i), width, width, 0.3)
		ps = append(ps, w)
		h = G.Must(G.Tanh(G.Must(G.Mul(h, w))))
	}
	h = G.Must(G.Add(h, skip))
	return finish(g, rng, dt, x, h, ps)
}

// denseNet: every layer reads the concatenation of all earlier ones.
func denseNet(dt tensor.Dtype, seed int64) *net {
	rng := rand.New(rand.NewSource(seed))
	g := G.NewGraph()
	x := dense(g, rng, dt, "x", rows, width, 1)
	feats := []*G.Node{x}
	var ps G.Nodes
	for i := 0; i < 8; i++ {
		cat := feats[0]
		if len(feats) > 1 {
			cat = G.Must(G.Concat(1, feats...))
		}
		w := dense(g, rng, dt, fmt.Sprintf("w%d", i), width*len(feats), width, 0.2)
		ps = append(ps, w)
		feats = append(feats, G.Must(G.Tanh(G.Must(G.Mul(cat, w)))))
	}
	return finish(g, rng, dt, x, feats[len(feats)-1], ps)
}

var handBuilt = map[string]builder{"chain": chainNet, "residual": residualNet, "unet-skip": unetNet, "dense-concat": denseNet}

func sortedNames[T any](m map[string]T) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// minFeasible is the smallest budget the window scheduler can plan for,
// found by bisection on Plan (with Window named: the default, Auto, plans
// Hybrid too at every step, and falls back on Window where it fails).
func minFeasible(t *testing.T, build builder, dt tensor.Dtype, hi int64) int64 {
	t.Helper()
	return minFeasibleWith(t, build, dt, hi)
}

// minFeasibleWith is minFeasible for a compile with the given options (a
// WithScheduler among them replaces Window).
func minFeasibleWith(t *testing.T, build builder, dt tensor.Dtype, hi int64, opts ...ooc.Option) int64 {
	t.Helper()
	return leastBudget(hi, func(b int64) bool {
		_, err := ooc.Plan(build(dt, 1).g, append([]ooc.Option{ooc.WithBudget(b), ooc.WithScheduler(ooc.Window{})}, opts...)...)
		return err == nil
	})
}

// leastBudget bisects (0, hi] to within 64 bytes for the least budget that
// fits.
func leastBudget(hi int64, fits func(budget int64) bool) int64 {
	lo := int64(0)
	for hi-lo > 64 {
		mid := (lo + hi) / 2
		if fits(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// TestWindowMatchesTapeMachine: under 100%, 50% and 25% of the in-core
// peak and under the smallest feasible budget, with both allocators, the
// window scheduler's runs equal the TapeMachine's bit for bit, and the
// device never holds more than the budget.
func TestWindowMatchesTapeMachine(t *testing.T) {
	for _, name := range sortedNames(handBuilt) {
		build := handBuilt[name]
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			ref := build(dt, 1)
			tm := G.NewTapeMachine(ref.g, G.BindDualValues(ref.params...))
			wantL, wantG, wantW := trainSteps(t, ref, tm, 3)
			tm.Close()
			inCore, err := ooc.Plan(build(dt, 1).g, ooc.Baseline())
			require.NoError(t, err)
			peak := inCore.Peak
			budgets := []struct {
				label string
				bytes int64
			}{
				{"100%", peak}, {"50%", peak / 2}, {"25%", peak / 4}, {"min", minFeasible(t, build, dt, peak)},
			}
			for _, b := range budgets {
				for _, kind := range []ooc.AllocatorKind{ooc.VA, ooc.BestFit} {
					t.Run(fmt.Sprintf("%s/%v/%s/%v", name, dt, b.label, kind), func(t *testing.T) {
						if need, f := mostOneFunctionNeeds(t, build(dt, 1)); need > b.bytes {
							require.NotEqual(t, "min", b.label, "the bisection found a schedule below a function's need")
							t.Skipf("no schedule exists: %s alone needs %d bytes resident, the budget is %d", f, need, b.bytes)
						}
						got := build(dt, 1)
						m, err := ooc.Compile(got.g, ooc.BindDualValues(got.params...), ooc.WithBudget(b.bytes),
							ooc.WithAllocator(kind), ooc.WithChunkSize(2<<20), ooc.WithPoison())
						require.NoError(t, err, "budget %d of peak %d", b.bytes, peak)
						defer m.Close()
						gotL, gotG, gotW := trainSteps(t, got, m, 3)
						require.Equal(t, wantL, gotL, "loss")
						require.Equal(t, wantG, gotG, "gradients")
						require.Equal(t, wantW, gotW, "weights after 3 Adam steps")
						st := m.Stats()
						require.LessOrEqual(t, st.PeakDeviceBytes, b.bytes)
						if b.bytes < peak {
							require.Positive(t, st.SwapInBytes, "below the in-core peak something must move")
						}
						t.Logf("budget %d (peak %d): device peak %d, swapped in %d B, out %d B", b.bytes, peak, st.PeakDeviceBytes, st.SwapInBytes, st.SwapOutBytes)
					})
				}
			}
		}
	}
}

// swaps lists the variables a tape swaps in and out, by node name.
func swaps(p *vm.Program) (in, out map[string]int) {
	in, out = map[string]int{}, map[string]int{}
	for _, x := range p.Instrs {
		switch x.Op {
		case vm.SwapIn:
			in[p.Vars[x.Var].Name]++
		case vm.SwapOut:
			out[p.Vars[x.Var].Name]++
		}
	}
	return
}

func TestWindowPlacesSwaps(t *testing.T) {
	t.Run("no swaps with room and a large window", func(t *testing.T) {
		for _, name := range sortedNames(handBuilt) {
			n := handBuilt[name](tensor.Float64, 1)
			inCore, err := ooc.Plan(n.g, ooc.Baseline())
			require.NoError(t, err)
			p, err := ooc.Plan(n.g, ooc.WithBudget(inCore.Peak), ooc.WithWindow(1<<40))
			require.NoError(t, err)
			in, out := swaps(p)
			require.Empty(t, in, name)
			require.Empty(t, out, name)
			require.Equal(t, inCore.Peak, p.Peak, name)
		}
	})
	t.Run("the long skip goes to the host and comes back before the add", func(t *testing.T) {
		n := unetNet(tensor.Float64, 1)
		inCore, err := ooc.Plan(n.g, ooc.Baseline())
		require.NoError(t, err)
		act := int64(rows * width * 8)
		p, err := ooc.Plan(n.g, ooc.WithBudget(inCore.Peak/2), ooc.WithWindow(4*act))
		require.NoError(t, err)
		// The add that closes the skip is the one function whose second
		// operand was made by one of the first functions (the first layer).
		var skip, add = -1, -1
		for i, f := range p.Funcs {
			if len(f.Inputs) != 2 {
				continue
			}
			if pr := p.Vars[f.Inputs[1]].Producer; pr >= 0 && pr < 3 && i > 10 && add < 0 {
				skip, add = f.Inputs[1], i
			}
		}
		require.GreaterOrEqual(t, skip, 0)
		require.GreaterOrEqual(t, add, 0)
		outAt, inAt, execAt := -1, -1, -1
		for pc, x := range p.Instrs {
			switch {
			case x.Op == vm.SwapOut && x.Var == skip && outAt < 0:
				outAt = pc
			case x.Op == vm.SwapIn && x.Var == skip && inAt < 0:
				inAt = pc
			case x.Op == vm.Exec && x.Func == add:
				execAt = pc
			}
		}
		require.Positive(t, outAt, "the skip is swapped out")
		require.Greater(t, inAt, outAt, "and swapped back in")
		require.Less(t, inAt, execAt, "before the add that reads it")
	})
	t.Run("a smaller window prefetches later", func(t *testing.T) {
		n := chainNet(tensor.Float64, 1)
		inCore, err := ooc.Plan(n.g, ooc.Baseline())
		require.NoError(t, err)
		act := int64(rows * width * 8)
		distance := func(w int64) float64 {
			p, err := ooc.Plan(chainNet(tensor.Float64, 1).g, ooc.WithBudget(inCore.Peak/2), ooc.WithWindow(w), ooc.WithScheduler(ooc.Window{}))
			require.NoError(t, err)
			// mean number of execs between a swap-in and the first exec reading it
			var sum, cnt float64
			for pc, x := range p.Instrs {
				if x.Op != vm.SwapIn {
					continue
				}
				execs := 0
				for _, y := range p.Instrs[pc+1:] {
					if y.Op == vm.Exec {
						execs++
						if contains(p.Funcs[y.Func].Inputs, x.Var) {
							break
						}
					}
				}
				sum += float64(execs)
				cnt++
			}
			require.Positive(t, cnt)
			return sum / cnt
		}
		small, large := distance(2*act), distance(6*act)
		require.Less(t, small, large, "swap-in distance grows with the window")
		_ = n
	})
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// mostOneFunctionNeeds is a lower bound on any feasible budget: the
// largest resident need of one function (Trace.Need).
func mostOneFunctionNeeds(t *testing.T, n *net) (int64, string) {
	tr, err := ooc.NewTrace(n.g)
	require.NoError(t, err)
	need, at := tr.MaxNeed()
	return need, tr.Funcs[at].Node.Name()
}
