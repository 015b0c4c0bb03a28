package dispatch_test

import (
	"fmt"
	"io"
	"log"
	"math"
	"math/rand"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm/cuda"
)

// opCase is one small graph around one gorgonia op: its inputs (made from a
// seeded generator), the op applied to them, and whether the test also takes
// the gradient of a weighted sum of the result with respect to every input.
type opCase struct {
	name  string
	op    string // the gorgonia op type the case is for
	ins   []tensor.Shape
	kind  valueKind
	build func(xs []*G.Node) (*G.Node, error)
	grad  bool
	// exact: the fake device must give the CPU device's bits, in both dtypes
	// (the products: the fake cuBLAS does the arithmetic of the BLAS call the
	// CPU device makes, and the gradient graphs' other ops are elementwise).
	exact bool
}

// valueKind says how a case's inputs are filled.
type valueKind int

const (
	signed   valueKind = iota // normal values
	positive                  // in [0.5, 2): logarithms, roots, powers
	grid                      // multiples of 0.5 in [-2, 2]: ties for comparisons and maxima
)

func sh(d ...int) tensor.Shape { return tensor.Shape(d) }

// unaryCases covers every operator of elemUnaryOp.
func unaryCases() []opCase {
	fs := []struct {
		n string
		f func(*G.Node) (*G.Node, error)
		k valueKind
	}{
		{"abs", G.Abs, signed}, {"sign", G.Sign, signed}, {"ceil", G.Ceil, signed}, {"floor", G.Floor, signed},
		{"sin", G.Sin, signed}, {"cos", G.Cos, signed}, {"exp", G.Exp, signed}, {"ln", G.Log, positive},
		{"log2", G.Log2, positive}, {"neg", G.Neg, signed}, {"square", G.Square, signed}, {"sqrt", G.Sqrt, positive},
		{"inv", G.Inverse, positive}, {"invSqrt", G.InverseSqrt, positive}, {"cube", G.Cube, signed},
		{"tanh", G.Tanh, signed}, {"sigmoid", G.Sigmoid, signed}, {"log1p", G.Log1p, positive},
		{"expm1", G.Expm1, signed}, {"softplus", G.Softplus, signed},
	}
	var cs []opCase
	for _, f := range fs {
		f := f
		// gorgonia differentiates every operator but sign, ceil and floor.
		grad := f.n != "sign" && f.n != "ceil" && f.n != "floor"
		cs = append(cs, opCase{name: f.n, op: "elemUnaryOp", ins: []tensor.Shape{sh(3, 4)}, kind: f.k, grad: grad,
			build: func(xs []*G.Node) (*G.Node, error) { return f.f(xs[0]) }})
	}
	return cs
}

// binaryCases covers elemBinOp: arithmetic and every comparison, with bool
// and same-type results, on same-shape and scalar operands.
func binaryCases() []opCase {
	type bf = func(a, b *G.Node) (*G.Node, error)
	arith := []struct {
		n string
		f bf
	}{{"add", G.Add}, {"sub", G.Sub}, {"mul", G.HadamardProd}, {"div", G.HadamardDiv}, {"pow", G.Pow}}
	var cs []opCase
	for _, a := range arith {
		a := a
		for _, ins := range [][]tensor.Shape{{sh(3, 4), sh(3, 4)}, {sh(3, 4), sh()}, {sh(), sh(3, 4)}} {
			cs = append(cs, opCase{name: fmt.Sprintf("%s %v %v", a.n, ins[0], ins[1]), op: "elemBinOp", ins: ins, kind: positive, grad: true,
				build: func(xs []*G.Node) (*G.Node, error) { return a.f(xs[0], xs[1]) }})
		}
	}
	cmps := []struct {
		n string
		f func(a, b *G.Node, same bool) (*G.Node, error)
	}{{"lt", G.Lt}, {"gt", G.Gt}, {"lte", G.Lte}, {"gte", G.Gte}, {"eq", G.Eq}, {"ne", G.Ne}}
	for _, c := range cmps {
		c := c
		for _, same := range []bool{false, true} {
			for _, ins := range [][]tensor.Shape{{sh(3, 4), sh(3, 4)}, {sh(3, 4), sh()}, {sh(), sh(3, 4)}} {
				cs = append(cs, opCase{name: fmt.Sprintf("%s retSame=%t %v %v", c.n, same, ins[0], ins[1]), op: "elemBinOp", ins: ins, kind: grid,
					build: func(xs []*G.Node) (*G.Node, error) { return c.f(xs[0], xs[1], same) }})
			}
		}
	}
	return cs
}

