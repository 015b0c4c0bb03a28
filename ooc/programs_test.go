package ooc_test

import (
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/ooc"
)

// The programs below are written the way gorgonia users write them (its
// examples and tutorials): a scalar constant in the cost, broadcast bias
// adds, Log(SoftMax) left for gorgonia's stabilisation, a recurrent net
// unrolled with Slice and Concat, an LSTM of gorgonia's elementwise ops,
// attention through Transpose, and a regression with an L2 penalty. None
// of them is shaped for this project.

func scalarConst(g *G.ExprGraph, dt tensor.Dtype, v float64, name string) *G.Node {
	if dt == tensor.Float32 {
		return G.NewConstant(float32(v), G.WithName(name))
	}
	return G.NewConstant(v, G.WithName(name))
}

// logReg is multinomial logistic regression with a bias row broadcast over
// the batch, Log(SoftMax) and a cost divided by a scalar constant.
func logReg(dt tensor.Dtype, seed int64) *net {
	rng := rand.New(rand.NewSource(seed))
	g := G.NewGraph()
	const batch, in, classes = 48, 10, 3
	x := G.NewMatrix(g, dt, G.WithShape(batch, in), G.WithName("x"), G.WithValue(randT(rng, dt, 1, batch, in)))
	y := G.NewMatrix(g, dt, G.WithShape(batch, classes), G.WithName("y"), G.WithValue(onehot(rng, dt, batch, classes)))
	w := G.NewMatrix(g, dt, G.WithShape(in, classes), G.WithName("w"), G.WithValue(randT(rng, dt, 0.3, in, classes)))
	b := G.NewVector(g, dt, G.WithShape(classes), G.WithName("b"), G.WithValue(randT(rng, dt, 0.1, classes)))
	logits := G.Must(G.BroadcastAdd(G.Must(G.Mul(x, w)), b, nil, []byte{0}))
	prob := G.Must(G.SoftMax(logits))
	ll := G.Must(G.Sum(G.Must(G.HadamardProd(G.Must(G.Log(prob)), y))))
	cost := G.Must(G.Neg(G.Must(G.Div(ll, scalarConst(g, dt, batch, "n")))))
	read := new(G.Value)
	G.Read(cost, read)
	params := G.Nodes{w, b}
	if _, err := G.Grad(cost, params...); err != nil {
		panic(err)
	}
	return &net{g: g, x: x, y: y, cost: cost, params: params, read: read, out: prob}
}

// regressionL2 is a two-layer regression with Sigmoid and LeakyRelu, a mean
// squared error and an L2 penalty on the weights scaled by a constant.
func regressionL2(dt tensor.Dtype, seed int64) *net {
	rng := rand.New(rand.NewSource(seed))
	g := G.NewGraph()
	const batch, in, hid = 32, 8, 16
	x := G.NewMatrix(g, dt, G.WithShape(batch, in), G.WithName("x"), G.WithValue(randT(rng, dt, 1, batch, in)))
	y := G.NewMatrix(g, dt, G.WithShape(batch, 1), G.WithName("y"), G.WithValue(randT(rng, dt, 1, batch, 1)))
	w1 := G.NewMatrix(g, dt, G.WithShape(in, hid), G.WithName("w1"), G.WithValue(randT(rng, dt, 0.4, in, hid)))
	w2 := G.NewMatrix(g, dt, G.WithShape(hid, 1), G.WithName("w2"), G.WithValue(randT(rng, dt, 0.4, hid, 1)))
	h := G.Must(G.LeakyRelu(G.Must(G.Mul(x, w1)), 0.1))
	h = G.Must(G.Sigmoid(h))
	pred := G.Must(G.Mul(h, w2))
	mse := G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(pred, y))))))
	l2 := G.Must(G.Add(G.Must(G.Sum(G.Must(G.Square(w1)))), G.Must(G.Sum(G.Must(G.Square(w2))))))
	cost := G.Must(G.Add(mse, G.Must(G.Mul(scalarConst(g, dt, 1e-3, "lambda"), l2))))
	params := G.Nodes{w1, w2}
	if _, err := G.Grad(cost, params...); err != nil {
		panic(err)
	}
	return &net{g: g, x: x, y: y, cost: cost, params: params, out: pred}
}

