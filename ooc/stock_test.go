package ooc_test

import (
	"math/rand"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/ooc"
)

// stockCNN is a small CNN written the way gorgonia's own examples write
// one: gorgonia's Conv2d (im2col, reshapes, a matmul and a transpose),
// Rectify, MaxPool2D, Reshape, Mul, SoftMax and Mean, with Log(SoftMax)
// (which gorgonia's stabilisation rewrites into LogSoftMax, removing nodes)
// and the cost fetched with gorgonia.Read.
func stockCNN(dt tensor.Dtype, seed int64) *net {
	return stockCNNOf(dt, seed, 8, true)
}

// stockCNNGrad builds stockCNN, with its backward when grad is set.
func stockCNNGrad(dt tensor.Dtype, seed int64, grad bool) *net {
	return stockCNNOf(dt, seed, 8, grad)
}

// stockCNNOf builds stockCNN for a batch size.
func stockCNNOf(dt tensor.Dtype, seed int64, batch int, grad bool) *net {
	rng := rand.New(rand.NewSource(seed))
	g := G.NewGraph()
	const hw, c1, c2, classes = 16, 8, 16, 10
	x := G.NewTensor(g, dt, 4, G.WithShape(batch, 1, hw, hw), G.WithName("x"), G.WithValue(randT(rng, dt, 1, batch, 1, hw, hw)))
	y := G.NewMatrix(g, dt, G.WithShape(batch, classes), G.WithName("y"), G.WithValue(onehot(rng, dt, batch, classes)))
	k1 := G.NewTensor(g, dt, 4, G.WithShape(c1, 1, 3, 3), G.WithName("k1"), G.WithValue(randT(rng, dt, 0.3, c1, 1, 3, 3)))
	k2 := G.NewTensor(g, dt, 4, G.WithShape(c2, c1, 3, 3), G.WithName("k2"), G.WithValue(randT(rng, dt, 0.1, c2, c1, 3, 3)))
	fc := G.NewMatrix(g, dt, G.WithShape(c2*4*4, classes), G.WithName("fc"), G.WithValue(randT(rng, dt, 0.1, c2*4*4, classes)))

	h := G.Must(G.Conv2d(x, k1, tensor.Shape{3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}))
	h = G.Must(G.Rectify(h))
	h = G.Must(G.MaxPool2D(h, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}))
	h = G.Must(G.Conv2d(h, k2, tensor.Shape{3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}))
	h = G.Must(G.Rectify(h))
	h = G.Must(G.MaxPool2D(h, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}))
	h = G.Must(G.Reshape(h, tensor.Shape{batch, c2 * 4 * 4}))
	prob := G.Must(G.SoftMax(G.Must(G.Mul(h, fc))))
	cost := G.Must(G.Neg(G.Must(G.Mean(G.Must(G.HadamardProd(G.Must(G.Log(prob)), y))))))
	read := new(G.Value)
	G.Read(cost, read)
	params := G.Nodes{k1, k2, fc}
	if grad {
		if _, err := G.Grad(cost, params...); err != nil {
			panic(err)
		}
	}
	return &net{g: g, x: x, y: y, cost: cost, params: params, read: read, out: prob}
}

// TestStockCNNAtItsLeastBudget is the target of running gorgonia programs
// as written: a CNN of gorgonia's stock ops runs bit for bit as
// TapeMachine does at the least budget the window scheduler can plan, and
// that budget is within 2% of what its largest function alone needs
// resident (views cost nothing, elementwise ops run in place, every op
// writes into device memory or has its host result counted).
func TestStockCNNAtItsLeastBudget(t *testing.T) {
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		t.Run(dt.String(), func(t *testing.T) {
			ref := stockCNN(dt, 4)
			tm := G.NewTapeMachine(ref.g, G.BindDualValues(ref.params...))
			wantL, wantG, wantW := trainSteps(t, ref, tm, 3)
			tm.Close()

			tr, err := ooc.NewTrace(stockCNN(dt, 4).g)
			require.NoError(t, err)
			need, at := tr.MaxNeed()
			peak, err := ooc.InCorePeak(stockCNN(dt, 4).g)
			require.NoError(t, err)
			least := minFeasible(t, stockCNN, dt, peak)
			t.Logf("in-core peak %d B; largest need %d B (%s); least feasible budget %d B = %.2f%% of the need, %.1f%% of the peak",
				peak, need, tr.Funcs[at].Node.Name(), least, 100*float64(least)/float64(need), 100*float64(least)/float64(peak))
			require.LessOrEqual(t, float64(least), 1.02*float64(need), "least feasible budget within 2%% of the largest need")

			got := stockCNN(dt, 4)
			m, err := ooc.Compile(got.g, ooc.BindDualValues(got.params...), ooc.WithBudget(least), ooc.WithPoison())
			require.NoError(t, err)
			defer m.Close()
			gotL, gotG, gotW := trainSteps(t, got, m, 3)
			require.Equal(t, wantL, gotL, "loss")
			require.Equal(t, wantG, gotG, "gradients")
			require.Equal(t, wantW, gotW, "weights after 3 Adam steps")
			require.LessOrEqual(t, m.Stats().PeakDeviceBytes, least)
		})
	}
}