// tensorCases covers the ops that move, reduce or multiply.
func tensorCases() []opCase {
	one := func(f func(x *G.Node) (*G.Node, error)) func(xs []*G.Node) (*G.Node, error) {
		return func(xs []*G.Node) (*G.Node, error) { return f(xs[0]) }
	}
	two := func(f func(a, b *G.Node) (*G.Node, error)) func(xs []*G.Node) (*G.Node, error) {
		return func(xs []*G.Node) (*G.Node, error) { return f(xs[0], xs[1]) }
	}
	return []opCase{
		{name: "Rectify", op: "elemBinOp", ins: []tensor.Shape{sh(3, 4)}, kind: grid, grad: true, build: one(G.Rectify)},
		{name: "LeakyRelu", op: "elemBinOp", ins: []tensor.Shape{sh(3, 4)}, kind: grid, grad: true,
			build: one(func(x *G.Node) (*G.Node, error) { return G.LeakyRelu(x, 0.1) })},
		{name: "MaxBetween", op: "maxBetween", ins: []tensor.Shape{sh(3, 4), sh(3, 4)}, kind: grid, grad: true, build: two(G.MaxBetween)},
		{name: "MinBetween", op: "minBetween", ins: []tensor.Shape{sh(3, 4), sh(3, 4)}, kind: grid, grad: true, build: two(G.MinBetween)},
		{name: "Transpose 2-D", op: "transposeOp", ins: []tensor.Shape{sh(3, 4)}, grad: true,
			build: one(func(x *G.Node) (*G.Node, error) { return G.Transpose(x) })},
		{name: "Transpose 3-D {2,0,1}", op: "transposeOp", ins: []tensor.Shape{sh(2, 3, 4)}, grad: true,
			build: one(func(x *G.Node) (*G.Node, error) { return G.Transpose(x, 2, 0, 1) })},
		{name: "Transpose 4-D {0,2,3,1}", op: "transposeOp", ins: []tensor.Shape{sh(2, 3, 2, 5)}, grad: true,
			build: one(func(x *G.Node) (*G.Node, error) { return G.Transpose(x, 0, 2, 3, 1) })},
		{name: "Transpose 4-D {0,3,1,2} (Conv2d's)", op: "transposeOp", ins: []tensor.Shape{sh(2, 3, 3, 4)}, grad: true,
			build: one(func(x *G.Node) (*G.Node, error) { return G.Transpose(x, 0, 3, 1, 2) })},
		{name: "Transpose 8-D {7,6,0,1,4,5,2,3} (collapses)", op: "transposeOp", ins: []tensor.Shape{sh(2, 1, 3, 1, 2, 2, 1, 3)}, grad: true,
			build: one(func(x *G.Node) (*G.Node, error) { return G.Transpose(x, 7, 6, 0, 1, 4, 5, 2, 3) })},
		{name: "Sum all", op: "sumOp", ins: []tensor.Shape{sh(3, 4)}, grad: true, build: one(func(x *G.Node) (*G.Node, error) { return G.Sum(x) })},
		{name: "Sum 0", op: "sumOp", ins: []tensor.Shape{sh(3, 4)}, grad: true, build: one(func(x *G.Node) (*G.Node, error) { return G.Sum(x, 0) })},
		{name: "Sum 1 of 3-D", op: "sumOp", ins: []tensor.Shape{sh(2, 3, 4)}, grad: true, build: one(func(x *G.Node) (*G.Node, error) { return G.Sum(x, 1) })},
		{name: "Sum 0,2 of 3-D", op: "sumOp", ins: []tensor.Shape{sh(2, 3, 4)}, grad: true, build: one(func(x *G.Node) (*G.Node, error) { return G.Sum(x, 0, 2) })},
		{name: "Mean 1", op: "sumOp", ins: []tensor.Shape{sh(3, 4)}, grad: true, build: one(func(x *G.Node) (*G.Node, error) { return G.Mean(x, 1) })},
		{name: "Mean all", op: "sumOp", ins: []tensor.Shape{sh(3, 4)}, grad: true, build: one(func(x *G.Node) (*G.Node, error) { return G.Mean(x) })},
		{name: "Max 1", op: "maxOp", ins: []tensor.Shape{sh(3, 4)}, grad: true, build: one(func(x *G.Node) (*G.Node, error) { return G.Max(x, 1) })},
		{name: "Max 0", op: "maxOp", ins: []tensor.Shape{sh(3, 4)}, grad: true, build: one(func(x *G.Node) (*G.Node, error) { return G.Max(x, 0) })},
		{name: "Max 0,2 of 3-D", op: "maxOp", ins: []tensor.Shape{sh(2, 3, 4)}, build: one(func(x *G.Node) (*G.Node, error) { return G.Max(x, 0, 2) })},
		{name: "SoftMax default axis", op: "softmaxOp", ins: []tensor.Shape{sh(3, 4)}, grad: true, build: one(func(x *G.Node) (*G.Node, error) { return G.SoftMax(x) })},
		{name: "SoftMax axis 0", op: "softmaxOp", ins: []tensor.Shape{sh(3, 4)}, grad: true, build: one(func(x *G.Node) (*G.Node, error) { return G.SoftMax(x, 0) })},
		{name: "SoftMax 3-D axis -2", op: "softmaxOp", ins: []tensor.Shape{sh(2, 3, 4)}, grad: true, build: one(func(x *G.Node) (*G.Node, error) { return G.SoftMax(x, -2) })},
		{name: "LogSoftMax default axis", op: "softmaxOp", ins: []tensor.Shape{sh(2, 3, 4)}, grad: true, build: one(func(x *G.Node) (*G.Node, error) { return G.LogSoftMax(x) })},
		{name: "Slice rows", op: "sliceOp", ins: []tensor.Shape{sh(4, 3)}, grad: true,
			build: one(func(x *G.Node) (*G.Node, error) { return G.Slice(x, G.S(1, 3)) })},
		// (A slice with a step is left out: gorgonia's sliceOp infers the
		// wrong shape for it, and the CPU device refuses the graph.)
		{name: "Slice one index", op: "sliceOp", ins: []tensor.Shape{sh(3, 4)}, grad: true,
			build: one(func(x *G.Node) (*G.Node, error) { return G.Slice(x, G.S(1)) })},
		{name: "Concat 0", op: "concatOp", ins: []tensor.Shape{sh(2, 3), sh(1, 3)}, grad: true,
			build: func(xs []*G.Node) (*G.Node, error) { return G.Concat(0, xs...) }},
		{name: "Concat 1", op: "concatOp", ins: []tensor.Shape{sh(2, 3), sh(2, 2)}, grad: true,
			build: func(xs []*G.Node) (*G.Node, error) { return G.Concat(1, xs...) }},
		{name: "BroadcastAdd (repeat)", op: "repeatOp", ins: []tensor.Shape{sh(3, 4), sh(1, 4)}, grad: true,
			build: func(xs []*G.Node) (*G.Node, error) { return G.BroadcastAdd(xs[0], xs[1], nil, []byte{0}) }},
		{name: "Reshape", op: "reshapeOp", ins: []tensor.Shape{sh(3, 4)}, grad: true,
			build: one(func(x *G.Node) (*G.Node, error) { return G.Reshape(x, sh(2, 6)) })},
		{name: "Mul matrix-matrix", exact: true, op: "linAlgBinOp", ins: []tensor.Shape{sh(3, 4), sh(4, 2)}, grad: true, build: two(G.Mul)},
		{name: "Mul matrix-vector", exact: true, op: "linAlgBinOp", ins: []tensor.Shape{sh(3, 4), sh(4)}, grad: true, build: two(G.Mul)},
		{name: "Mul vector-matrix (Aᵀ × b)", exact: true, op: "linAlgBinOp", ins: []tensor.Shape{sh(4), sh(4, 3)}, grad: true, build: two(G.Mul)},
		{name: "Mul vector dot", exact: true, op: "linAlgBinOp", ins: []tensor.Shape{sh(4), sh(4)}, grad: true, build: two(G.Mul)},
		// OuterProd without its gradient: gorgonia's gradient graph for it
		// multiplies (4, 3)ᵀ by a (4) vector, which the CPU device refuses.
		{name: "OuterProd", exact: true, op: "linAlgBinOp", ins: []tensor.Shape{sh(3), sh(4)}, build: two(G.OuterProd)},
		{name: "BatchedMatMul", exact: true, op: "linAlgBinOp", ins: []tensor.Shape{sh(2, 3, 4), sh(2, 4, 2)}, grad: true,
			build: func(xs []*G.Node) (*G.Node, error) { return G.BatchedMatMul(xs[0], xs[1]) }},
		{name: "BatchedMatMul transposed", exact: true, op: "linAlgBinOp", ins: []tensor.Shape{sh(2, 4, 3), sh(2, 2, 4)}, grad: true,
			build: func(xs []*G.Node) (*G.Node, error) { return G.BatchedMatMul(xs[0], xs[1], true, true) }},
		{name: "BatchedMatMul 4-D", exact: true, op: "linAlgBinOp", ins: []tensor.Shape{sh(2, 2, 3, 4), sh(2, 2, 4, 2)}, grad: true,
			build: func(xs []*G.Node) (*G.Node, error) { return G.BatchedMatMul(xs[0], xs[1]) }},
		{name: "Tensordot", exact: true, op: "tensordotOp", ins: []tensor.Shape{sh(2, 3, 4), sh(4, 3, 5)}, grad: true,
			build: func(xs []*G.Node) (*G.Node, error) { return G.Tensordot([]int{1, 2}, []int{1, 0}, xs[0], xs[1]) }},
		// Contractions that leave a vector or a scalar: tensor's TensorMul then
		// calls gemv or dot (its Dot goes by the matrices' shapes), and so does
		// the plan. The two vector ones without their gradients: gorgonia's
		// gradient graph contracts no axes there (an outer product), which
		// tensor's TensorMul refuses on the CPU device ("Shape mismatch").
		{name: "Tensordot to a vector (gemv)", exact: true, op: "tensordotOp", ins: []tensor.Shape{sh(2, 3, 4), sh(4, 3)},
			build: func(xs []*G.Node) (*G.Node, error) { return G.Tensordot([]int{1, 2}, []int{1, 0}, xs[0], xs[1]) }},
		{name: "Tensordot of a vector (gemv of bᵀ)", exact: true, op: "tensordotOp", ins: []tensor.Shape{sh(3, 4), sh(4, 3, 5)},
			build: func(xs []*G.Node) (*G.Node, error) { return G.Tensordot([]int{0, 1}, []int{1, 0}, xs[0], xs[1]) }},
		{name: "Tensordot to a scalar (dot)", exact: true, op: "tensordotOp", ins: []tensor.Shape{sh(3, 4), sh(4, 3)}, grad: true,
			build: func(xs []*G.Node) (*G.Node, error) { return G.Tensordot([]int{0, 1}, []int{1, 0}, xs[0], xs[1]) }},
		// gorgonia's composites, as programs call them.
		{name: "LogSumExp of a vector", op: "maxOp", ins: []tensor.Shape{sh(5)}, grad: true, // (of a matrix gorgonia's own shapes disagree)
			build: one(func(x *G.Node) (*G.Node, error) { return G.LogSumExp(x, 0) })},
		{name: "Norm 2", op: "sumOp", ins: []tensor.Shape{sh(3, 4)}, grad: true,
			build: one(func(x *G.Node) (*G.Node, error) { return G.Norm(x, 1, 2) })},
		{name: "BinaryXent", op: "elemBinOp", ins: []tensor.Shape{sh(3, 4), sh(3, 4)}, grad: true,
			build: func(xs []*G.Node) (*G.Node, error) {
				p, err := G.Sigmoid(xs[0])
				if err != nil {
					return nil, err
				}
				t, err := G.Sigmoid(xs[1])
				if err != nil {
					return nil, err
				}
				return G.BinaryXent(p, t)
			}},
		{name: "DiagFlat", op: "diagFlatOp", ins: []tensor.Shape{sh(4)},
			build: one(G.DiagFlat)},
		{name: "ConvType to Int and back", op: "dtConvOp", ins: []tensor.Shape{sh(3, 4)}, kind: grid, grad: true,
			build: one(func(x *G.Node) (*G.Node, error) {
				y, err := G.ConvType(x, x.Dtype(), tensor.Int)
				if err != nil {
					return nil, err
				}
				return G.ConvType(y, tensor.Int, x.Dtype())
			})},
		{name: "ConvType to Int", op: "dtConvOp", ins: []tensor.Shape{sh(3, 4)}, kind: signed,
			build: one(func(x *G.Node) (*G.Node, error) {
				y, err := G.HadamardProd(x, x)
				if err != nil {
					return nil, err
				}
				return G.ConvType(y, x.Dtype(), tensor.Int)
			})},
		{name: "GlobalAveragePool2D", op: "globalAveragePoolOp", ins: []tensor.Shape{sh(2, 3, 4, 5)},
			build: one(G.GlobalAveragePool2D)},
		{name: "SizeOf", op: "sizeOp", ins: []tensor.Shape{sh(3, 4)},
			build: one(func(x *G.Node) (*G.Node, error) { return G.SizeOf(1, x) })},
	}
}

