package dispatch_test

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm/cuda"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/dispatch"
)

// opGraph is one small graph of gorgonia ops: its cost and the nodes whose
// gradients are compared.
type opGraph func(g *G.ExprGraph, dt tensor.Dtype, rng *rand.Rand) (cost *G.Node, wrt G.Nodes)

// tolOf is the zoo's tolerance: float64 1e-12, float32 1e-5 normwise.
func tolOf(dt tensor.Dtype) float64 {
	if dt == tensor.Float32 {
		return 1e-5
	}
	return 1e-12
}

// runOpGraph builds the graph twice from one seed, runs it once on the CPU
// device and once on the fake CUDA device (in core), and compares the cost
// and every gradient.
func runOpGraph(t *testing.T, d *cuda.Device, dt tensor.Dtype, build opGraph) {
	t.Helper()
	trainOpGraph(t, d, dt, build, 1, nil)
}

// trainOpGraph runs steps steps of the graph on both devices, each a RunAll
// and, given a solver maker, a host solver's Step on the gradients; it
// compares every step's cost and gradients and the weights at the end.
func trainOpGraph(t *testing.T, d *cuda.Device, dt tensor.Dtype, build opGraph, steps int, solver func() G.Solver) {
	t.Helper()
	trainOpGraphAt(t, d, dt, build, steps, solver, 0)
}

