package ooc_test

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm"
)

// More programs written the way gorgonia users write them: gorgonia's own
// layers (BatchNorm, Dropout, Conv2d and MaxPool2D with odd sizes, strides,
// padding and dilation, Upsample2D, Im2Col), reductions along axes,
// masks from comparisons, clamps composed of Rectify, reshape chains,
// concatenation along every axis, stepped slices, broadcast patterns on
// either side, shared weights, unused nodes, constants, two heads summed
// into one cost, KL divergence and cross-entropy. Each is compared bit for
// bit with gorgonia's TapeMachine by checkBitForBit (loss, every gradient,
// weights after Adam steps; in core, at half the in-core peak and at the
// least feasible budget; float32 and float64).

// userCtx makes a program's leaves from one seeded generator.
type userCtx struct {
	g   *G.ExprGraph
	dt  tensor.Dtype
	rng *rand.Rand
}

func (c *userCtx) leaf(name string, scale float64, shape ...int) *G.Node {
	return G.NewTensor(c.g, c.dt, len(shape), G.WithShape(shape...), G.WithName(name), G.WithValue(randT(c.rng, c.dt, scale, shape...)))
}

func (c *userCtx) scalar(v float64) *G.Node {
	if c.dt == tensor.Float32 {
		return G.NewConstant(float32(v))
	}
	return G.NewConstant(v)
}

// userProgram builds a program's cost and learnables; asUserBuilder
// differentiates it with gorgonia.Grad.
type userProgram func(c *userCtx) (cost *G.Node, params G.Nodes)

func asUserBuilder(f userProgram) builder {
	return func(dt tensor.Dtype, seed int64) *net {
		c := &userCtx{g: G.NewGraph(), dt: dt, rng: rand.New(rand.NewSource(seed))}
		cost, params := f(c)
		if _, err := G.Grad(cost, params...); err != nil {
			panic(err)
		}
		n := &net{g: c.g, cost: cost, params: params}
		seedDropout(n)
		return n
	}
}

func must4(y, _, _ *G.Node, _ *G.BatchNormOp, err error) *G.Node {
	if err != nil {
		panic(err)
	}
	return y
}

