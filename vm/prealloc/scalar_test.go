package prealloc

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// scalarsOf are the values that tell arithmetic conventions apart: signed zeros, NaNs of two
// payloads (one signalling), infinities, tiny, huge and ordinary values.
func scalarsOf(dt tensor.Dtype) []G.Value {
	if dt == tensor.Float32 {
		vs := []float32{0, float32(math.Copysign(0, -1)), 1.5, -3.25, 1e-38, 3e38, float32(math.Inf(1)), float32(math.Inf(-1)),
			math.Float32frombits(0x7fc00011), math.Float32frombits(0xffc00022), math.Float32frombits(0x7f800033)}
		out := make([]G.Value, len(vs))
		for i, v := range vs {
			out[i] = G.NewF32(v)
		}
		return out
	}
	vs := []float64{0, math.Copysign(0, -1), 1.5, -3.25, 1e-308, 1e308, math.Inf(1), math.Inf(-1),
		math.Float64frombits(0x7ff8000000000011), math.Float64frombits(0xfff8000000000022), math.Float64frombits(0x7ff0000000000033)}
	out := make([]G.Value, len(vs))
	for i, v := range vs {
		out[i] = G.NewF64(v)
	}
	return out
}

// scalarBits runs f into fresh bytes and Do, and requires the same bits.
func scalarBits(t *testing.T, op G.Op, ins ...G.Value) {
	t.Helper()
	f, ok := ScalarFor(op)
	require.True(t, ok, "%v", op)
	want, err := op.Do(ins...)
	require.NoError(t, err)
	wb, err := valueLayout(want)
	require.NoError(t, err)
	out := make([]byte, len(wb.data))
	for i := range out {
		out[i] = 0xFF
	}
	done, err := f(out, ins...)
	require.NoError(t, err)
	require.True(t, done, "%v on %v", op, ins)
	if string(out) != string(wb.data) && !(raceEnabled && isNaN(out, want.Dtype()) && isNaN(wb.data, want.Dtype())) {
		t.Fatalf("%v on %v: want %s, got %s", op, ins, elem(wb.data, want.Dtype()), elem(out, want.Dtype()))
	}
}

func TestScalarOps(t *testing.T) {
	for _, dt := range floats {
		vals := scalarsOf(dt)
		g := G.NewGraph()
		a, b := G.NewScalar(g, dt, G.WithName("a")), G.NewScalar(g, dt, G.WithName("b"))
		x := G.NewMatrix(g, dt, G.WithShape(3, 5), G.WithName("x"))
		bins := []*G.Node{G.Must(G.Add(a, b)), G.Must(G.Sub(a, b)), G.Must(G.Mul(a, b)), G.Must(G.Div(a, b)), G.Must(G.Pow(a, b))}
		unas := []*G.Node{G.Must(G.Neg(a)), G.Must(G.Exp(a)), G.Must(G.Log(a)), G.Must(G.Sqrt(a)), G.Must(G.Tanh(a)),
			G.Must(G.Abs(a)), G.Must(G.Square(a)), G.Must(G.Sigmoid(a))}
		t.Run(fmt.Sprintf("%v/binary", dt), func(t *testing.T) {
			for _, n := range bins {
				for _, va := range vals {
					for _, vb := range vals {
						scalarBits(t, n.Op(), va, vb)
					}
				}
			}
		})
		t.Run(fmt.Sprintf("%v/unary", dt), func(t *testing.T) {
			for _, n := range unas {
				for _, v := range vals {
					scalarBits(t, n.Op(), v)
				}
			}
		})
		t.Run(fmt.Sprintf("%v/size", dt), func(t *testing.T) {
			for axis := 0; axis < 2; axis++ {
				scalarBits(t, G.Must(G.SizeOf(axis, x)).Op(), filled(dt, 1, 3, 5))
			}
		})
		t.Run(fmt.Sprintf("%v/declined", dt), func(t *testing.T) {
			f, ok := ScalarFor(G.Must(G.Add(a, b)).Op())
			require.True(t, ok)
			other := G.Value(G.NewF64(1))
			if dt == tensor.Float64 {
				other = G.NewF32(1)
			}
			done, err := f(make([]byte, 8), vals[2], other)
			require.NoError(t, err)
			require.False(t, done, "mixed dtypes are Do's to refuse")
			done, err = f(make([]byte, 2), vals[2], vals[3])
			require.NoError(t, err)
			require.False(t, done, "an out of the wrong size")
			_, ok = ScalarFor(G.Must(G.Max(x)).Op())
			require.False(t, ok, "reductions other than sums are not handled")
			_, ok = ScalarFor(G.Must(G.Gt(a, b, true)).Op())
			require.False(t, ok, "comparisons are not handled")
		})
	}
}

