package layers

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// spec is what each op added for the segmentation, GAN and sequence models defines; frameOp
// turns it into a gorgonia op that meets the package's contracts (one exec behind Do,
// UsePreallocDo and DoWorkspace; declared workspace; FLOPs; a hash naming every parameter), so
// each new op is only its semantics.
type spec interface {
	// name is the op's String and hash: it must name every parameter the result depends on,
	// because gorgonia merges nodes whose ops hash alike and whose operands are the same.
	name() string
	arity() int
	typ() hm.Type
	outShape(in []tensor.Shape) (tensor.Shape, error)
	flops(in []tensor.Shape) int64
	// exec writes every element of out, which holds arbitrary bytes on entry.
	exec(dt tensor.Dtype, out G.Value, ws []byte, in []G.Value) error
	// diff says which operands have gradients; grads builds them (nil for the others).
	diff(n int) []bool
	grads(in G.Nodes, out, grad *G.Node) (G.Nodes, error)
}

// wsSpec is implemented by specs that need scratch memory.
type wsSpec interface {
	ws(dt tensor.Dtype, in []tensor.Shape) int64
}

// inPlaceSpec is implemented by specs whose result may be written over an operand.
type inPlaceSpec interface {
	inPlace(operand int) bool
}

// frameOp is a spec as a gorgonia.Op.
type frameOp struct {
	pure
	shapeMemo
	s spec
}

func apply(s spec, in ...*G.Node) (*G.Node, error) { return G.ApplyOp(&frameOp{s: s}, in...) }

func (op *frameOp) Arity() int    { return op.s.arity() }
func (op *frameOp) Type() hm.Type { return op.s.typ() }
func (op *frameOp) outShape(in []tensor.Shape) (tensor.Shape, error) {
	if len(in) != op.s.arity() {
		return nil, fmt.Errorf("layers: %s takes %d inputs, got %d", op.s.name(), op.s.arity(), len(in))
	}
	return op.s.outShape(in)
}
func (op *frameOp) InferShape(ds ...G.DimSizer) (tensor.Shape, error) {
	in, err := dimSizersToShapes(ds)
	if err != nil {
		return nil, err
	}
	return op.outShape(in)
}
func (op *frameOp) wsBytes(dt tensor.Dtype, in []tensor.Shape) int64 {
	if w, ok := op.s.(wsSpec); ok {
		return w.ws(dt, in)
	}
	return 0
}

// WorkspaceBytes is the scratch one call needs (0 for most of these ops).
func (op *frameOp) WorkspaceBytes(dt tensor.Dtype, in []tensor.Shape) int64 {
	return op.wsBytes(dt, in)
}

// FLOPs counts a multiply-add as 2.
func (op *frameOp) FLOPs(in []tensor.Shape) int64 {
	if len(in) != op.s.arity() {
		return 0
	}
	return op.s.flops(in)
}

// Do allocates the result: a tensor, or a gorgonia scalar for the losses.
func (op *frameOp) Do(in ...G.Value) (G.Value, error) { return doAlloc(op, in) }
func (op *frameOp) UsePreallocDo(p G.Value, in ...G.Value) (G.Value, error) {
	return doPrealloc(op, p, in)
}
func (op *frameOp) DoWorkspace(out G.Value, ws []byte, in ...G.Value) error {
	return doWorkspace(op, out, ws, in, false)
}
func (op *frameOp) exec(dt tensor.Dtype, out G.Value, ws []byte, in []G.Value) error {
	return op.s.exec(dt, out, ws, in)
}
func (op *frameOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "layers.%s", op.s.name()) }
func (op *frameOp) Hashcode() uint32      { return hashOf(op) }
func (op *frameOp) String() string        { return op.s.name() }
func (op *frameOp) DiffWRT(n int) []bool  { return op.s.diff(n) }
func (op *frameOp) SymDiff(inputs G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	if len(inputs) != op.s.arity() {
		return nil, fmt.Errorf("layers: %s: %d inputs", op.s.name(), len(inputs))
	}
	return op.s.grads(inputs, output, grad)
}

