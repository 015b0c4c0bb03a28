package ooc_test

import (
	"fmt"
	"math/rand"
	"reflect"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/ooc"
)

// opCtx builds one row's graph: leaves, learnables and activations.
type opCtx struct {
	g      *G.ExprGraph
	dt     tensor.Dtype
	rng    *rand.Rand
	depth  int
	learn  bool // whether weights made now are learnables (passed to Grad)
	params G.Nodes
	n      int // for names
}

func (c *opCtx) name(p string) string { c.n++; return fmt.Sprintf("%s%d", p, c.n) }

func (c *opCtx) tensorOf(dt tensor.Dtype, scale float64, shape ...int) *G.Node {
	name := c.name("t")
	if len(shape) == 0 {
		f := c.rng.NormFloat64() * scale
		var v interface{} = f
		if dt == tensor.Float32 {
			v = float32(f)
		}
		return G.NewScalar(c.g, dt, G.WithName(name), G.WithValue(v))
	}
	return G.NewTensor(c.g, dt, len(shape), G.WithShape(shape...), G.WithName(name), G.WithValue(randT(c.rng, dt, scale, shape...)))
}

// weight is a weight of the row's dtype; a learnable when c.learn.
func (c *opCtx) weight(scale float64, shape ...int) *G.Node {
	return c.weightOf(c.dt, scale, shape...)
}

func (c *opCtx) weightOf(dt tensor.Dtype, scale float64, shape ...int) *G.Node {
	w := c.tensorOf(dt, scale, shape...)
	if c.learn {
		c.params = append(c.params, w)
	}
	return w
}

// input is a leaf that is not learnt.
func (c *opCtx) input(scale float64, shape ...int) *G.Node { return c.tensorOf(c.dt, scale, shape...) }

// unit is an input with values in (0, 1).
func (c *opCtx) unit(shape ...int) *G.Node {
	t := tensor.New(tensor.Of(c.dt), tensor.WithShape(shape...))
	for i := 0; i < t.Len(); i++ {
		f := 0.05 + 0.9*c.rng.Float64()
		if c.dt == tensor.Float32 {
			t.Data().([]float32)[i] = float32(f)
		} else {
			t.Data().([]float64)[i] = f
		}
	}
	return G.NewTensor(c.g, c.dt, len(shape), G.WithShape(shape...), G.WithName(c.name("u")), G.WithValue(t))
}

// ints is an Int tensor input.
func (c *opCtx) ints(vals []int, shape ...int) *G.Node {
	t := tensor.New(tensor.WithShape(shape...), tensor.WithBacking(vals))
	return G.NewTensor(c.g, tensor.Int, len(shape), G.WithShape(shape...), G.WithName(c.name("i")), G.WithValue(t))
}

// konst is a scalar constant of the row's dtype.
func (c *opCtx) konst(f float64) *G.Node {
	if c.dt == tensor.Float32 {
		return G.NewConstant(float32(f))
	}
	return G.NewConstant(f)
}

// layer is h = tanh(h ⊙ w) with a weight w of h's shape.
func (c *opCtx) layer(h *G.Node) *G.Node {
	var shape []int
	if !h.IsScalar() {
		shape = h.Shape().Clone()
	}
	w := c.weightOf(h.Dtype(), 0.7, shape...)
	return G.Must(G.Tanh(G.Must(G.HadamardProd(h, w))))
}

// act is a second operand of the given shape: an input through up to
// four layers.
func (c *opCtx) act(shape ...int) *G.Node {
	h := c.input(1, shape...)
	for i := 0; i < min(c.depth, 4); i++ {
		h = c.layer(h)
	}
	return h
}

// opRow is one gorgonia op under test.
type opRow struct {
	name string
	// in is the shape of the activation op gets; 0-length: (4, 6).
	in []int
	op func(c *opCtx, h *G.Node) *G.Node
	// noGrad: the op has no gradient (its DiffWRT is all false); only the
	// layers after it learn.
	noGrad bool
	// forward: gorgonia.Grad cannot go through the op: the graph is
	// compiled forward only and its cost and the op's output are compared.
	forward bool
	// bare (forward rows): the op's result cannot be an operand of any op,
	// so nothing follows it.
	bare bool
	// isCost: the op's output is the cost; nothing can follow it.
	isCost bool
	// refused: Compile must fail with an error naming the op's node and
	// containing this.
	refused string
	// lisp says why TapeMachine computes this graph wrong: the test checks
	// that it differs from gorgonia's LispMachine. ooc still matches
	// TapeMachine there, bugs included (tapeClobbers).
	lisp string
	// after runs on each built graph before any machine is made (Dropout
	// fixes its RNG here).
	after func(n *net)
}

