package kernels_test

import (
	"fmt"
	"math/rand"
	"testing"

	G "gorgonia.org/gorgonia"

	"github.com/gorgonia-ooc/outofcore/models/layers"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

// TestResizeBilinear: models/layers' ResizeBilinear and its gradient (the
// adjoint, which the kernel gathers where the CPU op scatters) bit for bit,
// up and down, with and without align_corners, from 1x1 (DeepLabv3+'s image
// pooling) and to sizes that clamp the last tap.
func TestResizeBilinear(t *testing.T) {
	for _, c := range []struct{ ih, iw, oh, ow int }{{5, 7, 11, 13}, {9, 8, 4, 3}, {1, 1, 3, 3}, {3, 4, 12, 17}, {6, 2, 6, 5}, {4, 4, 1, 1}} {
		for _, align := range []bool{true, false} {
			t.Run(fmt.Sprintf("%+v/align=%t", c, align), func(t *testing.T) {
				testResize[float32](t, c.ih, c.iw, c.oh, c.ow, align)
				testResize[float64](t, c.ih, c.iw, c.oh, c.ow, align)
			})
		}
	}
}

func testResize[T float32 | float64](t *testing.T, ih, iw, oh, ow int, align bool) {
	m := newMem(t)
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
	sameBits(t, "resize_bilinear_"+s, get[T](yb), wantY)
	dx := newOut[T](m, len(x))
	m.launch("resize_bilinear_grad_"+s, append([]kernels.Arg{p(dx), p(put(m, dy))}, geo...)...)
	sameBits(t, "resize_bilinear_grad_"+s, get[T](dx), wantDX)
}
