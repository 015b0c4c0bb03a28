package prealloc

import (
	"errors"
	"fmt"
	"slices"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// repeatOp's own UsePreallocDo equals Do (tested), but allocates on every
// call: tensor's RepeatReuse expands the count into a slice per element,
// clones shapes and boxes its options. A loss's mean and sums repeat their
// gradients this way every step. The Func replays the same method on out's
// bytes instead: the same checks, the same copies from the same source
// offsets (tensor's stride choices included), so the same bytes land in
// the same places. Where the replay's conditions do not hold (another
// engine, a view, a mask, a count that is not a positive number, a shape
// tensor's check would refuse) the op's own method runs, as before.

func buildRepeat(op gorgonia.Op) (Func, error) {
	own, err := usePrealloc(nil)(op)
	if err != nil {
		return nil, err
	}
	along, err := intField(op, "along")
	if err != nil {
		return nil, err
	}
	return func(out *tensor.Dense, inputs ...gorgonia.Value) error {
		done, err := repeatInto(out, along, inputs)
		if done || err != nil {
			return err
		}
		return own(out, inputs...)
	}, nil
}

// repeatCount is gorgonia's valueToInt of the count operand.
func repeatCount(v gorgonia.Value) (int, bool) {
	switch s := v.(type) {
	case *gorgonia.F64:
		return int(float64(*s)), true
	case *gorgonia.F32:
		return int(float32(*s)), true
	case *gorgonia.I:
		return int(*s), true
	case *gorgonia.I32:
		return int(int32(*s)), true
	case *gorgonia.I64:
		return int(int64(*s)), true
	case *gorgonia.U8:
		return int(byte(*s)), true
	}
	return 0, false
}

// bareArray says whether tensor's methods read t as its bare array: a plain
// (no view, no transpose, no mask) host tensor on tensor's own engine,
// which is what takes tensor's fast repeat copier.
func bareArray(t *tensor.Dense) bool {
	return onStdEng(t) && t.IsNativelyAccessible() && !t.IsMasked() && !t.IsMaterializable() && !t.RequiresIterator() &&
		t.DataOrder().IsRowMajor()
}

// repeatInto is repeatOp.UsePreallocDo on float tensors: a scalar-like x
// fills out, a count of 1 copies x, anything else is tensor's RepeatReuse
// with its fast copier. It reports false, having written nothing, where it
// does not apply.
func repeatInto(out *tensor.Dense, along int, inputs []gorgonia.Value) (bool, error) {
	if len(inputs) != 2 || along < 0 || out.Dims() == 0 {
		return false, nil
	}
	x, ok := inputs[0].(*tensor.Dense)
	if !ok {
		return false, nil
	}
	rep, ok := repeatCount(inputs[1])
	if !ok || rep < 1 {
		return false, nil
	}
	dt := x.Dtype()
	if !isFloat(dt) || out.Dtype() != dt || !bareArray(x) || !bareArray(out) {
		return false, nil
	}
	es := int(dt.Size())
	src, dst := x.Raw, out.Raw
	if overlap(src, dst) {
		return true, fmt.Errorf("out overlaps the input")
	}
	xs := x.Shape()
	switch {
	case xs.IsScalarEquiv():
		// UsePreallocDo sets every element of out's data to x's first.
		if len(src) < es {
			return false, nil
		}
		for i := 0; i+es <= len(dst); i += es {
			copy(dst[i:i+es], src[:es])
		}
		return true, nil
	case rep == 1:
		// gorgonia's Copy: tensor.Copy of the arrays, as many bytes as both hold.
		copy(dst, src)
		return true, nil
	}
	r, ok := repeatGeometry(x, out, along, rep)
	if !ok {
		return false, nil
	}
	return true, r.copy(dst, src, es)
}

// repeatRun is the arguments of tensor's fastCopyDenseRepeat.
type repeatRun struct {
	outers, size, stride, newStride, rep int
}

// repeatGeometry is tensor's Shape.Repeat and denseRepeat set-up for a
// count applied to every element along the axis: false where tensor would
// refuse (an axis past the shape) or where out's shape is not exactly the
// repeated one.
func repeatGeometry(x, out *tensor.Dense, along, rep int) (repeatRun, bool) {
	xs := x.Shape()
	var buf [maxDims]int
	if len(xs)+1 > maxDims {
		return repeatRun{}, false
	}
	var newShape tensor.Shape
	var size int
	switch {
	case xs.IsVector() && !xs.IsRowVec() && !xs.IsColVec() && along == 1:
		// a plain vector repeated along 1 becomes a column
		size = 1
		newShape = append(buf[:0], xs[0], 1)
	case along >= len(xs):
		return repeatRun{}, false
	default:
		size = xs[along]
		newShape = append(buf[:0], xs...)
	}
	newShape[along] = size * rep
	if !slices.Equal(out.Shape(), newShape) {
		return repeatRun{}, false
	}
	outers := 1
	for _, d := range xs[:along] {
		outers *= d
	}
	r := repeatRun{outers: outers, size: size, rep: rep, stride: 1, newStride: 1}
	// tensor's special case: a vector's strides are taken as 1, whatever
	// they are.
	if !newShape.IsVector() && !xs.IsVector() {
		r.stride = intAt(x.Strides(), along)
	}
	if !newShape.IsVector() {
		r.newStride = intAt(out.Strides(), along)
	}
	if r.stride < 0 || r.newStride < 0 {
		return repeatRun{}, false
	}
	return r, true
}

func intAt(s []int, i int) int {
	if i < 0 || i >= len(s) {
		return -1
	}
	return s[i]
}

var errRepeatRange = errors.New("gorgonia's Repeat indexes out of range (Do panics)")

// copy is fastCopyDenseRepeat on the arrays' bytes. Where tensor would
// slice past an array (it panics) it returns an error.
func (r repeatRun) copy(dst, src []byte, es int) error {
	srcLen, dstLen := len(src)/es, len(dst)/es
	var destStart, srcStart int
	for i := 0; i < r.outers; i++ {
		if r.stride == 1 && r.newStride == 1 {
			// Each element of x broadcast to its run of rep in out.
			for sz := 0; sz < r.size; sz++ {
				s0, s1 := srcStart*es, (srcStart+r.stride)*es
				d0, d1 := destStart*es, (destStart+r.rep)*es
				if s1 > len(src) || d1 > len(dst) {
					return errRepeatRange
				}
				one, run := src[s0:s1], dst[d0:d1]
				for k := 0; k < len(run); k += len(one) {
					copy(run[k:], one)
				}
				srcStart += r.stride
				destStart += r.rep
			}
			continue
		}
		for j := 0; j < r.size; j++ {
			if srcStart > srcLen {
				return errRepeatRange
			}
			from := src[srcStart*es:]
			for k := 0; k < r.rep; k++ {
				if srcStart >= srcLen || destStart+r.stride > dstLen {
					break
				}
				if destStart+r.newStride > dstLen {
					return errRepeatRange
				}
				copy(dst[destStart*es:(destStart+r.newStride)*es], from)
				destStart += r.newStride
			}
			srcStart += r.stride
		}
	}
	return nil
}