// built is one build of a row's graph.
type built struct {
	*net
	op    *G.Node    // the op's result
	reads []*G.Value // forward rows: where the cost and the op's result are read
}

// build makes a row's training graph: an activation through the leading
// layers, the op, one learnable layer and cost = Σ of that. Around an op
// without a gradient (noGrad, forward), the leading layers are not learnt
// and the op is followed by depth layers (learnt in noGrad rows); every
// leading layer's output is kept to the end (multiplied by the cost so
// far) so that half the in-core peak is feasible. A forward row has no
// backward: its cost and the op's result are fetched with gorgonia.Read.
// With grad false the graph has no backward (for the LispMachine, which
// differentiates by itself).
func (r *opRow) build(dt tensor.Dtype, depth int, grad bool) built {
	rng := rand.New(rand.NewSource(1))
	c := &opCtx{g: G.NewGraph(), dt: dt, rng: rng, depth: depth, learn: !r.noGrad && !r.forward}
	in := r.in
	if len(in) == 0 {
		in = []int{4, 6}
	}
	h := c.input(1, in...)
	var kept []*G.Node
	for i := 0; i < c.depth; i++ {
		h = c.layer(h)
		kept = append(kept, h)
	}
	out := r.op(c, h)
	b := built{op: out}
	c.learn = !r.forward
	tail := 1
	switch {
	case r.isCost || r.bare:
		tail = 0
	case r.noGrad || r.forward:
		tail = c.depth
	}
	for i := 0; i < tail; i++ {
		out = c.layer(out)
	}
	if r.bare {
		out = h
	}
	cost := out
	if !out.IsScalar() {
		cost = G.Must(G.Sum(G.Must(G.Ravel(out))))
	}
	if r.noGrad || r.forward {
		for _, k := range kept {
			cost = G.Must(G.Add(cost, G.Must(G.Sum(G.Must(G.Ravel(G.Must(G.HadamardProd(k, cost))))))))
		}
	}
	switch {
	case r.forward:
		for _, node := range []*G.Node{cost, b.op} {
			v := new(G.Value)
			G.Read(node, v)
			b.reads = append(b.reads, v)
		}
	case grad:
		if _, err := G.Grad(cost, c.params...); err != nil {
			panic(err)
		}
	}
	b.net = &net{g: c.g, cost: cost, params: c.params, out: b.op}
	if r.after != nil {
		r.after(b.net)
	}
	return b
}

func (r *opRow) builder(depth int) builder {
	return func(dt tensor.Dtype, _ int64) *net { return r.build(dt, depth, true).net }
}

// binary applies a two-operand op to h and a second activation of h's
// shape.
func binary(f func(a, b *G.Node) (*G.Node, error)) func(c *opCtx, h *G.Node) *G.Node {
	return func(c *opCtx, h *G.Node) *G.Node { return G.Must(f(h, c.act(h.Shape()...))) }
}

func unary(f func(a *G.Node) (*G.Node, error)) func(c *opCtx, h *G.Node) *G.Node {
	return func(c *opCtx, h *G.Node) *G.Node { return G.Must(f(h)) }
}

func compare(f func(a, b *G.Node, retSame bool) (*G.Node, error)) func(c *opCtx, h *G.Node) *G.Node {
	return func(c *opCtx, h *G.Node) *G.Node { return G.Must(f(h, c.act(h.Shape()...), true)) }
}

func bcompare(f func(a, b *G.Node, retSame bool, l, r []byte) (*G.Node, error)) func(c *opCtx, h *G.Node) *G.Node {
	return func(c *opCtx, h *G.Node) *G.Node { return G.Must(f(h, c.act(1, h.Shape()[1]), true, nil, []byte{0})) }
}

func bbinary(f func(a, b *G.Node, l, r []byte) (*G.Node, error)) func(c *opCtx, h *G.Node) *G.Node {
	return func(c *opCtx, h *G.Node) *G.Node { return G.Must(f(h, c.act(1, h.Shape()[1]), nil, []byte{0})) }
}

// positive is h moved into (0.1, 2.1), for ops defined on positive numbers.
func positive(c *opCtx, h *G.Node) *G.Node {
	return G.Must(G.Add(G.Must(G.Square(h)), c.konst(0.1)))
}

