package kernelcheck

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"unsafe"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

// TestIntBinary: on Int (int64), Int32 and Byte (uint8) tensors, + - ⊙
// (wrapping at the limits), ÷, the comparisons with integer and bool
// results, MaxBetween and MinBetween, against gorgonia's elemBinOp Do (÷
// against its UsePreallocDo, the CPU device's path: Do reports a zero
// divisor as an error, the preallocated path writes 0 there). (gorgonia has
// no integer tensor-scalar form: its Do takes only float scalars beside a
// tensor.) Then Sum and Max over axes and the Int fill.
func intBinary(t TB, m *Mem) {
	intArith[int](t, m)
	intArith[int32](t, m)
	intArith[uint8](t, m)
	intReduce[int](t, m)
	intReduce[int32](t, m)
	intReduce[uint8](t, m)
	intFill(t, m)
}

// integer is an integer dtype the kernels take: Go's int (Int, int64 on the
// device), int32 (Int32) or uint8 (Byte).
type integer interface{ int | int32 | uint8 }

func intInfo[T integer]() (dt tensor.Dtype, sfx string, size int, lo, hi T) {
	var z T
	switch unsafe.Sizeof(z) {
	case 1:
		mx := math.MaxUint8
		return tensor.Uint8, "byte", 1, 0, T(mx)
	case 4:
		mn, mx := math.MinInt32, math.MaxInt32
		return tensor.Int32, "i32", 4, T(mn), T(mx)
	}
	mn, mx := math.MinInt64, math.MaxInt64
	return tensor.Int, "i64", 8, T(mn), T(mx)
}

func putIntegers[T integer](m *Mem, v []T) *Buffer {
	_, _, size, _, _ := intInfo[T]()
	b := m.alloc(size * len(v))
	if len(v) > 0 {
		copy(unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b.Data()))), len(v)), v)
	}
	return b
}

func getIntegers[T integer](b *Buffer) []T {
	_, _, size, _, _ := intInfo[T]()
	if len(b.Data()) == 0 {
		return nil
	}
	return append([]T(nil), unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b.Data()))), len(b.Data())/size)...)
}

