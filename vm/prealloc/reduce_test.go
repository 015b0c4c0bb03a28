package prealloc

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// axisSets is every non-empty subset of the axes of a d-dimensional
// tensor, in increasing order, plus a few orders gorgonia accepts too.
func axisSets(d int) [][]int {
	var sets [][]int
	for mask := 1; mask < 1<<d; mask++ {
		var s []int
		for i := 0; i < d; i++ {
			if mask&(1<<i) != 0 {
				s = append(s, i)
			}
		}
		sets = append(sets, s)
		if len(s) >= 2 {
			r := make([]int, len(s))
			for i := range s {
				r[i] = s[len(s)-1-i]
			}
			sets = append(sets, r)
		}
	}
	return sets
}

var reduceShapes = [][]int{
	{7}, {3, 5}, {5, 1}, {1, 4}, {2, 3, 4}, {3, 2, 5}, {4, 1, 3},
	{2, 3, 4, 5}, {4, 8, 3, 3}, {3, 2, 2, 4}, {2, 2, 3, 1}, {2, 2, 1, 3}, {2, 3, 2, 3, 2},
}

// TestReduce compares Sum and Max with Do for every axis set of every
// shape above: bit for bit where Do returns, an error where Do panics.
func TestReduce(t *testing.T) {
	kinds := map[string]func(*G.Node, ...int) (*G.Node, error){"Sum": G.Sum, "Max": G.Max}
	for kind, build := range kinds {
		for _, dt := range floats {
			for _, shape := range reduceShapes {
				for _, axes := range axisSets(len(shape)) {
					name := fmt.Sprintf("%s/%v/%v/%v", kind, dt, shape, axes)
					g := G.NewGraph()
					n, err := build(input(g, dt, "x", shape...), axes...)
					if err != nil || n.IsScalar() {
						continue // scalar results are Do's
					}
					t.Run(name, func(t *testing.T) {
						checkReduce(t, n, filled(dt, 1, shape...))
						checkReduce(t, n, special(filled(dt, 2, shape...)))
					})
				}
			}
		}
	}
}

func checkReduce(t *testing.T, n *G.Node, x *tensor.Dense) {
	t.Helper()
	op := n.Op()
	f, ok := For(op)
	require.True(t, ok)
	var want G.Value
	panicked := func() (p bool) {
		defer func() { p = recover() != nil }()
		var err error
		want, err = op.Do(x.Clone().(*tensor.Dense))
		require.NoError(t, err)
		return false
	}()
	out := poisoned(n.Dtype(), n.Shape()...)
	err := f(out, x.Clone().(*tensor.Dense))
	if panicked {
		require.Error(t, err, "Do panics; the Func must fail instead")
		return
	}
	require.NoError(t, err)
	requireBits(t, want, out)
}

// Mean is Sum then a division: its sumOp is checked the same way.
func TestMeanUsesSum(t *testing.T) {
	g := G.NewGraph()
	m := G.Must(G.Mean(input(g, tensor.Float32, "x", 4, 8, 3, 3), 2, 3))
	s := findOp(t, g, "gorgonia.sumOp")
	require.NotNil(t, m)
	checkReduce(t, s, filled(tensor.Float32, 1, 4, 8, 3, 3))
}

// The bug the replay keeps: tensor's middle-axis kernel reads the wrong
// elements, so gorgonia's Sum over the spatial axes of an NCHW tensor is
// not the sum.
func TestSumMiddleAxisBug(t *testing.T) {
	g := G.NewGraph()
	n := G.Must(G.Sum(input(g, tensor.Float64, "x", 2, 3, 4, 4), 2, 3))
	x := tensor.New(tensor.WithShape(2, 3, 4, 4), tensor.WithBacking(make([]float64, 96)))
	for i := range x.Float64s() {
		x.Float64s()[i] = float64(i)
	}
	want, err := n.Op().Do(x.Clone().(*tensor.Dense))
	require.NoError(t, err)
	got := want.(*tensor.Dense).Float64s()
	require.Equal(t, 120.0, got[0], "plane 0: 0+1+...+15")
	require.NotEqual(t, 376.0, got[1], "plane 1 should be 16+...+31; gorgonia sums other elements")
	require.Equal(t, 248.0, got[1], "8+...+23: half of plane 0 and half of plane 1")
	checkReduce(t, n, x)
}

// Do sorts the op's axes in place, and so does the Func.
func TestReduceSortsAxesLikeDo(t *testing.T) {
	mk := func() G.Op {
		g := G.NewGraph()
		return G.Must(G.Sum(input(g, tensor.Float64, "x", 2, 3, 4), 2, 0)).Op()
	}
	a, b := mk(), mk()
	_, err := a.Do(filled(tensor.Float64, 1, 2, 3, 4))
	require.NoError(t, err)
	f, ok := For(b)
	require.True(t, ok)
	require.NoError(t, f(poisoned(tensor.Float64, 3), filled(tensor.Float64, 1, 2, 3, 4)))
	require.Equal(t, fmt.Sprint(a), fmt.Sprint(b))
	require.Equal(t, state(a), state(b))
}

func TestReduceInts(t *testing.T) {
	g := G.NewGraph()
	x := G.NewTensor(g, tensor.Int, 3, G.WithShape(2, 3, 4), G.WithName("x"))
	for _, axes := range axisSets(3) {
		n, err := G.Sum(x, axes...)
		if err != nil || n.IsScalar() {
			continue
		}
		checkReduce(t, n, filled(tensor.Int, 2, 2, 3, 4))
	}
	_ = math.Pi
}

// A middle axis of length 1 after more than one block: tensor's loop reads
// past the slice it cut and Do panics; the Func says so instead.
func TestReduceWhereDoPanics(t *testing.T) {
	g := G.NewGraph()
	n := G.Must(G.Sum(input(g, tensor.Float64, "x", 2, 2, 1, 3), 2))
	require.Panics(t, func() { _, _ = n.Op().Do(filled(tensor.Float64, 1, 2, 2, 1, 3)) })
	f, ok := For(n.Op())
	require.True(t, ok)
	require.ErrorContains(t, f(poisoned(tensor.Float64, 2, 2, 3), filled(tensor.Float64, 1, 2, 2, 1, 3)), "Do panics")
}