// seedDropout gives every dropout op of the graph the same seeded
// generator, in place of the clock-seeded one gorgonia gives it
// (dropoutOp.rndGen is unexported).
func seedDropout(n *net) {
	seed := int64(11)
	for _, node := range n.g.AllNodes() {
		op := node.Op()
		if op == nil || fmt.Sprintf("%T", op) != "*gorgonia.dropoutOp" {
			continue
		}
		f := reflect.ValueOf(op).Elem().FieldByName("rndGen")
		rng := rand.New(rand.NewSource(seed))
		seed++
		gen := reflect.ValueOf(func() float64 { return rng.Float64() }).Convert(f.Type())
		reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Set(gen)
	}
}

// tapeAliasesView: TapeMachine lets the op after a Reshape write its result
// in place over the reshape's register, which shares the reshaped node's
// memory (gorgonia regalloc.go:210-228 does not know that reshapeOp.Do
// returns a view), so the backward reads a clobbered activation.
const tapeAliasesView = "the op after the view writes over the viewed activation, which the backward reads"

var opRows = []opRow{
	// nn.go
	{name: "Rectify", op: unary(G.Rectify)},
	{name: "LeakyRelu", op: func(c *opCtx, h *G.Node) *G.Node { return G.Must(G.LeakyRelu(h, 0.1)) }},
	{name: "Dropout", op: func(c *opCtx, h *G.Node) *G.Node { return G.Must(G.Dropout(h, 0.3)) }, after: seedDropout},
	{name: "BinaryXent", op: func(c *opCtx, h *G.Node) *G.Node {
		return G.Must(G.BinaryXent(G.Must(G.Sigmoid(h)), c.unit(h.Shape()...)))
	}},
	{name: "Conv2d", in: []int{2, 2, 5, 5}, op: func(c *opCtx, h *G.Node) *G.Node {
		return G.Must(G.Conv2d(h, c.weight(0.3, 3, 2, 3, 3), tensor.Shape{3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}))
	}},
	{name: "Conv2d stride 2 dilation 2", in: []int{2, 2, 7, 7}, op: func(c *opCtx, h *G.Node) *G.Node {
		return G.Must(G.Conv2d(h, c.weight(0.3, 3, 2, 3, 3), tensor.Shape{3, 3}, []int{1, 1}, []int{2, 2}, []int{2, 2}))
	}},
	{name: "Conv1d", in: []int{2, 2, 1, 7}, op: func(c *opCtx, h *G.Node) *G.Node {
		return G.Must(G.Conv1d(h, c.weight(0.3, 3, 2, 1, 3), 3, 1, 1, 1))
	}},
	{name: "Im2Col", in: []int{2, 2, 4, 4}, op: func(c *opCtx, h *G.Node) *G.Node {
		return G.Must(G.Im2Col(h, tensor.Shape{3, 3}, tensor.Shape{1, 1}, tensor.Shape{1, 1}, tensor.Shape{1, 1}))
	}},
	{name: "MaxPool2D", in: []int{2, 3, 6, 6}, op: func(c *opCtx, h *G.Node) *G.Node {
		return G.Must(G.MaxPool2D(h, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}))
	}},
	{name: "MaxPool2D padded 3x3 stride 2", in: []int{2, 3, 7, 7}, op: func(c *opCtx, h *G.Node) *G.Node {
		return G.Must(G.MaxPool2D(h, tensor.Shape{3, 3}, []int{1, 1}, []int{2, 2}))
	}},
	{name: "MaxPool1D", in: []int{2, 3, 1, 8}, op: func(c *opCtx, h *G.Node) *G.Node {
		return G.Must(G.MaxPool1D(h, 2, 0, 2))
	}},
	{name: "BatchNorm", in: []int{4, 3, 4, 4}, op: func(c *opCtx, h *G.Node) *G.Node {
		y, _, _, _, err := G.BatchNorm(h, c.weight(0.3, 1, 3, 1, 1), c.weight(0.3, 1, 3, 1, 1), 0.1, 1e-5)
		if err != nil {
			panic(err)
		}
		return y
	}},
	{name: "GlobalAveragePool2D", in: []int{2, 3, 4, 4}, forward: true, op: unary(G.GlobalAveragePool2D)},

	// op_avg_pool.go
	{name: "AveragePool2D", in: []int{2, 3, 6, 6}, op: func(c *opCtx, h *G.Node) *G.Node {
		return G.Must(G.AveragePool2D(h, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}))
	}},
	{name: "AveragePool1D", in: []int{2, 3, 1, 8}, op: func(c *opCtx, h *G.Node) *G.Node {
		return G.Must(G.AveragePool1D(h, 2, 0, 2))
	}},

	// op_softmax.go, op_sparsemax.go
	{name: "SoftMax", op: unary(func(a *G.Node) (*G.Node, error) { return G.SoftMax(a) })},
	{name: "SoftMax axis 0", op: unary(func(a *G.Node) (*G.Node, error) { return G.SoftMax(a, 0) })},
	{name: "LogSoftMax", op: unary(func(a *G.Node) (*G.Node, error) { return G.LogSoftMax(a) })},
	{name: "LogSoftMax axis 0", op: unary(func(a *G.Node) (*G.Node, error) { return G.LogSoftMax(a, 0) })},
	{name: "Sparsemax", op: unary(func(a *G.Node) (*G.Node, error) { return G.Sparsemax(a) })},

	// operations.go
	{name: "Mul matrix-matrix", op: func(c *opCtx, h *G.Node) *G.Node { return G.Must(G.Mul(h, c.weight(0.3, 6, 5))) }},
	{name: "Mul matrix-vector", in: []int{4, 8}, op: func(c *opCtx, h *G.Node) *G.Node { return G.Must(G.Mul(h, c.act(8))) }},
	{name: "Mul vector-vector", in: []int{8}, op: func(c *opCtx, h *G.Node) *G.Node { return G.Must(G.Mul(h, c.act(8))) }},
	{name: "BatchedMatMul", in: []int{2, 3, 4}, op: func(c *opCtx, h *G.Node) *G.Node {
		return G.Must(G.BatchedMatMul(h, c.weight(0.3, 2, 4, 5)))
	}},
	{name: "BatchedMatMul transposed", in: []int{2, 4, 3}, op: func(c *opCtx, h *G.Node) *G.Node {
		return G.Must(G.BatchedMatMul(h, c.weight(0.3, 2, 5, 4), true, true))
	}},
	{name: "OuterProd", in: []int{6}, forward: true, op: func(c *opCtx, h *G.Node) *G.Node { return G.Must(G.OuterProd(h, c.act(5))) }},
	{name: "Div", op: func(c *opCtx, h *G.Node) *G.Node { return G.Must(G.Div(h, positive(c, c.act(4, 6)))) }},
	{name: "Auto(BroadcastHadamardProd)", op: func(c *opCtx, h *G.Node) *G.Node {
		return G.Must(G.Auto(G.BroadcastHadamardProd, h, c.act(1, 6)))
	}},
	{name: "LogSumExp", in: []int{6}, op: func(c *opCtx, h *G.Node) *G.Node { return G.Must(G.LogSumExp(h, 0)) }},
	{name: "At", refused: "never executes", op: func(c *opCtx, h *G.Node) *G.Node { return G.Must(G.At(h, 1, 2)) }, noGrad: true},
	{name: "Max one axis", op: func(c *opCtx, h *G.Node) *G.Node { return G.Must(G.Max(h, 1)) }},
	{name: "Max all axes", op: func(c *opCtx, h *G.Node) *G.Node { return G.Must(G.Max(h)) }},
	{name: "Mean one axis", op: func(c *opCtx, h *G.Node) *G.Node { return G.Must(G.Mean(h, 0)) }},
	{name: "Mean all axes", op: func(c *opCtx, h *G.Node) *G.Node { return G.Must(G.Mean(h)) }},
	{name: "Mean two axes of 4-D (wrong values)", in: []int{2, 3, 4, 4}, op: func(c *opCtx, h *G.Node) *G.Node { return G.Must(G.Mean(h, 2, 3)) }},
	{name: "Sum one axis", op: func(c *opCtx, h *G.Node) *G.Node { return G.Must(G.Sum(h, 1)) }},
	{name: "Sum all axes", op: func(c *opCtx, h *G.Node) *G.Node { return G.Must(G.Sum(h)) }},
	{name: "Sum two axes of 4-D (wrong values)", in: []int{2, 3, 4, 4}, op: func(c *opCtx, h *G.Node) *G.Node { return G.Must(G.Sum(h, 2, 3)) }},
	{name: "Norm p=2", op: func(c *opCtx, h *G.Node) *G.Node { return G.Must(G.Norm(h, 1, 2)) }},
	{name: "Norm p=3", op: func(c *opCtx, h *G.Node) *G.Node { return G.Must(G.Norm(positive(c, h), 1, 3)) }},
	{name: "ReduceAdd", op: func(c *opCtx, h *G.Node) *G.Node {
		return G.Must(G.ReduceAdd(G.Nodes{h, c.act(4, 6), c.act(4, 6)}))
	}},
	{name: "ReduceMul", in: []int{4, 4}, op: func(c *opCtx, h *G.Node) *G.Node {
		return G.Must(G.ReduceMul(G.Nodes{h, c.act(4, 4), c.act(4, 4)}))
	}},
	{name: "SizeOf", noGrad: true, op: func(c *opCtx, h *G.Node) *G.Node {
		return G.Must(G.HadamardProd(G.Must(G.SizeOf(1, h)), h))
	}},
	{name: "Slice", op: func(c *opCtx, h *G.Node) *G.Node { return G.Must(G.Slice(h, G.S(1, 3), nil)) }},
	{name: "Slice with step", op: func(c *opCtx, h *G.Node) *G.Node { return G.Must(G.Slice(h, nil, G.S(0, 6, 2))) }},
	{name: "Slice one index", in: []int{3, 4, 5}, op: func(c *opCtx, h *G.Node) *G.Node { return G.Must(G.Slice(h, nil, G.S(2))) }},
	{name: "Transpose", op: func(c *opCtx, h *G.Node) *G.Node { return G.Must(G.Transpose(h)) }},
	{name: "Transpose 3-D axes", in: []int{2, 3, 4}, op: func(c *opCtx, h *G.Node) *G.Node { return G.Must(G.Transpose(h, 2, 0, 1)) }},
	{name: "Concat", op: func(c *opCtx, h *G.Node) *G.Node { return G.Must(G.Concat(1, h, c.act(4, 3))) }},
	{name: "Concat axis 0", op: func(c *opCtx, h *G.Node) *G.Node { return G.Must(G.Concat(0, h, c.act(2, 6), h)) }},
	{name: "Concat of one", op: func(c *opCtx, h *G.Node) *G.Node { return G.Must(G.Concat(1, h)) }},
	{name: "Unconcat", op: func(c *opCtx, h *G.Node) *G.Node {
		us, err := G.Unconcat(h, 1, 2)
		if err != nil {
			panic(err)
		}
		return G.Must(G.HadamardProd(us[0], us[1]))
	}},
	{name: "Reshape", lisp: tapeAliasesView, op: func(c *opCtx, h *G.Node) *G.Node { return G.Must(G.Reshape(h, tensor.Shape{2, 3, 4})) }},
	{name: "Ravel", lisp: tapeAliasesView, op: unary(G.Ravel)},
	{name: "Tensordot", in: []int{2, 3, 4}, op: func(c *opCtx, h *G.Node) *G.Node {
		return G.Must(G.Tensordot([]int{1, 2}, []int{0, 1}, h, c.weight(0.3, 3, 4, 5)))
	}},
	{name: "Mish", op: unary(G.Mish)},
	{name: "MinBetween", op: binary(G.MinBetween)},
	{name: "MaxBetween", op: binary(G.MaxBetween)},

	// api_gen.go: unary
	{name: "Abs", op: unary(G.Abs)},
	{name: "Sign", noGrad: true, op: unary(G.Sign)},
	{name: "Ceil", noGrad: true, op: unary(G.Ceil)},
	{name: "Floor", noGrad: true, op: unary(G.Floor)},
	{name: "Sin", op: unary(G.Sin)},
	{name: "Cos", op: unary(G.Cos)},
	{name: "Exp", op: unary(G.Exp)},
	{name: "Log", op: func(c *opCtx, h *G.Node) *G.Node { return G.Must(G.Log(positive(c, h))) }},
	{name: "Log2", op: func(c *opCtx, h *G.Node) *G.Node { return G.Must(G.Log2(positive(c, h))) }},
	{name: "Log1p", op: func(c *opCtx, h *G.Node) *G.Node { return G.Must(G.Log1p(positive(c, h))) }},
	{name: "Expm1", op: unary(G.Expm1)},
	{name: "Neg", op: unary(G.Neg)},
	{name: "Square", op: unary(G.Square)},
	{name: "Sqrt", op: func(c *opCtx, h *G.Node) *G.Node { return G.Must(G.Sqrt(positive(c, h))) }},
	{name: "Cube", op: unary(G.Cube)},
	{name: "Inverse", op: func(c *opCtx, h *G.Node) *G.Node { return G.Must(G.Inverse(positive(c, h))) }},
	{name: "InverseSqrt", op: func(c *opCtx, h *G.Node) *G.Node { return G.Must(G.InverseSqrt(positive(c, h))) }},
	{name: "Tanh", op: unary(G.Tanh)},
	{name: "Sigmoid", op: unary(G.Sigmoid)},
	{name: "Softplus", op: unary(G.Softplus)},

	// api_gen.go: binary
	{name: "Add", op: binary(G.Add)},
	{name: "Sub", op: binary(G.Sub)},
	{name: "HadamardProd", op: binary(G.HadamardProd)},
	{name: "HadamardDiv", op: func(c *opCtx, h *G.Node) *G.Node { return G.Must(G.HadamardDiv(h, positive(c, c.act(4, 6)))) }},
	{name: "Pow", op: func(c *opCtx, h *G.Node) *G.Node { return G.Must(G.Pow(positive(c, h), c.act(4, 6))) }},
	{name: "Add scalar", op: func(c *opCtx, h *G.Node) *G.Node { return G.Must(G.Add(h, c.weight(0.5))) }},
	{name: "Lt", noGrad: true, op: compare(G.Lt)},
	{name: "Gt", noGrad: true, op: compare(G.Gt)},
	{name: "Lte", noGrad: true, op: compare(G.Lte)},
	{name: "Gte", noGrad: true, op: compare(G.Gte)},
	{name: "Eq", noGrad: true, op: func(c *opCtx, h *G.Node) *G.Node {
		return G.Must(G.Eq(G.Must(G.Sign(h)), G.Must(G.Sign(c.act(4, 6))), true))
	}},
	{name: "Ne", noGrad: true, op: func(c *opCtx, h *G.Node) *G.Node {
		return G.Must(G.Ne(G.Must(G.Sign(h)), G.Must(G.Sign(c.act(4, 6))), true))
	}},

	// api_gen.go: broadcast
	{name: "BroadcastAdd", op: bbinary(G.BroadcastAdd)},
	{name: "BroadcastSub", op: bbinary(G.BroadcastSub)},
	{name: "BroadcastHadamardProd", op: bbinary(G.BroadcastHadamardProd)},
	{name: "BroadcastHadamardDiv", op: func(c *opCtx, h *G.Node) *G.Node {
		return G.Must(G.BroadcastHadamardDiv(h, positive(c, c.act(1, 6)), nil, []byte{0}))
	}},
	{name: "BroadcastPow", op: func(c *opCtx, h *G.Node) *G.Node {
		return G.Must(G.BroadcastPow(positive(c, h), c.act(1, 6), nil, []byte{0}))
	}},
	{name: "BroadcastLt", noGrad: true, op: bcompare(G.BroadcastLt)},
	{name: "BroadcastGt", noGrad: true, op: bcompare(G.BroadcastGt)},
	{name: "BroadcastLte", noGrad: true, op: bcompare(G.BroadcastLte)},
	{name: "BroadcastGte", noGrad: true, op: bcompare(G.BroadcastGte)},
	{name: "BroadcastEq", noGrad: true, op: func(c *opCtx, h *G.Node) *G.Node {
		return G.Must(G.BroadcastEq(G.Must(G.Sign(h)), G.Must(G.Sign(c.act(1, 6))), true, nil, []byte{0}))
	}},
	{name: "BroadcastNe", noGrad: true, op: func(c *opCtx, h *G.Node) *G.Node {
		return G.Must(G.BroadcastNe(G.Must(G.Sign(h)), G.Must(G.Sign(c.act(1, 6))), true, nil, []byte{0}))
	}},
	{name: "Broadcast", op: func(c *opCtx, h *G.Node) *G.Node {
		a, b, err := G.Broadcast(h, c.act(4, 1), G.NewBroadcastPattern(nil, []byte{1}))
		if err != nil {
			panic(err)
		}
		return G.Must(G.HadamardProd(a, b))
	}},

	// the other op_*.go files
	{name: "Upsample2D", in: []int{2, 2, 3, 3}, op: func(c *opCtx, h *G.Node) *G.Node { return G.Must(G.Upsample2D(h, 2)) }},
	{name: "GroupNorm", in: []int{2, 4, 3, 3}, op: func(c *opCtx, h *G.Node) *G.Node {
		return G.Must(G.GroupNorm(h, c.weight(0.3, 1, 4, 1, 1), c.weight(0.3, 1, 4, 1, 1), 2, 4, 1e-5))
	}},
	{name: "ByIndices", op: func(c *opCtx, h *G.Node) *G.Node {
		return G.Must(G.ByIndices(h, c.ints([]int{2, 0, 3, 2}, 4), 0))
	}},
	{name: "ConvType Int to float", op: func(c *opCtx, h *G.Node) *G.Node {
		return G.Must(G.HadamardProd(h, G.Must(G.ConvType(c.ints([]int{1, -2, 3, 0, 2, 1, -1, 4, 2, 2, 0, 1, 3, -3, 1, 1, 2, 0, 1, 1, -1, 2, 2, 1}, 4, 6), tensor.Int, c.dt))))
	}},
	{name: "ConvType float to Int and back", op: func(c *opCtx, h *G.Node) *G.Node {
		k := G.Must(G.HadamardProd(h, c.konst(10)))
		return G.Must(G.ConvType(G.Must(G.ConvType(k, c.dt, tensor.Int)), tensor.Int, c.dt))
	}},
	{name: "CTCLoss", in: []int{6, 2, 4}, isCost: true, op: func(c *opCtx, h *G.Node) *G.Node {
		lp := G.Must(G.LogSoftMax(h, 2))
		return G.Must(G.CTCLoss(lp, c.ints([]int{1, 2, 3, 1}, 2, 2), c.ints([]int{6, 5}, 2), c.ints([]int{2, 2}, 2), G.ReductionMean))
	}},
	{name: "DiagFlat", in: []int{8}, forward: true, bare: true, op: unary(G.DiagFlat)},

	{name: "YOLOv3", in: []int{1, 14, 4, 4}, forward: true, refused: "rewrites its operand in place", op: func(c *opCtx, h *G.Node) *G.Node {
		return G.Must(G.YOLOv3(h, []float32{10, 13, 16, 30, 33, 23}, []int{0, 1}, 32, 2, 0.5))
	}},
	{name: "ApplyOp(NewAddOp)", forward: true, op: func(c *opCtx, h *G.Node) *G.Node {
		b := c.act(4, 6)
		return G.Must(G.ApplyOp(G.NewAddOp(h, b, G.ExecutionContext{}), h, b))
	}},
	{name: "ApplyOp(NewSubOp)", forward: true, op: func(c *opCtx, h *G.Node) *G.Node {
		b := c.act(4, 6)
		return G.Must(G.ApplyOp(G.NewSubOp(h, b, G.ExecutionContext{}), h, b))
	}},
	{name: "ApplyOp(NewHadamardProdOp)", forward: true, op: func(c *opCtx, h *G.Node) *G.Node {
		b := c.act(4, 6)
		return G.Must(G.ApplyOp(G.NewHadamardProdOp(h, b, G.ExecutionContext{}), h, b))
	}},
	{name: "Slice to a scalar", op: func(c *opCtx, h *G.Node) *G.Node { return G.Must(G.Slice(h, G.S(1), G.S(2))) }},

	// gorgonia.go: random inputs (clock-seeded per run: degenerate
	// distributions, or multiplied by zero, so that two runs agree)
	{name: "GaussianRandomNode", op: func(c *opCtx, h *G.Node) *G.Node {
		return G.Must(G.HadamardProd(h, G.GaussianRandomNode(c.g, c.dt, 0.5, 0, 4, 6)))
	}},
	{name: "BinomialRandomNode", op: func(c *opCtx, h *G.Node) *G.Node {
		return G.Must(G.HadamardProd(h, G.BinomialRandomNode(c.g, c.dt, 3, 1, 4, 6)))
	}},
	{name: "UniformRandomNode", op: func(c *opCtx, h *G.Node) *G.Node {
		return G.Must(G.Add(h, G.Must(G.HadamardProd(G.UniformRandomNode(c.g, c.dt, 0.25, 0.75, 4, 6), c.konst(0)))))
	}},
}

