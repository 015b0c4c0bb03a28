package prealloc

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func TestTranspose(t *testing.T) {
	cases := []struct {
		shape   []int
		pattern []int
	}{
		{[]int{3, 5}, nil},
		{[]int{1, 7}, nil},
		{[]int{2, 3, 4}, []int{1, 0, 2}},
		{[]int{2, 3, 4}, []int{2, 0, 1}},
		{[]int{2, 3, 4}, []int{0, 2, 1}},
		{[]int{2, 3, 4, 5}, []int{0, 2, 3, 1}}, // NCHW -> NHWC
		{[]int{2, 3, 4, 5}, []int{0, 3, 1, 2}},
		{[]int{2, 3, 4, 5}, []int{3, 2, 1, 0}},
		{[]int{2, 1, 4, 1}, []int{1, 3, 0, 2}},
	}
	for _, dt := range floats {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%v/%v/%v", dt, c.shape, c.pattern), func(t *testing.T) {
				g := G.NewGraph()
				n := G.Must(G.Transpose(input(g, dt, "x", c.shape...), c.pattern...))
				require.Equal(t, "gorgonia.transposeOp", fmt.Sprintf("%T", n.Op()))
				checkNode(t, n, 1)
			})
		}
	}
}

// Conv2d's forward and backward passes are where transposes come from.
func TestTransposeInConv(t *testing.T) {
	for _, dt := range floats {
		g := G.NewGraph()
		x := input(g, dt, "x", 2, 3, 6, 6)
		w := input(g, dt, "w", 4, 3, 3, 3)
		y := G.Must(G.Conv2d(x, w, tensor.Shape{3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}))
		gradOf(t, y, x, w)
		ts := findOps(g, "gorgonia.transposeOp")
		require.GreaterOrEqual(t, len(ts), 2)
		for i, n := range ts {
			t.Run(fmt.Sprintf("%v/%d/%v", dt, i, n.Op()), func(t *testing.T) { checkNode(t, n, i) })
		}
	}
}

func TestConcat(t *testing.T) {
	cases := []struct {
		axis   int
		shapes [][]int
	}{
		{0, [][]int{{2, 3}, {4, 3}}},
		{1, [][]int{{2, 3}, {2, 1}, {2, 5}}},
		{0, [][]int{{3}, {5}}},
		{1, [][]int{{2, 3, 4}, {2, 2, 4}}},
		{2, [][]int{{2, 3, 4}, {2, 3, 1}}},
		{1, [][]int{{2, 3, 2, 2}, {2, 5, 2, 2}, {2, 1, 2, 2}}}, // DenseNet's channel concat
	}
	for _, dt := range floats {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%v/%d/%v", dt, c.axis, c.shapes), func(t *testing.T) {
				g := G.NewGraph()
				var xs []*G.Node
				for i, s := range c.shapes {
					xs = append(xs, input(g, dt, fmt.Sprintf("x%d", i), s...))
				}
				n := G.Must(G.Concat(c.axis, xs...))
				require.Equal(t, "gorgonia.concatOp", fmt.Sprintf("%T", n.Op()))
				checkNode(t, n, 2)
			})
		}
	}
	t.Run("one input", func(t *testing.T) {
		g := G.NewGraph()
		x := input(g, tensor.Float64, "x", 3, 4)
		op := G.Must(G.Concat(1, x, x)).Op()
		ins := []G.Value{filled(tensor.Float64, 1, 3, 4)}
		runBoth(t, op, ins, tensor.Float64, tensor.Shape{3, 4})
	})
}

