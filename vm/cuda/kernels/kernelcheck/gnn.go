package kernelcheck

import (
	"math"
	"math/rand"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

// caseGorgoniaIm2col: g_im2col and g_col2im against gorgonia's im2colOp and
// col2imOp (Conv2d and its data gradient), with padding, stride, dilation
// and a 1x1 kernel.
func caseGorgoniaIm2col[T float32 | float64](t TB, m *Mem) {
	for _, c := range []struct{ H, W, k, pad, stride, dil int }{
		{7, 6, 3, 1, 1, 1}, {9, 8, 3, 1, 2, 1}, {8, 8, 3, 2, 1, 2}, {5, 5, 1, 0, 1, 1}, {6, 7, 2, 0, 2, 1},
	} {
		testGIm2col[T](t, m, c.H, c.W, c.k, c.pad, c.stride, c.dil)
	}
}

func testGIm2col[T float32 | float64](t TB, m *Mem, H, W, k, pad, st, dil int) {
	s := suffix[T]()
	rng := rand.New(rand.NewSource(26))
	N, C := 2, 3
	shape := []int{N, C, H, W}
	x := randn[T](rng, prod(shape), 1)
	g := G.NewGraph()
	xn := input[T](g, "x", shape...)
	col := must(t)(G.Im2Col(xn, tensor.Shape{k, k}, []int{pad, pad}, []int{st, st}, []int{dil, dil}))
	cs := col.Shape()
	dcol := input[T](g, "dcol", cs...)
	grads, err := col.Op().(G.SDOp).SymDiff(G.Nodes{xn}, col, dcol)
	if err != nil {
		t.Fatal(err)
	}
	dc := randn[T](rng, cs.TotalSize(), 1)
	wantCol := data[T](t, do(t, col.Op(), dense(x, shape...)))
	wantDX := data[T](t, do(t, grads[0].Op(), dense(dc, cs...)))
	geo := kernels.ConvArg(kernels.ConvGeom{C: int64(C), H: int64(H), W: int64(W), KH: int64(k), KW: int64(k), OH: int64(cs[1]), OW: int64(cs[2]),
		SH: int64(st), SW: int64(st), PH: int64(pad), PW: int64(pad), DH: int64(dil), DW: int64(dil)})
	cb := newOut[T](m, len(wantCol))
	m.launch("g_im2col_"+s, p(cb), p(put(m, x)), kernels.Int(int64(N)), geo)
	sameBits(t, m, "g_im2col_"+s, get[T](cb), wantCol)
	dx := newOut[T](m, len(x))
	m.launch("g_col2im_"+s, p(dx), p(put(m, dc)), kernels.Int(int64(N)), geo)
	sameBits(t, m, "g_col2im_"+s, get[T](dx), wantDX)
}

// caseGorgoniaPool: g_maxpool and g_avgpool with their gradients against
// gorgonia's maxPoolOp, avgPoolOp and their diff ops, bit for bit:
// overlapping windows, padding (also gorgonia's four-sided form, whose
// offset is the south and east padding), ties, a NaN and a window of -Inf.
func caseGorgoniaPool[T float32 | float64](t TB, m *Mem) {
	for _, c := range []struct {
		H, W, k, s int
		pad        []int
	}{{9, 7, 3, 2, []int{1, 1}}, {8, 8, 2, 2, []int{0, 0}}, {5, 6, 3, 1, []int{1, 1}}, {6, 6, 3, 2, []int{1, 0, 0, 1}}} {
		testGPool[T](t, m, c.H, c.W, c.k, c.s, c.pad)
	}
}

func testGPool[T float32 | float64](t TB, m *Mem, H, W, k, st int, pad []int) {
	s := suffix[T]()
	rng := rand.New(rand.NewSource(27))
	x, shape := poolInput[T](rng, H, W)
	N, C := shape[0], shape[1]
	// A plane of -Inf: gorgonia's maximum is -MaxFloat there, with no
	// argmax (its gradient then panics on the CPU, so only the forward
	// sees it).
	xInf := append([]T(nil), x...)
	for i := H * W; i < 2*H*W; i++ {
		xInf[i] = T(math.Inf(-1))
	}
	ph, pw := pad[0], pad[1]
	if len(pad) == 4 {
		ph, pw = pad[1], pad[3]
	}
	for _, kind := range []string{"g_maxpool", "g_avgpool"} {
		g := G.NewGraph()
		xn := input[T](g, "x", shape...)
		var y *G.Node
		if kind == "g_maxpool" {
			y = must(t)(G.MaxPool2D(xn, tensor.Shape{k, k}, pad, []int{st, st}))
		} else {
			y = must(t)(G.AveragePool2D(xn, tensor.Shape{k, k}, pad, []int{st, st}))
		}
		ys := y.Shape()
		dyn := input[T](g, "dy", ys...)
		grads, err := y.Op().(G.SDOp).SymDiff(G.Nodes{xn}, y, dyn)
		if err != nil {
			t.Fatal(err)
		}
		dy := randn[T](rng, ys.TotalSize(), 1)
		yv := do(t, y.Op(), dense(x, shape...)) // fills the op's mask, which its gradient reads
		wantY := data[T](t, yv)
		wantDX := data[T](t, do(t, grads[0].Op(), dense(x, shape...), yv, dense(dy, ys...)))
		geo := kernels.PoolArg(kernels.PoolGeom{Planes: int64(N * C), H: int64(H), W: int64(W), OH: int64(ys[2]), OW: int64(ys[3]),
			KH: int64(k), KW: int64(k), SH: int64(st), SW: int64(st), PH: int64(ph), PW: int64(pw)})
		name := kind + "_" + s
		yb := newOut[T](m, len(wantY))
		m.launch(name, p(yb), p(put(m, x)), geo)
		sameBits(t, m, name, get[T](yb), wantY)
		if kind == "g_maxpool" {
			m.launch(name, p(yb), p(put(m, xInf)), geo)
			sameBits(t, m, name+" of -Inf", get[T](yb), data[T](t, do(t, y.Op(), dense(xInf, shape...))))
		}
		dx := newOut[T](m, len(x))
		if kind == "g_maxpool" {
			m.launch(kind+"_grad_"+s, p(dx), p(put(m, x)), p(put(m, dy)), geo)
		} else {
			m.launch(kind+"_grad_"+s, p(dx), p(put(m, dy)), geo)
		}
		sameBits(t, m, kind+"_grad_"+s, get[T](dx), wantDX)
	}
}
