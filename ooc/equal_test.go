package ooc_test

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/ooc"
)

// net is a model built twice from one seed: once for gorgonia's
// TapeMachine, once for the out-of-core machine.
type net struct {
	g          *G.ExprGraph
	x, y, cost *G.Node
	params     G.Nodes
	read       *G.Value // where a gorgonia.Read of the cost stores it, if the graph has one
	out        *G.Node  // the prediction (logits or probabilities), where the builder names one
}

type builder func(dt tensor.Dtype, seed int64) *net

// randT returns a tensor of the given shape filled from rng.
func randT(rng *rand.Rand, dt tensor.Dtype, scale float64, shape ...int) *tensor.Dense {
	n := tensor.Shape(shape).TotalSize()
	switch dt {
	case tensor.Float32:
		b := make([]float32, n)
		for i := range b {
			b[i] = float32(rng.NormFloat64() * scale)
		}
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(b))
	default:
		b := make([]float64, n)
		for i := range b {
			b[i] = rng.NormFloat64() * scale
		}
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(b))
	}
}

func onehot(rng *rand.Rand, dt tensor.Dtype, n, k int) *tensor.Dense {
	t := tensor.New(tensor.Of(dt), tensor.WithShape(n, k))
	for i := 0; i < n; i++ {
		j := rng.Intn(k)
		switch dt {
		case tensor.Float32:
			t.Data().([]float32)[i*k+j] = 1
		default:
			t.Data().([]float64)[i*k+j] = 1
		}
	}
	return t
}

func mlp(dt tensor.Dtype, seed int64) *net {
	rng := rand.New(rand.NewSource(seed))
	g := G.NewGraph()
	const batch, in, hid, out = 64, 20, 32, 5
	x := G.NewMatrix(g, dt, G.WithShape(batch, in), G.WithName("x"), G.WithValue(randT(rng, dt, 1, batch, in)))
	y := G.NewMatrix(g, dt, G.WithShape(batch, out), G.WithName("y"), G.WithValue(onehot(rng, dt, batch, out)))
	w1 := G.NewMatrix(g, dt, G.WithShape(in, hid), G.WithName("w1"), G.WithValue(randT(rng, dt, 0.3, in, hid)))
	b1 := G.NewMatrix(g, dt, G.WithShape(1, hid), G.WithName("b1"), G.WithValue(randT(rng, dt, 0.1, 1, hid)))
	w2 := G.NewMatrix(g, dt, G.WithShape(hid, hid), G.WithName("w2"), G.WithValue(randT(rng, dt, 0.3, hid, hid)))
	w3 := G.NewMatrix(g, dt, G.WithShape(hid, out), G.WithName("w3"), G.WithValue(randT(rng, dt, 0.3, hid, out)))
	h := G.Must(G.Mul(x, w1))
	h = G.Must(G.BroadcastAdd(h, b1, nil, []byte{0}))
	h = G.Must(G.Rectify(h))
	h = G.Must(G.Tanh(G.Must(G.Mul(h, w2))))
	logits := G.Must(G.Mul(h, w3))
	cost := softmaxCE(logits, y)
	params := G.Nodes{w1, b1, w2, w3}
	if _, err := G.Grad(cost, params...); err != nil {
		panic(err)
	}
	return &net{g: g, x: x, y: y, cost: cost, params: params, out: logits}
}

// softmaxCE is the mean softmax cross-entropy, reduced one axis at a time
// (gorgonia's multi-axis reductions are wrong).
func softmaxCE(logits, onehot *G.Node) *G.Node {
	ls := G.Must(G.LogSoftMax(logits))
	prod := G.Must(G.HadamardProd(ls, onehot))
	s := G.Must(G.Sum(prod, 1))
	return G.Must(G.Neg(G.Must(G.Mean(s))))
}

