package layers

import (
	"fmt"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// MSEToConstant is scale * mean((x - target)²) over every element of x, a scalar: the least-squares
// GAN loss (Mao et al.; Pix2PixHD's default), where target is 1 for "real" and 0 for "fake". One
// node: gorgonia's Sub, Square and chain of single-axis means would keep two activation-sized
// temporaries, and its multi-axis Mean is wrong. The backward reads x only.
func MSEToConstant(x *G.Node, target, scale float64) (*G.Node, error) {
	if x.IsScalar() || x.Shape().TotalSize() == 0 {
		return nil, fmt.Errorf("layers: MSEToConstant of %v: want a non-empty tensor", x.Shape())
	}
	return apply(lossSpec{kind: lossMSE, target: target, scale: scale, dims: x.Dims()}, x)
}

// L1Loss is scale * mean(|a - b|) over every element, a scalar (Pix2PixHD's feature-matching
// loss). Its gradient with respect to a is scale*sign(a-b)/n (0 where a = b, as PyTorch's).
func L1Loss(a, b *G.Node, scale float64) (*G.Node, error) {
	if !a.Shape().Eq(b.Shape()) || a.IsScalar() || a.Shape().TotalSize() == 0 {
		return nil, fmt.Errorf("layers: L1Loss of %v and %v: want two non-empty tensors of one shape", a.Shape(), b.Shape())
	}
	return apply(lossSpec{kind: lossL1, scale: scale, dims: a.Dims()}, a, b)
}

type lossKind uint8

const (
	lossMSE lossKind = iota // (x) -> scale * mean((x-target)²)
	lossL1                  // (a, b) -> scale * mean(|a-b|)
)

// lossSpec is a mean-reduction loss; its gradients are lossGradSpec.
type lossSpec struct {
	kind   lossKind
	target float64
	scale  float64
	dims   int
}

func (s lossSpec) name() string {
	if s.kind == lossMSE {
		return fmt.Sprintf("MSEToConstant{%v x%v}", s.target, s.scale)
	}
	return fmt.Sprintf("L1Loss{x%v}", s.scale)
}
func (s lossSpec) arity() int {
	if s.kind == lossMSE {
		return 1
	}
	return 2
}
func (s lossSpec) typ() hm.Type {
	t := G.TensorType{Dims: s.dims, Of: hm.TypeVariable('a')}
	if s.kind == lossMSE {
		return hm.NewFnType(t, scalarType())
	}
	return hm.NewFnType(t, t, scalarType())
}
func (s lossSpec) outShape(in []tensor.Shape) (tensor.Shape, error) {
	if _, err := sameShape(in); err != nil {
		return nil, err
	}
	return tensor.ScalarShape(), nil
}
func (s lossSpec) flops(in []tensor.Shape) int64 { return 3 * size1(in) }
func (s lossSpec) diff(n int) []bool {
	d := make([]bool, n)
	for i := range d {
		d[i] = true
	}
	return d
}
func (s lossSpec) grads(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	var gs G.Nodes
	for i := range in {
		g, err := apply(lossGradSpec{loss: s, wrt: i}, append(append(G.Nodes{}, in...), grad)...)
		if err != nil {
			return nil, err
		}
		gs = append(gs, g)
	}
	return gs, nil
}
func (s lossSpec) exec(dt tensor.Dtype, out G.Value, _ []byte, in []G.Value) error {
	var v float64
	var err error
	if dt == tensor.Float32 {
		v, err = lossValue[float32](s, in)
	} else {
		v, err = lossValue[float64](s, in)
	}
	if err != nil {
		return err
	}
	return setScalar(out, v)
}

// lossChunk is the summation unit: chunks are summed in parallel, each serially, and the chunk
// sums added in order, so the result depends on the shape alone.
const lossChunk = 1 << 14

func lossValue[T float](s lossSpec, in []G.Value) (float64, error) {
	sh := in[0].Shape()
	a, err := denseData[T](in[0], sh)
	if err != nil {
		return 0, err
	}
	var b []T
	if s.kind == lossL1 {
		if b, err = denseData[T](in[1], sh); err != nil {
			return 0, err
		}
	}
	n := len(a)
	parts := make([]float64, (n+lossChunk-1)/lossChunk)
	t := s.target
	parallelFor(len(parts), int64(n), func(c0, c1 int) {
		for c := c0; c < c1; c++ {
			lo, hi := c*lossChunk, min((c+1)*lossChunk, n)
			var acc float64
			if b == nil {
				for _, v := range a[lo:hi] {
					d := float64(v) - t
					acc += d * d
				}
			} else {
				for i, v := range a[lo:hi] {
					acc += math.Abs(float64(v) - float64(b[lo+i]))
				}
			}
			parts[c] = acc
		}
	})
	var sum float64
	for _, p := range parts {
		sum += p
	}
	return s.scale * sum / float64(n), nil
}

// lossGradSpec: (operands..., dloss) -> the gradient of operand wrt, elementwise.
type lossGradSpec struct {
	backward
	loss lossSpec
	wrt  int
}

func (s lossGradSpec) name() string { return fmt.Sprintf("%sGrad%d", s.loss.name(), s.wrt) }
func (s lossGradSpec) arity() int   { return s.loss.arity() + 1 }
func (s lossGradSpec) typ() hm.Type {
	t := G.TensorType{Dims: s.loss.dims, Of: hm.TypeVariable('a')}
	if s.loss.kind == lossMSE {
		return hm.NewFnType(t, scalarType(), t)
	}
	return hm.NewFnType(t, t, scalarType(), t)
}
func (s lossGradSpec) outShape(in []tensor.Shape) (tensor.Shape, error) {
	g := in[len(in)-1]
	if !g.IsScalar() && g.TotalSize() != 1 {
		return nil, fmt.Errorf("layers: %s: the loss gradient must be a scalar, got %v", s.name(), g)
	}
	return sameShape(in[:len(in)-1])
}
func (s lossGradSpec) flops(in []tensor.Shape) int64 { return 3 * size1(in) }

// inPlace: only over the operand differentiated, elementwise; never over the scalar.
func (s lossGradSpec) inPlace(operand int) bool { return operand < s.loss.arity() }
func (s lossGradSpec) exec(dt tensor.Dtype, out G.Value, _ []byte, in []G.Value) error {
	if dt == tensor.Float32 {
		return lossGrad[float32](s.loss, s.wrt, out, in)
	}
	return lossGrad[float64](s.loss, s.wrt, out, in)
}

func lossGrad[T float](s lossSpec, wrt int, out G.Value, in []G.Value) error {
	sh := in[0].Shape()
	a, err := denseData[T](in[0], sh)
	if err != nil {
		return err
	}
	var b []T
	if s.kind == lossL1 {
		if b, err = denseData[T](in[1], sh); err != nil {
			return err
		}
	}
	g, err := Scalar(in[len(in)-1])
	if err != nil {
		return err
	}
	res, err := outData[T](out, sh)
	if err != nil {
		return err
	}
	n := len(a)
	k := s.scale * g / float64(n)
	if s.kind == lossMSE {
		k *= 2
	} else if wrt == 1 {
		k = -k
	}
	kt, t := T(k), T(s.target)
	parallelFor((n+lossChunk-1)/lossChunk, int64(n), func(c0, c1 int) {
		lo, hi := c0*lossChunk, min(c1*lossChunk, n)
		for i := lo; i < hi; i++ {
			if b == nil {
				res[i] = kt * (a[i] - t)
				continue
			}
			switch d := a[i] - b[i]; {
			case d > 0:
				res[i] = kt
			case d < 0:
				res[i] = -kt
			default:
				res[i] = d * kt // 0, or NaN for NaN
			}
		}
	})
	return nil
}