// rnn is an Elman network unrolled over time with Slice, its hidden states
// joined with Concat, and a learnable initial state.
func rnn(dt tensor.Dtype, seed int64) *net {
	rng := rand.New(rand.NewSource(seed))
	g := G.NewGraph()
	const batch, steps, in, hid, classes = 8, 5, 6, 12, 4
	x := G.NewTensor(g, dt, 3, G.WithShape(steps, batch, in), G.WithName("x"), G.WithValue(randT(rng, dt, 1, steps, batch, in)))
	y := G.NewMatrix(g, dt, G.WithShape(batch, classes), G.WithName("y"), G.WithValue(onehot(rng, dt, batch, classes)))
	wx := G.NewMatrix(g, dt, G.WithShape(in, hid), G.WithName("wx"), G.WithValue(randT(rng, dt, 0.3, in, hid)))
	wh := G.NewMatrix(g, dt, G.WithShape(hid, hid), G.WithName("wh"), G.WithValue(randT(rng, dt, 0.3, hid, hid)))
	h0 := G.NewMatrix(g, dt, G.WithShape(batch, hid), G.WithName("h0"), G.WithValue(randT(rng, dt, 0.1, batch, hid)))
	wo := G.NewMatrix(g, dt, G.WithShape(steps*hid, classes), G.WithName("wo"), G.WithValue(randT(rng, dt, 0.2, steps*hid, classes)))
	h := h0
	var hs G.Nodes
	for t := 0; t < steps; t++ {
		xt := G.Must(G.Slice(x, G.S(t)))
		h = G.Must(G.Tanh(G.Must(G.Add(G.Must(G.Mul(xt, wx)), G.Must(G.Mul(h, wh))))))
		hs = append(hs, h)
	}
	all := G.Must(G.Concat(1, hs...))
	logits := G.Must(G.Mul(all, wo))
	cost := softmaxCE(logits, y)
	params := G.Nodes{wx, wh, h0, wo}
	if _, err := G.Grad(cost, params...); err != nil {
		panic(err)
	}
	return &net{g: g, x: x, y: y, cost: cost, params: params, out: logits}
}

// lstmNet is an LSTM written with gorgonia's elementwise ops (Sigmoid, Tanh,
// HadamardProd, Add), the gates sliced out of one matmul, over a few steps.
func lstmNet(dt tensor.Dtype, seed int64) *net {
	rng := rand.New(rand.NewSource(seed))
	g := G.NewGraph()
	const batch, steps, in, hid, classes = 4, 4, 5, 6, 3
	x := G.NewTensor(g, dt, 3, G.WithShape(steps, batch, in), G.WithName("x"), G.WithValue(randT(rng, dt, 1, steps, batch, in)))
	y := G.NewMatrix(g, dt, G.WithShape(batch, classes), G.WithName("y"), G.WithValue(onehot(rng, dt, batch, classes)))
	w := G.NewMatrix(g, dt, G.WithShape(in+hid, 4*hid), G.WithName("w"), G.WithValue(randT(rng, dt, 0.3, in+hid, 4*hid)))
	b := G.NewVector(g, dt, G.WithShape(4*hid), G.WithName("b"), G.WithValue(randT(rng, dt, 0.1, 4*hid)))
	wo := G.NewMatrix(g, dt, G.WithShape(hid, classes), G.WithName("wo"), G.WithValue(randT(rng, dt, 0.3, hid, classes)))
	h := G.NewMatrix(g, dt, G.WithShape(batch, hid), G.WithName("h0"), G.WithValue(tensor.New(tensor.Of(dt), tensor.WithShape(batch, hid))))
	c := G.NewMatrix(g, dt, G.WithShape(batch, hid), G.WithName("c0"), G.WithValue(tensor.New(tensor.Of(dt), tensor.WithShape(batch, hid))))
	for t := 0; t < steps; t++ {
		xt := G.Must(G.Slice(x, G.S(t)))
		z := G.Must(G.BroadcastAdd(G.Must(G.Mul(G.Must(G.Concat(1, xt, h)), w)), b, nil, []byte{0}))
		i := G.Must(G.Sigmoid(G.Must(G.Slice(z, nil, G.S(0, hid)))))
		f := G.Must(G.Sigmoid(G.Must(G.Slice(z, nil, G.S(hid, 2*hid)))))
		o := G.Must(G.Sigmoid(G.Must(G.Slice(z, nil, G.S(2*hid, 3*hid)))))
		u := G.Must(G.Tanh(G.Must(G.Slice(z, nil, G.S(3*hid, 4*hid)))))
		c = G.Must(G.Add(G.Must(G.HadamardProd(f, c)), G.Must(G.HadamardProd(i, u))))
		h = G.Must(G.HadamardProd(o, G.Must(G.Tanh(c))))
	}
	logits := G.Must(G.Mul(h, wo))
	cost := softmaxCE(logits, y)
	params := G.Nodes{w, b, wo}
	if _, err := G.Grad(cost, params...); err != nil {
		panic(err)
	}
	return &net{g: g, x: x, y: y, cost: cost, params: params, out: logits}
}