var userPrograms = map[string]userProgram{
	// A CNN block as gorgonia's examples write one: Conv2d, BatchNorm in
	// training mode, Rectify, Dropout (seeded alike in both runs: its
	// generator is otherwise clock-seeded), an odd-sized padded MaxPool2D.
	"bn-dropout-cnn": func(c *userCtx) (*G.Node, G.Nodes) {
		x := c.leaf("x", 1, 3, 2, 7, 7)
		k := c.leaf("k", 0.3, 4, 2, 3, 3)
		scale := c.leaf("scale", 0.3, 1, 4, 1, 1)
		bias := c.leaf("bias", 0.1, 1, 4, 1, 1)
		fc := c.leaf("fc", 0.2, 4*4*4, 3)
		h := G.Must(G.Conv2d(x, k, tensor.Shape{3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}))
		h = must4(G.BatchNorm(h, scale, bias, 0.1, 1e-5))
		h = G.Must(G.Rectify(h))
		h = G.Must(G.Dropout(h, 0.25))
		h = G.Must(G.MaxPool2D(h, tensor.Shape{3, 3}, []int{1, 1}, []int{2, 2}))
		logits := G.Must(G.Mul(G.Must(G.Reshape(h, tensor.Shape{3, 4 * 4 * 4})), fc))
		y := G.NewMatrix(c.g, c.dt, G.WithShape(3, 3), G.WithName("y"), G.WithValue(onehot(c.rng, c.dt, 3, 3)))
		return softmaxCE(logits, y), G.Nodes{k, scale, bias, fc}
	},
	// Conv2d variants side by side: stride 2 without padding on an odd
	// input, a 1x1 kernel, a 3x1 kernel padded on one axis, dilation 2
	// with padding 2; their maps joined on the channel axis, then pooled
	// to a vector by means over the last axes, one at a time.
	"conv-variants": func(c *userCtx) (*G.Node, G.Nodes) {
		x := c.leaf("x", 1, 2, 3, 7, 7)
		k1 := c.leaf("k1", 0.3, 2, 3, 3, 3)
		k2 := c.leaf("k2", 0.3, 2, 3, 1, 1)
		k3 := c.leaf("k3", 0.3, 2, 3, 3, 1)
		k4 := c.leaf("k4", 0.3, 2, 3, 3, 3)
		a := G.Must(G.Conv2d(x, k1, tensor.Shape{3, 3}, []int{0, 0}, []int{2, 2}, []int{1, 1}))  // 3x3
		b := G.Must(G.Conv2d(x, k2, tensor.Shape{1, 1}, []int{0, 0}, []int{2, 2}, []int{1, 1}))  // 4x4
		d := G.Must(G.Conv2d(x, k3, tensor.Shape{3, 1}, []int{1, 0}, []int{2, 2}, []int{1, 1}))  // 4x4
		e := G.Must(G.Conv2d(x, k4, tensor.Shape{3, 3}, []int{2, 2}, []int{1, 1}, []int{2, 2}))  // 7x7
		e = G.Must(G.MaxPool2D(G.Must(G.Tanh(e)), tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2})) // 3x3
		bd := G.Must(G.Concat(1, b, d))
		bd = G.Must(G.MaxPool2D(bd, tensor.Shape{3, 3}, []int{1, 1}, []int{1, 1})) // 4x4, padded
		bd = G.Must(G.Slice(bd, nil, nil, G.S(0, 3), G.S(1, 4)))
		all := G.Must(G.Concat(1, a, bd, e))
		v := G.Must(G.Mean(G.Must(G.Mean(all, 3)), 2))
		return G.Must(G.Sum(G.Must(G.Square(v)))), G.Nodes{k1, k2, k3, k4}
	},
	// Nearest upsampling, then a convolution written by hand: Im2Col and
	// a matrix product with a reshaped kernel.
	"upsample-im2col": func(c *userCtx) (*G.Node, G.Nodes) {
		x := c.leaf("x", 1, 2, 2, 3, 3)
		k := c.leaf("k", 0.3, 2*3*3, 4)
		up := G.Must(G.Upsample2D(x, 2)) // 6x6
		cols := G.Must(G.Im2Col(up, tensor.Shape{3, 3}, tensor.Shape{0, 0}, tensor.Shape{1, 1}, tensor.Shape{1, 1}))
		flat := G.Must(G.Reshape(cols, tensor.Shape{2 * 4 * 4, 2 * 3 * 3}))
		out := G.Must(G.Mul(flat, k))
		return G.Must(G.Mean(G.Must(G.Sum(G.Must(G.Sigmoid(out)), 1)))), G.Nodes{x, k}
	},
	// Reductions along each axis of a 3-D tensor, Norm along an axis,
	// SoftMax along the middle axis and LogSoftMax along the last.
	"reductions-softmax-axes": func(c *userCtx) (*G.Node, G.Nodes) {
		x := c.leaf("x", 1, 3, 4, 5)
		w := c.leaf("w", 0.3, 5, 5)
		h := G.Must(G.Tanh(G.Must(G.Reshape(G.Must(G.Mul(G.Must(G.Reshape(x, tensor.Shape{12, 5})), w)), tensor.Shape{3, 4, 5}))))
		s0 := G.Must(G.Sum(h, 0))                // 4x5
		m1 := G.Must(G.Mean(h, 1))               // 3x5
		s2 := G.Must(G.Sum(G.Must(G.Sum(h, 2)))) // scalar
		sm := G.Must(G.SoftMax(h, 1))
		ls := G.Must(G.LogSoftMax(h, 2))
		nrm := G.Must(G.Norm(m1, 1, 2)) // 3
		cost := G.Must(G.Add(G.Must(G.Sum(G.Must(G.Square(s0)))), G.Must(G.Mean(G.Must(G.Mean(m1, 1))))))
		cost = G.Must(G.Add(cost, G.Must(G.Mul(s2, c.scalar(0.01)))))
		cost = G.Must(G.Add(cost, G.Must(G.Sum(G.Must(G.Sum(G.Must(G.Sum(G.Must(G.HadamardProd(sm, ls)), 2)), 1))))))
		cost = G.Must(G.Add(cost, G.Must(G.Sum(nrm))))
		return cost, G.Nodes{x, w}
	},
	// Masks and clamps as users write them: a ReLU as x ⊙ (x > 0) with
	// retSame, a clamp to [-0.5, 0.5] from two Rectify, a gradient-free
	// Sign, Ceil and Floor branch, Inverse and Neg.
	"masks-clamps": func(c *userCtx) (*G.Node, G.Nodes) {
		x := c.leaf("x", 1, 6, 5)
		w := c.leaf("w", 0.4, 5, 5)
		h := G.Must(G.Mul(x, w))
		relu := G.Must(G.HadamardProd(h, G.Must(G.Gt(h, c.scalar(0), true))))
		lo, hi := c.scalar(-0.5), c.scalar(0.5)
		clamp := G.Must(G.Sub(G.Must(G.Add(lo, G.Must(G.Rectify(G.Must(G.Sub(h, lo)))))), G.Must(G.Rectify(G.Must(G.Sub(h, hi))))))
		steps := G.Must(G.Add(G.Must(G.Sign(x)), G.Must(G.Sub(G.Must(G.Ceil(x)), G.Must(G.Floor(x))))))
		inv := G.Must(G.Inverse(G.Must(G.Add(G.Must(G.Square(clamp)), c.scalar(1)))))
		cost := G.Must(G.Sum(G.Must(G.HadamardProd(G.Must(G.Add(relu, inv)), G.Must(G.Neg(steps))))))
		lt := G.Must(G.Lt(h, G.Must(G.Neg(h)), true))
		ne := G.Must(G.Ne(G.Must(G.Sign(h)), c.scalar(1), true))
		cost = G.Must(G.Add(cost, G.Must(G.Sum(G.Must(G.HadamardProd(G.Must(G.Add(lt, ne)), h))))))
		return cost, G.Nodes{w}
	},
	// Reshape chains, Concat along axes 0, 1 and 2 of 3-D tensors, slices
	// with steps on two axes, and broadcast adds with the pattern on the
	// left, on the right and on both sides.
	"reshape-concat-slice-broadcast": func(c *userCtx) (*G.Node, G.Nodes) {
		a := c.leaf("a", 1, 2, 3, 4)
		b := c.leaf("b", 1, 2, 3, 4)
		col := c.leaf("col", 0.5, 6, 1)
		row := c.leaf("row", 0.5, 1, 8)
		bias := c.leaf("bias", 0.5, 8)
		c0 := G.Must(G.Concat(0, a, b)) // 4x3x4
		c1 := G.Must(G.Concat(1, a, b)) // 2x6x4
		c2 := G.Must(G.Concat(2, a, b)) // 2x3x8
		r := G.Must(G.Reshape(G.Must(G.Reshape(c1, tensor.Shape{12, 4})), tensor.Shape{6, 8}))
		outer := G.Must(G.BroadcastAdd(col, row, []byte{1}, []byte{0})) // 6x8
		h := G.Must(G.Tanh(G.Must(G.HadamardProd(G.Must(G.Mul(r, c.scalar(1))), outer))))
		h = G.Must(G.BroadcastAdd(h, bias, nil, []byte{0}))
		st := G.Must(G.Slice(G.Must(G.Slice(c0, G.S(0, 4, 2))), nil, nil, G.S(1, 4))) // 2x3x3
		sq := G.Must(G.Reshape(G.Must(G.Slice(c2, nil, nil, G.S(0, 8, 4))), tensor.Shape{2, 6}))
		cost := G.Must(G.Add(G.Must(G.Sum(G.Must(G.Sum(h, 1)))), G.Must(G.Sum(G.Must(G.Sum(G.Must(G.Square(st)), 2))))))
		cost = G.Must(G.Add(cost, G.Must(G.Mean(G.Must(G.Sum(G.Must(G.Cube(sq)), 1))))))
		return cost, G.Nodes{a, b, col, row, bias}
	},
	// One weight used twice (a Siamese pair), a node computed and never
	// used, a constant tensor and scalar constants in the cost,
	// matrix-vector and vector-vector products.
	"shared-unused-constants": func(c *userCtx) (*G.Node, G.Nodes) {
		x1 := c.leaf("x1", 1, 8, 6)
		x2 := c.leaf("x2", 1, 8, 6)
		w := c.leaf("w", 0.3, 6, 4)
		v := c.leaf("v", 0.3, 4)
		u := c.leaf("u", 0.3, 8)
		_ = G.Must(G.Exp(G.Must(G.Mul(x1, w)))) // unused
		h1 := G.Must(G.Tanh(G.Must(G.Mul(x1, w))))
		h2 := G.Must(G.Tanh(G.Must(G.Mul(x2, w))))
		d := G.Must(G.Sub(h1, h2))
		target := G.NewConstant(randT(c.rng, c.dt, 1, 8, 4), G.WithName("target"), G.In(c.g))
		mv := G.Must(G.Mul(G.Must(G.Add(d, target)), v)) // 8
		dot := G.Must(G.Mul(mv, u))                      // scalar
		cost := G.Must(G.Add(G.Must(G.Square(dot)), G.Must(G.Mul(c.scalar(0.5), G.Must(G.Sum(G.Must(G.Square(d))))))))
		return cost, G.Nodes{w, v, u}
	},
	// A classifier trained on a KL divergence to soft targets plus a
	// binary cross-entropy head on a shared trunk, the two costs summed
	// with weights.
	"kl-xent-two-heads": func(c *userCtx) (*G.Node, G.Nodes) {
		x := c.leaf("x", 1, 10, 6)
		w := c.leaf("w", 0.3, 6, 8)
		wa := c.leaf("wa", 0.3, 8, 4)
		wb := c.leaf("wb", 0.3, 8, 1)
		soft := G.NewConstant(softTargets(c.rng, c.dt, 10, 4), G.WithName("soft"), G.In(c.g))
		bin := G.NewConstant(randUnit(c.rng, c.dt, 10, 1), G.WithName("bin"), G.In(c.g))
		trunk := G.Must(G.Rectify(G.Must(G.Mul(x, w))))
		logp := G.Must(G.LogSoftMax(G.Must(G.Mul(trunk, wa))))
		kl := G.Must(G.Mean(G.Must(G.Sum(G.Must(G.HadamardProd(soft, G.Must(G.Sub(G.Must(G.Log(soft)), logp)))), 1))))
		pb := G.Must(G.Sigmoid(G.Must(G.Mul(trunk, wb))))
		bx := G.Must(G.Mean(G.Must(G.BinaryXent(pb, bin))))
		cost := G.Must(G.Add(kl, G.Must(G.Mul(bx, c.scalar(0.5)))))
		return cost, G.Nodes{w, wa, wb}
	},
	// A 2-D BatchNorm over features, LeakyRelu, and the negative
	// log-likelihood summed from one scalar Slice per sample at its label
	// (as character-level models write it); a vector-matrix product adds a
	// penalty.
	"bn2d-nll-slices-vecmat": func(c *userCtx) (*G.Node, G.Nodes) {
		x := c.leaf("x", 1, 8, 5)
		// Widths of 8: float32 vectors of 17 to 24 bytes make TapeMachine's
		// own matrix-vector products vary from run to run (see the doc).
		w := c.leaf("w", 0.4, 5, 8)
		scale := c.leaf("scale", 0.3, 1, 8)
		bias := c.leaf("bias", 0.1, 1, 8)
		wo := c.leaf("wo", 0.4, 8, 4)
		v := c.leaf("v", 0.3, 8)
		h := must4(G.BatchNorm(G.Must(G.Mul(x, w)), scale, bias, 0.1, 1e-5))
		h = G.Must(G.LeakyRelu(h, 0.2))
		logp := G.Must(G.LogSoftMax(G.Must(G.Mul(h, wo))))
		var nll *G.Node
		for i, label := range []int{1, 0, 3, 2, 2, 1, 0, 3} {
			p := G.Must(G.Slice(logp, G.S(i), G.S(label)))
			if nll == nil {
				nll = p
			} else {
				nll = G.Must(G.Add(nll, p))
			}
		}
		vm := G.Must(G.Mul(v, h)) // 8
		cost := G.Must(G.Sub(G.Must(G.Mul(G.Must(G.Sum(G.Must(G.Square(vm)))), c.scalar(0.01))), nll))
		return cost, G.Nodes{w, scale, bias, wo, v}
	},
	// Two learnables added directly (a learnable initial state plus a
	// learnable offset): gorgonia's Grad gives both one gradient node, and
	// TapeMachine under BindDualValues still keeps a gradient per
	// learnable. (Compile refused this graph: "is the gradient of b and also
	// an output".)
	"two-learnables-one-gradient-node": func(c *userCtx) (*G.Node, G.Nodes) {
		a := c.leaf("a", 1, 4, 6)
		b := c.leaf("b", 1, 4, 6)
		w := c.leaf("w", 0.3, 6, 3)
		h := G.Must(G.Tanh(G.Must(G.Add(a, b))))
		return G.Must(G.Sum(G.Must(G.Square(G.Must(G.Mul(h, w)))))), G.Nodes{a, b, w}
	},
	// A kernel learnt as a matrix and reshaped to 4-D for Conv2d, and a
	// weight used through two Transposes: their gradients are views.
	"reshaped-and-transposed-weights": func(c *userCtx) (*G.Node, G.Nodes) {
		x := c.leaf("x", 1, 2, 2, 5, 5)
		wm := c.leaf("wm", 0.3, 3, 18)
		k := G.Must(G.Reshape(wm, tensor.Shape{3, 2, 3, 3}))
		h := G.Must(G.Conv2d(x, k, tensor.Shape{3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}))
		a := c.leaf("a", 1, 4, 6)
		wt := c.leaf("wt", 0.3, 6, 4)
		tt := G.Must(G.Mul(a, G.Must(G.Transpose(G.Must(G.Transpose(wt))))))
		return G.Must(G.Add(G.Must(G.Sum(G.Must(G.Tanh(h)))), G.Must(G.Sum(G.Must(G.Square(tt)))))), G.Nodes{wm, a, wt}
	},
	// A numerically stable log-softmax written by hand with KeepDims (a
	// reduction kept 2-D, then broadcast back), one-hot targets made by
	// OneHotVector, and a matrix of them built with Concat.
	"keepdims-onehot": func(c *userCtx) (*G.Node, G.Nodes) {
		x := c.leaf("x", 1, 4, 6)
		w := c.leaf("w", 0.3, 6, 5)
		z := G.Must(G.Mul(x, w))
		m, err := G.KeepDims(z, false, func(a *G.Node) (*G.Node, error) { return G.Max(a, 1) })
		if err != nil {
			panic(err)
		}
		shifted := G.Must(G.BroadcastSub(z, m, nil, []byte{1}))
		lse, err := G.KeepDims(shifted, false, func(a *G.Node) (*G.Node, error) {
			return G.Log(G.Must(G.Sum(G.Must(G.Exp(a)), 1)))
		})
		if err != nil {
			panic(err)
		}
		logp := G.Must(G.BroadcastSub(shifted, lse, nil, []byte{1}))
		var rows G.Nodes
		for _, label := range []int{2, 0, 4, 1} {
			oh := G.OneHotVector(label, 5, c.dt, G.In(c.g))
			rows = append(rows, G.Must(G.Reshape(oh, tensor.Shape{1, 5})))
		}
		y := G.Must(G.Concat(0, rows...))
		return G.Must(G.Neg(G.Must(G.Mean(G.Must(G.Sum(G.Must(G.HadamardProd(logp, y)), 1)))))), G.Nodes{w}
	},
	// An embedding table looked up row by row with Slice (a token repeated,
	// so its row's gradient accumulates from two slices) and by ByIndices,
	// the rows stacked with Concat after a Reshape each.
	"embedding-lookups": func(c *userCtx) (*G.Node, G.Nodes) {
		emb := c.leaf("emb", 0.5, 7, 4)
		w := c.leaf("w", 0.3, 4, 4)
		var rows G.Nodes
		for _, tok := range []int{3, 0, 3, 6} {
			rows = append(rows, G.Must(G.Reshape(G.Must(G.Slice(emb, G.S(tok))), tensor.Shape{1, 4})))
		}
		seq := G.Must(G.Concat(0, rows...)) // 4x4
		idx := G.NewVector(c.g, tensor.Int, G.WithShape(4), G.WithName("idx"), G.WithValue(tensor.New(tensor.WithBacking([]int{1, 5, 1, 2}))))
		ctx := G.Must(G.ByIndices(emb, idx, 0)) // 4x4
		h := G.Must(G.Tanh(G.Must(G.Mul(G.Must(G.Add(seq, ctx)), w))))
		return G.Must(G.Sum(G.Must(G.Square(h)))), G.Nodes{emb, w}
	},
	// A GRU unrolled over three steps: gates from one matrix product of
	// the concatenated input and state, (1 - z) with the scalar first, the
	// candidate from the reset state, a learnable initial state.
	"gru": func(c *userCtx) (*G.Node, G.Nodes) {
		const batch, in, hid = 4, 3, 4
		x := c.leaf("x", 1, 3, batch, in)
		wzr := c.leaf("wzr", 0.4, in+hid, 2*hid)
		wx := c.leaf("wx", 0.4, in, hid)
		wh := c.leaf("wh", 0.4, hid, hid)
		h := c.leaf("h0", 0.1, batch, hid)
		h0 := h
		one := c.scalar(1)
		for t := 0; t < 3; t++ {
			xt := G.Must(G.Slice(x, G.S(t)))
			g := G.Must(G.Sigmoid(G.Must(G.Mul(G.Must(G.Concat(1, xt, h)), wzr))))
			z := G.Must(G.Slice(g, nil, G.S(0, hid)))
			r := G.Must(G.Slice(g, nil, G.S(hid, 2*hid)))
			cand := G.Must(G.Tanh(G.Must(G.Add(G.Must(G.Mul(xt, wx)), G.Must(G.Mul(G.Must(G.HadamardProd(r, h)), wh))))))
			h = G.Must(G.Add(G.Must(G.HadamardProd(G.Must(G.Sub(one, z)), h)), G.Must(G.HadamardProd(z, cand))))
		}
		return G.Must(G.Mean(G.Must(G.Sum(G.Must(G.Square(h)), 1)))), G.Nodes{wzr, wx, wh, h0}
	},
}

