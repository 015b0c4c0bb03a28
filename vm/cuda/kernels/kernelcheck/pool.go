package kernelcheck

import (
	"math"
	"math/rand"

	G "gorgonia.org/gorgonia"

	"github.com/gorgonia-ooc/outofcore/models/layers"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

// poolInput is a pooling check's input, (2, 3, H, W), with ties (the first
// maximum wins) and a NaN.
func poolInput[T float32 | float64](rng *rand.Rand, H, W int) (x []T, shape []int) {
	shape = []int{2, 3, H, W}
	x = randn[T](rng, prod(shape), 1)
	for i := 0; i+1 < len(x); i += 5 {
		x[i] = x[i+1]
	}
	x[7] = T(math.NaN())
	return x, shape
}

func testPool[T float32 | float64](t TB, m *Mem, H, W, k, st, pad int) {
	s := suffix[T]()
	rng := rand.New(rand.NewSource(14))
	x, shape := poolInput[T](rng, H, W)
	N, C := shape[0], shape[1]
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
		compare(t, m, name, get[T](yb), wantY, false)
		dx := newOut[T](m, len(x))
		if max {
			m.launch(kind+"_grad_"+s, p(dx), p(put(m, x)), p(put(m, dy)), geo)
		} else {
			m.launch(kind+"_grad_"+s, p(dx), p(put(m, dy)), geo)
		}
		compare(t, m, kind+"_grad_"+s, get[T](dx), wantDX, false)
	}
}

func testGAP[T float32 | float64](t TB, m *Mem) {
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
	compare(t, m, "gap_"+s, get[T](yb), wantY, false)
	dx := newOut[T](m, len(x))
	m.launch("gap_grad_"+s, p(dx), p(put(m, dy)), kernels.Int(15), kernels.Int(42))
	compare(t, m, "gap_grad_"+s, get[T](dx), wantDX, false)
}

func testReLU[T float32 | float64](t TB, m *Mem) {
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
		compare(t, m, "relu_"+s, get[T](yb), wantY, false)
		dx := newOut[T](m, len(x))
		m.launch("relu_grad_"+s, p(dx), p(yb), p(put(m, dy)), kernels.Int(int64(len(x))))
		compare(t, m, "relu_grad_"+s, get[T](dx), wantDX, false)
	}
}
