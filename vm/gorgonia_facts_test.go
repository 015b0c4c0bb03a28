package vm

// Facts about gorgonia v0.9.18 that the machine relies on, each checked here
// (they were first recorded in the project's GORGONIA-NOTES).

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/vm/prealloc"
)

func filled(shape ...int) *tensor.Dense {
	n := tensor.Shape(shape).TotalSize()
	d := make([]float64, n)
	for i := range d {
		d[i] = math.Sin(float64(i)*0.37) * 3
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(d))
}

// poisoned is a tensor of NaNs: what reused device memory may hold.
func poisoned(shape ...int) *tensor.Dense {
	t := filled(shape...)
	for i := range t.Raw {
		t.Raw[i] = 0xFF
	}
	return t
}

// opOf builds a graph node with the given constructor and returns its op
// and operand values.
func opOf(t *testing.T, build func(g *G.ExprGraph) *G.Node) (G.Op, []G.Value, tensor.Shape) {
	t.Helper()
	g := G.NewGraph()
	n := build(g)
	var ins []G.Value
	it := g.From(n.ID())
	for it.Next() {
		c := it.Node().(*G.Node)
		ins = append(ins, c.Value())
	}
	return n.Op(), ins, n.Shape()
}

func in(g *G.ExprGraph, name string, shape ...int) *G.Node {
	return G.NewTensor(g, tensor.Float64, len(shape), G.WithShape(shape...), G.WithName(name), G.WithValue(filled(shape...)))
}

// TestPreallocSafeOps: every op the machine runs with UsePreallocDo writes
// its whole result into the tensor it is given, whatever that held, and
// matches Do bit for bit.
func TestPreallocSafeOps(t *testing.T) {
	cases := map[string]func(g *G.ExprGraph) *G.Node{
		"gorgonia.linAlgBinOp": func(g *G.ExprGraph) *G.Node { return G.Must(G.Mul(in(g, "a", 5, 7), in(g, "b", 7, 3))) },
		"gorgonia.elemBinOp":   func(g *G.ExprGraph) *G.Node { return G.Must(G.Add(in(g, "a", 4, 6), in(g, "b", 4, 6))) },
		"gorgonia.im2colOp": func(g *G.ExprGraph) *G.Node {
			return G.Must(G.Im2Col(in(g, "x", 2, 3, 6, 6), tensor.Shape{3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}))
		},
		"*gorgonia.maxPoolOp": func(g *G.ExprGraph) *G.Node {
			return G.Must(G.MaxPool2D(in(g, "x", 2, 3, 6, 6), tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}))
		},
	}
	for name, build := range cases {
		t.Run(name, func(t *testing.T) {
			op, ins, shape := opOf(t, build)
			require.Equal(t, name, fmt.Sprintf("%T", op))
			_, ok := prealloc.For(op)
			require.True(t, ok, "the machine runs it into device memory")
			want, err := op.Do(ins...)
			require.NoError(t, err)
			dst := poisoned(shape...)
			got, err := op.(G.UsePreallocDoer).UsePreallocDo(dst, ins...)
			require.NoError(t, err)
			require.Same(t, dst, got, "UsePreallocDo returns the tensor it was given")
			require.Equal(t, want.(*tensor.Dense).Raw, dst.Raw)
		})
	}
}

// TestBatchNormPreallocQuirk: BatchNormOp.UsePreallocDo normalises the
// tensor it is given in place rather than its input, so package prealloc
// copies the input there first.
func TestBatchNormPreallocQuirk(t *testing.T) {
	g := G.NewGraph()
	x := in(g, "x", 4, 2, 3, 3)
	scale := G.NewTensor(g, tensor.Float64, 4, G.WithShape(1, 2, 1, 1), G.WithName("s"), G.WithInit(G.Ones()))
	bias := G.NewTensor(g, tensor.Float64, 4, G.WithShape(1, 2, 1, 1), G.WithName("b"), G.WithInit(G.Zeroes()))
	_, _, _, op, err := G.BatchNorm(x, scale, bias, 0.1, 1e-5)
	require.NoError(t, err)
	want, err := op.Do(x.Value())
	require.NoError(t, err)
	dst := poisoned(4, 2, 3, 3)
	_, err = op.UsePreallocDo(dst, x.Value())
	require.NoError(t, err)
	require.NotEqual(t, want.(*tensor.Dense).Raw, dst.Raw, "UsePreallocDo ignores its input")
}

// TestReshapeAliasesItsInput: reshape's Do returns a view of its operand's
// memory, so the machine copies every result into the output's own block
// rather than keeping what Do returned.
func TestReshapeAliasesItsInput(t *testing.T) {
	op, ins, _ := opOf(t, func(g *G.ExprGraph) *G.Node { return G.Must(G.Reshape(in(g, "x", 4, 6), tensor.Shape{6, 4})) })
	out, err := op.Do(ins...)
	require.NoError(t, err)
	a, err := rawBytes(out)
	require.NoError(t, err)
	b, err := rawBytes(ins[0])
	require.NoError(t, err)
	require.True(t, sameMemory(a, b))
}

// TestScalarResults: reductions to a scalar return gorgonia's scalar value
// types, not 0-d tensors; the machine keeps them in device memory as such.
func TestScalarResults(t *testing.T) {
	op, ins, _ := opOf(t, func(g *G.ExprGraph) *G.Node { return G.Must(G.Sum(in(g, "x", 3, 4))) })
	out, err := op.Do(ins...)
	require.NoError(t, err)
	_, isF64 := out.(*G.F64)
	require.True(t, isF64, "%T", out)
	k, err := kindOf(out)
	require.NoError(t, err)
	require.Equal(t, kindScalar, k)
	b := make([]byte, 8)
	v, err := scalarOver(b, tensor.Float64)
	require.NoError(t, err)
	*v.(*G.F64) = *out.(*G.F64)
	raw, err := rawBytes(v)
	require.NoError(t, err)
	require.True(t, sameMemory(raw, b), "the scalar lives in the given bytes")
}

// TestSortIsRootsFirst: gorgonia.Sort lists roots (the cost side) first,
// so execution order is its reverse.
func TestSortIsRootsFirst(t *testing.T) {
	g := G.NewGraph()
	x := in(g, "x", 2, 2)
	y := G.Must(G.Square(x))
	z := G.Must(G.Sum(y))
	sorted, err := G.Sort(g)
	require.NoError(t, err)
	require.Same(t, z, sorted[0])
	require.Same(t, x, sorted[len(sorted)-1])
}