// softTargets are rows of a probability distribution.
func softTargets(rng *rand.Rand, dt tensor.Dtype, n, k int) *tensor.Dense {
	t := randUnit(rng, dt, n, k)
	for i := 0; i < n; i++ {
		var s float64
		for j := 0; j < k; j++ {
			s += at(t, i*k+j)
		}
		for j := 0; j < k; j++ {
			setAt(t, i*k+j, at(t, i*k+j)/s)
		}
	}
	return t
}

// randUnit is a tensor of numbers in (0.05, 0.95).
func randUnit(rng *rand.Rand, dt tensor.Dtype, shape ...int) *tensor.Dense {
	t := tensor.New(tensor.Of(dt), tensor.WithShape(shape...))
	for i := 0; i < t.Len(); i++ {
		setAt(t, i, 0.05+0.9*rng.Float64())
	}
	return t
}

func at(t *tensor.Dense, i int) float64 {
	if d, ok := t.Data().([]float32); ok {
		return float64(d[i])
	}
	return t.Data().([]float64)[i]
}

func setAt(t *tensor.Dense, i int, f float64) {
	if d, ok := t.Data().([]float32); ok {
		d[i] = float32(f)
		return
	}
	t.Data().([]float64)[i] = f
}

// TestMoreUsersProgramsBitForBit: the programs above train bit for bit as
// under TapeMachine, in core, at half the in-core peak (where a schedule
// exists) and at the least feasible budget.
func TestMoreUsersProgramsBitForBit(t *testing.T) {
	models := map[string]builder{}
	for name, p := range userPrograms {
		models[name] = asUserBuilder(p)
	}
	checkBitForBit(t, models)
}

