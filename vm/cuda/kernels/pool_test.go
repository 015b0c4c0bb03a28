package kernels_test

import (
	"math"
	"math/rand"
	"testing"

	G "gorgonia.org/gorgonia"

	"github.com/gorgonia-ooc/outofcore/models/layers"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

// TestPool: max and average pooling (with and without the padding in the
// count) forward and backward against
// models/layers' ops, with overlapping windows (ResNet's 3x3 stride 2 pad 1),
// ties, a NaN, and odd sizes.
func TestPool(t *testing.T) {
	for _, c := range []struct{ H, W, k, s, pad int }{{9, 7, 3, 2, 1}, {8, 8, 2, 2, 0}, {5, 6, 3, 1, 1}, {4, 4, 4, 4, 2}} {
		testPool[float32](t, c.H, c.W, c.k, c.s, c.pad)
		testPool[float64](t, c.H, c.W, c.k, c.s, c.pad)
	}
}

func testPool[T float32 | float64](t *testing.T, H, W, k, st, pad int) {
	m := newMem(t)
	s := suffix[T]()
	rng := rand.New(rand.NewSource(14))
	N, C := 2, 3
	shape := []int{N, C, H, W}
	x := randn[T](rng, prod(shape), 1)
	for i := 0; i+1 < len(x); i += 5 {
		x[i] = x[i+1] // ties: the first maximum wins
	}
	x[7] = T(math.NaN())
	for _, kind := range []string{"maxpool", "avgpool", "avgpool_excl"} {
		max := kind == "maxpool"
		g := G.NewGraph()
		xn := input[T](g, "x", shape...)
		var y *G.Node
		switch kind {
		case "maxpool":
			y = must(t)(layers.MaxPool2D(xn, k, st, pad))
		case "avgpool":
			y = must(t)(layers.AvgPool2D(xn, k, st, pad))
		default:
			y = must(t)(layers.AvgPool2DExcludePad(xn, k, st, pad))
		}
		ys := y.Shape()
		dyn := input[T](g, "dy", ys...)
		grads, err := y.Op().(G.SDOp).SymDiff(G.Nodes{xn}, y, dyn)
		if err != nil {
			t.Fatal(err)
		}
		dy := randn[T](rng, ys.TotalSize(), 1)
		wantY := data[T](t, do(t, y.Op(), dense(x, shape...)))
		var wantDX []T
		if max {
			wantDX = data[T](t, do(t, grads[0].Op(), dense(x, shape...), dense(dy, ys...)))
		} else {
			wantDX = data[T](t, do(t, grads[0].Op(), dense(dy, ys...)))
		}
		geo := kernels.PoolArg(kernels.PoolGeom{Planes: int64(N * C), H: int64(H), W: int64(W), OH: int64(ys[2]), OW: int64(ys[3]),
			KH: int64(k), KW: int64(k), SH: int64(st), SW: int64(st), PH: int64(pad), PW: int64(pad)})
		name := kind + "_" + s
		yb := newOut[T](m, len(wantY))
		m.launch(name, p(yb), p(put(m, x)), geo)
		compare(t, name, get[T](yb), wantY, false)
		dx := newOut[T](m, len(x))
		if max {
			m.launch(kind+"_grad_"+s, p(dx), p(put(m, x)), p(put(m, dy)), geo)
		} else {
			m.launch(kind+"_grad_"+s, p(dx), p(put(m, dy)), geo)
		}
		compare(t, kind+"_grad_"+s, get[T](dx), wantDX, false)
	}
}

// TestGlobalAvgPool and TestReLU: the remaining models/layers ops.
func TestGlobalAvgPool(t *testing.T) {
	testGAP[float32](t)
	testGAP[float64](t)
}

func testGAP[T float32 | float64](t *testing.T) {
	m := newMem(t)
	s := suffix[T]()
	rng := rand.New(rand.NewSource(15))
	shape := []int{3, 5, 7, 6}
	x := randn[T](rng, prod(shape), 1)
	g := G.NewGraph()
	xn := input[T](g, "x", shape...)
	y := must(t)(layers.GlobalAvgPool2D(xn))
	dyn := input[T](g, "dy", 3, 5)
	grads, err := y.Op().(G.SDOp).SymDiff(G.Nodes{xn}, y, dyn)
	if err != nil {
		t.Fatal(err)
	}
	dy := randn[T](rng, 15, 1)
	wantY := data[T](t, do(t, y.Op(), dense(x, shape...)))
	wantDX := data[T](t, do(t, grads[0].Op(), dense(dy, 3, 5)))
	yb := newOut[T](m, 15)
	m.launch("gap_"+s, p(yb), p(put(m, x)), kernels.Int(15), kernels.Int(42))
	compare(t, "gap_"+s, get[T](yb), wantY, false)
	dx := newOut[T](m, len(x))
	m.launch("gap_grad_"+s, p(dx), p(put(m, dy)), kernels.Int(15), kernels.Int(42))
	compare(t, "gap_grad_"+s, get[T](dx), wantDX, false)
}

func TestReLU(t *testing.T) {
	testReLU[float32](t)
	testReLU[float64](t)
}

func testReLU[T float32 | float64](t *testing.T) {
	m := newMem(t)
	s := suffix[T]()
	rng := rand.New(rand.NewSource(16))
	for _, n := range sizes {
		x := append(specials[T](), randn[T](rng, n, 1)...)
		g := G.NewGraph()
		xn := input[T](g, "x", len(x))
		y := must(t)(layers.ReLU(xn))
		dyn := input[T](g, "dy", len(x))
		grads, err := y.Op().(G.SDOp).SymDiff(G.Nodes{xn}, y, dyn)
		if err != nil {
			t.Fatal(err)
		}
		dy := randn[T](rng, len(x), 1)
		wantY := data[T](t, do(t, y.Op(), dense(x, len(x))))
		wantDX := data[T](t, do(t, grads[0].Op(), dense(wantY, len(x)), dense(dy, len(x))))
		yb := newOut[T](m, len(x))
		m.launch("relu_"+s, p(yb), p(put(m, x)), kernels.Int(int64(len(x))))
		compare(t, "relu_"+s, get[T](yb), wantY, false)
		dx := newOut[T](m, len(x))
		m.launch("relu_grad_"+s, p(dx), p(yb), p(put(m, dy)), kernels.Int(int64(len(x))))
		compare(t, "relu_grad_"+s, get[T](dx), wantDX, false)
	}
}
