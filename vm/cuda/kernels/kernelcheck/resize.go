package kernelcheck

import (
	"math/rand"

	G "gorgonia.org/gorgonia"

	"github.com/gorgonia-ooc/outofcore/models/layers"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

func testResize[T float32 | float64](t TB, m *Mem, ih, iw, oh, ow int, align bool) {
	s := suffix[T]()
	rng := rand.New(rand.NewSource(15))
	N, C := 2, 3
	shape := []int{N, C, ih, iw}
	g := G.NewGraph()
	xn := input[T](g, "x", shape...)
	y := must(t)(layers.ResizeBilinear(xn, oh, ow, align))
	ys := y.Shape()
	dyn := input[T](g, "dy", ys...)
	grads, err := y.Op().(G.SDOp).SymDiff(G.Nodes{xn}, y, dyn)
	if err != nil {
		t.Fatal(err)
	}
	x, dy := randn[T](rng, prod(shape), 1), randn[T](rng, ys.TotalSize(), 1)
	wantY := data[T](t, do(t, y.Op(), dense(x, shape...)))
	wantDX := data[T](t, do(t, grads[0].Op(), dense(dy, ys...)))
	al := int64(0)
	if align {
		al = 1
	}
	geo := []kernels.Arg{kernels.Int(int64(N * C)), kernels.Int(int64(ih)), kernels.Int(int64(iw)), kernels.Int(int64(oh)), kernels.Int(int64(ow)), kernels.Int(al)}
	yb := newOut[T](m, len(wantY))
	m.launch("resize_bilinear_"+s, append([]kernels.Arg{p(yb), p(put(m, x))}, geo...)...)
	sameBits(t, m, "resize_bilinear_"+s, get[T](yb), wantY)
	dx := newOut[T](m, len(x))
	m.launch("resize_bilinear_grad_"+s, append([]kernels.Arg{p(dx), p(put(m, dy))}, geo...)...)
	sameBits(t, m, "resize_bilinear_grad_"+s, get[T](dx), wantDX)
}