// solverCase makes a fresh gorgonia solver for one run.
type solverCase struct {
	name string
	make func() G.Solver
	// f64Only: gorgonia's solver fails on float32 weights, whatever ran
	// the step.
	f64Only bool
}

var userSolvers = []solverCase{
	{name: "vanilla-clip", make: func() G.Solver { return G.NewVanillaSolver(G.WithLearnRate(0.1), G.WithClip(0.05)) }},
	{name: "vanilla-l2-batch", make: func() G.Solver {
		return G.NewVanillaSolver(G.WithLearnRate(0.1), G.WithL2Reg(1e-2), G.WithBatchSize(4))
	}},
	{name: "momentum-l1", make: func() G.Solver {
		return G.NewMomentum(G.WithLearnRate(0.05), G.WithMomentum(0.8), G.WithL1Reg(1e-3))
	}},
	{name: "adam-l2-clip-batch", make: func() G.Solver {
		return G.NewAdamSolver(G.WithLearnRate(0.01), G.WithL2Reg(1e-3), G.WithClip(0.5), G.WithBatchSize(2))
	}},
	{name: "rmsprop", make: func() G.Solver {
		return G.NewRMSPropSolver(G.WithLearnRate(0.01), G.WithRho(0.9), G.WithEps(1e-6), G.WithClip(1))
	}},
	{name: "adagrad-l2", make: func() G.Solver { return G.NewAdaGradSolver(G.WithLearnRate(0.05), G.WithL2Reg(1e-3)) }},
	// Its Step multiplies a float32 tensor by a float64 scalar and fails
	// (solvers.go:1530).
	{name: "barzilai-borwein", make: func() G.Solver { return G.NewBarzilaiBorweinSolver(G.WithLearnRate(0.01)) }, f64Only: true},
	{name: "adamw", make: func() G.Solver { return G.NewAdamW(G.WithLearnRate(0.01)) }},
}

// solverSteps is trainSteps with a given solver; with newBatch, a script's
// loop that gorgonia.Lets a new batch into x before every run.
func solverSteps(t *testing.T, n *net, m G.VM, solver G.Solver, steps int, newBatch bool) [][]uint64 {
	t.Helper()
	rng := rand.New(rand.NewSource(9))
	var out [][]uint64
	for s := 0; s < steps; s++ {
		if newBatch {
			require.NoError(t, G.Let(n.x, randT(rng, n.x.Dtype(), 1, n.x.Shape()...)))
		}
		require.NoError(t, m.RunAll())
		out = append(out, bits(t, n.cost.Value()))
		for _, p := range n.params {
			gv, err := p.Grad()
			require.NoError(t, err)
			out = append(out, bits(t, gv))
		}
		require.NoError(t, solver.Step(G.NodesToValueGrads(n.params)))
		m.Reset()
	}
	for _, p := range n.params {
		out = append(out, bits(t, p.Value()))
	}
	return out
}

// solverOnTape is solverSteps of a fresh build on gorgonia's TapeMachine:
// the reference the suites compare with, and (in float64) the float32 CUDA
// clause's.
func solverOnTape(t *testing.T, build builder, dt tensor.Dtype, sc solverCase) [][]uint64 {
	t.Helper()
	ref := build(dt, 1)
	tm := G.NewTapeMachine(ref.g, G.BindDualValues(ref.params...))
	out := solverSteps(t, ref, tm, sc.make(), 3, true)
	require.NoError(t, tm.Close())
	return out
}

