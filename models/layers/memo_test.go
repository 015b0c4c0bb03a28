package layers

import (
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestShapeMemoNoAllocation: once an op has checked one set of operand shapes, checking them
// again (every training step does) builds nothing, and neither does the rest of the call, for
// the ops of the bundled CNNs.
func TestShapeMemoNoAllocation(t *testing.T) {
	bn, err := NewBatchNormOp(4, 8, 0.1, 1e-5)
	require.NoError(t, err)
	p := Square(1, 1).norm()
	x, w, y := sh(2, 8, 6, 6), sh(5, 8, 3, 3), sh(2, 5, 6, 6)
	cases := []struct {
		op     kernel
		shapes []tensor.Shape
	}{
		{&convOp{kind: convForward, p: p}, []tensor.Shape{x, w}},
		{&convOp{kind: convData, p: p, h: 6, w: 6}, []tensor.Shape{w, y}},
		{&convOp{kind: convFilter, p: p, kh: 3, kw: 3}, []tensor.Shape{x, y}},
		{bn, []tensor.Shape{x, sh(8), sh(8)}},
		{&bnGradOp{bn: bn}, []tensor.Shape{x, sh(8), x}},
		{&bnGradOp{bn: bn, wrtGamma: true}, []tensor.Shape{x, x}},
		{&channelSumOp{dims: 4}, []tensor.Shape{x}},
		{&maxPoolOp{g: poolGeom{2, 2, 2, 2, 0, 0}}, []tensor.Shape{x}},
		{&maxPoolGradOp{g: poolGeom{2, 2, 2, 2, 0, 0}}, []tensor.Shape{x, sh(2, 8, 3, 3)}},
		{&reluOp{}, []tensor.Shape{x}},
		{&reluGradOp{}, []tensor.Shape{x, x}},
		{&avgPoolOp{g: poolGeom{2, 2, 2, 2, 0, 0}}, []tensor.Shape{x}},
		{&avgPoolGradOp{g: poolGeom{2, 2, 2, 2, 0, 0}, h: 6, w: 6}, []tensor.Shape{sh(2, 8, 3, 3)}},
		{&globalAvgPoolOp{}, []tensor.Shape{x}},
		{&globalAvgPoolGradOp{h: 6, w: 6}, []tensor.Shape{sh(2, 8)}},
	}
	rng := rand.New(rand.NewSource(1))
	for _, c := range cases {
		in := make([]G.Value, len(c.shapes))
		for i, s := range c.shapes {
			in[i] = denseAs(tensor.Float32, s, randData(rng, s.TotalSize()))
		}
		want, err := c.op.outShape(c.shapes)
		require.NoError(t, err, "%v", c.op)
		got, err := checkShapes(c.op, in)
		require.NoError(t, err, "%v", c.op)
		require.Equal(t, []int(want), []int(got.out), "%v", c.op)
		allocs := testing.AllocsPerRun(10, func() {
			if _, err := checkShapes(c.op, in); err != nil {
				t.Fatal(err)
			}
		})
		require.Zero(t, allocs, "%v: allocations to check the same shapes again", c.op)
		// The whole call: check, kernel and its (serial, at this size) parallel body.
		out := denseAs(tensor.Float32, want, make([]float64, want.TotalSize()))
		ws := make([]byte, c.op.wsBytes(tensor.Float32, c.shapes))
		run := func() {
			if err := doWorkspace(c.op, out, ws, in, false); err != nil {
				t.Fatal(err)
			}
		}
		run()
		require.Zero(t, testing.AllocsPerRun(10, run), "%v: allocations of a call", c.op)
	}
}

// TestShapeMemoFollowsShapes: the memo answers only for exactly the shapes and dtype it
// checked; other operands are checked afresh, errors included.
func TestShapeMemoFollowsShapes(t *testing.T) {
	op := &maxPoolOp{g: poolGeom{2, 2, 2, 2, 0, 0}}
	rng := rand.New(rand.NewSource(2))
	run := func(dt tensor.Dtype, xs, ys tensor.Shape) error {
		x := denseAs(dt, xs, randData(rng, xs.TotalSize()))
		out := denseAs(dt, ys, make([]float64, ys.TotalSize()))
		return op.DoWorkspace(out, nil, x)
	}
	require.NoError(t, run(tensor.Float32, sh(2, 3, 4, 4), sh(2, 3, 2, 2)))
	require.ErrorContains(t, run(tensor.Float32, sh(1, 3, 4, 4), sh(2, 3, 2, 2)), "output shape")
	require.NoError(t, run(tensor.Float32, sh(1, 3, 4, 4), sh(1, 3, 2, 2)))
	require.NoError(t, run(tensor.Float64, sh(1, 3, 4, 4), sh(1, 3, 2, 2)))
	require.ErrorContains(t, run(tensor.Float32, sh(1, 3, 1, 1), sh(1, 3, 2, 2)), "does not fit")
	require.NoError(t, run(tensor.Float32, sh(2, 3, 4, 4), sh(2, 3, 2, 2)))
	// A vector and a matrix that tensor's Shape.Eq calls equal are still different shapes.
	relu := &reluOp{}
	c, err := checkShapes(relu, []G.Value{denseAs(tensor.Float32, sh(3, 1), make([]float64, 3))})
	require.NoError(t, err)
	c2, err := checkShapes(relu, []G.Value{denseAs(tensor.Float32, sh(3), make([]float64, 3))})
	require.NoError(t, err)
	require.Equal(t, []int{3, 1}, []int(c.out))
	require.Equal(t, []int{3}, []int(c2.out))
}