// TestNoHeapGrowthWithActivations: every op of a model of gorgonia's stock
// ops writes into device memory, so what a step allocates on the Go heap
// does not grow with the activations' bytes, and the live heap does not grow
// over steps. What a step still allocates is bookkeeping: tensor headers,
// and work items that grow with the batch's rows, not its bytes (gonum's
// sgemm jobs, a goroutine per image in gorgonia's im2col and col2im, one
// per row in tensor's softmax): quadrupling the batch adds under 3% of the
// added activation bytes (about 1.7% measured here).
func TestNoHeapGrowthWithActivations(t *testing.T) {
	perStep := func(batch int) (alloc, act int64) {
		n := stockCNNOf(tensor.Float32, 1, batch, true)
		peak, err := ooc.InCorePeak(n.g)
		require.NoError(t, err)
		m, err := ooc.Compile(n.g, ooc.BindDualValues(n.params...), ooc.WithBudget(peak/2))
		require.NoError(t, err)
		defer m.Close()
		for _, v := range m.Program().Vars {
			if !v.IsLeaf() && !v.View {
				act += v.Bytes
			}
		}
		for _, f := range m.Program().Funcs {
			if !f.Node.IsScalar() {
				require.Zero(t, f.HostBytes, "%v returns its result on the heap", f.Op)
			}
		}
		run := func(steps int) {
			for i := 0; i < steps; i++ {
				require.NoError(t, m.RunAll())
				m.Reset()
			}
		}
		live := func() uint64 {
			var ms runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&ms)
			return ms.HeapAlloc
		}
		run(2) // host buffers for swapped copies are pooled from the first steps on
		var before, after runtime.MemStats
		const steps = 5
		heap0 := live()
		runtime.ReadMemStats(&before)
		run(steps)
		runtime.ReadMemStats(&after)
		run(20)
		require.Less(t, float64(live()), float64(heap0)+0.01*float64(act), "the live heap grows over steps")
		return int64(after.TotalAlloc-before.TotalAlloc) / steps, act
	}
	small, actSmall := perStep(8)
	large, actLarge := perStep(32)
	t.Logf("Go heap allocated per step: batch 8 %d B (activations %d B), batch 32 %d B (activations %d B): %.2f%% of the added activation bytes",
		small, actSmall, large, actLarge, 100*float64(large-small)/float64(actLarge-actSmall))
	require.Less(t, float64(large-small), 0.03*float64(actLarge-actSmall))
}