// trainOpGraphAt is trainOpGraph with the CUDA machine planned for budget
// bytes (0: in core) plus the backend's reserve; the CPU device runs in
// core (its results do not depend on the budget: the CPU suites prove it).
func trainOpGraphAt(t *testing.T, d *cuda.Device, dt tensor.Dtype, build opGraph, steps int, solver func() G.Solver, budget int64) {
	t.Helper()
	var costs, grads, weights [2][][]float64
	for k, dev := range []ooc.Option{nil, ooc.WithDevice(d)} {
		g := G.NewGraph()
		cost, wrt := build(g, dt, rand.New(rand.NewSource(26)))
		if _, err := G.Grad(cost, wrt...); err != nil {
			t.Fatal(err)
		}
		opts := []ooc.Option{ooc.BindDualValues(wrt...)}
		if dev != nil {
			opts = append(opts, dev)
			if budget > 0 {
				opts = append(opts, ooc.WithBudget(budget+dispatch.For(d).Reserve()))
			}
		}
		m, err := ooc.Compile(g, opts...)
		if err != nil {
			t.Fatal(err)
		}
		var s G.Solver
		if solver != nil {
			s = solver()
		}
		for step := 0; step < steps; step++ {
			if err := m.RunAll(); err != nil {
				t.Fatal(err)
			}
			costs[k] = append(costs[k], floats(t, cost.Value()))
			for _, w := range wrt {
				gv, err := w.Grad()
				if err != nil {
					t.Fatal(err)
				}
				grads[k] = append(grads[k], floats(t, gv))
			}
			if s != nil {
				if err := s.Step(G.NodesToValueGrads(wrt)); err != nil {
					t.Fatal(err)
				}
			}
			m.Reset()
		}
		for _, w := range wrt {
			weights[k] = append(weights[k], floats(t, w.Value()))
		}
		if st := m.Stats(); dev != nil && budget > 0 {
			t.Logf("budget %d (+ the reserve): device peak %d B, swapped in %d B, out %d B", budget, st.PeakDeviceBytes, st.SwapInBytes, st.SwapOutBytes)
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
	tol := tolOf(dt)
	for what, pair := range map[string][2][][]float64{"cost": {costs[1], costs[0]}, "gradient": {grads[1], grads[0]}, "weights": {weights[1], weights[0]}} {
		for i := range pair[1] {
			if e := relErr(pair[0][i], pair[1][i]); e > tol {
				t.Errorf("%s %d: %v on CUDA and %v on the CPU, %.3g apart (tolerance %.0g)", what, i, head(pair[0][i]), head(pair[1][i]), e, tol)
			}
		}
	}
}

func head(v []float64) []float64 { return v[:min(len(v), 4)] }

// gleaf is a learnable of random values.
func gleaf(g *G.ExprGraph, dt tensor.Dtype, rng *rand.Rand, name string, shape ...int) *G.Node {
	v := tensor.New(tensor.Of(dt), tensor.WithShape(shape...))
	for i := 0; i < v.Size(); i++ {
		set(v, i, rng.NormFloat64())
	}
	return G.NewTensor(g, dt, len(shape), G.WithShape(shape...), G.WithName(name), G.WithValue(v))
}

// weighted is Σ y ⊙ c for a random constant c, so every element of y's
// gradient differs.
func weighted(g *G.ExprGraph, dt tensor.Dtype, rng *rand.Rand, y *G.Node) *G.Node {
	c := tensor.New(tensor.Of(dt), tensor.WithShape(y.Shape()...))
	for i := 0; i < c.Size(); i++ {
		set(c, i, rng.NormFloat64())
	}
	return G.Must(G.Sum(G.Must(G.HadamardProd(y, G.NewConstant(c)))))
}

// TestGorgoniaConvAndPoolOps: gorgonia's im2col (and col2im, its gradient),
// MaxPool2D, AveragePool2D, Upsample2D, ByIndices, Sparsemax and GroupNorm
// with their gradients compile on the fake CUDA device and give the CPU device's cost
// and gradients.
func TestGorgoniaConvAndPoolOps(t *testing.T) {
	d := openFake(t)
	cases := map[string]opGraph{
		"im2col 3x3 pad 1 stride 2 into a product": func(g *G.ExprGraph, dt tensor.Dtype, rng *rand.Rand) (*G.Node, G.Nodes) {
			x := gleaf(g, dt, rng, "x", 2, 3, 7, 6)
			w := gleaf(g, dt, rng, "w", 27, 4)
			col := G.Must(G.Im2Col(x, tensor.Shape{3, 3}, []int{1, 1}, []int{2, 2}, []int{1, 1}))
			s := col.Shape()
			flat := G.Must(G.Reshape(col, tensor.Shape{s[0] * s[1] * s[2], s[3]}))
			return weighted(g, dt, rng, G.Must(G.Mul(flat, w))), G.Nodes{x, w}
		},
		"im2col dilated": func(g *G.ExprGraph, dt tensor.Dtype, rng *rand.Rand) (*G.Node, G.Nodes) {
			x := gleaf(g, dt, rng, "x", 2, 2, 8, 8)
			return weighted(g, dt, rng, G.Must(G.Im2Col(x, tensor.Shape{3, 3}, []int{2, 2}, []int{1, 1}, []int{2, 2}))), G.Nodes{x}
		},
		"maxpool 3x3 stride 2 pad 1": func(g *G.ExprGraph, dt tensor.Dtype, rng *rand.Rand) (*G.Node, G.Nodes) {
			x := gleaf(g, dt, rng, "x", 2, 3, 9, 7)
			return weighted(g, dt, rng, G.Must(G.MaxPool2D(x, tensor.Shape{3, 3}, []int{1, 1}, []int{2, 2}))), G.Nodes{x}
		},
		"maxpool 2x2 four-sided padding": func(g *G.ExprGraph, dt tensor.Dtype, rng *rand.Rand) (*G.Node, G.Nodes) {
			x := gleaf(g, dt, rng, "x", 2, 2, 6, 6)
			return weighted(g, dt, rng, G.Must(G.MaxPool2D(x, tensor.Shape{2, 2}, []int{1, 0, 0, 1}, []int{2, 2}))), G.Nodes{x}
		},
		"upsample x2": func(g *G.ExprGraph, dt tensor.Dtype, rng *rand.Rand) (*G.Node, G.Nodes) {
			x := gleaf(g, dt, rng, "x", 2, 3, 4, 5)
			return weighted(g, dt, rng, G.Must(G.Upsample2D(x, 2))), G.Nodes{x}
		},
		"upsample x3": func(g *G.ExprGraph, dt tensor.Dtype, rng *rand.Rand) (*G.Node, G.Nodes) {
			x := gleaf(g, dt, rng, "x", 1, 2, 3, 3)
			return weighted(g, dt, rng, G.Must(G.Upsample2D(x, 3))), G.Nodes{x}
		},
		"by indices rows, repeated": func(g *G.ExprGraph, dt tensor.Dtype, rng *rand.Rand) (*G.Node, G.Nodes) {
			x := gleaf(g, dt, rng, "x", 5, 4)
			idx := G.NewVector(g, tensor.Int, G.WithShape(4), G.WithName("idx"),
				G.WithValue(tensor.New(tensor.WithShape(4), tensor.WithBacking([]int{3, 1, 3, 0}))))
			return weighted(g, dt, rng, G.Must(G.ByIndices(x, idx, 0))), G.Nodes{x}
		},
		"by indices last axis": func(g *G.ExprGraph, dt tensor.Dtype, rng *rand.Rand) (*G.Node, G.Nodes) {
			x := gleaf(g, dt, rng, "x", 3, 6)
			idx := G.NewVector(g, tensor.Int, G.WithShape(3), G.WithName("idx"),
				G.WithValue(tensor.New(tensor.WithShape(3), tensor.WithBacking([]int{5, 0, 5}))))
			return weighted(g, dt, rng, G.Must(G.ByIndices(x, idx, 1))), G.Nodes{x}
		},
		"sparsemax": func(g *G.ExprGraph, dt tensor.Dtype, rng *rand.Rand) (*G.Node, G.Nodes) {
			x := gleaf(g, dt, rng, "x", 6, 9)
			return weighted(g, dt, rng, G.Must(G.Sparsemax(x))), G.Nodes{x}
		},
		"group norm": func(g *G.ExprGraph, dt tensor.Dtype, rng *rand.Rand) (*G.Node, G.Nodes) {
			x := gleaf(g, dt, rng, "x", 2, 4, 16, 16)
			scale, bias := gleaf(g, dt, rng, "scale", 2, 4, 16, 16), gleaf(g, dt, rng, "bias", 2, 4, 16, 16)
			return weighted(g, dt, rng, G.Must(G.GroupNorm(x, scale, bias, 2, 4, 1e-5))), G.Nodes{x, scale, bias}
		},
		"avgpool 2x2": func(g *G.ExprGraph, dt tensor.Dtype, rng *rand.Rand) (*G.Node, G.Nodes) {
			x := gleaf(g, dt, rng, "x", 2, 3, 8, 8)
			return weighted(g, dt, rng, G.Must(G.AveragePool2D(x, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}))), G.Nodes{x}
		},
	}
	for _, name := range sortedKeys(cases) {
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			t.Run(name+"/"+dt.String(), func(t *testing.T) { runOpGraph(t, d, dt, cases[name]) })
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// TestGorgoniaBatchNormOp: gorgonia.BatchNorm over NCHW and (N, C) inputs
// trains two steps on the fake CUDA device and gives the CPU device's cost,
// gradients and running statistics; then, switched to inference with
// SetTraining(false), the same cost.
func TestGorgoniaBatchNormOp(t *testing.T) {
	d := openFake(t)
	for _, shape := range [][]int{{3, 4, 5, 5}, {6, 5}} {
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			t.Run(fmt.Sprint(shape, dt), func(t *testing.T) {
				type run struct {
					costs, grads, stats [][]float64
				}
				var runs [2]run
				for k, dev := range []ooc.Option{nil, ooc.WithDevice(d)} {
					rng := rand.New(rand.NewSource(29))
					g := G.NewGraph()
					x := gleaf(g, dt, rng, "x", shape...)
					scale := gleaf(g, dt, rng, "scale", shape...)
					bias := gleaf(g, dt, rng, "bias", shape...)
					y, _, _, op, err := G.BatchNorm(x, scale, bias, 0.1, 1e-5)
					if err != nil {
						t.Fatal(err)
					}
					cost := weighted(g, dt, rng, y)
					wrt := G.Nodes{x, scale, bias}
					if _, err := G.Grad(cost, wrt...); err != nil {
						t.Fatal(err)
					}
					opts := []ooc.Option{ooc.BindDualValues(wrt...)}
					if dev != nil {
						opts = append(opts, dev)
					}
					m, err := ooc.Compile(g, opts...)
					if err != nil {
						t.Fatal(err)
					}
					r := &runs[k]
					for step := 0; step < 3; step++ {
						if step == 2 {
							if err := op.SetTraining(false); err != nil {
								t.Fatal(err)
							}
						}
						if err := m.RunAll(); err != nil {
							t.Fatal(err)
						}
						r.costs = append(r.costs, floats(t, cost.Value()))
						if step < 2 {
							for _, w := range wrt {
								gv, err := w.Grad()
								if err != nil {
									t.Fatal(err)
								}
								r.grads = append(r.grads, floats(t, gv))
							}
						}
						mean, variance := op.Stats()
						r.stats = append(r.stats, floats(t, mean), floats(t, variance))
						m.Reset()
					}
					if err := m.Close(); err != nil {
						t.Fatal(err)
					}
				}
				tol := tolOf(dt)
				for what, pair := range map[string][2][][]float64{
					"cost": {runs[1].costs, runs[0].costs}, "gradient": {runs[1].grads, runs[0].grads},
					"running statistics": {runs[1].stats, runs[0].stats},
				} {
					for i := range pair[1] {
						if e := relErr(pair[0][i], pair[1][i]); e > tol {
							t.Errorf("%s %d: %.3g apart on CUDA and the CPU (tolerance %.0g)", what, i, e, tol)
						}
					}
				}
			})
		}
	}
}

// TestGorgoniaGlobalAvgPoolOp: gorgonia's GlobalAveragePool2D (which has no
// gradient: gorgonia.Grad fails on any graph holding it, so only inference
// graphs have it) gives the CPU device's values on the fake CUDA device.
func TestGorgoniaGlobalAvgPoolOp(t *testing.T) {
	d := openFake(t)
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		var got [2][]float64
		for k, dev := range []ooc.Option{nil, ooc.WithDevice(d)} {
			g := G.NewGraph()
			rng := rand.New(rand.NewSource(36))
			x := gleaf(g, dt, rng, "x", 3, 4, 5, 5)
			y := G.Must(G.Tanh(G.Must(G.GlobalAveragePool2D(x))))
			opts := []ooc.Option{ooc.Inference(), ooc.WithOutputs(y)}
			if dev != nil {
				opts = append(opts, dev)
			}
			m, err := ooc.Compile(g, opts...)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.RunAll(); err != nil {
				t.Fatal(err)
			}
			got[k] = floats(t, y.Value())
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if e := relErr(got[1], got[0]); e > tolOf(dt) {
			t.Errorf("%v: %.3g apart", dt, e)
		}
	}
}

// stockCNN is a CNN of gorgonia's stock ops that have CUDA plans here
// (Im2Col and a product as the convolution, BatchNorm, Tanh, Dropout with a
// seeded generator, MaxPool2D, Upsample2D, SoftMax along axis 1 and a
// cross-entropy).
func stockCNN(t *testing.T) opGraph {
	return func(g *G.ExprGraph, dt tensor.Dtype, rng *rand.Rand) (*G.Node, G.Nodes) {
		const n = 4
		x := gleaf(g, dt, rng, "x", n, 2, 8, 8) // the data and the targets: no gradients taken
		y := gleaf(g, dt, rng, "y", n, 5)
		w := gleaf(g, dt, rng, "w", 18, 6)
		scale, bias := gleaf(g, dt, rng, "scale", n, 6, 8, 8), gleaf(g, dt, rng, "bias", n, 6, 8, 8)
		w2 := gleaf(g, dt, rng, "w2", 6*8*8, 5)
		col := G.Must(G.Im2Col(x, tensor.Shape{3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1})) // (n, 8, 8, 18)
		h := G.Must(G.Reshape(G.Must(G.Mul(G.Must(G.Reshape(col, tensor.Shape{n * 64, 18})), w)), tensor.Shape{n, 6, 8, 8}))
		h, _, _, _, err := G.BatchNorm(h, scale, bias, 0.1, 1e-5)
		if err != nil {
			t.Fatal(err)
		}
		h = G.Must(G.Dropout(G.Must(G.Tanh(h)), 0.2))
		seedDropout(t, h.Op(), 3)
		h = G.Must(G.Upsample2D(G.Must(G.MaxPool2D(h, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2})), 2))
		logits := G.Must(G.Mul(G.Must(G.Reshape(h, tensor.Shape{n, 6 * 8 * 8})), w2))
		prob := G.Must(G.SoftMax(logits, 1))
		cost := G.Must(G.Neg(G.Must(G.Sum(G.Must(G.HadamardProd(G.Must(G.Log(prob)), y))))))
		return cost, G.Nodes{w, scale, bias, w2}
	}
}

// TestStockOpsCNNOnCUDA: a CNN of gorgonia's stock ops trains three Adam
// steps on the fake CUDA device in core, at half its in-core peak and at
// the least budget (swapping), matching the CPU device's costs, gradients
// and weights.
func TestStockOpsCNNOnCUDA(t *testing.T) {
	d := openFake(t)
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		g := G.NewGraph()
		cost, wrt := stockCNN(t)(g, dt, rand.New(rand.NewSource(26)))
		if _, err := G.Grad(cost, wrt...); err != nil {
			t.Fatal(err)
		}
		peak, err := ooc.InCorePeak(g)
		if err != nil {
			t.Fatal(err)
		}
		lo, hi := int64(0), peak
		for hi-lo > 256 {
			mid := (lo + hi) / 2
			g := G.NewGraph()
			cost, wrt := stockCNN(t)(g, dt, rand.New(rand.NewSource(26)))
			if _, err := G.Grad(cost, wrt...); err != nil {
				t.Fatal(err)
			}
			if _, err := ooc.Plan(g, ooc.BindDualValues(wrt...), ooc.WithBudget(mid)); err == nil {
				hi = mid
			} else {
				lo = mid
			}
		}
		for _, b := range []int64{0, peak / 2, hi} {
			t.Run(fmt.Sprintf("%v/budget %d of %d", dt, b, peak), func(t *testing.T) {
				if b > 0 && b < hi {
					t.Skipf("no schedule at %d bytes (the least is %d)", b, hi)
				}
				trainOpGraphAt(t, d, dt, stockCNN(t), 3, func() G.Solver { return G.NewAdamSolver(G.WithLearnRate(1e-2)) }, b)
			})
		}
	}
}

// TestGorgoniaConvTypeOp: gorgonia's ConvType to Int and back (truncating
// the values) on the fake CUDA device gives the CPU device's cost and
// gradient of the weight after it.
func TestGorgoniaConvTypeOp(t *testing.T) {
	d := openFake(t)
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		runOpGraph(t, d, dt, func(g *G.ExprGraph, dt tensor.Dtype, rng *rand.Rand) (*G.Node, G.Nodes) {
			x := gleaf(g, dt, rng, "x", 4, 5)
			w := gleaf(g, dt, rng, "w", 4, 5)
			x10 := G.Must(G.Mul(x, G.NewConstant(castOf(dt, 10))))
			back := G.Must(G.ConvType(G.Must(G.ConvType(x10, dt, tensor.Int)), tensor.Int, dt))
			return weighted(g, dt, rng, G.Must(G.HadamardProd(back, w))), G.Nodes{w}
		})
	}
}

func castOf(dt tensor.Dtype, v float64) any {
	if dt == tensor.Float32 {
		return float32(v)
	}
	return v
}