func TestSlice(t *testing.T) {
	cases := []struct {
		shape  []int
		slices []tensor.Slice
	}{
		{[]int{5, 4}, []tensor.Slice{G.S(1)}},
		{[]int{5, 4}, []tensor.Slice{G.S(1, 4)}},
		{[]int{5, 4}, []tensor.Slice{G.S(0, 5, 2)}}, // tensor rounds axis 0 down: 2 rows, not 3
		{[]int{5, 4}, []tensor.Slice{nil, G.S(1, 3)}},
		{[]int{5, 4}, []tensor.Slice{nil, G.S(2)}},
		{[]int{5, 4}, []tensor.Slice{nil, G.S(0, 4, 2)}},
		{[]int{3, 4, 5}, []tensor.Slice{nil, G.S(1, 3)}},
		{[]int{3, 4, 5}, []tensor.Slice{nil, nil, G.S(4)}},
		{[]int{3, 4, 5}, []tensor.Slice{G.S(2), G.S(1, 3)}},
		{[]int{2, 3, 4, 5}, []tensor.Slice{nil, G.S(1, 3), nil, G.S(1, 5, 2)}},
		{[]int{64, 32, 7, 7}, []tensor.Slice{nil, G.S(0, 16)}},
		{[]int{64, 32, 7, 7}, []tensor.Slice{nil, G.S(16, 32)}},
		{[]int{3, 4, 5}, []tensor.Slice{nil, nil, G.S(0, 5)}},
		{[]int{1, 4}, []tensor.Slice{nil, G.S(1, 3)}},
		{[]int{4, 1}, []tensor.Slice{G.S(1, 3)}},
	}
	for _, dt := range floats {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%v/%v/%v", dt, c.shape, c.slices), func(t *testing.T) {
				g := G.NewGraph()
				n := G.Must(G.Slice(input(g, dt, "x", c.shape...), c.slices...))
				// G.Slice chains one sliceOp per sliced axis: check each.
				ops := findOps(g, "*gorgonia.sliceOp")
				require.NotEmpty(t, ops)
				for _, s := range ops {
					checkNode(t, s, 3)
				}
				_ = n
			})
		}
	}
}

// A step that does not divide the range, along an axis other than the
// first: the graph's shape (tensor.Shape.S, rounding down) is smaller than
// Do's result (tensor's AP.S rounds up there), so no out can hold it.
func TestSliceStepMismatch(t *testing.T) {
	g := G.NewGraph()
	n := G.Must(G.Slice(input(g, tensor.Float64, "x", 3, 5), nil, G.S(0, 5, 2)))
	require.Equal(t, tensor.Shape{3, 2}, n.Shape())
	ins := inputsOf(n, 1)
	want, err := n.Op().Do(ins...)
	require.NoError(t, err)
	require.Equal(t, tensor.Shape{3, 3}, want.Shape())
	f, ok := For(n.Op())
	require.True(t, ok)
	require.Error(t, f(poisoned(tensor.Float64, 3, 2), ins...))
}

func TestSliceIncr(t *testing.T) {
	cases := []struct {
		shape  []int
		slices []tensor.Slice
	}{
		{[]int{5, 4}, []tensor.Slice{G.S(1)}},
		{[]int{5, 4}, []tensor.Slice{G.S(1, 4)}},
		{[]int{5, 4}, []tensor.Slice{nil, G.S(0, 4, 2)}},
		{[]int{3, 4, 5}, []tensor.Slice{nil, G.S(1, 3)}},
		{[]int{2, 3, 4, 5}, []tensor.Slice{nil, G.S(1, 3)}},
	}
	for _, dt := range floats {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%v/%v/%v", dt, c.shape, c.slices), func(t *testing.T) {
				g := G.NewGraph()
				x := input(g, dt, "x", c.shape...)
				n := G.Must(G.Slice(x, c.slices...))
				if n.IsScalar() {
					n = G.Must(G.Mul(n, n))
				}
				gradOf(t, n, x)
				for _, s := range findOps(g, "gorgonia.sliceIncrOp") {
					checkNode(t, s, 4)
				}
			})
		}
	}
	t.Run("scalar increment", func(t *testing.T) {
		g := G.NewGraph()
		x := input(g, tensor.Float64, "x", 5, 4)
		s := G.Must(G.Slice(x, G.S(2), G.S(1)))
		gradOf(t, G.Must(G.Mul(s, s)), x)
		n := findOp(t, g, "gorgonia.sliceIncrOp")
		runBoth(t, n.Op(), []G.Value{filled(tensor.Float64, 1, 5, 4), G.NewF64(2.5)}, tensor.Float64, tensor.Shape{5, 4})
	})
}

func TestReshape(t *testing.T) {
	for _, dt := range floats {
		g := G.NewGraph()
		n := G.Must(G.Reshape(input(g, dt, "x", 4, 8, 6, 6), tensor.Shape{4, 288}))
		checkNode(t, n, 5)
		// A transposed view as input: the copy is in its logical order.
		v := filled(dt, 3, 288, 4)
		require.NoError(t, v.T())
		runBoth(t, n.Op(), []G.Value{v}, dt, tensor.Shape{4, 288})
	}
}