// convnetExample is gorgonia's examples/convnet as written there (three
// Conv2d-Rectify-MaxPool2D-Dropout blocks, Reshape, two Mul layers with
// dropout between, SoftMax, and the cost -Mean(Log(out ⊙ y)) read with
// gorgonia.Read), at batch 16 on 28x28 images. Its dropout generators are
// seeded alike in every build (gorgonia seeds them from the clock).
func convnetExample(dt tensor.Dtype, seed int64) *net {
	const bs = 16
	rng := rand.New(rand.NewSource(seed))
	g := G.NewGraph()
	x := G.NewTensor(g, dt, 4, G.WithShape(bs, 1, 28, 28), G.WithName("x"), G.WithValue(randT(rng, dt, 1, bs, 1, 28, 28)))
	y := G.NewMatrix(g, dt, G.WithShape(bs, 10), G.WithName("y"), G.WithValue(onehot(rng, dt, bs, 10)))
	w0 := G.NewTensor(g, dt, 4, G.WithShape(32, 1, 3, 3), G.WithName("w0"), G.WithValue(randT(rng, dt, 0.3, 32, 1, 3, 3)))
	w1 := G.NewTensor(g, dt, 4, G.WithShape(64, 32, 3, 3), G.WithName("w1"), G.WithValue(randT(rng, dt, 0.05, 64, 32, 3, 3)))
	w2 := G.NewTensor(g, dt, 4, G.WithShape(128, 64, 3, 3), G.WithName("w2"), G.WithValue(randT(rng, dt, 0.05, 128, 64, 3, 3)))
	w3 := G.NewMatrix(g, dt, G.WithShape(128*3*3, 625), G.WithName("w3"), G.WithValue(randT(rng, dt, 0.02, 128*3*3, 625)))
	w4 := G.NewMatrix(g, dt, G.WithShape(625, 10), G.WithName("w4"), G.WithValue(randT(rng, dt, 0.05, 625, 10)))
	h := x
	for _, w := range []*G.Node{w0, w1, w2} {
		h = G.Must(G.Conv2d(h, w, tensor.Shape{3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}))
		h = G.Must(G.Rectify(h))
		h = G.Must(G.MaxPool2D(h, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}))
		if w != w2 {
			h = G.Must(G.Dropout(h, 0.2))
		}
	}
	h = G.Must(G.Dropout(G.Must(G.Reshape(h, tensor.Shape{bs, 128 * 3 * 3})), 0.2))
	h = G.Must(G.Dropout(G.Must(G.Rectify(G.Must(G.Mul(h, w3)))), 0.55))
	out := G.Must(G.SoftMax(G.Must(G.Mul(h, w4))))
	cost := G.Must(G.Neg(G.Must(G.Mean(G.Must(G.Log(G.Must(G.HadamardProd(out, y))))))))
	read := new(G.Value)
	G.Read(cost, read)
	params := G.Nodes{w0, w1, w2, w3, w4}
	if _, err := G.Grad(cost, params...); err != nil {
		panic(err)
	}
	n := &net{g: g, x: x, y: y, cost: cost, params: params, read: read, out: out}
	seedDropout(n)
	return n
}

// TestGorgoniaConvnetExample: gorgonia's own convnet example trains bit for
// bit as under TapeMachine at the least budget the window scheduler plans,
// which is what its largest function needs, under a third of its in-core
// peak.
func TestGorgoniaConvnetExample(t *testing.T) {
	dt := tensor.Float32
	ref := convnetExample(dt, 1)
	tm := G.NewTapeMachine(ref.g, G.BindDualValues(ref.params...))
	wantL, wantG, wantW := trainSteps(t, ref, tm, 2)
	tm.Close()

	tr, err := ooc.NewTrace(convnetExample(dt, 1).g)
	require.NoError(t, err)
	need, at := tr.MaxNeed()
	peak, err := ooc.InCorePeak(convnetExample(dt, 1).g)
	require.NoError(t, err)
	least := minFeasible(t, convnetExample, dt, peak)
	t.Logf("in-core peak %d B; largest need %d B (%s); least feasible budget %d B = %.2f%% of the need, %.1f%% of the peak",
		peak, need, tr.Funcs[at].Node.Name(), least, 100*float64(least)/float64(need), 100*float64(least)/float64(peak))
	require.LessOrEqual(t, float64(least), 1.02*float64(need))

	got := convnetExample(dt, 1)
	m, err := ooc.Compile(got.g, ooc.BindDualValues(got.params...), ooc.WithBudget(least))
	require.NoError(t, err)
	defer m.Close()
	gotL, gotG, gotW := trainSteps(t, got, m, 2)
	require.Equal(t, wantL, gotL, "loss")
	require.Equal(t, wantG, gotG, "gradients")
	require.Equal(t, wantW, gotW, "weights after 2 Adam steps")
	require.LessOrEqual(t, m.Stats().PeakDeviceBytes, least)
}
