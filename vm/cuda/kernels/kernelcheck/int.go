package kernelcheck

import (
	"fmt"
	"math"
	"math/rand"
	"slices"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

// TestIntBinary: + - ⊙ (wrapping at the int64 limits), ÷, the comparisons
// with Int and bool results, MaxBetween and MinBetween on Int tensors,
// against gorgonia's elemBinOp Do (÷ against its UsePreallocDo, the CPU
// device's path: Do reports a zero divisor as an error, the preallocated
// path writes 0 there). (gorgonia has no Int tensor-scalar form: its Do
// takes only float scalars beside a tensor.) Then Sum and Max over axes
// and the Int fill.
func intBinary(t TB, m *Mem) {
	intArith(t, m)
	intReduce(t, m)
	intFill(t, m)
}

func intArith(t TB, m *Mem) {
	rng := rand.New(rand.NewSource(28))
	const n = 64
	a, b := make([]int, n), make([]int, n)
	for i := range a {
		a[i], b[i] = rng.Intn(7)-3, rng.Intn(7)-3 // ties
	}
	a[0], b[0] = math.MaxInt64, 1   // + wraps
	a[1], b[1] = math.MinInt64, 1   // - wraps
	a[2], b[2] = math.MaxInt64/2, 3 // ⊙ wraps
	a[3], b[3] = 5, 0               // ÷ by zero: 0
	a[4], b[4] = math.MinInt64, -1  // ÷ wraps
	a[5], b[5] = -7, 2              // ÷ truncates toward zero
	a[6], b[6] = 7, -2
	type bf = func(x, y *G.Node) (*G.Node, error)
	cmp := func(f func(x, y *G.Node, same bool) (*G.Node, error), same bool) bf {
		return func(x, y *G.Node) (*G.Node, error) { return f(x, y, same) }
	}
	cases := []struct {
		sym   string
		build bf
		bools bool
	}{
		{"+", G.Add, false}, {"-", G.Sub, false}, {"⊙", G.HadamardProd, false}, {"÷", G.HadamardDiv, false},
		{"MaxBetween", G.MaxBetween, false}, {"MinBetween", G.MinBetween, false},
	}
	for _, c := range []struct {
		sym string
		f   func(x, y *G.Node, same bool) (*G.Node, error)
	}{{"<", G.Lt}, {">", G.Gt}, {"<=", G.Lte}, {">=", G.Gte}, {"==", G.Eq}, {"!=", G.Ne}} {
		cases = append(cases, struct {
			sym   string
			build bf
			bools bool
		}{c.sym, cmp(c.f, true), false}, struct {
			sym   string
			build bf
			bools bool
		}{c.sym, cmp(c.f, false), true})
	}
	for _, c := range cases {
		g := G.NewGraph()
		an := G.NewVector(g, tensor.Int, G.WithShape(n), G.WithName("a"))
		bn := G.NewVector(g, tensor.Int, G.WithShape(n), G.WithName("b"))
		node, err := c.build(an, bn)
		if err != nil {
			t.Fatal(err)
		}
		av := tensor.New(tensor.WithShape(n), tensor.WithBacking(append([]int(nil), a...)))
		bv := tensor.New(tensor.WithShape(n), tensor.WithBacking(append([]int(nil), b...)))
		var want any
		if c.sym == "÷" {
			pre := tensor.New(tensor.Of(tensor.Int), tensor.WithShape(n))
			v, err := node.Op().(G.UsePreallocDoer).UsePreallocDo(pre, av, bv)
			if err != nil {
				t.Fatalf("%v.UsePreallocDo: %v", node.Op(), err)
			}
			want = v.Data()
		} else {
			want = do(t, node.Op(), av, bv).Data()
		}
		op, ok := kernels.BinaryOpFor(c.sym, false)
		if !ok {
			t.Fatalf("no operator for %s", c.sym)
		}
		if c.sym == "÷" { // scalar ÷ scalar runs the scalar operator: the same rule
			out := m.alloc(8 * n)
			sop, _ := kernels.BinaryOpFor(c.sym, true)
			m.launch("binary_i64", kernels.Int(int64(sop)), p(out), p(putInts(m, a)), p(putInts(m, b)), kernels.Int(n), kernels.LayoutArg(kernels.Contiguous()))
			for i, w := range want.([]int) {
				if got := asInts(out.Data())[i]; got != w {
					t.Fatalf("binary_i64 %v: element %d (%d, %d) is %d, want %d", sop, i, a[i], b[i], got, w)
				}
			}
		}
		ab, bb := m.alloc(8*n), m.alloc(8*n)
		copy(ab.Data(), fromInts(a))
		copy(bb.Data(), fromInts(b))
		l := kernels.Contiguous()
		name := fmt.Sprintf("%s %s", c.sym, node.Op())
		if c.bools {
			out := m.alloc(n)
			m.launch("compare_i64", kernels.Int(int64(op)), p(out), p(ab), p(bb), kernels.Int(n), kernels.LayoutArg(l))
			for i, v := range out.Data() {
				if (v == 1) != want.([]bool)[i] || v > 1 {
					t.Fatalf("compare_i64 %s: element %d (%d, %d) is %d, want %v", name, i, a[i], b[i], v, want.([]bool)[i])
				}
			}
			m.exactly()
			continue
		}
		out := m.alloc(8 * n)
		m.launch("binary_i64", kernels.Int(int64(op)), p(out), p(ab), p(bb), kernels.Int(n), kernels.LayoutArg(l))
		got := asInts(out.Data())
		for i, w := range want.([]int) {
			if got[i] != w {
				t.Fatalf("binary_i64 %s: element %d (%d, %d) is %d, want %d", name, i, a[i], b[i], got[i], w)
			}
		}
		m.exactly()
	}
}

// intReduce: reduce_i64 (one run of axes) and reduce_axes_i64 (any set)
// against gorgonia's sumOp and maxOp Do on Int tensors, sums that wrap
// included.
func intReduce(t TB, m *Mem) {
	rng := rand.New(rand.NewSource(29))
	shape := []int{3, 5, 4}
	x := make([]int, prod(shape))
	for i := range x {
		x[i] = rng.Intn(2001) - 1000
	}
	x[0], x[20], x[40] = math.MaxInt64, 7, math.MaxInt64 // axis 0 of column 0 wraps
	for _, along := range [][]int{{0}, {1}, {2}, {0, 2}, {0, 1, 2}} {
		for _, isMax := range []bool{false, true} {
			g := G.NewGraph()
			xn := G.NewTensor(g, tensor.Int, len(shape), G.WithShape(shape...), G.WithName("x"))
			build, op := G.Sum, kernels.ReduceSum
			if isMax {
				build, op = G.Max, kernels.ReduceMax
			}
			node, err := build(xn, along...)
			if err != nil {
				t.Fatal(err)
			}
			wv := do(t, node.Op(), tensor.New(tensor.WithShape(shape...), tensor.WithBacking(append([]int(nil), x...))))
			var want []int
			switch v := wv.Data().(type) {
			case []int:
				want = v
			case int:
				want = []int{v}
			default:
				t.Fatalf("%v gave %T", node.Op(), v)
			}
			name := fmt.Sprintf("%v over %v", op, along)
			xb := putInts(m, x)
			out := m.alloc(8 * len(want))
			if len(along) == 1 || len(along) == len(shape) { // one run of neighbouring axes
				outer, k, inner := int64(1), int64(1), int64(1)
				for d, v := range shape {
					switch {
					case slices.Contains(along, d):
						k *= int64(v)
					case d < along[0]:
						outer *= int64(v)
					default:
						inner *= int64(v)
					}
				}
				m.launch("reduce_i64", kernels.Int(int64(op)), p(out), p(xb), kernels.Int(outer), kernels.Int(k), kernels.Int(inner))
				name = "reduce_i64 " + name
			} else {
				l, rows, k := axesLayout(shape, along)
				m.launch("reduce_axes_i64", kernels.Int(int64(op)), p(out), p(xb), kernels.Int(rows), kernels.Int(k),
					kernels.Int(int64(len(shape)-len(along))), kernels.LayoutArg(l))
				name = "reduce_axes_i64 " + name
			}
			if got := asInts(out.Data()); !slices.Equal(got, want) {
				t.Fatalf("%s: got %v, want %v", name, got, want)
			}
			m.exactly()
		}
	}
}

// intFill: fill_i64 with the count gorgonia's sizeOp gives for an Int
// operand, and the largest Int.
func intFill(t TB, m *Mem) {
	g := G.NewGraph()
	xn := G.NewMatrix(g, tensor.Int, G.WithShape(3, 7), G.WithName("x"))
	node, err := G.SizeOf(1, xn)
	if err != nil {
		t.Fatal(err)
	}
	sz := do(t, node.Op(), tensor.New(tensor.Of(tensor.Int), tensor.WithShape(3, 7))).Data().(int)
	for _, v := range []int{sz, math.MaxInt64} { // (kernel ints are never negative: sizeOp's counts are not)
		out := m.alloc(8 * 5)
		m.launch("fill_i64", p(out), kernels.Int(int64(v)), kernels.Int(5))
		for i, got := range asInts(out.Data()) {
			if got != v {
				t.Fatalf("fill_i64 %d: element %d is %d", v, i, got)
			}
		}
		m.exactly()
	}
}