// intCases run ops on Int tensors (made from grid inputs by ConvType).
func intCases() []opCase {
	toInt := func(x *G.Node) (*G.Node, error) { return G.ConvType(x, x.Dtype(), tensor.Int) }
	two := func(f func(a, b *G.Node) (*G.Node, error)) func(xs []*G.Node) (*G.Node, error) {
		return func(xs []*G.Node) (*G.Node, error) {
			a, err := toInt(xs[0])
			if err != nil {
				return nil, err
			}
			b, err := toInt(xs[1])
			if err != nil {
				return nil, err
			}
			return f(a, b)
		}
	}
	one := func(f func(a *G.Node) (*G.Node, error)) func(xs []*G.Node) (*G.Node, error) {
		return func(xs []*G.Node) (*G.Node, error) {
			a, err := toInt(xs[0])
			if err != nil {
				return nil, err
			}
			return f(a)
		}
	}
	pair := []tensor.Shape{sh(3, 4), sh(3, 4)}
	cs := []opCase{
		{name: "Int add", op: "elemBinOp", ins: pair, kind: grid, build: two(G.Add)},
		{name: "Int sub", op: "elemBinOp", ins: pair, kind: grid, build: two(G.Sub)},
		{name: "Int mul", op: "elemBinOp", ins: pair, kind: grid, build: two(G.HadamardProd)},
		{name: "Int MaxBetween", op: "maxBetween", ins: pair, kind: grid, build: two(G.MaxBetween)},
		{name: "Int MinBetween", op: "minBetween", ins: pair, kind: grid, build: two(G.MinBetween)},
		{name: "Int transpose", op: "transposeOp", ins: []tensor.Shape{sh(3, 4)}, kind: grid,
			build: one(func(a *G.Node) (*G.Node, error) { return G.Transpose(a) })},
		{name: "Int slice", op: "sliceOp", ins: []tensor.Shape{sh(3, 4)}, kind: grid,
			build: one(func(a *G.Node) (*G.Node, error) { return G.Slice(a, G.S(1, 3)) })},
		{name: "Int concat", op: "concatOp", ins: pair, kind: grid, build: two(func(a, b *G.Node) (*G.Node, error) { return G.Concat(1, a, b) })},
	}
	for _, c := range []struct {
		n string
		f func(a, b *G.Node, same bool) (*G.Node, error)
	}{{"lt", G.Lt}, {"gt", G.Gt}, {"lte", G.Lte}, {"gte", G.Gte}, {"eq", G.Eq}, {"ne", G.Ne}} {
		c := c
		for _, same := range []bool{false, true} {
			cs = append(cs, opCase{name: fmt.Sprintf("Int %s retSame=%t", c.n, same), op: "elemBinOp", ins: pair, kind: grid,
				build: two(func(a, b *G.Node) (*G.Node, error) { return c.f(a, b, same) })})
		}
	}
	return cs
}