// cnn has conv, batch-norm, ReLU, max-pool, a residual add, a channel
// concat, a fully connected layer and softmax cross-entropy.
func cnn(dt tensor.Dtype, seed int64) *net {
	rng := rand.New(rand.NewSource(seed))
	g := G.NewGraph()
	const batch, ch, hw, classes = 4, 3, 8, 4
	x := G.NewTensor(g, dt, 4, G.WithShape(batch, ch, hw, hw), G.WithName("x"), G.WithValue(randT(rng, dt, 1, batch, ch, hw, hw)))
	y := G.NewMatrix(g, dt, G.WithShape(batch, classes), G.WithName("y"), G.WithValue(onehot(rng, dt, batch, classes)))
	k1 := G.NewTensor(g, dt, 4, G.WithShape(6, ch, 3, 3), G.WithName("k1"), G.WithValue(randT(rng, dt, 0.3, 6, ch, 3, 3)))
	k2 := G.NewTensor(g, dt, 4, G.WithShape(6, 6, 3, 3), G.WithName("k2"), G.WithValue(randT(rng, dt, 0.2, 6, 6, 3, 3)))
	scale := G.NewTensor(g, dt, 4, G.WithShape(1, 6, 1, 1), G.WithName("bn.scale"), G.WithValue(randT(rng, dt, 0.1, 1, 6, 1, 1)))
	bias := G.NewTensor(g, dt, 4, G.WithShape(1, 6, 1, 1), G.WithName("bn.bias"), G.WithValue(randT(rng, dt, 0.1, 1, 6, 1, 1)))
	fc := G.NewMatrix(g, dt, G.WithShape(12*4*4, classes), G.WithName("fc"), G.WithValue(randT(rng, dt, 0.1, 12*4*4, classes)))

	c1 := G.Must(G.Conv2d(x, k1, tensor.Shape{3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}))
	bn, _, _, _, err := G.BatchNorm(c1, scale, bias, 0.1, 1e-5)
	if err != nil {
		panic(err)
	}
	r1 := G.Must(G.Rectify(bn))
	c2 := G.Must(G.Conv2d(r1, k2, tensor.Shape{3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}))
	res := G.Must(G.Add(c2, r1))
	cat := G.Must(G.Concat(1, res, r1))
	p := G.Must(G.MaxPool2D(cat, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}))
	flat := G.Must(G.Reshape(p, tensor.Shape{batch, 12 * 4 * 4}))
	logits := G.Must(G.Mul(flat, fc))
	cost := softmaxCE(logits, y)
	params := G.Nodes{k1, k2, scale, bias, fc}
	if _, err := G.Grad(cost, params...); err != nil {
		panic(err)
	}
	return &net{g: g, x: x, y: y, cost: cost, params: params, out: logits}
}

// bits returns a value's contents as raw bits, so that comparisons are
// bit for bit (NaN payloads and signed zeros included).
func bits(t *testing.T, v G.Value) []uint64 {
	t.Helper()
	switch d := v.Data().(type) {
	case []float64:
		out := make([]uint64, len(d))
		for i, f := range d {
			out[i] = math.Float64bits(f)
		}
		return out
	case []float32:
		out := make([]uint64, len(d))
		for i, f := range d {
			out[i] = uint64(math.Float32bits(f))
		}
		return out
	case float64:
		return []uint64{math.Float64bits(d)}
	case float32:
		return []uint64{uint64(math.Float32bits(d))}
	}
	t.Fatalf("unexpected value data %T", v.Data())
	return nil
}

// trainSteps runs steps of forward, backward and Adam on a machine and
// returns, per step, the loss bits (and the bits a gorgonia.Read of it
// stored, if the graph has one) and every gradient's bits, and at the end
// every learnable's bits.
func trainSteps(t *testing.T, n *net, m G.VM, steps int) (losses [][]uint64, grads [][][]uint64, weights [][]uint64) {
	t.Helper()
	solver := G.NewAdamSolver(G.WithLearnRate(0.01))
	for s := 0; s < steps; s++ {
		require.NoError(t, m.RunAll())
		l := bits(t, n.cost.Value())
		if n.read != nil {
			require.NotNil(t, *n.read, "gorgonia.Read stored nothing")
			l = append(l, bits(t, *n.read)...)
		}
		losses = append(losses, l)
		var gs [][]uint64
		for _, p := range n.params {
			gv, err := p.Grad()
			require.NoError(t, err)
			gs = append(gs, bits(t, gv))
		}
		grads = append(grads, gs)
		require.NoError(t, solver.Step(G.NodesToValueGrads(n.params)))
		m.Reset()
	}
	for _, p := range n.params {
		weights = append(weights, bits(t, p.Value()))
	}
	return
}

// trained is what trainSteps returns.
type trained struct {
	losses  [][]uint64
	grads   [][][]uint64
	weights [][]uint64
}