// attention is single-head self-attention over one sequence per batch row
// folded into a matrix: scores through Transpose and a constant scale,
// SoftMax, a weighted sum, then a mean over the rows.
func attention(dt tensor.Dtype, seed int64) *net {
	rng := rand.New(rand.NewSource(seed))
	g := G.NewGraph()
	const seq, d, classes = 16, 8, 4
	x := G.NewMatrix(g, dt, G.WithShape(seq, d), G.WithName("x"), G.WithValue(randT(rng, dt, 1, seq, d)))
	y := G.NewMatrix(g, dt, G.WithShape(seq, classes), G.WithName("y"), G.WithValue(onehot(rng, dt, seq, classes)))
	wq := G.NewMatrix(g, dt, G.WithShape(d, d), G.WithName("wq"), G.WithValue(randT(rng, dt, 0.3, d, d)))
	wk := G.NewMatrix(g, dt, G.WithShape(d, d), G.WithName("wk"), G.WithValue(randT(rng, dt, 0.3, d, d)))
	wv := G.NewMatrix(g, dt, G.WithShape(d, d), G.WithName("wv"), G.WithValue(randT(rng, dt, 0.3, d, d)))
	wo := G.NewMatrix(g, dt, G.WithShape(d, classes), G.WithName("wo"), G.WithValue(randT(rng, dt, 0.3, d, classes)))
	q := G.Must(G.Mul(x, wq))
	k := G.Must(G.Mul(x, wk))
	v := G.Must(G.Mul(x, wv))
	scores := G.Must(G.Mul(G.Must(G.Mul(q, G.Must(G.Transpose(k)))), scalarConst(g, dt, 0.35, "scale")))
	att := G.Must(G.Mul(G.Must(G.SoftMax(scores)), v))
	h := G.Must(G.Add(att, x))
	logits := G.Must(G.Mul(h, wo))
	cost := softmaxCE(logits, y)
	params := G.Nodes{wq, wk, wv, wo}
	if _, err := G.Grad(cost, params...); err != nil {
		panic(err)
	}
	return &net{g: g, x: x, y: y, cost: cost, params: params, out: logits}
}

// TestUsersProgramsBitForBit: programs written as gorgonia users write them
// train bit for bit as under gorgonia's TapeMachine, in core, at half the
// in-core peak and at the least feasible budget.
func TestUsersProgramsBitForBit(t *testing.T) {
	checkBitForBit(t, map[string]builder{
		"logreg": logReg, "regression-l2": regressionL2, "rnn": rnn, "lstm": lstmNet, "attention": attention,
	})
}