func TestUpsample(t *testing.T) {
	for _, dt := range floats {
		for _, scale := range []int{1, 2, 3} {
			t.Run(fmt.Sprintf("%v/%d", dt, scale), func(t *testing.T) {
				g := G.NewGraph()
				x := input(g, dt, "x", 2, 3, 4, 5)
				n := G.Must(G.Upsample2D(x, scale))
				checkNode(t, n, 6)
				gradOf(t, n, x)
				checkNode(t, findOp(t, g, "*gorgonia.upsampleDiffOp"), 7)
			})
		}
	}
}

func TestGlobalAveragePool(t *testing.T) {
	for _, dt := range floats {
		g := G.NewGraph()
		n := G.Must(G.GlobalAveragePool2D(input(g, dt, "x", 3, 4, 5, 6)))
		checkNode(t, n, 8)
		ins := inputsOf(n, 1)
		special(ins[0].(*tensor.Dense))
		runBoth(t, n.Op(), ins, dt, n.Shape())
	}
}

func TestDiagFlat(t *testing.T) {
	for _, dt := range floats {
		g := G.NewGraph()
		n := G.Must(G.DiagFlat(input(g, dt, "x", 2, 3)))
		checkNode(t, n, 9)
	}
}

func TestByIndices(t *testing.T) {
	cases := []struct {
		shape   []int
		axis    int
		indices []int
	}{
		{[]int{5}, 0, []int{4, 0, 2, 2}},
		{[]int{5, 3}, 0, []int{4, 0, 2}},
		{[]int{5, 3}, 1, []int{2, 2, 0, 1}},
		{[]int{3, 4, 2}, 1, []int{3, 1}}, // a middle axis: tensor's loop steps wrongly
		{[]int{3, 2, 2}, 1, []int{1, 0, 1}},
		{[]int{3, 4, 2}, 2, []int{1, 0, 1}},
		{[]int{5, 3}, 0, []int{7, 1}}, // out of range: Do ignores tensor's error
	}
	for _, dt := range floats {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%v/%v/%d/%v", dt, c.shape, c.axis, c.indices), func(t *testing.T) {
				g := G.NewGraph()
				x := input(g, dt, "x", c.shape...)
				idx := G.NewVector(g, tensor.Int, G.WithShape(len(c.indices)), G.WithName("i"),
					G.WithValue(tensor.New(tensor.WithBacking(append([]int(nil), c.indices...)))))
				n := G.Must(G.ByIndices(x, idx, c.axis))
				checkNode(t, n, 10)
				gradOf(t, n, x)
				d := findOp(t, g, "*gorgonia.byIndicesOpDiffOp")
				// tensor's ByIndicesB runs off its slices for a middle axis.
				runBothOrFail(t, d.Op(), inputsOf(d, 11), dt, d.Shape())
			})
		}
	}
}

func TestTensordot(t *testing.T) {
	cases := []struct {
		a, b         []int
		aAxes, bAxes []int
		ok           bool
	}{
		{[]int{3, 4}, []int{4, 5}, []int{1}, []int{0}, true},
		{[]int{2, 3, 4}, []int{3, 4, 5}, []int{1, 2}, []int{0, 1}, true},
		{[]int{2, 3, 4}, []int{4, 2}, []int{2}, []int{0}, true},
		{[]int{3, 4}, []int{4}, []int{1}, []int{0}, true},
		{[]int{4, 3}, []int{4, 5}, []int{0}, []int{0}, false},
		{[]int{2, 3, 4}, []int{3, 2}, []int{1, 0}, []int{0, 1}, false},
	}
	for _, dt := range floats {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%v/%v.%v/%v.%v", dt, c.a, c.aAxes, c.b, c.bAxes), func(t *testing.T) {
				g := G.NewGraph()
				n := G.Must(G.Tensordot(c.aAxes, c.bAxes, input(g, dt, "a", c.a...), input(g, dt, "b", c.b...)))
				_, ok := For(n.Op())
				require.Equal(t, c.ok, ok)
				if ok {
					checkNode(t, n, 11)
				}
			})
		}
	}
}

func TestIdentityAndScalarReshape(t *testing.T) {
	for _, dt := range floats {
		g := G.NewGraph()
		x := input(g, dt, "x", 3, 4)
		id := G.Must(G.ApplyOp(G.Iop{}, x))
		checkNode(t, id, 12)
		s := G.NewScalar(g, dt, G.WithName("s"))
		r, err := G.Reshape(s, tensor.Shape{1, 1})
		require.NoError(t, err)
		runBoth(t, r.Op(), []G.Value{scalarOf(dt, 2.5)}, dt, r.Shape())
	}
}
