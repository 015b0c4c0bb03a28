package dispatch_test

import (
	"math/rand"
	"reflect"
	"testing"
	"unsafe"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/ooc"
)

// seedDropout gives a gorgonia dropoutOp a generator drawing from
// rand.NewSource(seed) in place of its clock-seeded one, so two builds of a
// graph hold the same generator state.
func seedDropout(t *testing.T, op G.Op, seed int64) {
	t.Helper()
	f := reflect.ValueOf(op).Elem().FieldByName("rndGen")
	if !f.IsValid() {
		t.Fatalf("%T has no rndGen", op)
	}
	rng := rand.New(rand.NewSource(seed))
	gen := reflect.ValueOf(func() float64 { return rng.Float64() }).Convert(f.Type())
	reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Set(gen)
}

// TestGorgoniaDropoutOp: gorgonia.Dropout on the fake CUDA device, its mask
// drawn on the host from the op's generator, gives the CPU device's cost
// and gradient for the same generator state; at probability 0 and out of
// training it is a copy.
func TestGorgoniaDropoutOp(t *testing.T) {
	d := openFake(t)
	dropout := func(prob float64, training bool) opGraph {
		return func(g *G.ExprGraph, dt tensor.Dtype, rng *rand.Rand) (*G.Node, G.Nodes) {
			x := gleaf(g, dt, rng, "x", 4, 33)
			y := G.Must(G.Dropout(G.Must(G.Tanh(x)), prob))
			seedDropout(t, y.Op(), 7)
			if !training {
				if err := y.Op().(interface{ SetTraining(bool) error }).SetTraining(false); err != nil {
					t.Fatal(err)
				}
			}
			return weighted(g, dt, rng, y), G.Nodes{x}
		}
	}
	cases := map[string]opGraph{
		"p=0.3": dropout(0.3, true), "p=0.55": dropout(0.55, true), "p=0": dropout(0, true), "not training": dropout(0.3, false),
	}
	for _, name := range sortedKeys(cases) {
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			t.Run(name+"/"+dt.String(), func(t *testing.T) { runOpGraph(t, d, dt, cases[name]) })
		}
	}
}

// TestGorgoniaRandomNode: a random node runs on the fake CUDA device with
// the op's own draws (made on the host at each run): the values are in the
// node's range and the cost computed from them on the device is theirs.
func TestGorgoniaRandomNode(t *testing.T) {
	d := openFake(t)
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		g := G.NewGraph()
		rng := rand.New(rand.NewSource(31))
		x := gleaf(g, dt, rng, "x", 3, 4)
		r := G.UniformRandomNode(g, dt, 2, 3, 3, 4)
		cost := G.Must(G.Sum(G.Must(G.HadamardProd(r, x))))
		m, err := ooc.Compile(g, ooc.WithDevice(d), ooc.Inference(), ooc.WithOutputs(r, cost))
		if err != nil {
			t.Fatal(err)
		}
		for run := 0; run < 2; run++ {
			if err := m.RunAll(); err != nil {
				t.Fatal(err)
			}
			rv, xv := floats(t, r.Value()), floats(t, x.Value())
			want := 0.0
			for i := range rv {
				if rv[i] < 2 || rv[i] >= 3 {
					t.Fatalf("%v: draw %d is %v, outside [2, 3)", dt, i, rv[i])
				}
				want += rv[i] * xv[i]
			}
			if e := relErr(floats(t, cost.Value()), []float64{want}); e > 1e-5 {
				t.Errorf("%v: cost %v, the draws give %v", dt, cost.Value(), want)
			}
			m.Reset()
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestHostSolversOnCUDA: every solver gorgonia v0.9.18 has steps on the
// host after a CUDA machine's RunAll (the gradients come back to the
// learnables, the solver updates the host weights, the next run uploads
// them), three steps matching the CPU device's costs, gradients and weights.
func TestHostSolversOnCUDA(t *testing.T) {
	d := openFake(t)
	mlp := func(g *G.ExprGraph, dt tensor.Dtype, rng *rand.Rand) (*G.Node, G.Nodes) {
		x := G.NewConstant(gleaf(g, dt, rng, "x", 4, 5).Value())
		w1, w2 := gleaf(g, dt, rng, "w1", 5, 6), gleaf(g, dt, rng, "w2", 6, 3)
		return weighted(g, dt, rng, G.Must(G.Mul(G.Must(G.Tanh(G.Must(G.Mul(x, w1)))), w2))), G.Nodes{w1, w2}
	}
	solvers := map[string]func() G.Solver{
		"vanilla":         func() G.Solver { return G.NewVanillaSolver(G.WithLearnRate(0.05), G.WithL2Reg(0.01), G.WithClip(0.5)) },
		"momentum":        func() G.Solver { return G.NewMomentum(G.WithLearnRate(0.02), G.WithMomentum(0.8)) },
		"adam":            func() G.Solver { return G.NewAdamSolver(G.WithLearnRate(1e-2)) },
		"adamw":           func() G.Solver { return G.NewAdamW(G.WithLearnRate(1e-2)) },
		"rmsprop":         func() G.Solver { return G.NewRMSPropSolver(G.WithLearnRate(1e-2)) },
		"adagrad":         func() G.Solver { return G.NewAdaGradSolver(G.WithLearnRate(1e-2)) },
		"barzilaiborwein": func() G.Solver { return G.NewBarzilaiBorweinSolver(G.WithLearnRate(1e-2)) },
	}
	for _, name := range sortedKeys(solvers) {
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			if name == "barzilaiborwein" && dt == tensor.Float32 {
				continue // gorgonia's BarzilaiBorweinSolver fails on float32 on any machine (a float64 scalar times a float32 tensor)
			}
			t.Run(name+"/"+dt.String(), func(t *testing.T) { trainOpGraph(t, d, dt, mlp, 3, solvers[name]) })
		}
	}
}