// moreIntCases: ÷ (grid inputs truncate to -2..2: zero divisors, negative
// operands), reductions, SizeOf, DiagFlat, ByIndices of Int tensors; Int
// scalars; Int64 leaves (gorgonia's Int64 is Go's int64: the same kernels).
// gorgonia builds no unary op on Int (newElemUnaryOp has no Int operator:
// Neg, Abs, Square... panic when the graph is built) and tensor has no Int
// ^ (the CPU device fails at Run), so neither has a case.
func moreIntCases() []opCase {
	toInt := func(x *G.Node) (*G.Node, error) { return G.ConvType(x, x.Dtype(), tensor.Int) }
	one := func(f func(a *G.Node) (*G.Node, error)) func(xs []*G.Node) (*G.Node, error) {
		return func(xs []*G.Node) (*G.Node, error) {
			a, err := toInt(xs[0])
			if err != nil {
				return nil, err
			}
			return f(a)
		}
	}
	pair := []tensor.Shape{sh(3, 4), sh(3, 4)}
	intScalar := func(g *G.ExprGraph, name string, v int) *G.Node {
		return G.NewScalar(g, tensor.Int, G.WithName(name), G.WithValue(v))
	}
	scalars := func(f func(a, b *G.Node) (*G.Node, error), a, b int) func(xs []*G.Node) (*G.Node, error) {
		return func(xs []*G.Node) (*G.Node, error) {
			g := xs[0].Graph()
			return f(intScalar(g, "a", a), intScalar(g, "b", b))
		}
	}
	int64s := func(g *G.ExprGraph, name string, v []int64, shape ...int) *G.Node {
		t := tensor.New(tensor.WithShape(shape...), tensor.WithBacking(v))
		return G.NewTensor(g, tensor.Int64, len(shape), G.WithShape(shape...), G.WithName(name), G.WithValue(t))
	}
	a64 := []int64{7, -7, 7, -7, 0, 3, math.MaxInt64, math.MinInt64, 5, -9, 2, 1}
	b64 := []int64{2, 2, -2, -2, 5, 0, 1, -1, 3, 4, 0, -6}
	return append([]opCase{
		{name: "Int div", op: "elemBinOp", ins: pair, kind: grid, build: func(xs []*G.Node) (*G.Node, error) {
			a, err := toInt(xs[0])
			if err != nil {
				return nil, err
			}
			b, err := toInt(xs[1])
			if err != nil {
				return nil, err
			}
			return G.HadamardDiv(a, b)
		}},
		{name: "Int Sum all", op: "sumOp", ins: []tensor.Shape{sh(3, 4)}, kind: grid, build: one(func(a *G.Node) (*G.Node, error) { return G.Sum(a) })},
		{name: "Int Sum 1", op: "sumOp", ins: []tensor.Shape{sh(3, 4)}, kind: grid, build: one(func(a *G.Node) (*G.Node, error) { return G.Sum(a, 1) })},
		{name: "Int Sum 0,2 of 3-D", op: "sumOp", ins: []tensor.Shape{sh(2, 3, 4)}, kind: grid, build: one(func(a *G.Node) (*G.Node, error) { return G.Sum(a, 0, 2) })},
		{name: "Int Mean all (a Sum, then scalar ÷)", op: "sumOp", ins: []tensor.Shape{sh(3, 4)}, kind: grid, build: one(func(a *G.Node) (*G.Node, error) { return G.Mean(a) })},
		{name: "Int Max 1", op: "maxOp", ins: []tensor.Shape{sh(3, 4)}, kind: grid, build: one(func(a *G.Node) (*G.Node, error) { return G.Max(a, 1) })},
		{name: "Int Max 0,2 of 3-D", op: "maxOp", ins: []tensor.Shape{sh(2, 3, 4)}, kind: grid, build: one(func(a *G.Node) (*G.Node, error) { return G.Max(a, 0, 2) })},
		{name: "Int SizeOf", op: "sizeOp", ins: []tensor.Shape{sh(3, 4)}, kind: grid, build: one(func(a *G.Node) (*G.Node, error) { return G.SizeOf(1, a) })},
		{name: "Int DiagFlat", op: "diagFlatOp", ins: []tensor.Shape{sh(5)}, kind: grid, build: one(G.DiagFlat)},
		{name: "Int Reshape", op: "reshapeOp", ins: []tensor.Shape{sh(3, 4)}, kind: grid,
			build: one(func(a *G.Node) (*G.Node, error) { return G.Reshape(a, sh(2, 6)) })},
		{name: "Int ByIndices", op: "byIndicesOp", ins: []tensor.Shape{sh(4, 3)}, kind: grid, build: one(func(a *G.Node) (*G.Node, error) {
			ids := tensor.New(tensor.WithShape(3), tensor.WithBacking([]int{2, 0, 2}))
			i := G.NewVector(a.Graph(), tensor.Int, G.WithShape(3), G.WithName("ids"), G.WithValue(ids))
			return G.ByIndices(a, i, 0)
		})},
		{name: "Int BroadcastAdd (repeat)", op: "repeatOp", ins: []tensor.Shape{sh(3, 4), sh(1, 4)}, kind: grid, build: func(xs []*G.Node) (*G.Node, error) {
			a, err := toInt(xs[0])
			if err != nil {
				return nil, err
			}
			b, err := toInt(xs[1])
			if err != nil {
				return nil, err
			}
			return G.BroadcastAdd(a, b, nil, []byte{0})
		}},
		{name: "Int scalar add", op: "elemBinOp", ins: []tensor.Shape{sh()}, build: scalars(G.Add, 7, -9)},
		{name: "Int scalar mul", op: "elemBinOp", ins: []tensor.Shape{sh()}, build: scalars(G.HadamardProd, 7, -9)},
		{name: "Int scalar div", op: "elemBinOp", ins: []tensor.Shape{sh()}, build: scalars(G.HadamardDiv, -7, 2)},
		{name: "Int scalar gt", op: "elemBinOp", ins: []tensor.Shape{sh()}, build: scalars(func(a, b *G.Node) (*G.Node, error) { return G.Gt(a, b, false) }, 7, -9)},
		{name: "Int64 div", op: "elemBinOp", ins: []tensor.Shape{sh()}, build: func(xs []*G.Node) (*G.Node, error) {
			g := xs[0].Graph()
			return G.HadamardDiv(int64s(g, "a", a64, 3, 4), int64s(g, "b", b64, 3, 4))
		}},
		{name: "Int64 add, Sum 0", op: "sumOp", ins: []tensor.Shape{sh()}, build: func(xs []*G.Node) (*G.Node, error) {
			g := xs[0].Graph()
			s, err := G.Add(int64s(g, "a", a64, 3, 4), int64s(g, "b", b64, 3, 4))
			if err != nil {
				return nil, err
			}
			return G.Sum(s, 0)
		}},
	}, int32Cases()...)
}

