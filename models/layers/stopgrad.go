package layers

import (
	"fmt"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// StopGradient is the identity in the forward and a wall in the backward: gorgonia.Grad sends
// nothing through it, so whatever is computed from its result never changes the gradient of x
// (PyTorch's detach, TensorFlow's stop_gradient). gorgonia has no such op.
//
// A GAN step in one graph needs it: the discriminator's loss must not train the generator (it
// reads StopGradient(fake)), and the generator's loss must not train the discriminator (it runs
// the discriminator on StopGradient(weight) for every discriminator weight, and compares with
// StopGradient of the real image's features). The op copies x: that is one tensor of x's size,
// the generated images or one weight, never a whole network's activations.
func StopGradient(x *G.Node) (*G.Node, error) {
	if x.Shape().TotalSize() == 0 || x.IsScalar() {
		return nil, fmt.Errorf("layers: StopGradient of %v: want a non-empty tensor", x.Shape())
	}
	return apply(stopSpec{dims: x.Dims()}, x)
}

type stopSpec struct {
	elementwise
	dims int
}

func (s stopSpec) name() string                                     { return fmt.Sprintf("StopGradient%d", s.dims) }
func (s stopSpec) arity() int                                       { return 1 }
func (s stopSpec) typ() hm.Type                                     { return fnType(s.dims, s.dims) }
func (s stopSpec) outShape(in []tensor.Shape) (tensor.Shape, error) { return sameShape(in) }
func (s stopSpec) flops(in []tensor.Shape) int64                    { return size1(in) }

// diff is false for the operand, so gorgonia.Grad neither differentiates through the op nor
// counts its operand as reached by the gradient along this path.
func (s stopSpec) diff(n int) []bool { return make([]bool, n) }
func (s stopSpec) grads(in G.Nodes, _, _ *G.Node) (G.Nodes, error) {
	return make(G.Nodes, len(in)), nil
}
func (s stopSpec) exec(dt tensor.Dtype, out G.Value, _ []byte, in []G.Value) error {
	if dt == tensor.Float32 {
		return copyExec[float32](out, in[0])
	}
	return copyExec[float64](out, in[0])
}

func copyExec[T float](out, in G.Value) error {
	x, y, err := srcDst[T](in, out, in.Shape())
	if err == nil {
		copy(y, x)
	}
	return err
}
