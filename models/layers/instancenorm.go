package layers

import (
	"fmt"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// InstanceNorm normalises each (image, channel) plane of an (N,C,H,W) input to mean 0 and
// variance 1 with the plane's own statistics (biased variance, eps added), as PyTorch's
// InstanceNorm2d with its defaults: no affine parameters and no running statistics, so training
// and inference compute the same thing (Pix2PixHD's norm layer). gorgonia has no instance norm.
//
// Like BatchNorm here the op saves nothing: its backward reads x and dy and recomputes the
// statistics, so a VM may recompute or interleave it freely.
func InstanceNorm(x *G.Node, eps float64) (*G.Node, error) {
	if !(eps > 0) {
		return nil, fmt.Errorf("layers: InstanceNorm needs eps > 0, got %v", eps)
	}
	if err := want4D("InstanceNorm input", x.Shape()); err != nil {
		return nil, err
	}
	return apply(instNormSpec{eps: eps}, x)
}

type instNormSpec struct {
	eps float64
}

func (s instNormSpec) name() string    { return fmt.Sprintf("InstanceNorm{%v}", s.eps) }
func (s instNormSpec) arity() int      { return 1 }
func (s instNormSpec) typ() hm.Type    { return fnType(4, 4) }
func (s instNormSpec) diff(int) []bool { return []bool{true} }
func (s instNormSpec) outShape(in []tensor.Shape) (tensor.Shape, error) {
	if err := want4D("InstanceNorm input", in[0]); err != nil {
		return nil, err
	}
	return in[0].Clone(), nil
}

// flops: two statistics passes and the normalisation.
func (s instNormSpec) flops(in []tensor.Shape) int64 { return 6 * size1(in) }

// inPlace: each plane's statistics are read in full before that plane is written.
func (s instNormSpec) inPlace(int) bool { return true }

func (s instNormSpec) exec(dt tensor.Dtype, out G.Value, _ []byte, in []G.Value) error {
	if dt == tensor.Float32 {
		return instNormExec[float32](s.eps, out, in[0], nil)
	}
	return instNormExec[float64](s.eps, out, in[0], nil)
}
func (s instNormSpec) grads(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	dx, err := apply(instNormGradSpec{eps: s.eps}, in[0], grad)
	return G.Nodes{dx}, err
}

// instNormGradSpec: (x, dy) -> dx = (dy - mean(dy) - x̂·mean(dy·x̂)) / std, per plane.
type instNormGradSpec struct {
	backward
	eps float64
}

func (s instNormGradSpec) name() string { return fmt.Sprintf("InstanceNormGrad{%v}", s.eps) }
func (s instNormGradSpec) arity() int   { return 2 }
func (s instNormGradSpec) typ() hm.Type { return fnType(4, 4, 4) }
func (s instNormGradSpec) outShape(in []tensor.Shape) (tensor.Shape, error) {
	if err := want4D("InstanceNormGrad input", in[0]); err != nil {
		return nil, err
	}
	return sameShape(in)
}
func (s instNormGradSpec) flops(in []tensor.Shape) int64 { return 10 * size1(in) }

// inPlace: a plane's dx is written after all of that plane's x and dy have been read.
func (s instNormGradSpec) inPlace(int) bool { return true }
func (s instNormGradSpec) exec(dt tensor.Dtype, out G.Value, _ []byte, in []G.Value) error {
	if dt == tensor.Float32 {
		return instNormExec[float32](s.eps, out, in[0], in[1])
	}
	return instNormExec[float64](s.eps, out, in[0], in[1])
}

// instNormExec normalises x into out, or with dyv computes dx into out. Planes run in parallel;
// each plane's sums are lane sums in float64 (lanes: the CUDA kernels' order), so results do not depend on the split.
func instNormExec[T float](eps float64, out, xv, dyv G.Value) error {
	xs := xv.Shape()
	x, dy, res, err := elemIO[T](out, xv, dyv)
	if err != nil {
		return err
	}
	plane := xs[2] * xs[3]
	cnt := float64(plane)
	parallelFor(xs[0]*xs[1], int64(len(x)), func(p0, p1 int) {
		for p := p0; p < p1; p++ {
			xr, rr := x[p*plane:(p+1)*plane], res[p*plane:(p+1)*plane]
			var sum, q lanes
			laneSum(&sum, 0, xr)
			mean := sum.total() / cnt
			laneSumSq(&q, 0, xr, mean)
			is := 1 / math.Sqrt(q.total()/cnt+eps)
			if dy == nil {
				m, a := T(mean), T(is)
				for i, v := range xr {
					rr[i] = (v - m) * a
				}
				continue
			}
			dr := dy[p*plane : (p+1)*plane]
			var sa, sb lanes
			laneGradSums(&sa, &sb, 0, dr, xr, mean)
			sdy, sdxh := sa.total(), sb.total()*is
			mdy, k, m, a := T(sdy/cnt), T(sdxh/cnt*is), T(mean), T(is)
			for i, g := range dr {
				rr[i] = a * (g - mdy - (xr[i]-m)*k)
			}
		}
	})
	return nil
}