// int32Cases: gorgonia's ops on Int32 and Byte (Uint8) leaves (ConvType
// makes neither: only a leaf brings one), on the _i32 and _byte kernels and
// the 4- and 1-byte moves. tensor has no SizeOf of either (so no Mean and no
// Repeat either): the CPU device fails there.
func int32Cases() []opCase {
	return append(smallIntCases[int32]("Int32", tensor.Int32,
		[]int32{7, -7, 7, -7, 0, 3, math.MaxInt32, math.MinInt32, 5, -9, 2, 1},
		[]int32{2, 2, -2, -2, 5, 0, 1, -1, 3, 4, 0, -6}),
		smallIntCases[uint8]("Byte", tensor.Uint8,
			[]uint8{7, 250, 7, 3, 0, 200, 255, 0, 5, 9, 2, 1},
			[]uint8{2, 10, 0, 5, 5, 100, 1, 255, 3, 4, 0, 6})...)
}

func smallIntCases[T int32 | uint8](dtn string, dt tensor.Dtype, a, b []T) []opCase {
	leaf := func(g *G.ExprGraph, name string, v []T, shape ...int) *G.Node {
		t := tensor.New(tensor.WithShape(shape...), tensor.WithBacking(slices.Clone(v)))
		return G.NewTensor(g, dt, len(shape), G.WithShape(shape...), G.WithName(name), G.WithValue(t))
	}
	two := func(f func(x, y *G.Node) (*G.Node, error)) func(xs []*G.Node) (*G.Node, error) {
		return func(xs []*G.Node) (*G.Node, error) {
			g := xs[0].Graph()
			return f(leaf(g, "a", a, 3, 4), leaf(g, "b", b, 3, 4))
		}
	}
	one := func(f func(x *G.Node) (*G.Node, error)) func(xs []*G.Node) (*G.Node, error) {
		return func(xs []*G.Node) (*G.Node, error) { return f(leaf(xs[0].Graph(), "a", a, 3, 4)) }
	}
	scalar := func(g *G.ExprGraph, name string, v T) *G.Node {
		return G.NewScalar(g, dt, G.WithName(name), G.WithValue(v))
	}
	none := []tensor.Shape{sh()} // the float leaf only carries the graph
	return []opCase{
		{name: dtn + " add", op: "elemBinOp", ins: none, build: two(G.Add)},
		{name: dtn + " mul", op: "elemBinOp", ins: none, build: two(G.HadamardProd)},
		{name: dtn + " div", op: "elemBinOp", ins: none, build: two(G.HadamardDiv)},
		{name: dtn + " gt", op: "elemBinOp", ins: none, build: two(func(x, y *G.Node) (*G.Node, error) { return G.Gt(x, y, false) })},
		{name: dtn + " lte retSame", op: "elemBinOp", ins: none, build: two(func(x, y *G.Node) (*G.Node, error) { return G.Lte(x, y, true) })},
		{name: dtn + " MinBetween", op: "minBetween", ins: none, build: two(G.MinBetween)},
		{name: dtn + " Sum 0", op: "sumOp", ins: none, build: one(func(x *G.Node) (*G.Node, error) { return G.Sum(x, 0) })},
		{name: dtn + " Sum all", op: "sumOp", ins: none, build: one(func(x *G.Node) (*G.Node, error) { return G.Sum(x) })},
		{name: dtn + " Max 1", op: "maxOp", ins: none, build: one(func(x *G.Node) (*G.Node, error) { return G.Max(x, 1) })},
		{name: dtn + " transpose", op: "transposeOp", ins: none, build: one(func(x *G.Node) (*G.Node, error) { return G.Transpose(x) })},
		{name: dtn + " slice", op: "sliceOp", ins: none, build: one(func(x *G.Node) (*G.Node, error) { return G.Slice(x, nil, G.S(1, 3)) })},
		{name: dtn + " concat", op: "concatOp", ins: none, build: two(func(x, y *G.Node) (*G.Node, error) { return G.Concat(1, x, y) })},
		{name: dtn + " DiagFlat", op: "diagFlatOp", ins: none, build: func(xs []*G.Node) (*G.Node, error) { return G.DiagFlat(leaf(xs[0].Graph(), "a", a, 12)) }},
		{name: dtn + " ByIndices", op: "byIndicesOp", ins: none, build: one(func(x *G.Node) (*G.Node, error) {
			ids := tensor.New(tensor.WithShape(3), tensor.WithBacking([]int{2, 0, 2}))
			i := G.NewVector(x.Graph(), tensor.Int, G.WithShape(3), G.WithName("ids"), G.WithValue(ids))
			return G.ByIndices(x, i, 0)
		})},
		{name: dtn + " scalar div", op: "elemBinOp", ins: none, build: func(xs []*G.Node) (*G.Node, error) {
			g := xs[0].Graph()
			return G.HadamardDiv(scalar(g, "a", a[0]), scalar(g, "b", b[0]))
		}},
	}
}