// TestSolversBitForBit: gorgonia's solvers with their options (clipping,
// L1 and L2 regularisation, batch size) step the weights an out-of-core
// run computes the gradients of exactly as they step TapeMachine's, over
// three steps, each with a new batch Let into the input, in core and at
// the least feasible budget.
func TestSolversBitForBit(t *testing.T) {
	checkSolversOn(t, nil)
}

// checkSolversOn is TestSolversBitForBit on a device: nil is the CPU device
// (bit for bit); a CUDA target compares within the zoo's tolerance (the
// float64 build on the TapeMachine is the float32 clause's reference), with
// the backend's reserve added to the least budget.
func checkSolversOn(t *testing.T, dev *cudaTarget) {
	models := map[string]builder{"mlp": mlp, "cnn": cnn}
	for _, name := range sortedNames(models) {
		build := models[name]
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			peak, err := ooc.InCorePeak(build(dt, 1).g)
			require.NoError(t, err)
			least := minFeasible(t, build, dt, peak)
			for _, sc := range userSolvers {
				if sc.f64Only && dt != tensor.Float64 {
					continue
				}
				t.Run(name+"/"+dt.String()+"/"+sc.name, func(t *testing.T) {
					want := solverOnTape(t, build, dt, sc)
					f64 := once(func(t *testing.T) [][]uint64 { return solverOnTape(t, build, tensor.Float64, sc) })
					for _, budget := range []int64{0, least} {
						got := build(dt, 1)
						opts := []ooc.Option{ooc.BindDualValues(got.params...), ooc.WithPoison(), ooc.Baseline()}
						if budget > 0 {
							opts = []ooc.Option{ooc.BindDualValues(got.params...), ooc.WithPoison(), ooc.WithBudget(budget + dev.reserve())}
						}
						m, err := ooc.Compile(got.g, append(opts, dev.options()...)...)
						require.NoError(t, err)
						res := solverSteps(t, got, m, sc.make(), 3, true)
						require.NoError(t, m.Close())
						if dev != nil {
							dev.requireClose(t, dt, fmt.Sprintf("budget %d", budget), want, res, f64)
							continue
						}
						require.Equal(t, want, res, "budget %d", budget)
					}
				})
			}
		}
	}
}

// TestUsersProgramsEverySchedulerAndOption: users' programs train bit for
// bit as under TapeMachine with every scheduler (at the least budget that
// scheduler can plan, and at half the in-core peak where that is no less:
// below its least budget a scheduler's Compile returns an error) and with the public API's other options (the
// best-fit allocator, a larger VA chunk, an explicit window, a workspace
// limit, leaves kept in host memory, BindDualValues of every learnable,
// planning times of a simulated GPU). A scheduler that times the trace
// (LMS, Greedy, DynProg, VDNN, Hybrid) runs its first step on the window
// scheduler's tape and replans from measured op times, so the steps after
// the first run another tape.
func TestUsersProgramsEverySchedulerAndOption(t *testing.T) {
	models := map[string]builder{
		"bn-dropout-cnn":    asUserBuilder(userPrograms["bn-dropout-cnn"]),
		"kl-xent-two-heads": asUserBuilder(userPrograms["kl-xent-two-heads"]),
		"masks-clamps":      asUserBuilder(userPrograms["masks-clamps"]),
	}
	schedulers := []ooc.Scheduler{ooc.Window{}, ooc.LMS{}, ooc.Greedy{}, ooc.DynProg{}, ooc.VDNN{}, ooc.Checkpoint{}, ooc.Hybrid{}}
	prof, err := vm.LookupProfile("gtx1080ti")
	require.NoError(t, err)
	gpuSim, err := vm.NewSim(prof)
	require.NoError(t, err)
	for _, name := range sortedNames(models) {
		build := models[name]
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			ref := build(dt, 1)
			tm := G.NewTapeMachine(ref.g, G.BindDualValues(ref.params...))
			wantL, wantG, wantW := trainSteps(t, ref, tm, 3)
			require.NoError(t, tm.Close())
			peak, err := ooc.InCorePeak(build(dt, 1).g)
			require.NoError(t, err)
			need, _ := mostOneFunctionNeeds(t, build(dt, 1))
			type variant struct {
				label  string
				budget int64
				opts   []ooc.Option
			}
			var variants []variant
			leastOf := map[string]int64{}
			for _, sc := range schedulers {
				least := minFeasibleWith(t, build, dt, peak, ooc.WithScheduler(sc))
				leastOf[sc.Name()] = least
				variants = append(variants, variant{sc.Name() + "/min", least, []ooc.Option{ooc.WithScheduler(sc)}})
				if need <= peak/2 && least <= peak/2 {
					variants = append(variants, variant{sc.Name() + "/50%", peak / 2, []ooc.Option{ooc.WithScheduler(sc)}})
				}
			}
			least := minFeasible(t, build, dt, peak)
			variants = append(variants,
				variant{"bestfit", least, []ooc.Option{ooc.WithAllocator(ooc.BestFit)}},
				variant{"chunk-4MiB", least, []ooc.Option{ooc.WithChunkSize(4 << 20)}},
				variant{"window-2x", least, []ooc.Option{ooc.WithWindow(2 * least)}},
				variant{"workspace-limit", least, []ooc.Option{ooc.WithWorkspaceLimit(1024)}},
				variant{"host-persistent", least, []ooc.Option{ooc.HostPersistent()}},
				variant{"bind-all", least, []ooc.Option{ooc.BindDualValues()}},
				variant{"dynprog-planned-for-gtx1080ti", leastOf["dynprog"], []ooc.Option{ooc.WithScheduler(ooc.DynProg{}), ooc.WithPlanningTimes(gpuSim)}},
			)
			for _, v := range variants {
				t.Run(name+"/"+dt.String()+"/"+v.label, func(t *testing.T) {
					got := build(dt, 1)
					opts := append([]ooc.Option{ooc.BindDualValues(got.params...), ooc.WithPoison(), ooc.WithBudget(v.budget)}, v.opts...)
					m, err := ooc.Compile(got.g, opts...)
					require.NoError(t, err)
					defer m.Close()
					gotL, gotG, gotW := trainSteps(t, got, m, 3)
					require.Equal(t, wantL, gotL, "loss")
					require.Equal(t, wantG, gotG, "gradients")
					require.Equal(t, wantW, gotW, "weights")
					require.LessOrEqual(t, m.Stats().PeakDeviceBytes, v.budget)
				})
			}
		}
	}
}

// forwardProgram builds a forward-only program and returns the nodes the
// script reads with gorgonia.Read.
type forwardProgram func(c *userCtx) G.Nodes

