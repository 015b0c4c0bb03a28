package kernelcheck

import (
	"math/rand"
	"strings"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

var unaryBuilders = map[kernels.UnaryOp]func(*G.Node) (*G.Node, error){
	kernels.UnaryAbs: G.Abs, kernels.UnarySign: G.Sign, kernels.UnaryCeil: G.Ceil, kernels.UnaryFloor: G.Floor,
	kernels.UnarySin: G.Sin, kernels.UnaryCos: G.Cos, kernels.UnaryExp: G.Exp, kernels.UnaryLn: G.Log,
	kernels.UnaryLog2: G.Log2, kernels.UnaryNeg: G.Neg, kernels.UnarySquare: G.Square, kernels.UnarySqrt: G.Sqrt,
	kernels.UnaryInv: G.Inverse, kernels.UnaryInvSqrt: G.InverseSqrt, kernels.UnaryCube: G.Cube,
	kernels.UnaryTanh: G.Tanh, kernels.UnarySigmoid: G.Sigmoid, kernels.UnaryLog1p: G.Log1p,
	kernels.UnaryExpm1: G.Expm1, kernels.UnarySoftplus: G.Softplus,
}

func testUnary[T float32 | float64](t TB, m *Mem) {
	rng := rand.New(rand.NewSource(1))
	name := "unary_" + suffix[T]()
	for op, build := range unaryBuilders {
		if n, ok := kernels.UnaryOpNamed(op.String()); !ok || n != op {
			t.Fatalf("UnaryOpNamed(%q)", op.String())
		}
		for _, n := range sizes {
			x := append(specials[T](), randn[T](rng, n, 3)...)
			g := G.NewGraph()
			node := must(t)(build(input[T](g, "x", len(x))))
			if node.Op().String() != op.String() {
				t.Fatalf("%v is gorgonia's %v", op, node.Op())
			}
			want := data[T](t, do(t, node.Op(), dense(x, len(x))))
			y := newOut[T](m, len(x))
			m.launch(name, kernels.Int(int64(op)), p(y), p(put(m, x)), kernels.Int(int64(len(x))))
			compare(t, m, name+" "+op.String(), get[T](y), want, false)
		}
	}
	// Zero elements: no blocks, nothing launched.
	s, _ := kernels.Lookup(name)
	l, err := s.Prepare(kernels.Int(0), kernels.Ptr(0), kernels.Ptr(0), kernels.Int(0))
	if err != nil || !l.Empty() {
		t.Fatalf("zero-size launch: %v, %v", l, err)
	}
}

func suffix[T float32 | float64]() string {
	if dtOf[T]() == tensor.Float32 {
		return "f32"
	}
	return "f64"
}

type binCase struct {
	sym     string
	build   func(a, b *G.Node) (*G.Node, error)
	compare bool
}

var binCases = []binCase{
	{"+", G.Add, false}, {"-", G.Sub, false}, {"⊙", G.HadamardProd, false}, {"÷", G.HadamardDiv, false}, {"^", G.Pow, false},
	{"<", func(a, b *G.Node) (*G.Node, error) { return G.Lt(a, b, true) }, true},
	{">", func(a, b *G.Node) (*G.Node, error) { return G.Gt(a, b, true) }, true},
	{"<=", func(a, b *G.Node) (*G.Node, error) { return G.Lte(a, b, true) }, true},
	{">=", func(a, b *G.Node) (*G.Node, error) { return G.Gte(a, b, true) }, true},
	{"==", func(a, b *G.Node) (*G.Node, error) { return G.Eq(a, b, true) }, true},
	{"!=", func(a, b *G.Node) (*G.Node, error) { return G.Ne(a, b, true) }, true},
	{"MaxBetween", G.MaxBetween, false}, {"MinBetween", G.MinBetween, false},
}

func scalarValue[T float32 | float64](v T) G.Value {
	if dtOf[T]() == tensor.Float32 {
		return G.NewF32(float32(v))
	}
	return G.NewF64(float64(v))
}

func testBinary[T float32 | float64](t TB, m *Mem) {
	rng := rand.New(rand.NewSource(2))
	name := "binary_" + suffix[T]()
	for _, c := range binCases {
		for _, n := range sizes {
			sp := specials[T]()
			a := append(append([]T(nil), sp...), randn[T](rng, n, 2)...)
			b := append(rotate(sp, 3), randn[T](rng, n, 2)...)
			b[len(b)-1] = 0 // a zero divisor among the random values
			N := len(a)
			for _, form := range []string{"tt", "ts", "st"} {
				if form != "tt" && strings.HasSuffix(c.sym, "Between") {
					continue // gorgonia's MaxBetween and MinBetween take two tensors of one shape
				}
				g := G.NewGraph()
				var an, bn *G.Node
				var av, bv G.Value
				l := kernels.Contiguous()
				ab, bb := put(m, a), put(m, b)
				switch form {
				case "tt":
					an, bn = input[T](g, "a", N), input[T](g, "b", N)
					av, bv = dense(a, N), dense(b, N)
				case "ts":
					an, bn = input[T](g, "a", N), G.NewScalar(g, dtOf[T](), G.WithName("b"))
					av, bv = dense(a, N), scalarValue(b[5])
					bb = put(m, b[5:6])
					l = kernels.Layout{Rank: 1, Dim: [6]int64{int64(N)}, Out: [6]int64{1}, A: [6]int64{1}, B: [6]int64{0}}
				case "st":
					an, bn = G.NewScalar(g, dtOf[T](), G.WithName("a")), input[T](g, "b", N)
					av, bv = scalarValue(a[6]), dense(b, N)
					ab = put(m, a[6:7])
					l = kernels.Layout{Rank: 1, Dim: [6]int64{int64(N)}, Out: [6]int64{1}, A: [6]int64{0}, B: [6]int64{1}}
				}
				node := must(t)(c.build(an, bn))
				want := data[T](t, do(t, node.Op(), av, bv))
				op, ok := kernels.BinaryOpFor(c.sym, form == "ts")
				if !ok {
					t.Fatalf("no operator for %s", c.sym)
				}
				y := newOut[T](m, N)
				m.launch(name, kernels.Int(int64(op)), p(y), p(ab), p(bb), kernels.Int(int64(N)), kernels.LayoutArg(l))
				compare(t, m, name+" "+op.String()+" "+form, get[T](y), want, false)
			}
		}
	}
}

func rotate[T any](s []T, k int) []T { return append(append([]T(nil), s[k:]...), s[:k]...) }

func testCompare[T float32 | float64](t TB, m *Mem) {
	name := "compare_" + suffix[T]()
	rng := rand.New(rand.NewSource(3))
	for _, c := range binCases {
		if !c.compare {
			continue
		}
		a := append(specials[T](), randn[T](rng, 40, 1)...)
		b := append(rotate(specials[T](), 1), a[len(specials[T]()):]...) // equal tails
		g := G.NewGraph()
		N := len(a)
		var node *G.Node
		switch c.sym {
		case "<":
			node = must(t)(G.Lt(input[T](g, "a", N), input[T](g, "b", N), false))
		case ">":
			node = must(t)(G.Gt(input[T](g, "a", N), input[T](g, "b", N), false))
		case "<=":
			node = must(t)(G.Lte(input[T](g, "a", N), input[T](g, "b", N), false))
		case ">=":
			node = must(t)(G.Gte(input[T](g, "a", N), input[T](g, "b", N), false))
		case "==":
			node = must(t)(G.Eq(input[T](g, "a", N), input[T](g, "b", N), false))
		case "!=":
			node = must(t)(G.Ne(input[T](g, "a", N), input[T](g, "b", N), false))
		}
		res := do(t, node.Op(), dense(a, N), dense(b, N)).(*tensor.Dense).Data().([]bool)
		op, _ := kernels.BinaryOpFor(c.sym, false)
		out := m.alloc(N)
		m.launch(name, kernels.Int(int64(op)), p(out), p(put(m, a)), p(put(m, b)), kernels.Int(int64(N)), kernels.LayoutArg(kernels.Contiguous()))
		for i, v := range out.host {
			if (v == 1) != res[i] || v > 1 {
				t.Fatalf("%s %s: element %d (%v, %v) is %d, want %v", name, c.sym, i, a[i], b[i], v, res[i])
			}
		}
		m.exactly()
	}
}