// boolCases: comparisons' Bool results moved (transpose, reshape, slice,
// concat, DiagFlat, ByIndices) and compared (== and != between Bool
// tensors). tensor refuses arithmetic, ordering, Sum and SizeOf on bools,
// so the CPU device runs nothing else on them.
func boolCases() []opCase {
	gt := func(xs []*G.Node) (*G.Node, error) { return G.Gt(xs[0], xs[1], false) }
	on := func(f func(b *G.Node) (*G.Node, error)) func(xs []*G.Node) (*G.Node, error) {
		return func(xs []*G.Node) (*G.Node, error) {
			b, err := gt(xs)
			if err != nil {
				return nil, err
			}
			return f(b)
		}
	}
	pair := []tensor.Shape{sh(3, 4), sh(3, 4)}
	cs := []opCase{
		{name: "Bool transpose", op: "transposeOp", ins: pair, kind: grid, build: on(func(b *G.Node) (*G.Node, error) { return G.Transpose(b) })},
		{name: "Bool reshape", op: "reshapeOp", ins: pair, kind: grid, build: on(func(b *G.Node) (*G.Node, error) { return G.Reshape(b, sh(2, 6)) })},
		{name: "Bool slice", op: "sliceOp", ins: pair, kind: grid, build: on(func(b *G.Node) (*G.Node, error) { return G.Slice(b, nil, G.S(1, 3)) })},
		{name: "Bool concat", op: "concatOp", ins: pair, kind: grid, build: func(xs []*G.Node) (*G.Node, error) {
			b1, err := gt(xs)
			if err != nil {
				return nil, err
			}
			b2, err := G.Lt(xs[0], xs[1], false)
			if err != nil {
				return nil, err
			}
			return G.Concat(0, b1, b2)
		}},
		{name: "Bool DiagFlat", op: "diagFlatOp", ins: []tensor.Shape{sh(5), sh(5)}, kind: grid, build: on(G.DiagFlat)},
		{name: "Bool ByIndices", op: "byIndicesOp", ins: pair, kind: grid, build: on(func(b *G.Node) (*G.Node, error) {
			ids := tensor.New(tensor.WithShape(3), tensor.WithBacking([]int{1, 0, 1}))
			i := G.NewVector(b.Graph(), tensor.Int, G.WithShape(3), G.WithName("ids"), G.WithValue(ids))
			return G.ByIndices(b, i, 1)
		})},
	}
	cs = append(cs, opCase{name: "Bool scalar ne", op: "elemBinOp", ins: []tensor.Shape{sh()}, build: func(xs []*G.Node) (*G.Node, error) {
		g := xs[0].Graph()
		return G.Ne(G.NewScalar(g, tensor.Bool, G.WithName("p"), G.WithValue(true)), G.NewScalar(g, tensor.Bool, G.WithName("q"), G.WithValue(false)), false)
	}})
	for _, c := range []struct {
		n string
		f func(a, b *G.Node, same bool) (*G.Node, error)
	}{{"eq", G.Eq}, {"ne", G.Ne}} {
		for _, same := range []bool{false, true} {
			cs = append(cs, opCase{name: fmt.Sprintf("Bool %s retSame=%t", c.n, same), op: "elemBinOp", ins: pair, kind: grid,
				build: func(xs []*G.Node) (*G.Node, error) {
					b1, err := gt(xs)
					if err != nil {
						return nil, err
					}
					b2, err := G.Gte(xs[1], xs[0], false)
					if err != nil {
						return nil, err
					}
					return c.f(b1, b2, same)
				}})
		}
	}
	return cs
}

// convPoolNormCases are gorgonia's convolution, pooling, normalisation,
// dropout, upsampling, sparsemax and ByIndices ops (the g_ kernels' plans).
func convPoolNormCases() []opCase {
	one := func(f func(x *G.Node) (*G.Node, error)) func(xs []*G.Node) (*G.Node, error) {
		return func(xs []*G.Node) (*G.Node, error) { return f(xs[0]) }
	}
	img := sh(2, 3, 4, 4)
	return []opCase{
		{name: "Conv2d", op: "im2colOp", ins: []tensor.Shape{img, sh(2, 3, 3, 3)}, grad: true,
			build: func(xs []*G.Node) (*G.Node, error) {
				return G.Conv2d(xs[0], xs[1], tensor.Shape{3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1})
			}},
		{name: "MaxPool2D", op: "maxPoolOp", ins: []tensor.Shape{img}, grad: true,
			build: one(func(x *G.Node) (*G.Node, error) { return G.MaxPool2D(x, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}) })},
		{name: "AveragePool2D", op: "avgPoolOp", ins: []tensor.Shape{img}, grad: true,
			build: one(func(x *G.Node) (*G.Node, error) {
				return G.AveragePool2D(x, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2})
			})},
		{name: "BatchNorm", op: "BatchNormOp", ins: []tensor.Shape{img, sh(1, 3, 1, 1), sh(1, 3, 1, 1)}, grad: true,
			build: func(xs []*G.Node) (*G.Node, error) {
				y, _, _, _, err := G.BatchNorm(xs[0], xs[1], xs[2], 0.1, 1e-5)
				return y, err
			}},
		{name: "GroupNorm", op: "GroupNormOp", ins: []tensor.Shape{sh(2, 4, 3, 3), sh(1, 4, 1, 1), sh(1, 4, 1, 1)}, grad: true,
			build: func(xs []*G.Node) (*G.Node, error) { return G.GroupNorm(xs[0], xs[1], xs[2], 2, 4, 1e-5) }},
		{name: "Dropout", op: "dropoutOp", ins: []tensor.Shape{sh(3, 4)}, grad: true,
			build: one(func(x *G.Node) (*G.Node, error) { return G.Dropout(x, 0) })},
		{name: "Upsample2D", op: "upsampleOp", ins: []tensor.Shape{img}, grad: true,
			build: one(func(x *G.Node) (*G.Node, error) { return G.Upsample2D(x, 2) })},
		{name: "Sparsemax", op: "sparsemaxOp", ins: []tensor.Shape{sh(3, 4)}, grad: true,
			build: one(func(x *G.Node) (*G.Node, error) { return G.Sparsemax(x) })},
		{name: "ByIndices", op: "byIndicesOp", ins: []tensor.Shape{sh(4, 3)}, grad: true,
			build: one(func(x *G.Node) (*G.Node, error) {
				ids := tensor.New(tensor.WithShape(3), tensor.WithBacking([]int{2, 0, 2}))
				i := G.NewVector(x.Graph(), tensor.Int, G.WithShape(3), G.WithName("ids"), G.WithValue(ids))
				return G.ByIndices(x, i, 0)
			})},
	}
}