var userForwardPrograms = map[string]forwardProgram{
	// A classifier's forward as an evaluation script runs it: Conv2d,
	// BatchNorm, Dropout, GlobalAveragePool2D (which has no gradient, so
	// only a forward graph can use it), a matrix product and SoftMax.
	"bn-dropout-gap": func(c *userCtx) G.Nodes {
		x := c.leaf("x", 1, 2, 3, 5, 5)
		k := c.leaf("k", 0.3, 4, 3, 3, 3)
		scale := c.leaf("scale", 0.3, 1, 4, 1, 1)
		bias := c.leaf("bias", 0.1, 1, 4, 1, 1)
		fc := c.leaf("fc", 0.3, 4, 3)
		h := G.Must(G.Conv2d(x, k, tensor.Shape{3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}))
		h = must4(G.BatchNorm(h, scale, bias, 0.1, 1e-5))
		h = G.Must(G.Dropout(G.Must(G.Rectify(h)), 0.5))
		gap := G.Must(G.Reshape(G.Must(G.GlobalAveragePool2D(h)), tensor.Shape{2, 4}))
		prob := G.Must(G.SoftMax(G.Must(G.Mul(gap, fc))))
		return G.Nodes{prob, G.Must(G.Max(prob, 1))}
	},
	// Outer products and a vector chain: OuterProd has no correct gradient
	// in gorgonia, so it appears in forward graphs.
	"outer-products": func(c *userCtx) G.Nodes {
		u := c.leaf("u", 1, 8)
		v := c.leaf("v", 1, 4)
		w := c.leaf("w", 0.5, 4, 8)
		o := G.Must(G.OuterProd(u, v))                   // 8x4
		p := G.Must(G.Tanh(G.Must(G.Mul(o, w))))         // 8x8
		q := G.Must(G.Mul(p, u))                         // 8
		r := G.Must(G.Sum(G.Must(G.HadamardProd(q, u)))) // scalar
		return G.Nodes{p, q, r}
	},
}

// TestUsersForwardPrograms: forward-only programs give, in what their Read
// statements store over three runs, what TapeMachine gives: a graph with no
// gradient run as it is (batch norm and dropout in training mode, as a
// plain TapeMachine runs them; dropout seeded alike) and compiled with
// Inference() against TapeMachine's EvalMode; in core and at the least
// feasible budget.
func TestUsersForwardPrograms(t *testing.T) {
	build := func(p forwardProgram, dt tensor.Dtype) (*G.ExprGraph, []*G.Value) {
		c := &userCtx{g: G.NewGraph(), dt: dt, rng: rand.New(rand.NewSource(3))}
		var reads []*G.Value
		for _, n := range p(c) {
			r := new(G.Value)
			G.Read(n, r)
			reads = append(reads, r)
		}
		seedDropout(&net{g: c.g})
		return c.g, reads
	}
	for _, name := range sortedNames(userForwardPrograms) {
		p := userForwardPrograms[name]
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			for _, eval := range []bool{false, true} {
				mode := map[bool]string{false: "train-mode", true: "inference"}[eval]
				t.Run(name+"/"+dt.String()+"/"+mode, func(t *testing.T) {
					g, reads := build(p, dt)
					var tmOpts []G.VMOpt
					var opts []ooc.Option
					if eval {
						tmOpts, opts = append(tmOpts, G.EvalMode()), append(opts, ooc.Inference())
					}
					tm := G.NewTapeMachine(g, tmOpts...)
					want := runReads(t, tm, reads, 3)
					require.NoError(t, tm.Close())
					g, _ = build(p, dt)
					peak, err := ooc.InCorePeak(g)
					require.NoError(t, err)
					least := minFeasibleWith(t, func(dt tensor.Dtype, _ int64) *net {
						g, _ := build(p, dt)
						return &net{g: g}
					}, dt, peak, opts...)
					for _, budget := range []int64{0, least} {
						g, reads := build(p, dt)
						o := append([]ooc.Option{ooc.WithPoison(), ooc.Baseline()}, opts...)
						if budget > 0 {
							o = append([]ooc.Option{ooc.WithPoison(), ooc.WithBudget(budget)}, opts...)
						}
						m, err := ooc.Compile(g, o...)
						require.NoError(t, err)
						require.Equal(t, want, runReads(t, m, reads, 3), "budget %d", budget)
						require.NoError(t, m.Close())
					}
				})
			}
		}
	}
}

// backpropNet differentiates with gorgonia.Backpropagate instead of Grad,
// with output gradients the script supplies as constants: from a matrix
// output alone (no scalar cost anywhere in the graph), or from that and a
// scalar penalty at once. The script reads the matrix output with
// gorgonia.Read.
func backpropNet(withScalar bool) builder {
	return func(dt tensor.Dtype, seed int64) *net {
		c := &userCtx{g: G.NewGraph(), dt: dt, rng: rand.New(rand.NewSource(seed))}
		x := c.leaf("x", 1, 8, 5)
		w1 := c.leaf("w1", 0.3, 5, 6)
		w2 := c.leaf("w2", 0.3, 6, 4)
		h := G.Must(G.Tanh(G.Must(G.Mul(x, w1))))
		out := G.Must(G.Mul(h, w2)) // 8x4
		outs := G.Nodes{out}
		grads := G.Nodes{G.NewConstant(randT(c.rng, dt, 1, 8, 4), G.WithName("dout"), G.In(c.g))}
		if withScalar {
			outs = append(outs, G.Must(G.Sum(G.Must(G.Square(G.Must(G.Sum(h, 1)))))))
			grads = append(grads, G.NewConstant(castTo(dt, 0.01), G.WithName("dreg"), G.In(c.g)))
		}
		params := G.Nodes{w1, w2}
		if _, err := G.Backpropagate(outs, grads, params); err != nil {
			panic(err)
		}
		read := new(G.Value)
		G.Read(out, read)
		return &net{g: c.g, x: x, cost: out, params: params, read: read}
	}
}

// twoGradNet calls gorgonia.Grad twice on one graph: an autoencoder's
// reconstruction cost for the encoder and decoder, and a classifier's cost
// on the code for the head, as scripts that train two objectives write it.
func twoGradNet(dt tensor.Dtype, seed int64) *net {
	c := &userCtx{g: G.NewGraph(), dt: dt, rng: rand.New(rand.NewSource(seed))}
	x := c.leaf("x", 1, 8, 6)
	enc := c.leaf("enc", 0.3, 6, 4)
	dec := c.leaf("dec", 0.3, 4, 6)
	head := c.leaf("head", 0.3, 4, 3)
	y := G.NewMatrix(c.g, dt, G.WithShape(8, 3), G.WithName("y"), G.WithValue(onehot(c.rng, dt, 8, 3)))
	code := G.Must(G.Sigmoid(G.Must(G.Mul(x, enc))))
	rec := G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(G.Must(G.Mul(code, dec)), x))))))
	if _, err := G.Grad(rec, enc, dec); err != nil {
		panic(err)
	}
	cls := softmaxCE(G.Must(G.Mul(code, head)), y)
	if _, err := G.Grad(cls, head); err != nil {
		panic(err)
	}
	read := new(G.Value)
	G.Read(cls, read)
	return &net{g: c.g, x: x, cost: rec, params: G.Nodes{enc, dec, head}, read: read}
}

