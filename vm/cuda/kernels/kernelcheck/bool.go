package kernelcheck

import (
	"fmt"
	"math/rand"
	"slices"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

// TestBoolOps: the Bool kernels against gorgonia's ops on Bool tensors, byte
// for byte: a transpose (copy_u8 through the layout the dispatch builds),
// == and != with bool and retSame results (compare_u8), a zero fill and a
// DiagFlat (fill_u8, then copy_u8 along the diagonal), and ByIndices
// (g_byindices_u8).
func boolOps(t TB, m *Mem) {
	rng := rand.New(rand.NewSource(30))
	boolTranspose(t, m, rng)
	boolCompare(t, m, rng)
	boolDiagFlat(t, m, rng)
	boolByIndices(t, m, rng)
}

func randBools(rng *rand.Rand, n int) []bool {
	v := make([]bool, n)
	for i := range v {
		v[i] = rng.Intn(2) == 1
	}
	return v
}

func boolDense(v []bool, shape ...int) *tensor.Dense {
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(append([]bool(nil), v...)))
}

func boolNode(g *G.ExprGraph, name string, shape ...int) *G.Node {
	return G.NewTensor(g, tensor.Bool, len(shape), G.WithShape(shape...), G.WithName(name))
}

// boolsOf reads a CPU op's Bool result in row-major order.
func boolsOf(t TB, v G.Value) []bool {
	t.Helper()
	d, ok := v.(*tensor.Dense)
	if !ok {
		t.Fatalf("CPU op returned %T", v)
	}
	if d.RequiresIterator() {
		d = d.Materialize().(*tensor.Dense)
	}
	return append([]bool(nil), d.Data().([]bool)...)
}

func putBools(m *Mem, v []bool) *Buffer {
	b := m.alloc(len(v))
	for i, x := range v {
		if x {
			b.Data()[i] = 1
		}
	}
	return b
}

// sameBools compares a kernel's bytes with the CPU's bools: a byte other
// than 0 or 1 is wrong too (Go reads it as neither).
func sameBools(t TB, m *Mem, name string, got []byte, want []bool) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d bytes, want %d", name, len(got), len(want))
	}
	for i, w := range want {
		if got[i] > 1 || (got[i] == 1) != w {
			t.Fatalf("%s: element %d is byte %d, want %v", name, i, got[i], w)
		}
	}
	m.exactly()
}

func boolTranspose(t TB, m *Mem, rng *rand.Rand) {
	shape, perm := []int{2, 3, 5}, []int{2, 0, 1}
	x := randBools(rng, prod(shape))
	g := G.NewGraph()
	node := must(t)(G.Transpose(boolNode(g, "x", shape...), perm...))
	want := boolsOf(t, do(t, node.Op(), boolDense(x, shape...)))
	out := make([]int, len(perm))
	for i, a := range perm {
		out[i] = shape[a]
	}
	in := strides(shape)
	l := kernels.Layout{Rank: len(out), Dim: dims(out), Out: strides(out)}
	for i, a := range perm {
		l.A[i], l.Rep[i] = in[a], 1
	}
	y := m.alloc(len(x))
	m.launch("copy_u8", p(y), p(putBools(m, x)), kernels.Int(int64(len(x))), kernels.LayoutArg(l))
	sameBools(t, m, "copy_u8 transpose", y.Data(), want)
}

func boolCompare(t TB, m *Mem, rng *rand.Rand) {
	const n = 37
	a, b := randBools(rng, n), randBools(rng, n)
	for _, c := range []struct {
		sym string
		f   func(x, y *G.Node, same bool) (*G.Node, error)
	}{{"==", G.Eq}, {"!=", G.Ne}} {
		for _, same := range []bool{false, true} {
			g := G.NewGraph()
			node := must(t)(c.f(boolNode(g, "a", n), boolNode(g, "b", n), same))
			want := boolsOf(t, do(t, node.Op(), boolDense(a, n), boolDense(b, n)))
			op, _ := kernels.BinaryOpFor(c.sym, false)
			y := m.alloc(n)
			m.launch("compare_u8", kernels.Int(int64(op)), p(y), p(putBools(m, a)), p(putBools(m, b)), kernels.Int(n), kernels.LayoutArg(kernels.Contiguous()))
			sameBools(t, m, fmt.Sprintf("compare_u8 %s retSame=%t", c.sym, same), y.Data(), want)
		}
	}
}

func boolDiagFlat(t TB, m *Mem, rng *rand.Rand) {
	const n = 6
	x := randBools(rng, n)
	x[0] = true
	g := G.NewGraph()
	node := must(t)(G.DiagFlat(boolNode(g, "x", n)))
	want := boolsOf(t, do(t, node.Op(), boolDense(x, n)))
	y := m.alloc(n * n)
	for i := range y.Data() {
		y.Data()[i] = 7 // every byte must be written
	}
	m.launch("fill_u8", p(y), kernels.Float(0), kernels.Int(n*n))
	l := kernels.Layout{Rank: 1}
	l.Dim[0], l.Out[0], l.A[0], l.Rep[0] = n, n+1, 1, 1
	m.launch("copy_u8", p(y), p(putBools(m, x)), kernels.Int(n), kernels.LayoutArg(l))
	sameBools(t, m, "fill_u8, copy_u8 diagonal", y.Data(), want)
	ones := m.alloc(5)
	m.launch("fill_u8", p(ones), kernels.Float(1), kernels.Int(5))
	sameBools(t, m, "fill_u8 true", ones.Data(), slices.Repeat([]bool{true}, 5))
}

func boolByIndices(t TB, m *Mem, rng *rand.Rand) {
	for _, c := range []struct {
		shape []int
		axis  int
		idx   []int
	}{{[]int{5, 4}, 0, []int{3, 1, 3, 0}}, {[]int{2, 3, 4}, 1, []int{2, 0}}} {
		x := randBools(rng, prod(c.shape))
		g := G.NewGraph()
		in := G.NewVector(g, tensor.Int, G.WithShape(len(c.idx)), G.WithName("idx"))
		y := must(t)(G.ByIndices(boolNode(g, "x", c.shape...), in, c.axis))
		iv := tensor.New(tensor.WithShape(len(c.idx)), tensor.WithBacking(append([]int(nil), c.idx...)))
		want := boolsOf(t, do(t, y.Op(), boolDense(x, c.shape...), iv))
		args, err := kernels.ByIndicesArgs(c.shape, y.Shape(), c.axis, false)
		if err != nil {
			t.Fatal(err)
		}
		out := m.alloc(len(want))
		m.launch("g_byindices_u8", append([]kernels.Arg{p(out), p(putBools(m, x)), p(putInts(m, c.idx))}, args...)...)
		sameBools(t, m, fmt.Sprintf("g_byindices_u8 %v axis %d", c.shape, c.axis), out.Data(), want)
	}
}
