package layers

import (
	"fmt"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// ReflectionPad2D pads H and W of an (N,C,H,W) input by p on every side with the mirror image of
// the border (the border row itself not repeated), as PyTorch's ReflectionPad2d; p must be
// smaller than H and W. Pix2PixHD's generator pads this way before its 7x7 and residual
// convolutions. gorgonia has no pad op. The backward reads only dy.
func ReflectionPad2D(x *G.Node, p int) (*G.Node, error) {
	s := x.Shape()
	if err := want4D("ReflectionPad2D input", s); err != nil {
		return nil, err
	}
	if p < 1 || p >= s[2] || p >= s[3] {
		return nil, fmt.Errorf("layers: ReflectionPad2D of %d needs 1 <= pad < height and width, input %v", p, s)
	}
	return apply(padSpec{p: p}, x)
}

// reflect maps a padded coordinate i in [-p, n+p) to the input coordinate it copies.
func reflect(i, n int) int {
	if i < 0 {
		return -i
	}
	if i >= n {
		return 2*(n-1) - i
	}
	return i
}

// padSpec: (N,C,H,W) -> (N,C,H+2p,W+2p).
type padSpec struct{ p int }

func (s padSpec) name() string    { return fmt.Sprintf("ReflectionPad2D{%d}", s.p) }
func (s padSpec) arity() int      { return 1 }
func (s padSpec) typ() hm.Type    { return fnType(4, 4) }
func (s padSpec) diff(int) []bool { return []bool{true} }
func (s padSpec) outShape(in []tensor.Shape) (tensor.Shape, error) {
	x := in[0]
	if err := want4D("ReflectionPad2D input", x); err != nil {
		return nil, err
	}
	if s.p >= x[2] || s.p >= x[3] {
		return nil, fmt.Errorf("layers: %s does not fit input %v", s.name(), x)
	}
	return tensor.Shape{x[0], x[1], x[2] + 2*s.p, x[3] + 2*s.p}, nil
}
func (s padSpec) flops(in []tensor.Shape) int64 {
	o, err := s.outShape(in)
	if err != nil {
		return 0
	}
	return int64(o.TotalSize())
}
func (s padSpec) exec(dt tensor.Dtype, out G.Value, _ []byte, in []G.Value) error {
	if dt == tensor.Float32 {
		return padExec[float32](s.p, false, out, in[0])
	}
	return padExec[float64](s.p, false, out, in[0])
}
func (s padSpec) grads(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	xs := in[0].Shape()
	dx, err := apply(s.gradSpec(xs[2], xs[3]), grad)
	return G.Nodes{dx}, err
}

// gradSpec is the adjoint for an h x w input.
func (s padSpec) gradSpec(h, w int) padGradSpec { return padGradSpec{p: s.p, h: h, w: w} }

// padGradSpec: dy (N,C,H+2p,W+2p) -> dx (N,C,H,W), each padded pixel's gradient added onto the
// pixel it copied. It is linear, and its own gradient is the padding.
type padGradSpec struct{ p, h, w int }

func (s padGradSpec) name() string {
	return fmt.Sprintf("ReflectionPad2DGrad{%d %dx%d}", s.p, s.h, s.w)
}
func (s padGradSpec) arity() int      { return 1 }
func (s padGradSpec) typ() hm.Type    { return fnType(4, 4) }
func (s padGradSpec) diff(int) []bool { return []bool{true} }
func (s padGradSpec) outShape(in []tensor.Shape) (tensor.Shape, error) {
	d := in[0]
	if err := want4D("ReflectionPad2DGrad input", d); err != nil {
		return nil, err
	}
	if d[2] != s.h+2*s.p || d[3] != s.w+2*s.p {
		return nil, fmt.Errorf("layers: %s: gradient %v is not a padded %dx%d image", s.name(), d, s.h, s.w)
	}
	return tensor.Shape{d[0], d[1], s.h, s.w}, nil
}
func (s padGradSpec) flops(in []tensor.Shape) int64 { return size1(in) }
func (s padGradSpec) exec(dt tensor.Dtype, out G.Value, _ []byte, in []G.Value) error {
	if dt == tensor.Float32 {
		return padExec[float32](s.p, true, out, in[0])
	}
	return padExec[float64](s.p, true, out, in[0])
}
func (s padGradSpec) grads(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	d, err := apply(padSpec{p: s.p}, grad)
	return G.Nodes{d}, err
}

// padExec pads in into out, or with adjoint sums the padded gradient in back into out. Planes
// run in parallel; within a plane the sums run in row-major order of the padded image.
func padExec[T float](p int, adjoint bool, out, inv G.Value) error {
	os := out.Shape()
	is := inv.Shape()
	small, big := os, is // adjoint: the padded tensor is the input
	if !adjoint {
		small, big = is, os
	}
	if small.Dims() != 4 || big.Dims() != 4 || big[2] != small[2]+2*p || big[3] != small[3]+2*p {
		return fmt.Errorf("layers: reflection pad of %d between %v and %v", p, small, big)
	}
	src, dst, err := srcDst[T](inv, out, os)
	if err != nil {
		return err
	}
	H, W := small[2], small[3]
	PH, PW := big[2], big[3]
	parallelFor(small[0]*small[1], int64(big.TotalSize()), func(q0, q1 int) {
		for q := q0; q < q1; q++ {
			sp, bp := q*H*W, q*PH*PW
			if adjoint {
				clear(dst[sp : sp+H*W])
			}
			for i := 0; i < PH; i++ {
				r := reflect(i-p, H)
				for j := 0; j < PW; j++ {
					c := reflect(j-p, W)
					if adjoint {
						dst[sp+r*W+c] += src[bp+i*PW+j]
					} else {
						dst[bp+i*PW+j] = src[sp+r*W+c]
					}
				}
			}
		}
	})
	return nil
}