// TestScalarOpsNoAllocation: a scalar op into caller memory allocates nothing (Do makes a new
// scalar and gorgonia's type checks allocate, every call).
func TestScalarOpsNoAllocation(t *testing.T) {
	g := G.NewGraph()
	a, b := G.NewScalar(g, tensor.Float32, G.WithName("a")), G.NewScalar(g, tensor.Float32, G.WithName("b"))
	x := G.NewMatrix(g, tensor.Float32, G.WithShape(3, 5), G.WithName("x"))
	out := make([]byte, 4)
	va, vb := G.Value(G.NewF32(3)), G.Value(G.NewF32(4))
	xv := G.Value(filled(tensor.Float32, 1, 3, 5))
	for _, c := range []struct {
		n   *G.Node
		ins []G.Value
	}{{G.Must(G.Div(a, b)), []G.Value{va, vb}}, {G.Must(G.Neg(a)), []G.Value{va}}, {G.Must(G.SizeOf(1, x)), []G.Value{xv}},
		{G.Must(G.Sum(x)), []G.Value{xv}}} {
		f, ok := ScalarFor(c.n.Op())
		require.True(t, ok)
		require.Zero(t, testing.AllocsPerRun(10, func() {
			if done, err := f(out, c.ins...); !done || err != nil {
				t.Fatal(done, err)
			}
		}), "%v", c.n.Op())
	}

}

// TestScalarSum: a sum over every axis into caller memory gives Do's bits: signed zeros,
// infinities, and NaNs of several payloads in one input (the first NaN's survives), for the
// sums a loss takes (Σ[0] of a batch's per-example losses, a mean's sum of a vector or a
// matrix) and larger ones.
func TestScalarSum(t *testing.T) {
	for _, dt := range floats {
		for _, c := range []struct {
			shape []int
			along []int
		}{
			{[]int{64}, []int{0}},
			{[]int{64}, nil},
			{[]int{64, 10}, nil},
			{[]int{64, 10}, []int{0, 1}},
			{[]int{2, 3, 4}, nil},
			{[]int{1}, nil},
			{[]int{1000}, nil},
		} {
			t.Run(fmt.Sprintf("%v/%v/%v", dt, c.shape, c.along), func(t *testing.T) {
				g := G.NewGraph()
				n := G.Must(G.Sum(input(g, dt, "x", c.shape...), c.along...))
				require.True(t, n.IsScalar())
				plain := filled(dt, 3, c.shape...)
				scalarBits(t, n.Op(), plain)
				nans := special(filled(dt, 4, c.shape...))
				scalarBits(t, n.Op(), nans)
				repayNaNs(nans)
				scalarBits(t, n.Op(), nans)
			})
		}
	}
}

// TestScalarSumDeclines: views (Do materialises them) and sums of another kind are Do's.
func TestScalarSumDeclines(t *testing.T) {
	g := G.NewGraph()
	x := filled(tensor.Float64, 1, 4, 6)
	n := G.Must(G.Sum(input(g, tensor.Float64, "x", 4, 6)))
	f, ok := ScalarFor(n.Op())
	require.True(t, ok)
	v, err := x.Slice(nil, G.S(1, 3))
	require.NoError(t, err)
	done, err := f(make([]byte, 8), v)
	require.NoError(t, err)
	require.False(t, done, "a view")
	done, err = f(make([]byte, 4), x)
	require.NoError(t, err)
	require.False(t, done, "an out of the wrong size")
	done, err = f(make([]byte, 8), filled(tensor.Float64, 1, 4, 6, 2))
	require.NoError(t, err)
	require.False(t, done, "a tensor with an axis the op does not name")
}