// TestGorgoniaOps: for every public gorgonia op, a small training graph
// through it runs under ooc exactly as under gorgonia's TapeMachine, bit
// for bit (loss and every gradient, two steps, float32 and float64), in
// core, at half the in-core peak and at the least feasible budget, with
// fresh device memory poisoned; or Compile refuses it, saying why.
func TestGorgoniaOps(t *testing.T) {
	start := time.Now()
	for i := range opRows {
		r := &opRows[i]
		t.Run(r.name, func(t *testing.T) {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("panic: %v", p)
				}
			}()
			for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
				if r.refused != "" {
					b := r.build(dt, 4, true)
					_, err := ooc.Compile(b.g, ooc.BindDualValues(b.params...))
					require.Error(t, err)
					require.ErrorContains(t, err, b.op.Name())
					require.ErrorContains(t, err, r.refused)
					continue
				}
				runOpRow(t, r, dt)
			}
		})
	}
	t.Logf("%d rows in %v", len(opRows), time.Since(start))
}

// rowDepth is the least number of layers before (and, around an op
// without a gradient, after) the op, from four on, at which no function
// needs more than half the in-core peak.
func rowDepth(t *testing.T, r *opRow, dt tensor.Dtype) (depth int, peak int64) {
	for depth = 4; ; depth++ {
		n := r.build(dt, depth, true).net
		p, err := ooc.InCorePeak(n.g)
		require.NoError(t, err)
		need, f := mostOneFunctionNeeds(t, n)
		if need <= p/2 {
			return depth, p
		}
		require.Less(t, depth, 32, "%s alone needs %d of the in-core peak %d", f, need, p)
	}
}