// TestLetEachStep: a training loop that binds a new batch with gorgonia.Let
// before every run (as every script with a data loader does) sees each new
// batch, in core and at the least feasible budget, bit for bit with
// TapeMachine.
func TestLetEachStep(t *testing.T) {
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		run := func(t *testing.T, n *net, m G.VM) [][]uint64 {
			rng := rand.New(rand.NewSource(7))
			xs, ys := n.x.Shape().Clone(), n.y.Shape().Clone()
			solver := G.NewMomentum(G.WithLearnRate(0.05))
			var out [][]uint64
			for step := 0; step < 4; step++ {
				require.NoError(t, G.Let(n.x, randT(rng, dt, 1, xs...)))
				require.NoError(t, G.Let(n.y, onehot(rng, dt, ys[0], ys[1])))
				require.NoError(t, m.RunAll())
				out = append(out, bits(t, n.cost.Value()))
				require.NoError(t, solver.Step(G.NodesToValueGrads(n.params)))
				m.Reset()
			}
			for _, p := range n.params {
				out = append(out, bits(t, p.Value()))
			}
			return out
		}
		for _, name := range []string{"stock-cnn", "lstm"} {
			build := map[string]builder{"stock-cnn": stockCNN, "lstm": lstmNet}[name]
			ref := build(dt, 2)
			tm := G.NewTapeMachine(ref.g, G.BindDualValues(ref.params...))
			want := run(t, ref, tm)
			tm.Close()
			peak, err := ooc.InCorePeak(build(dt, 2).g)
			require.NoError(t, err)
			for _, mode := range []string{"baseline", "min"} {
				t.Run(name+"/"+dt.String()+"/"+mode, func(t *testing.T) {
					got := build(dt, 2)
					opts := []ooc.Option{ooc.BindDualValues(got.params...), ooc.WithPoison(), ooc.Baseline()}
					if mode == "min" {
						opts = []ooc.Option{ooc.BindDualValues(got.params...), ooc.WithPoison(), ooc.WithBudget(minFeasible(t, build, dt, peak))}
					}
					m, err := ooc.Compile(got.g, opts...)
					require.NoError(t, err)
					defer m.Close()
					require.Equal(t, want, run(t, got, m))
				})
			}
		}
	}
}

// gradNodesNet is a graph whose gradients are read from the nodes Grad
// returns, one of them the input's.
func gradNodesNet(dt tensor.Dtype) (*G.ExprGraph, *G.Node, G.Nodes) {
	rng := rand.New(rand.NewSource(3))
	g := G.NewGraph()
	x := G.NewMatrix(g, dt, G.WithShape(16, 6), G.WithName("x"), G.WithValue(randT(rng, dt, 1, 16, 6)))
	w := G.NewMatrix(g, dt, G.WithShape(6, 5), G.WithName("w"), G.WithValue(randT(rng, dt, 0.3, 6, 5)))
	w2 := G.NewMatrix(g, dt, G.WithShape(5, 2), G.WithName("w2"), G.WithValue(randT(rng, dt, 0.3, 5, 2)))
	h := G.Must(G.Tanh(G.Must(G.Mul(x, w))))
	cost := G.Must(G.Mean(G.Must(G.Square(G.Must(G.Mul(h, w2))))))
	grads, err := G.Grad(cost, w, w2, x)
	if err != nil {
		panic(err)
	}
	return g, cost, grads
}

// TestGradNodesWithoutDualValues: a script that compiles without
// BindDualValues and reads the nodes gorgonia.Grad returned (gradients of
// weights and of the input) gets TapeMachine's values.
func TestGradNodesWithoutDualValues(t *testing.T) {
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		g, cost, grads := gradNodesNet(dt)
		tm := G.NewTapeMachine(g)
		require.NoError(t, tm.RunAll())
		want := [][]uint64{bits(t, cost.Value())}
		for _, gn := range grads {
			want = append(want, bits(t, gn.Value()))
		}
		tm.Close()
		g2, cost2, grads2 := gradNodesNet(dt)
		m, err := ooc.Compile(g2)
		require.NoError(t, err)
		require.NoError(t, m.RunAll())
		got := [][]uint64{bits(t, cost2.Value())}
		for _, gn := range grads2 {
			require.NotNil(t, gn.Value(), gn.Name())
			got = append(got, bits(t, gn.Value()))
		}
		m.Close()
		require.Equal(t, want, got)
	}
}