// trainOnTape is trainSteps of a fresh build on gorgonia's TapeMachine: the
// reference the suites compare with, and (in float64) the float32 CUDA
// clause's.
func trainOnTape(t *testing.T, build builder, dt tensor.Dtype) trained {
	t.Helper()
	ref := build(dt, 1)
	tm := G.NewTapeMachine(ref.g, G.BindDualValues(ref.params...))
	defer tm.Close()
	var r trained
	r.losses, r.grads, r.weights = trainSteps(t, ref, tm, 3)
	return r
}

// TestBitForBitWithTapeMachine: in core, at half the in-core peak and at
// the least feasible budget, runs equal gorgonia's TapeMachine bit for bit.
func TestBitForBitWithTapeMachine(t *testing.T) {
	checkBitForBit(t, map[string]builder{"mlp": mlp, "cnn": cnn, "stock-cnn": stockCNN})
}

// checkBitForBit trains each model 3 Adam steps, float32 and float64, under
// TapeMachine and out of core (in core, at half the in-core peak where a
// schedule exists, and at the least feasible budget), and requires the
// same loss, gradients and weights bit for bit, within the budget.
func checkBitForBit(t *testing.T, models map[string]builder) {
	checkBitForBitOn(t, models, nil)
}

// checkBitForBitOn is checkBitForBit on a device: nil is the CPU device
// (bit for bit); a CUDA target compares within the zoo's tolerance
// (cudaTarget.requireClose, with the float64 build on the TapeMachine as the
// float32 reference) and plans each budget with the backend's
// reserve (cuBLAS's workspace) added, so both devices plan the same tape.
func checkBitForBitOn(t *testing.T, models map[string]builder, dev *cudaTarget) {
	for _, name := range sortedNames(models) {
		build := models[name]
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			want := trainOnTape(t, build, dt)
			f64 := once(func(t *testing.T) trained { return trainOnTape(t, build, tensor.Float64) })
			inCore, err := ooc.Plan(build(dt, 1).g, ooc.Baseline())
			require.NoError(t, err)
			peak := inCore.Peak
			for _, mode := range []string{"baseline", "50%", "min"} {
				t.Run(name+"/"+dt.String()+"/"+mode, func(t *testing.T) {
					got := build(dt, 1)
					opts := []ooc.Option{ooc.BindDualValues(got.params...), ooc.WithPoison()}
					var budget int64
					switch mode {
					case "baseline":
						opts = append(opts, ooc.Baseline())
					case "50%":
						budget = peak / 2
						if need, f := mostOneFunctionNeeds(t, build(dt, 1)); need > budget {
							t.Skipf("no schedule exists: %s alone needs %d bytes resident, the budget is %d", f, need, budget)
						}
					case "min":
						budget = minFeasible(t, build, dt, peak)
					}
					if budget > 0 {
						budget += dev.reserve()
						opts = append(opts, ooc.WithBudget(budget))
					}
					m, err := ooc.Compile(got.g, append(opts, dev.options()...)...)
					require.NoError(t, err)
					defer m.Close()
					gotL, gotG, gotW := trainSteps(t, got, m, 3)
					if dev == nil {
						require.Equal(t, want.losses, gotL, "loss")
						require.Equal(t, want.grads, gotG, "gradients")
						require.Equal(t, want.weights, gotW, "weights after 3 Adam steps")
					} else {
						dev.requireClose(t, dt, "loss", want.losses, gotL, func(t *testing.T) [][]uint64 { return f64(t).losses })
						for s := range want.grads {
							dev.requireClose(t, dt, fmt.Sprintf("gradients of step %d", s), want.grads[s], gotG[s],
								func(t *testing.T) [][]uint64 { return f64(t).grads[s] })
						}
						dev.requireClose(t, dt, "weights after 3 Adam steps", want.weights, gotW, func(t *testing.T) [][]uint64 { return f64(t).weights })
					}
					st := m.Stats()
					t.Logf("budget %d (in-core peak %d): device peak %d B, swap in %d B, out %d B, tape: %d instrs",
						budget, peak, st.PeakDeviceBytes, st.SwapInBytes, st.SwapOutBytes, len(m.Program().Instrs))
					if budget > 0 {
						require.LessOrEqual(t, st.PeakDeviceBytes, budget)
					}
				})
			}
		}
	}
}