// runRow runs a built row's graph on a machine for two steps: the loss,
// the gradients and the weights after each Adam step, or for a forward
// row what its reads store.
func runRow(t *testing.T, r *opRow, b built, m G.VM) []any {
	const steps = 2
	if r.forward {
		return []any{runReads(t, m, b.reads, steps)}
	}
	l, g, w := trainSteps(t, b.net, m, steps)
	return []any{l, g, w}
}

// freshLisp runs each step on a new LispMachine: a LispMachine run again
// after Reset does not see the weights a solver updated in between.
type freshLisp struct {
	G.VM
	g      *G.ExprGraph
	params G.Nodes
}

func (f *freshLisp) RunAll() error {
	f.VM = G.NewLispMachine(f.g, G.BindDualValues(f.params...))
	return f.VM.RunAll()
}

func (f *freshLisp) Reset() { _ = f.VM.Close() }

func runOpRow(t *testing.T, r *opRow, dt tensor.Dtype) {
	depth, peak := rowDepth(t, r, dt)
	ref := r.build(dt, depth, true)
	var tm G.VM
	if r.forward {
		tm = G.NewTapeMachine(ref.g)
	} else {
		tm = G.NewTapeMachine(ref.g, G.BindDualValues(ref.params...))
	}
	want := runRow(t, r, ref, tm)
	require.NoError(t, tm.Close())
	if r.lisp != "" {
		lisp := r.build(dt, depth, false)
		fromLisp := runRow(t, r, lisp, &freshLisp{g: lisp.g, params: lisp.params})
		require.NotEqual(t, want, fromLisp, "%v: TapeMachine was wrong here (%s); it now agrees with LispMachine", dt, r.lisp)
	}

	least := minFeasible(t, r.builder(depth), dt, peak)
	for _, bud := range []struct {
		label string
		bytes int64
	}{{"in-core", 0}, {"50%", peak / 2}, {"min", least}} {
		got := r.build(dt, depth, true)
		opts := []ooc.Option{ooc.WithPoison()}
		if !r.forward {
			opts = append(opts, ooc.BindDualValues(got.params...))
		}
		if bud.bytes == 0 {
			opts = append(opts, ooc.Baseline())
		} else {
			opts = append(opts, ooc.WithBudget(bud.bytes))
		}
		m, err := ooc.Compile(got.g, opts...)
		require.NoError(t, err, "%v %s", dt, bud.label)
		res := runRow(t, r, got, m)
		st := m.Stats()
		require.NoError(t, m.Close())
		for k, what := range []string{"loss", "gradients", "weights"}[:len(want)] {
			require.Equal(t, want[k], res[k], "%v %s (depth %d): %s", dt, bud.label, depth, what)
		}
		t.Logf("%v %s: depth %d, budget %d of in-core peak %d, device peak %d, swapped in %d B",
			dt, bud.label, depth, bud.bytes, peak, st.PeakDeviceBytes, st.SwapInBytes)
		if bud.bytes > 0 {
			require.LessOrEqual(t, st.PeakDeviceBytes, bud.bytes, "%v %s", dt, bud.label)
			require.Positive(t, st.SwapInBytes, "%v %s: below the in-core peak something must move", dt, bud.label)
		}
	}
}
