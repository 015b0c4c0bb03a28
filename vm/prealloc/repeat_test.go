package prealloc

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// repeatOps are gorgonia's repeatOps along axes 0, 1 and 2, as a sum's
// gradient makes them.
func repeatOps(t *testing.T, dt tensor.Dtype) map[int]G.Op {
	g := G.NewGraph()
	x := input(g, dt, "x", 3, 4, 5)
	gradOf(t, G.Must(G.Sum(x, 0)), x)
	gradOf(t, G.Must(G.Sum(x, 1)), x)
	gradOf(t, G.Must(G.Sum(x, 2)), x)
	ops := map[int]G.Op{}
	for _, n := range findOps(g, "*gorgonia.repeatOp") {
		along, err := intField(n.Op(), "along")
		require.NoError(t, err)
		ops[along] = n.Op()
	}
	require.Len(t, ops, 3)
	return ops
}

// TestRepeatReplay: the replay of repeatOp's UsePreallocDo gives Do's bits, with no
// allocation, for the repeats a loss's gradients make (a mean's (1, n) bias row
// broadcast to (b, n) along 0, a scalar-like (1) to (b), a column (b, 1) to (b, n)
// along 1) and for broadcasts along other axes, scalar-like inputs and a count of 1.
func TestRepeatReplay(t *testing.T) {
	cases := []struct {
		shape      []int
		along, rep int
	}{
		{[]int{1, 10}, 0, 64}, // Repeat0 of a bias row (the mean's gradient)
		{[]int{1}, 0, 64},     // Repeat0 of a scalar-like (1)
		{[]int{64, 1}, 1, 10}, // Repeat1 of a column (the sums' gradient)
		{[]int{3, 4}, 0, 2},
		{[]int{3, 4}, 1, 3},
		{[]int{3, 4}, 1, 1},
		{[]int{1, 1}, 0, 5},
		{[]int{5}, 0, 3},
		{[]int{4}, 1, 3},
		{[]int{2, 3, 4}, 0, 2},
		{[]int{2, 3, 4}, 1, 2},
		{[]int{2, 3, 4}, 2, 3},
		{[]int{3, 1, 4}, 1, 5},
		{[]int{2, 1, 1}, 2, 4},
	}
	for _, dt := range floats {
		ops := repeatOps(t, dt)
		for _, c := range cases {
			t.Run(fmt.Sprintf("%v/%v/along%d/x%d", dt, c.shape, c.along, c.rep), func(t *testing.T) {
				op := ops[c.along]
				ins := []G.Value{special(filled(dt, c.along+c.rep, c.shape...)), scalarOf(dt, float64(c.rep))}
				want, err := op.Do(cloneAll(t, ins)...)
				require.NoError(t, err)
				f, ok := For(op)
				require.True(t, ok)
				out := poisoned(dt, want.Shape()...)
				require.NoError(t, f(out, cloneAll(t, ins)...))
				requireBits(t, want, out)
				done, err := repeatInto(out, c.along, ins)
				require.NoError(t, err)
				require.True(t, done, "the replay applies")
				require.Zero(t, testing.AllocsPerRun(5, func() { require.NoError(t, f(out, ins...)) }), "allocations per call")
			})
		}
	}
}

// TestRepeatReplayDeclines: where the replay does not apply, the op's own method runs
// (and its errors come back).
func TestRepeatReplayDeclines(t *testing.T) {
	dt := tensor.Float64
	ops := repeatOps(t, dt)
	x := filled(dt, 1, 3, 4)
	cases := []struct {
		name  string
		out   *tensor.Dense
		along int
		ins   []G.Value
	}{
		{"a count of 0", poisoned(dt, 3, 4), 0, []G.Value{x, G.NewF64(0)}},
		{"an int tensor", poisoned(tensor.Int, 6, 4), 0, []G.Value{filled(tensor.Int, 1, 3, 4), G.NewF64(2)}},
		{"out of another shape", poisoned(dt, 4, 6), 0, []G.Value{x, G.NewF64(2)}},
		{"a view", poisoned(dt, 6, 2), 0, []G.Value{sliced(t, x), G.NewF64(2)}},
		{"a scalar", poisoned(dt, 3), 0, []G.Value{G.NewF64(2), G.NewF64(3)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			done, err := repeatInto(c.out, c.along, c.ins)
			require.NoError(t, err)
			require.False(t, done)
		})
	}
	f, ok := For(ops[0])
	require.True(t, ok)
	require.Error(t, f(poisoned(dt, 4, 6), x, G.NewF64(2)), "out of another shape: tensor's check refuses it")
}

func sliced(t *testing.T, x *tensor.Dense) *tensor.Dense {
	v, err := x.Slice(nil, G.S(1, 3))
	require.NoError(t, err)
	return v.(*tensor.Dense)
}
