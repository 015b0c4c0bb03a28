package layers

import (
	"fmt"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// ResizeBilinear resizes the planes of an (N,C,H,W) input to (N,C,oh,ow) by bilinear
// interpolation, as PyTorch's F.interpolate(mode="bilinear"). With alignCorners the corner pixels
// of input and output coincide (DeepLabv3+ on 513x513 inputs: 33 -> 129 -> 513 is exactly 4x each
// time); without, pixel centres are mapped (PyTorch's default, align_corners=False). gorgonia has
// only nearest-neighbour upsampling. The backward reads only dy.
func ResizeBilinear(x *G.Node, oh, ow int, alignCorners bool) (*G.Node, error) {
	s := x.Shape()
	if err := want4D("ResizeBilinear input", s); err != nil {
		return nil, err
	}
	if oh < 1 || ow < 1 {
		return nil, fmt.Errorf("layers: ResizeBilinear to %dx%d", oh, ow)
	}
	if oh == s[2] && ow == s[3] {
		return x, nil // both modes are the identity at the same size
	}
	return apply(resizeSpec{ih: s[2], iw: s[3], oh: oh, ow: ow, align: alignCorners}, x)
}

// resizeSpec maps (N,C,ih,iw) to (N,C,oh,ow); adjoint is its transpose, (N,C,oh,ow) to
// (N,C,ih,iw), which is the gradient. Each is the other's gradient.
type resizeSpec struct {
	ih, iw, oh, ow int
	align          bool
	adjoint        bool
}

func (s resizeSpec) name() string {
	n := "ResizeBilinear"
	if s.adjoint {
		n += "Grad"
	}
	return fmt.Sprintf("%s{%dx%d->%dx%d align=%t}", n, s.ih, s.iw, s.oh, s.ow, s.align)
}
func (s resizeSpec) arity() int      { return 1 }
func (s resizeSpec) typ() hm.Type    { return fnType(4, 4) }
func (s resizeSpec) diff(int) []bool { return []bool{true} }
func (s resizeSpec) outShape(in []tensor.Shape) (tensor.Shape, error) {
	x := in[0]
	if err := want4D(s.name()+" input", x); err != nil {
		return nil, err
	}
	fh, fw, th, tw := s.ih, s.iw, s.oh, s.ow
	if s.adjoint {
		fh, fw, th, tw = th, tw, fh, fw
	}
	if x[2] != fh || x[3] != fw {
		return nil, fmt.Errorf("layers: %s takes %dx%d planes, got %v", s.name(), fh, fw, x)
	}
	return tensor.Shape{x[0], x[1], th, tw}, nil
}

// flops: four multiply-adds per output pixel of the resize.
func (s resizeSpec) flops(in []tensor.Shape) int64 {
	return 8 * prod(in[0][0], in[0][1], s.oh, s.ow)
}
func (s resizeSpec) exec(dt tensor.Dtype, out G.Value, _ []byte, in []G.Value) error {
	if dt == tensor.Float32 {
		return resizeExec[float32](s, out, in[0])
	}
	return resizeExec[float64](s, out, in[0])
}
func (s resizeSpec) grads(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	t := s
	t.adjoint = !s.adjoint
	d, err := apply(t, grad)
	return G.Nodes{d}, err
}

// taps holds, per output coordinate along one axis, the two input coordinates it reads and the
// weight of the second.
type taps struct {
	i0, i1 []int
	w1     []float64
}

// bilinearTaps follows PyTorch's area_pixel_compute_source_index: with alignCorners the source is
// o*(in-1)/(out-1); without, (o+0.5)*in/out - 0.5 clamped at 0.
func bilinearTaps(in, out int, align bool) taps {
	t := taps{i0: make([]int, out), i1: make([]int, out), w1: make([]float64, out)}
	for o := 0; o < out; o++ {
		var src float64
		switch {
		case align && out > 1:
			src = float64(o) * float64(in-1) / float64(out-1)
		case align:
			src = 0
		default:
			src = math.Max((float64(o)+0.5)*float64(in)/float64(out)-0.5, 0)
		}
		i0 := min(int(src), in-1)
		t.i0[o], t.i1[o], t.w1[o] = i0, min(i0+1, in-1), src-float64(i0)
	}
	return t
}

// resizeExec interpolates, or for the adjoint scatters each output gradient onto the four pixels
// it was interpolated from. Planes run in parallel, each in a fixed order.
func resizeExec[T float](s resizeSpec, out, inv G.Value) error {
	is := inv.Shape()
	os, err := s.outShape([]tensor.Shape{is})
	if err != nil {
		return err
	}
	src, dst, err := srcDst[T](inv, out, os)
	if err != nil {
		return err
	}
	th, tw := bilinearTaps(s.ih, s.oh, s.align), bilinearTaps(s.iw, s.ow, s.align)
	small, big := s.ih*s.iw, s.oh*s.ow
	parallelFor(is[0]*is[1], int64(is[0]*is[1]*big), func(p0, p1 int) {
		for p := p0; p < p1; p++ {
			if s.adjoint {
				g, x := src[p*big:(p+1)*big], dst[p*small:(p+1)*small]
				clear(x)
				for o := 0; o < s.oh; o++ {
					r0, r1, b := th.i0[o]*s.iw, th.i1[o]*s.iw, T(th.w1[o])
					for q := 0; q < s.ow; q++ {
						c0, c1, a := tw.i0[q], tw.i1[q], T(tw.w1[q])
						v := g[o*s.ow+q]
						top, bot := v*(1-b), v*b
						x[r0+c0] += top * (1 - a)
						x[r0+c1] += top * a
						x[r1+c0] += bot * (1 - a)
						x[r1+c1] += bot * a
					}
				}
				continue
			}
			x, y := src[p*small:(p+1)*small], dst[p*big:(p+1)*big]
			for o := 0; o < s.oh; o++ {
				r0, r1, b := x[th.i0[o]*s.iw:], x[th.i1[o]*s.iw:], T(th.w1[o])
				row := y[o*s.ow : (o+1)*s.ow]
				for q := range row {
					c0, c1, a := tw.i0[q], tw.i1[q], T(tw.w1[q])
					top := r0[c0] + (r0[c1]-r0[c0])*a
					bot := r1[c0] + (r1[c1]-r1[c0])*a
					row[q] = top + (bot-top)*b
				}
			}
		}
	})
	return nil
}