// ctcCases run CTCLoss, whose targets and lengths are Int tensors.
func ctcCases() []opCase {
	ints := func(g *G.ExprGraph, name string, v int, shape ...int) *G.Node {
		t := tensor.New(tensor.Of(tensor.Int), tensor.WithShape(shape...))
		for i := range t.Data().([]int) {
			t.Data().([]int)[i] = v
		}
		return G.NewTensor(g, tensor.Int, len(shape), G.WithShape(shape...), G.WithName(name), G.WithValue(t))
	}
	intsOf := func(g *G.ExprGraph, name string, v []int, shape ...int) *G.Node {
		t := tensor.New(tensor.WithShape(shape...), tensor.WithBacking(v))
		return G.NewTensor(g, tensor.Int, len(shape), G.WithShape(shape...), G.WithName(name), G.WithValue(t))
	}
	return []opCase{
		{name: "CTCLoss ragged, sum", op: "ctcLossOp", ins: []tensor.Shape{sh(5, 3, 4)}, grad: true,
			build: func(xs []*G.Node) (*G.Node, error) {
				g := xs[0].Graph()
				return G.CTCLoss(xs[0], intsOf(g, "targets", []int{1, 2, 3, 3, 1, 0}, 3, 2), intsOf(g, "inputLengths", []int{5, 3, 4}, 3),
					intsOf(g, "targetLengths", []int{2, 2, 1}, 3), G.ReductionSum)
			}},
		{name: "CTCLoss", op: "ctcLossOp", ins: []tensor.Shape{sh(4, 3, 5)}, grad: true,
			build: func(xs []*G.Node) (*G.Node, error) {
				g := xs[0].Graph()
				return G.CTCLoss(xs[0], ints(g, "targets", 2, 3, 4), ints(g, "inputLengths", 4, 3), ints(g, "targetLengths", 2, 3), G.ReductionMean)
			}},
	}
}

func allCases() []opCase {
	// (Cases are seeded by their index: new ones go last, so the seeds of the
	// others, and docs/results.md's counts of equal bits, stay as they were.)
	return slices.Concat(unaryCases(), binaryCases(), tensorCases(), intCases(), convPoolNormCases(), ctcCases(), moreIntCases(), boolCases())
}

// TestCoverage runs one small graph per gorgonia op (with its gradient where
// it has one) on the fake CUDA device and on the CPU device, float64 and
// float32, and compares every result and gradient with the zoo's rule
// (float64 1e-12, float32 1e-5, normwise relative per tensor; bools and
// ints equal). It lists the ops left without a CUDA plan, with the
// dispatch's reason, and fails for each graph the CPU device runs and the
// CUDA device refuses (differentiable or not; a graph the CPU device
// refuses too is skipped with its error).
func TestCoverage(t *testing.T) {
	d := openFake(t)
	log.SetOutput(io.Discard) // gorgonia's GroupNorm gradient logs its operands
	t.Cleanup(func() { log.SetOutput(os.Stderr) })
	unsupported := map[string]string{}    // op type -> reason
	table := map[string]map[string]bool{} // op type -> kernels
	ran := 0
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		for i, c := range allCases() {
			t.Run(dt.String()+"/"+c.name, func(t *testing.T) {
				ran++
				runCase(t, d, c, dt, int64(i), unsupported, table)
			})
		}
	}
	keys := make([]string, 0, len(unsupported))
	for k := range unsupported {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "\n  %s: %s", k, unsupported[k])
	}
	t.Logf("ops left without a CUDA plan (%d):%s", len(keys), b.String())
	if !t.Failed() && ran == 2*len(allCases()) { // every case ran: the table is whole
		checkOpTable(t, table, unsupported)
	}
}

// side is one device's run of a case.
type side struct {
	out   G.Value
	grads [][]float64
	err   error
	work  map[string]map[string]bool // op type -> kernels it launched (fake device)
}

// refusalRE reads one refusal of a Compile error: the op type and the reason.
var refusalRE = regexp.MustCompile(`\((\*?[a-zA-Z0-9_.]+)\) at node .* has no CUDA implementation(?:: (.*))?$`)

