package layers

import (
	"fmt"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// LeakyReLU is x for x > 0 and slope*x otherwise (Pix2PixHD's discriminator uses slope 0.2), one
// node whose gradient reads only its output: for a positive slope y > 0 exactly where x > 0.
// gorgonia has no leaky ReLU; building it from a comparison, a product and a sum keeps a mask and
// two more activation-sized tensors alive.
func LeakyReLU(x *G.Node, slope float64) (*G.Node, error) {
	if !(slope > 0 && slope < 1) {
		return nil, fmt.Errorf("layers: LeakyReLU slope must be in (0, 1), got %v", slope)
	}
	return apply(actSpec{kind: actLeaky, slope: slope, dims: x.Dims()}, x)
}

// Tanh is the hyperbolic tangent as one node whose gradient, 1 - y², reads only its output (the
// Pix2PixHD generator's last layer). gorgonia's Tanh has no path into memory the caller owns.
func Tanh(x *G.Node) (*G.Node, error) {
	return apply(actSpec{kind: actTanh, dims: x.Dims()}, x)
}

type actKind uint8

const (
	actLeaky actKind = iota
	actTanh
)

// actSpec is an activation y = f(x); its gradient is actGradSpec (y, dy) -> dy * f'(x), with
// f' written in terms of y.
type actSpec struct {
	elementwise
	kind  actKind
	slope float64
	dims  int
}

func (s actSpec) name() string {
	if s.kind == actTanh {
		return "Tanh"
	}
	return fmt.Sprintf("LeakyReLU{%v}", s.slope)
}
func (s actSpec) arity() int                                       { return 1 }
func (s actSpec) typ() hm.Type                                     { return fnType(s.dims, s.dims) }
func (s actSpec) outShape(in []tensor.Shape) (tensor.Shape, error) { return sameShape(in) }
func (s actSpec) flops(in []tensor.Shape) int64 {
	if s.kind == actTanh {
		return 8 * size1(in) // an exp and a division per element, roughly
	}
	return size1(in)
}
func (s actSpec) exec(dt tensor.Dtype, out G.Value, _ []byte, in []G.Value) error {
	if dt == tensor.Float32 {
		return actExec[float32](s.kind, s.slope, out, in[0], nil)
	}
	return actExec[float64](s.kind, s.slope, out, in[0], nil)
}
func (s actSpec) diff(n int) []bool { return []bool{true} }
func (s actSpec) grads(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	dx, err := apply(actGradSpec{kind: s.kind, slope: s.slope, dims: s.dims}, out, grad)
	return G.Nodes{dx}, err
}

// actGradSpec: (y, dy) -> dx.
type actGradSpec struct {
	backward
	elementwise
	kind  actKind
	slope float64
	dims  int
}

func (s actGradSpec) name() string                                     { return actSpec{kind: s.kind, slope: s.slope}.name() + "Grad" }
func (s actGradSpec) arity() int                                       { return 2 }
func (s actGradSpec) typ() hm.Type                                     { return fnType(s.dims, s.dims, s.dims) }
func (s actGradSpec) outShape(in []tensor.Shape) (tensor.Shape, error) { return sameShape(in) }
func (s actGradSpec) flops(in []tensor.Shape) int64                    { return 2 * size1(in) }
func (s actGradSpec) exec(dt tensor.Dtype, out G.Value, _ []byte, in []G.Value) error {
	if dt == tensor.Float32 {
		return actExec[float32](s.kind, s.slope, out, in[0], in[1])
	}
	return actExec[float64](s.kind, s.slope, out, in[0], in[1])
}

// actExec computes y = f(x) into out, or with dyv the gradient from y = xv and dy. Chunks of a
// fixed size run in parallel; every element is independent, so the split does not matter.
func actExec[T float](kind actKind, slope float64, out, xv, dyv G.Value) error {
	x, dy, res, err := elemIO[T](out, xv, dyv)
	if err != nil {
		return err
	}
	a := T(slope)
	const chunk = 1 << 14
	parallelFor((len(x)+chunk-1)/chunk, int64(len(x)), func(c0, c1 int) {
		lo, hi := c0*chunk, min(c1*chunk, len(x))
		xr, rr := x[lo:hi], res[lo:hi]
		switch {
		case kind == actLeaky && dy == nil:
			for i, v := range xr {
				if v > 0 {
					rr[i] = v
				} else {
					rr[i] = a * v // NaN stays NaN
				}
			}
		case kind == actLeaky:
			for i, v := range xr { // v is y: positive exactly where x was
				if v > 0 {
					rr[i] = dy[lo+i]
				} else {
					rr[i] = a * dy[lo+i]
				}
			}
		case dy == nil:
			for i, v := range xr {
				rr[i] = T(math.Tanh(float64(v)))
			}
		default:
			for i, v := range xr {
				rr[i] = dy[lo+i] * (1 - v*v)
			}
		}
	})
	return nil
}
