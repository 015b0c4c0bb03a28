package layers

import (
	"math/rand"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func heapAfterGC() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

func nodesOfShape(g *G.ExprGraph, s tensor.Shape) int {
	k := 0
	for it := g.Nodes(); it.Next(); {
		if it.Node().(*G.Node).Shape().Eq(s) {
			k++
		}
	}
	return k
}

// The claims doc.go makes about gorgonia v0.9.18, and this package's answers to them, checked.
func TestGorgoniaFactsInDoc(t *testing.T) {
	t.Run("GlobalAveragePool2D has no gradient", func(t *testing.T) {
		g := G.NewGraph()
		x := G.NewTensor(g, tensor.Float64, 4, G.WithShape(2, 3, 4, 4), G.WithName("x"))
		y, err := G.GlobalAveragePool2D(x)
		require.NoError(t, err)
		s := G.Must(G.Sum(G.Must(G.Reshape(y, tensor.Shape{y.Shape().TotalSize()})), 0))
		var r interface{}
		func() {
			defer func() { r = recover() }()
			_, err = G.Grad(s, x)
		}()
		require.True(t, r != nil || err != nil, "gorgonia's GlobalAveragePool2D differentiated fine")
	})
	t.Run("AveragePool2D is wrong", func(t *testing.T) {
		xs := sh(2, 3, 6, 6)
		v := randData(rand.New(rand.NewSource(1)), xs.TotalSize())
		g := G.NewGraph()
		x := G.NewTensor(g, tensor.Float64, 4, G.WithShape(xs...), G.WithName("x"), G.WithValue(denseAs(tensor.Float64, xs, v)))
		y, err := G.AveragePool2D(x, sh(2, 2), []int{0, 0}, []int{2, 2})
		require.NoError(t, err)
		m := G.NewTapeMachine(g)
		defer m.Close()
		require.NoError(t, m.RunAll())
		require.Greater(t, maxAbsDiff(f64s(t, y.Value()), refPool(nd{xs, v}, 2, 2, 0, false).data), 1e-3)
	})
	t.Run("MaxPool2D allocates an int per output at build time; ours nothing", func(t *testing.T) {
		xs := sh(16, 64, 112, 112)
		before := heapAfterGC()
		g := G.NewGraph()
		x := G.NewTensor(g, tensor.Float32, 4, G.WithShape(xs...), G.WithName("x"))
		y, err := G.MaxPool2D(x, sh(3, 3), []int{1, 1}, []int{2, 2})
		require.NoError(t, err)
		grew := heapAfterGC() - before
		require.GreaterOrEqual(t, grew, int64(8*y.Shape().TotalSize())*9/10)
		runtime.KeepAlive(y)

		before = heapAfterGC()
		y2, err := MaxPool2D(x, 3, 2, 1)
		require.NoError(t, err)
		_, err = G.Grad(G.Must(G.Sum(G.Must(G.Reshape(y2, tensor.Shape{y2.Shape().TotalSize()})), 0)), x)
		require.NoError(t, err)
		require.Less(t, heapAfterGC()-before, int64(1<<20))
		runtime.KeepAlive(y2)
	})
	t.Run("Conv2d materialises a 9x im2col node; ours is one node", func(t *testing.T) {
		g := G.NewGraph()
		x := G.NewTensor(g, tensor.Float32, 4, G.WithShape(8, 64, 56, 56), G.WithName("x"))
		w := G.NewTensor(g, tensor.Float32, 4, G.WithShape(64, 64, 3, 3), G.WithName("w"))
		before := g.Nodes().Len()
		_, err := G.Conv2d(x, w, sh(3, 3), []int{1, 1}, []int{1, 1}, []int{1, 1})
		require.NoError(t, err)
		require.Equal(t, 1, nodesOfShape(g, sh(8, 56, 56, 64*9)), "im2col output, 9x the input")
		require.Equal(t, 6, g.Nodes().Len()-before) // im2col, 2 reshapes, matmul, reshape, transpose
		before = g.Nodes().Len()
		_, err = Conv2D(x, w, nil, Square(1, 1))
		require.NoError(t, err)
		require.Equal(t, 1, g.Nodes().Len()-before)
	})
	t.Run("BatchNorm materialises its scale and shift; ours is one node", func(t *testing.T) {
		xs := sh(8, 64, 56, 56)
		g := G.NewGraph()
		x := G.NewTensor(g, tensor.Float32, 4, G.WithShape(xs...), G.WithName("x"))
		sc := G.NewTensor(g, tensor.Float32, 4, G.WithShape(1, 64, 1, 1), G.WithName("s"))
		bi := G.NewTensor(g, tensor.Float32, 4, G.WithShape(1, 64, 1, 1), G.WithName("b"))
		_, _, _, _, err := G.BatchNorm(x, sc, bi, 0.1, 1e-5)
		require.NoError(t, err)
		// x, the normalised x, two broadcast (Repeat) copies, the product and the sum.
		require.Equal(t, 6, nodesOfShape(g, xs))
		g2 := G.NewGraph()
		x2 := G.NewTensor(g2, tensor.Float32, 4, G.WithShape(xs...), G.WithName("x"))
		gm := G.NewTensor(g2, tensor.Float32, 1, G.WithShape(64), G.WithName("g"))
		bt := G.NewTensor(g2, tensor.Float32, 1, G.WithShape(64), G.WithName("b"))
		_, _, err = BatchNorm(x2, gm, bt, 0.1, 1e-5)
		require.NoError(t, err)
		require.Equal(t, 2, nodesOfShape(g2, xs))
	})
	t.Run("Sum over two axes is wrong", func(t *testing.T) {
		xs := sh(2, 3, 4, 5)
		v := randData(rand.New(rand.NewSource(2)), xs.TotalSize())
		g := G.NewGraph()
		x := G.NewTensor(g, tensor.Float64, 4, G.WithShape(xs...), G.WithName("x"), G.WithValue(denseAs(tensor.Float64, xs, v)))
		y, err := G.Sum(x, 2, 3)
		require.NoError(t, err)
		m := G.NewTapeMachine(g)
		defer m.Close()
		require.NoError(t, m.RunAll())
		want := refGAP(nd{xs, v}).data
		for i := range want {
			want[i] *= 20
		}
		got := f64s(t, y.Value())
		require.True(t, len(got) != len(want) || maxAbsDiff(got, want) > 1e-6, "Sum(x, 2, 3) was right")
	})
	t.Run("Rectify is a mask and a product", func(t *testing.T) {
		xs := sh(8, 64, 56, 56)
		g := G.NewGraph()
		x := G.NewTensor(g, tensor.Float32, 4, G.WithShape(xs...), G.WithName("x"))
		_, err := G.Rectify(x)
		require.NoError(t, err)
		require.Equal(t, 3, nodesOfShape(g, xs))
		g2 := G.NewGraph()
		x2 := G.NewTensor(g2, tensor.Float32, 4, G.WithShape(xs...), G.WithName("x"))
		_, err = ReLU(x2)
		require.NoError(t, err)
		require.Equal(t, 2, nodesOfShape(g2, xs))
	})
}