// InPlaceSafe tells the out-of-core VM whether the result may be written over an operand.
func (op *frameOp) InPlaceSafe(operand int) bool {
	if ip, ok := op.s.(inPlaceSpec); ok {
		return ip.inPlace(operand)
	}
	return false
}

// backward marks the specs of gradient ops: nobody needs their second derivatives.
type backward struct{}

func (backward) diff(n int) []bool { return make([]bool, n) }
func (backward) grads(G.Nodes, *G.Node, *G.Node) (G.Nodes, error) {
	return nil, fmt.Errorf("layers: second-order gradients are not implemented for this op")
}

// elementwise is the in-place rule of ops whose every output element reads only the operands'
// elements at the same index.
type elementwise struct{}

func (elementwise) inPlace(int) bool { return true }

// sameShape is the output shape of ops whose operands and result all have one shape.
func sameShape(in []tensor.Shape) (tensor.Shape, error) {
	for _, s := range in[1:] {
		if !s.Eq(in[0]) {
			return nil, fmt.Errorf("layers: operands of shapes %v must be alike", in)
		}
	}
	if in[0].TotalSize() == 0 {
		return nil, fmt.Errorf("layers: empty operand %v", in[0])
	}
	return in[0].Clone(), nil
}

// size1 is the element count of the first operand, the cost unit of elementwise ops.
func size1(in []tensor.Shape) int64 { return int64(in[0].TotalSize()) }

func newScalar(dt tensor.Dtype) G.Value {
	if dt == tensor.Float32 {
		return G.NewF32(0)
	}
	return G.NewF64(0)
}

// setScalar stores a scalar result into a gorgonia scalar or a one-element tensor.
func setScalar(out G.Value, v float64) error {
	switch o := out.(type) {
	case *G.F32:
		*o = G.F32(float32(v))
	case *G.F64:
		*o = G.F64(v)
	case *tensor.Dense:
		switch d := o.Data().(type) {
		case []float32:
			if len(d) != 1 {
				return fmt.Errorf("layers: scalar result into %v", o.Shape())
			}
			d[0] = float32(v)
		case []float64:
			if len(d) != 1 {
				return fmt.Errorf("layers: scalar result into %v", o.Shape())
			}
			d[0] = v
		case float32:
			return o.SetAt(float32(v))
		case float64:
			return o.SetAt(v)
		default:
			return fmt.Errorf("layers: scalar result into %T", d)
		}
	default:
		return fmt.Errorf("layers: scalar result into %T", out)
	}
	return nil
}

// Scalar reads a scalar value (a loss, or the gradient a loss op is given): a gorgonia scalar or
// a one-element tensor.
func Scalar(v G.Value) (float64, error) {
	switch x := v.(type) {
	case *G.F32:
		return float64(*x), nil
	case *G.F64:
		return float64(*x), nil
	case *tensor.Dense:
		if x.Shape().TotalSize() == 1 {
			switch d := x.Data().(type) {
			case []float32:
				return float64(d[0]), nil
			case []float64:
				return d[0], nil
			case float32:
				return float64(d), nil
			case float64:
				return d, nil
			}
		}
	}
	if v == nil {
		return 0, fmt.Errorf("layers: no value")
	}
	return 0, fmt.Errorf("layers: not a scalar: %T %v", v, v.Shape())
}

// scalarType is the hm type of a gorgonia scalar of the op's float type.
func scalarType() hm.Type { return hm.TypeVariable('a') }

// srcDst returns the data of a one-operand op's input and of its output of shape os.
func srcDst[T float](in, out G.Value, os tensor.Shape) (src, dst []T, err error) {
	if src, err = denseData[T](in, in.Shape()); err != nil {
		return nil, nil, err
	}
	dst, err = outData[T](out, os)
	return src, dst, err
}

// elemIO returns the data of an elementwise op's operand, of its optional second operand of the
// same shape (nil when dyv is nil: a forward) and of its output.
func elemIO[T float](out, xv, dyv G.Value) (x, dy, res []T, err error) {
	if x, res, err = srcDst[T](xv, out, xv.Shape()); err != nil {
		return nil, nil, nil, err
	}
	if dyv != nil {
		if dy, err = denseData[T](dyv, xv.Shape()); err != nil {
			return nil, nil, nil, err
		}
	}
	return x, dy, res, nil
}