func intArith[T integer](t TB, m *Mem) {
	dt, sfx, size, lo, hi := intInfo[T]()
	rng := rand.New(rand.NewSource(28))
	const n = 64
	a, b := make([]T, n), make([]T, n)
	for i := range a {
		a[i], b[i] = T(rng.Intn(7)-3), T(rng.Intn(7)-3) // ties
	}
	m1, m7, m2 := -1, -7, -2 // (variables: a Byte wraps them to 255, 249, 254)
	a[0], b[0] = hi, 1       // + wraps
	a[1], b[1] = lo, 1       // - wraps
	a[2], b[2] = hi/2, 3     // ⊙ wraps
	a[3], b[3] = 5, 0        // ÷ by zero: 0
	a[4], b[4] = lo, T(m1)   // ÷ of the minimum by -1 wraps (signed types)
	a[5], b[5] = T(m7), 2    // ÷ truncates toward zero
	a[6], b[6] = 7, T(m2)
	type bf = func(x, y *G.Node) (*G.Node, error)
	cmp := func(f func(x, y *G.Node, same bool) (*G.Node, error), same bool) bf {
		return func(x, y *G.Node) (*G.Node, error) { return f(x, y, same) }
	}
	type opCase struct {
		sym   string
		build bf
		bools bool
	}
	cases := []opCase{
		{"+", G.Add, false}, {"-", G.Sub, false}, {"⊙", G.HadamardProd, false}, {"÷", G.HadamardDiv, false},
		{"MaxBetween", G.MaxBetween, false}, {"MinBetween", G.MinBetween, false},
	}
	for _, c := range []struct {
		sym string
		f   func(x, y *G.Node, same bool) (*G.Node, error)
	}{{"<", G.Lt}, {">", G.Gt}, {"<=", G.Lte}, {">=", G.Gte}, {"==", G.Eq}, {"!=", G.Ne}} {
		cases = append(cases, opCase{c.sym, cmp(c.f, true), false}, opCase{c.sym, cmp(c.f, false), true})
	}
	for _, c := range cases {
		g := G.NewGraph()
		an := G.NewVector(g, dt, G.WithShape(n), G.WithName("a"))
		bn := G.NewVector(g, dt, G.WithShape(n), G.WithName("b"))
		node, err := c.build(an, bn)
		if err != nil {
			t.Fatal(err)
		}
		av := tensor.New(tensor.WithShape(n), tensor.WithBacking(append([]T(nil), a...)))
		bv := tensor.New(tensor.WithShape(n), tensor.WithBacking(append([]T(nil), b...)))
		var want any
		if c.sym == "÷" {
			pre := tensor.New(tensor.Of(dt), tensor.WithShape(n))
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
		ops := []kernels.BinaryOp{op}
		if c.sym == "÷" { // scalar ÷ scalar runs the scalar operator: the same rule
			sop, _ := kernels.BinaryOpFor(c.sym, true)
			ops = append(ops, sop)
		}
		l := kernels.Contiguous()
		name := fmt.Sprintf("%s %s", c.sym, node.Op())
		for _, op := range ops {
			if c.bools {
				out := m.alloc(n)
				m.launch("compare_"+sfx, kernels.Int(int64(op)), p(out), p(putIntegers(m, a)), p(putIntegers(m, b)), kernels.Int(n), kernels.LayoutArg(l))
				for i, v := range out.Data() {
					if (v == 1) != want.([]bool)[i] || v > 1 {
						t.Fatalf("compare_%s %s: element %d (%d, %d) is %d, want %v", sfx, name, i, a[i], b[i], v, want.([]bool)[i])
					}
				}
				m.exactly()
				continue
			}
			out := m.alloc(size * n)
			m.launch("binary_"+sfx, kernels.Int(int64(op)), p(out), p(putIntegers(m, a)), p(putIntegers(m, b)), kernels.Int(n), kernels.LayoutArg(l))
			got := getIntegers[T](out)
			for i, w := range want.([]T) {
				if got[i] != w {
					t.Fatalf("binary_%s %s (%v): element %d (%d, %d) is %d, want %d", sfx, name, op, i, a[i], b[i], got[i], w)
				}
			}
			m.exactly()
		}
	}
}

// intReduce: reduce (one run of axes) and reduce_axes (any set) of
// integers against gorgonia's sumOp and maxOp Do, sums that wrap included.
func intReduce[T integer](t TB, m *Mem) {
	dt, sfx, size, _, hi := intInfo[T]()
	rng := rand.New(rand.NewSource(29))
	shape := []int{3, 5, 4}
	x := make([]T, prod(shape))
	for i := range x {
		x[i] = T(rng.Intn(2001) - 1000)
	}
	x[0], x[20], x[40] = hi, 7, hi // axis 0 of column 0 wraps
	for _, along := range [][]int{{0}, {1}, {2}, {0, 2}, {0, 1, 2}} {
		for _, isMax := range []bool{false, true} {
			g := G.NewGraph()
			xn := G.NewTensor(g, dt, len(shape), G.WithShape(shape...), G.WithName("x"))
			build, op := G.Sum, kernels.ReduceSum
			if isMax {
				build, op = G.Max, kernels.ReduceMax
			}
			node, err := build(xn, along...)
			if err != nil {
				t.Fatal(err)
			}
			wv := do(t, node.Op(), tensor.New(tensor.WithShape(shape...), tensor.WithBacking(append([]T(nil), x...))))
			var want []T
			switch v := wv.Data().(type) {
			case []T:
				want = v
			case T:
				want = []T{v}
			default:
				t.Fatalf("%v gave %T", node.Op(), v)
			}
			name := fmt.Sprintf("%v over %v", op, along)
			xb := putIntegers(m, x)
			out := m.alloc(size * len(want))
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
				m.launch("reduce_"+sfx, kernels.Int(int64(op)), p(out), p(xb), kernels.Int(outer), kernels.Int(k), kernels.Int(inner))
				name = "reduce_" + sfx + " " + name
			} else {
				l, rows, k := axesLayout(shape, along)
				m.launch("reduce_axes_"+sfx, kernels.Int(int64(op)), p(out), p(xb), kernels.Int(rows), kernels.Int(k),
					kernels.Int(int64(len(shape)-len(along))), kernels.LayoutArg(l))
				name = "reduce_axes_" + sfx + " " + name
			}
			if got := getIntegers[T](out); !slices.Equal(got, want) {
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