func runCase(t *testing.T, d *cuda.Device, c opCase, dt tensor.Dtype, seed int64, unsupported map[string]string, table map[string]map[string]bool) {
	cpu := buildAndRun(t, c, dt, seed, nil)
	if cpu.err != nil {
		t.Skipf("the CPU device cannot run this graph either: %v", cpu.err)
	}
	gpu := buildAndRun(t, c, dt, seed, d)
	if gpu.err != nil {
		msg := gpu.err.Error()
		if !strings.Contains(msg, "no CUDA implementation") {
			t.Fatalf("fake CUDA device: %v", gpu.err)
		}
		for _, line := range strings.Split(msg, "\n") {
			if m := refusalRE.FindStringSubmatch(line); m != nil {
				unsupported[m[1]] = m[2]
			}
		}
		kind := "op" // every graph the CPU device runs must plan (issue 26)
		if c.grad {
			kind = "differentiable op"
		}
		t.Errorf("%s %s runs on the CPU device and has no CUDA plan: %v", kind, c.op, gpu.err)
		return
	}
	for op, ks := range gpu.work {
		if table[op] == nil {
			table[op] = map[string]bool{}
		}
		for k := range ks {
			table[op][k] = true
		}
	}
	compareValues(t, "result", dt, gpu.out, cpu.out)
	for i := range cpu.grads {
		compareFloats(t, fmt.Sprintf("gradient %d", i), dt, gpu.grads[i], cpu.grads[i])
	}
	if c.exact {
		sameBits(t, "result", floats(t, gpu.out), floats(t, cpu.out))
		for i := range cpu.grads {
			sameBits(t, fmt.Sprintf("gradient %d", i), gpu.grads[i], cpu.grads[i])
		}
	}
}

// sameBits fails unless got and want are the same numbers (float32 values
// widen exactly, so equal float64s are equal bits but for the sign of zero,
// which is compared too).
func sameBits(t *testing.T, what string, got, want []float64) {
	t.Helper()
	for i := range want {
		if i >= len(got) || math.Float64bits(got[i]) != math.Float64bits(want[i]) {
			t.Errorf("%s: element %d: fake CUDA device %v, CPU device %v (want the same bits)", what, i, got[i], want[i])
			return
		}
	}
}

// buildAndRun builds the case's graph with inputs from seed and runs it once
// on d (the CPU device when nil).
func buildAndRun(t *testing.T, c opCase, dt tensor.Dtype, seed int64, d *cuda.Device) side {
	t.Helper()
	rng := rand.New(rand.NewSource(seed))
	g := G.NewGraph()
	xs := make([]*G.Node, len(c.ins))
	for i, s := range c.ins {
		xs[i] = leaf(g, rng, dt, s, c.kind, fmt.Sprintf("x%d", i))
	}
	y, err := c.build(xs)
	if err != nil {
		t.Fatalf("building: %v", err)
	}
	var out, costV G.Value
	G.Read(y, &out)
	opts := []ooc.Option{}
	grad := c.grad && y.Dtype() == dt
	if grad {
		cost := y // a scalar result is the cost itself (a rank-0 tensor does not multiply a scalar)
		if !y.Shape().IsScalar() {
			w := leaf(g, rng, dt, y.Shape(), signed, "w")
			prod, err := G.HadamardProd(y, w)
			if err != nil {
				t.Fatal(err)
			}
			if cost, err = G.Sum(prod); err != nil {
				t.Fatal(err)
			}
		}
		G.Read(cost, &costV)
		if _, err := G.Grad(cost, xs...); err != nil {
			t.Fatalf("gradient: %v", err)
		}
		opts = append(opts, ooc.BindDualValues(xs...))
	} else {
		opts = append(opts, ooc.Inference())
	}
	if d != nil {
		opts = append(opts, ooc.WithDevice(d))
	}
	m, err := ooc.Compile(g, opts...)
	if err != nil {
		return side{err: err}
	}
	defer m.Close()
	if err := m.RunAll(); err != nil {
		return side{err: err}
	}
	r := side{out: cloneValue(out), work: workOf(m)}
	if grad {
		for _, x := range xs {
			gv, err := x.Grad()
			if err != nil {
				t.Fatal(err)
			}
			r.grads = append(r.grads, floats(t, gv))
		}
	}
	return r
}

func cloneValue(v G.Value) G.Value {
	if d, ok := v.(*tensor.Dense); ok {
		return d.Clone().(*tensor.Dense)
	}
	return v
}

// leaf is an input of shape s filled from rng.
func leaf(g *G.ExprGraph, rng *rand.Rand, dt tensor.Dtype, s tensor.Shape, k valueKind, name string) *G.Node {
	val := func() float64 {
		switch k {
		case positive:
			return 0.5 + 1.5*rng.Float64()
		case grid:
			return float64(rng.Intn(9)-4) / 2
		}
		return rng.NormFloat64()
	}
	if s.IsScalar() {
		var v any = val()
		if dt == tensor.Float32 {
			v = float32(val())
		}
		return G.NewScalar(g, dt, G.WithName(name), G.WithValue(v))
	}
	t := tensor.New(tensor.Of(dt), tensor.WithShape(s...))
	for i := 0; i < t.Len(); i++ {
		set(t, i, val())
	}
	return G.NewTensor(g, dt, len(s), G.WithShape(s...), G.WithName(name), G.WithValue(t))
}

// compareValues compares two results: bools and ints exactly, floats by the
// zoo's rule.
func compareValues(t *testing.T, what string, dt tensor.Dtype, got, want G.Value) {
	t.Helper()
	if got == nil || want == nil {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
	if !got.Shape().Eq(want.Shape()) || got.Dtype() != want.Dtype() {
		t.Fatalf("%s: got %v %v, want %v %v", what, got.Dtype(), got.Shape(), want.Dtype(), want.Shape())
	}
	switch want.Dtype() {
	case tensor.Bool, tensor.Int, tensor.Int64, tensor.Int32, tensor.Uint8:
		if fmt.Sprint(got.Data()) != fmt.Sprint(want.Data()) {
			t.Errorf("%s: got %v, want %v", what, got.Data(), want.Data())
		}
		return
	}
	compareFloats(t, what, dt, floats(t, got), floats(t, want))
}

func compareFloats(t *testing.T, what string, dt tensor.Dtype, got, want []float64) {
	t.Helper()
	tol := 1e-12
	if dt == tensor.Float32 {
		tol = 1e-5
	}
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	got, want = slices.Clone(got), slices.Clone(want)
	for i := range got { // equal infinities (CTC's gradient rows past an input's length) are no difference
		if got[i] == want[i] && math.IsInf(got[i], 0) {
			got[i], want[i] = 0, 0
		}
	}
	if e := relErr(got, want); e > tol || math.IsNaN(e) {
		t.Errorf("%s: fake CUDA and CPU device differ by %.3g > %g\n got %v\nwant %v", what, e, tol, got, want)
	}
}