// TestBackpropagateBitForBit: a graph differentiated by
// gorgonia.Backpropagate, or by two gorgonia.Grad calls of two costs,
// trains bit for bit as under TapeMachine. (From a
// matrix output alone, Compile refused BindDualValues on it, saying the
// learnables had no gradient, and without BindDualValues a Read in the
// graph left their gradients out: only a scalar output with a constant
// gradient was taken for a cost.)
func TestBackpropagateBitForBit(t *testing.T) {
	checkBitForBit(t, map[string]builder{"matrix-output": backpropNet(false), "matrix-and-scalar": backpropNet(true), "two-grad-calls": twoGradNet})
}

// TestSharedGradientNodeWithoutDualValues: without BindDualValues, two
// learnables with one gradient node both read that node's value through
// Grad(), as under TapeMachine.
func TestSharedGradientNodeWithoutDualValues(t *testing.T) {
	build := asUserBuilder(userPrograms["two-learnables-one-gradient-node"])
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		grads := func(n *net, m G.VM) [][]uint64 {
			require.NoError(t, m.RunAll())
			var out [][]uint64
			for _, p := range n.params {
				g, err := p.Grad()
				require.NoError(t, err)
				out = append(out, bits(t, g))
			}
			require.NoError(t, m.Close())
			return out
		}
		ref := build(dt, 1)
		require.Same(t, ref.params[0].Deriv(), ref.params[1].Deriv())
		want := grads(ref, G.NewTapeMachine(ref.g))
		got := build(dt, 1)
		m, err := ooc.Compile(got.g)
		require.NoError(t, err)
		require.Equal(t, want, grads(got, m))
	}
}

// TestSwitchFromTapeMachine: a script that trains a step with gorgonia's
// TapeMachine (BindDualValues) and then compiles the same graph with ooc
// continues exactly as TapeMachine would have, with or without
// BindDualValues, in core and at the least budget. (TapeMachine leaves each
// learnable bound to a dual value whose gradient Grad() returns: ooc's
// gradients were published beside it, and the solver stepped with the
// first step's gradients ever after.)
func TestSwitchFromTapeMachine(t *testing.T) {
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		ref := mlp(dt, 1)
		tm := G.NewTapeMachine(ref.g, G.BindDualValues(ref.params...))
		solver := G.NewAdamSolver(G.WithLearnRate(0.01))
		want := solverSteps(t, ref, tm, solver, 1, false)
		want = append(want, solverSteps(t, ref, tm, solver, 3, false)...)
		require.NoError(t, tm.Close())
		peak, err := ooc.InCorePeak(mlp(dt, 1).g)
		require.NoError(t, err)
		least := minFeasible(t, mlp, dt, peak)
		for _, bind := range []bool{true, false} {
			for _, budget := range []int64{0, least} {
				got := mlp(dt, 1)
				first := G.NewTapeMachine(got.g, G.BindDualValues(got.params...))
				solver := G.NewAdamSolver(G.WithLearnRate(0.01))
				res := solverSteps(t, got, first, solver, 1, false)
				require.NoError(t, first.Close())
				opts := []ooc.Option{ooc.WithPoison(), ooc.Baseline()}
				if budget > 0 {
					opts = []ooc.Option{ooc.WithPoison(), ooc.WithBudget(budget)}
				}
				if bind {
					opts = append(opts, ooc.BindDualValues(got.params...))
				}
				m, err := ooc.Compile(got.g, opts...)
				require.NoError(t, err)
				res = append(res, solverSteps(t, got, m, solver, 3, false)...)
				require.NoError(t, m.Close())
				require.Equal(t, want, res, "%v, BindDualValues %v, budget %d", dt, bind, budget)
			}
		}
	}
}

// bnNet is a convolution, gorgonia's BatchNorm and a classifier, with the
// batch norm op kept to read its running statistics and the prediction
// read by a gorgonia.Read.
func bnNet(dt tensor.Dtype) (*net, *G.BatchNormOp, *G.Value) {
	c := &userCtx{g: G.NewGraph(), dt: dt, rng: rand.New(rand.NewSource(5))}
	x := c.leaf("x", 1, 4, 2, 5, 5)
	k := c.leaf("k", 0.3, 3, 2, 3, 3)
	scale := c.leaf("scale", 0.3, 1, 3, 1, 1)
	bias := c.leaf("bias", 0.1, 1, 3, 1, 1)
	fc := c.leaf("fc", 0.2, 3*5*5, 2)
	h := G.Must(G.Conv2d(x, k, tensor.Shape{3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}))
	h, _, _, op, err := G.BatchNorm(h, scale, bias, 0.1, 1e-5)
	if err != nil {
		panic(err)
	}
	prob := G.Must(G.SoftMax(G.Must(G.Mul(G.Must(G.Reshape(G.Must(G.Rectify(h)), tensor.Shape{4, 3 * 5 * 5})), fc))))
	y := G.NewMatrix(c.g, dt, G.WithShape(4, 2), G.WithName("y"), G.WithValue(onehot(c.rng, dt, 4, 2)))
	cost := G.Must(G.Neg(G.Must(G.Mean(G.Must(G.HadamardProd(G.Must(G.Log(prob)), y))))))
	params := G.Nodes{k, scale, bias, fc}
	if _, err := G.Grad(cost, params...); err != nil {
		panic(err)
	}
	pred := new(G.Value)
	G.Read(prob, pred)
	return &net{g: c.g, x: x, cost: cost, params: params}, op, pred
}

// TestBatchNormStateThenEvaluation: gorgonia's BatchNorm keeps running
// statistics in its op. Three training steps advance them exactly as under
// TapeMachine (once per step, never by a recomputation), and the script's
// evaluation afterwards on the same graph (a TapeMachine with EvalMode;
// ooc.Compile with Inference()) predicts from them the same bits; in core
// and at the least budget.
func TestBatchNormStateThenEvaluation(t *testing.T) {
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		run := func(n *net, op *G.BatchNormOp, pred *G.Value, train G.VM) [][]uint64 {
			solver := G.NewMomentum(G.WithLearnRate(0.05))
			var out [][]uint64
			for s := 0; s < 3; s++ {
				require.NoError(t, train.RunAll())
				out = append(out, bits(t, n.cost.Value()), bits(t, *pred))
				require.NoError(t, solver.Step(G.NodesToValueGrads(n.params)))
				train.Reset()
			}
			mean, variance := op.Stats()
			out = append(out, bits(t, mean), bits(t, variance))
			return out
		}
		evaluate := func(pred *G.Value, m G.VM) []uint64 {
			require.NoError(t, m.RunAll())
			return bits(t, *pred)
		}
		ref, op, pred := bnNet(dt)
		tm := G.NewTapeMachine(ref.g, G.BindDualValues(ref.params...))
		want := run(ref, op, pred, tm)
		require.NoError(t, tm.Close())
		ev := G.NewTapeMachine(ref.g, G.EvalMode())
		want = append(want, evaluate(pred, ev))
		require.NoError(t, ev.Close())

		peak, err := ooc.InCorePeak(func() *net { n, _, _ := bnNet(dt); return n }().g)
		require.NoError(t, err)
		least := minFeasible(t, func(dt tensor.Dtype, _ int64) *net { n, _, _ := bnNet(dt); return n }, dt, peak)
		for _, budget := range []int64{0, least} {
			n, op, pred := bnNet(dt)
			opts := []ooc.Option{ooc.BindDualValues(n.params...), ooc.WithPoison(), ooc.Baseline()}
			if budget > 0 {
				opts = []ooc.Option{ooc.BindDualValues(n.params...), ooc.WithPoison(), ooc.WithBudget(budget)}
			}
			m, err := ooc.Compile(n.g, opts...)
			require.NoError(t, err)
			got := run(n, op, pred, m)
			require.NoError(t, m.Close())
			em, err := ooc.Compile(n.g, ooc.Inference(), ooc.WithPoison())
			require.NoError(t, err)
			got = append(got, evaluate(pred, em))
			require.NoError(t, em.Close())
			require.Equal(t, want, got, "%v budget %d", dt, budget)
		}
	}
}

// rowRange is a tensor.Slice of rows, as gorgonia's MNIST example defines
// its own.
type rowRange struct{ start, end int }

func (s rowRange) Start() int { return s.start }
func (s rowRange) End() int   { return s.end }
func (s rowRange) Step() int  { return 1 }

// TestLetSlicedBatches: a data loader that Lets views of one dataset
// tensor (dataset.Slice of the batch's rows, as gorgonia's MNIST example
// does) into the inputs trains bit for bit as under TapeMachine, in core
// and at the least budget.
func TestLetSlicedBatches(t *testing.T) {
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		run := func(n *net, m G.VM) [][]uint64 {
			rng := rand.New(rand.NewSource(4))
			xs, ys := randT(rng, dt, 1, 3*64, 20), onehot(rng, dt, 3*64, 5)
			solver := G.NewAdamSolver(G.WithLearnRate(0.01))
			var out [][]uint64
			for b := 0; b < 3; b++ {
				xv, err := xs.Slice(rowRange{b * 64, (b + 1) * 64})
				require.NoError(t, err)
				yv, err := ys.Slice(rowRange{b * 64, (b + 1) * 64})
				require.NoError(t, err)
				require.NoError(t, G.Let(n.x, xv))
				require.NoError(t, G.Let(n.y, yv))
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
		ref := mlp(dt, 1)
		tm := G.NewTapeMachine(ref.g, G.BindDualValues(ref.params...))
		want := run(ref, tm)
		require.NoError(t, tm.Close())
		peak, err := ooc.InCorePeak(mlp(dt, 1).g)
		require.NoError(t, err)
		for _, budget := range []int64{0, minFeasible(t, mlp, dt, peak)} {
			got := mlp(dt, 1)
			opts := []ooc.Option{ooc.BindDualValues(got.params...), ooc.WithPoison(), ooc.Baseline()}
			if budget > 0 {
				opts = []ooc.Option{ooc.BindDualValues(got.params...), ooc.WithPoison(), ooc.WithBudget(budget)}
			}
			m, err := ooc.Compile(got.g, opts...)
			require.NoError(t, err)
			require.Equal(t, want, run(got, m), "%v budget %d", dt, budget)
			require.NoError(t, m.Close())
		}
	}
}

// TestScalarIntermediatesBound: after RunAll the script reads the terms of
// a cost, and a metric the cost does not use, with Value() (as TapeMachine
// computes and binds every node): float scalars of the forward are bound to
// their nodes with TapeMachine's values, in core and at the least budget.
// (Their Value() was nil, and the metric was not computed.)
func TestScalarIntermediatesBound(t *testing.T) {
	build := func(dt tensor.Dtype) (*net, G.Nodes) {
		c := &userCtx{g: G.NewGraph(), dt: dt, rng: rand.New(rand.NewSource(2))}
		x := c.leaf("x", 1, 6, 4)
		w := c.leaf("w", 0.3, 4, 3)
		y := G.NewMatrix(c.g, dt, G.WithShape(6, 3), G.WithName("y"), G.WithValue(onehot(c.rng, dt, 6, 3)))
		logits := G.Must(G.Mul(x, w))
		xent := softmaxCE(logits, y)
		l2 := G.Must(G.Sum(G.Must(G.Square(w))))
		penalty := G.Must(G.Mul(l2, c.scalar(0.01)))
		cost := G.Must(G.Add(xent, penalty))
		// A metric the cost does not use: the mean of the predicted
		// probability of the true class.
		metric := G.Must(G.Mean(G.Must(G.Sum(G.Must(G.HadamardProd(G.Must(G.SoftMax(logits)), y)), 1))))
		if _, err := G.Grad(cost, w); err != nil {
			panic(err)
		}
		return &net{g: c.g, x: x, cost: cost, params: G.Nodes{w}}, G.Nodes{xent, l2, penalty, metric}
	}
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		run := func(n *net, terms G.Nodes, m G.VM) [][]uint64 {
			solver := G.NewVanillaSolver(G.WithLearnRate(0.1))
			var out [][]uint64
			for s := 0; s < 3; s++ {
				require.NoError(t, m.RunAll())
				for _, term := range terms {
					require.NotNil(t, term.Value(), "%s", term.Name())
					out = append(out, bits(t, term.Value()))
				}
				require.NoError(t, solver.Step(G.NodesToValueGrads(n.params)))
				m.Reset()
			}
			return out
		}
		ref, terms := build(dt)
		tm := G.NewTapeMachine(ref.g, G.BindDualValues(ref.params...))
		want := run(ref, terms, tm)
		require.NoError(t, tm.Close())
		peak, err := ooc.InCorePeak(func() *net { n, _ := build(dt); return n }().g)
		require.NoError(t, err)
		for _, budget := range []int64{0, minFeasible(t, func(dt tensor.Dtype, _ int64) *net { n, _ := build(dt); return n }, dt, peak)} {
			n, terms := build(dt)
			opts := []ooc.Option{ooc.BindDualValues(n.params...), ooc.WithPoison(), ooc.Baseline()}
			if budget > 0 {
				opts = []ooc.Option{ooc.BindDualValues(n.params...), ooc.WithPoison(), ooc.WithBudget(budget)}
			}
			m, err := ooc.Compile(n.g, opts...)
			require.NoError(t, err)
			require.Equal(t, want, run(n, terms, m), "%v budget %d", dt, budget)
			require.NoError(t, m.Close())
		}
	}
}
