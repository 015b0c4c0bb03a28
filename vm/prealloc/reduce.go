package prealloc

import (
	"fmt"
	"math"
	"slices"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// sumOp and maxOp run tensor v0.9.24's StdEng.reduce, which has no reuse
// option: it reduces one axis at a time, sorted, each into a fresh
// tensor, with one of three kernels per axis:
//
//	first   (axis 0):      r[j] = x[j]; then r[j] = f(r[j], x[i*split+j]) for i = 1..
//	last    (last axis):   r[k] = g(x[k*n : (k+1)*n])
//	default (in between):  tensor's reduceDefault loop
//
// reduceDefault walks the outer index j with innerStart = j + (j/stride)*stride,
// which skips one stride per block where it should skip (dimSize-1): for a
// middle axis of length other than 2 it reads the wrong elements, so
// gorgonia's Sum and Max over a middle axis, and over two or more axes of
// an ordinary 4-D tensor (the second axis reduced becomes a middle one or
// the first one is), are wrong. Do's answer is the contract, so the same
// reads are made here. When the loop would run past its slice, Do panics
// (index out of range); the Func returns an error instead.
//
// The replay needs no intermediate tensors: each output element is
// evaluated through the chain of reductions from the input, recursively.
// Every kernel folds left in tensor's operand order, so the float results
// are Do's bit for bit.

type kernel uint8

const (
	kFirst kernel = iota
	kLast
	kDefault
)

type redStep struct {
	k kernel
	// kFirst: size, split; kLast: dimSize; kDefault: the rest.
	size, split                   int
	dimSize                       int
	outerStride, stride, expected int
}

// reducePlan lays out the steps tensor takes for an input of the given
// shape and axes, and returns the number of elements of the result.
func reducePlan(shape []int, along []int, steps *[maxDims]redStep) (nsteps, n int, err error) {
	if len(along) == 0 {
		return 0, 0, errScalar
	}
	if len(along) > maxDims || len(shape) > maxDims {
		return 0, 0, fmt.Errorf("reduction over %v of shape %v", along, shape)
	}
	mono, incr1 := true, true
	for i := 1; i < len(along); i++ {
		if along[i] < along[i-1] {
			mono, incr1 = false, false
			break
		}
		if along[i] != along[i-1]+1 {
			incr1 = false
		}
	}
	if mono && incr1 && len(along) == len(shape) {
		return 0, 0, errScalar
	}
	var sorted [maxDims]int
	copy(sorted[:], along)
	insertionSort(sorted[:len(along)])

	var cur [maxDims]int
	dims := copy(cur[:], shape)
	for i, axis := range sorted[:len(along)] {
		axis -= i
		if axis < 0 || axis >= dims {
			return 0, 0, fmt.Errorf("cannot reduce axis %d of a %d-dimensional tensor", axis, dims)
		}
		s := cur[:dims]
		total := 1
		for _, d := range s {
			total *= d
		}
		if total == 0 {
			return 0, 0, fmt.Errorf("reduction of an empty tensor of shape %v", slices.Clone(s))
		}
		var st redStep
		switch {
		case axis == 0:
			st = redStep{k: kFirst, size: s[0], split: total / s[0]}
		case axis == dims-1:
			st = redStep{k: kLast, dimSize: s[axis]}
		default:
			var strides [maxDims]int
			rowMajorStrides(s, strides[:dims])
			// the result's strides[0]: the product of its dims after the first
			expected := total / s[0] / s[axis]
			st = redStep{k: kDefault, size: s[0], dimSize: s[axis],
				outerStride: strides[0], stride: strides[axis], expected: expected}
			// tensor's loop slices x[i*outerStride : (i+1)*outerStride]
			// and reads innerStart(j) + k*stride in it.
			j := expected - 1
			if last := j + (j/st.stride)*st.stride + (st.dimSize-1)*st.stride; last >= st.outerStride {
				return 0, 0, fmt.Errorf("gorgonia's reduction over axis %d of shape %v reads out of range (Do panics)", axis, slices.Clone(s))
			}
		}
		steps[i] = st
		copy(cur[axis:], cur[axis+1:dims])
		dims--
	}
	if dims == 0 {
		return 0, 0, errScalar
	}
	n = 1
	for _, d := range cur[:dims] {
		n *= d
	}
	return len(along), n, nil
}

func insertionSort(a []int) {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j] < a[j-1]; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
}

type number interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 | ~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~float32 | ~float64
}

// replay evaluates the chain of reductions without storing any level.
type replay[T number] struct {
	src   []T
	steps []redStep
	max   bool
}

// at is element i of the tensor after the first l reductions.
func (r *replay[T]) at(l, i int) T {
	if l == 0 {
		return r.src[i]
	}
	st := &r.steps[l-1]
	switch st.k {
	case kFirst:
		// VecAdd / VecMax: a[j] = a[j] op b[j].
		acc := r.at(l-1, i)
		for k := 1; k < st.size; k++ {
			v := r.at(l-1, k*st.split+i)
			if r.max {
				if v > acc {
					acc = v
				}
			} else {
				acc = add(acc, v)
			}
		}
		return acc
	case kLast:
		base := i * st.dimSize
		if r.max {
			// SliceMax: ReduceF(MaxF, a[0], a[1:]...), MaxF(a, b) = a > b ? a : b.
			acc := r.at(l-1, base)
			for k := 1; k < st.dimSize; k++ {
				if v := r.at(l-1, base+k); !(acc > v) {
					acc = v
				}
			}
			return acc
		}
		// Sum: a zero accumulator, added to in order.
		var acc T
		for k := 0; k < st.dimSize; k++ {
			acc = add(acc, r.at(l-1, base+k))
		}
		return acc
	default:
		o, j := i/st.expected, i%st.expected
		start := o*st.outerStride + j + (j/st.stride)*st.stride
		acc := r.at(l-1, start)
		for k := 1; k < st.dimSize; k++ {
			v := r.at(l-1, start+k*st.stride)
			if r.max {
				if !(acc > v) {
					acc = v
				}
			} else {
				acc = add(acc, v)
			}
		}
		return acc
	}
}

// add is acc + v with the NaN the hardware keeps when both are NaNs
// pinned to tensor's: its compiled kernels (VecAdd, SumF*, AddF*) keep the
// accumulator's, quieted, on amd64. Go may put either operand of a + b
// first, so that choice is not left to the compiler here.
func add[T number](acc, v T) T {
	if acc != acc {
		return quiet(acc)
	}
	return acc + v
}

func quiet[T number](v T) T {
	switch x := any(v).(type) {
	case float64:
		return any(math.Float64frombits(math.Float64bits(x) | 1<<51)).(T)
	case float32:
		return any(math.Float32frombits(math.Float32bits(x) | 1<<22)).(T)
	}
	return v
}

func runReplay[T number](out []T, src []T, steps []redStep, isMax bool) {
	r := replay[T]{src: src, steps: steps, max: isMax}
	l := len(steps)
	if st := steps[l-1]; st.k == kFirst {
		// Row by row, as tensor's VecAdd runs: each out[j] still folds its
		// inputs in the same order, but the reads stream through memory.
		n := len(out)
		if l == 1 {
			copy(out, src[:n])
			for k := 1; k < st.size; k++ {
				row := src[k*st.split : k*st.split+n]
				if isMax {
					for j, v := range row {
						if v > out[j] {
							out[j] = v
						}
					}
					continue
				}
				for j, v := range row {
					if a := out[j]; a == a {
						out[j] = a + v
					} else {
						out[j] = quiet(a)
					}
				}
			}
			return
		}
		for j := range out {
			out[j] = r.at(l-1, j)
		}
		for k := 1; k < st.size; k++ {
			base := k * st.split
			for j := range out {
				v := r.at(l-1, base+j)
				if isMax {
					if v > out[j] {
						out[j] = v
					}
				} else {
					out[j] = add(out[j], v)
				}
			}
		}
		return
	}
	if st := steps[0]; l == 1 && st.k == kLast {
		// One reduction over contiguous runs, as tensor's reduceLast.
		for i := range out {
			run := src[i*st.dimSize : (i+1)*st.dimSize]
			if isMax {
				acc := run[0]
				for _, v := range run[1:] {
					if !(acc > v) {
						acc = v
					}
				}
				out[i] = acc
				continue
			}
			// Once the sum is a NaN it stays that NaN (see add).
			var acc T
			for _, v := range run {
				if acc != acc {
					break
				}
				acc += v
			}
			if acc != acc {
				acc = quiet(acc)
			}
			out[i] = acc
		}
		return
	}
	for i := range out {
		out[i] = r.at(l, i)
	}
}

func buildSum(op gorgonia.Op) (Func, error) { return buildReduce(op, false) }
func buildMax(op gorgonia.Op) (Func, error) { return buildReduce(op, true) }

func buildReduce(op gorgonia.Op, isMax bool) (Func, error) {
	// The op's own axes slice: Do sorts it in place, and so does the Func.
	along, err := sharedInts(op, "along")
	if err != nil {
		return nil, err
	}
	return func(out *tensor.Dense, inputs ...gorgonia.Value) error {
		if err := arity(inputs, 1); err != nil {
			return err
		}
		x, err := denseArg(inputs, 0)
		if err != nil {
			return err
		}
		if v := x; v.IsMaterializable() {
			// Do reduces a materialised copy of a view; so does this
			// (the one allocation, never taken for plain tensors).
			x = v.Materialize().(*tensor.Dense)
		}
		var steps [maxDims]redStep
		ns, n, err := reducePlan(x.Shape(), along, &steps)
		if err != nil {
			return err
		}
		insertionSort(along)
		xb, err := contiguousBytes(x)
		if err != nil {
			return err
		}
		ob, err := outBytes(out, x.Dtype(), n)
		if err != nil {
			return err
		}
		if overlap(ob, xb) {
			return fmt.Errorf("out overlaps the input")
		}
		return replayDtype(x.Dtype(), ob, xb, steps[:ns], isMax)
	}, nil
}

func replayDtype(dt tensor.Dtype, ob, xb []byte, steps []redStep, isMax bool) error {
	switch dt {
	case tensor.Float64:
		runReplay(asSlice[float64](ob), asSlice[float64](xb), steps, isMax)
	case tensor.Float32:
		runReplay(asSlice[float32](ob), asSlice[float32](xb), steps, isMax)
	case tensor.Int:
		runReplay(asSlice[int](ob), asSlice[int](xb), steps, isMax)
	case tensor.Int64:
		runReplay(asSlice[int64](ob), asSlice[int64](xb), steps, isMax)
	case tensor.Int32:
		runReplay(asSlice[int32](ob), asSlice[int32](xb), steps, isMax)
	case tensor.Int16:
		runReplay(asSlice[int16](ob), asSlice[int16](xb), steps, isMax)
	case tensor.Int8:
		runReplay(asSlice[int8](ob), asSlice[int8](xb), steps, isMax)
	case tensor.Uint:
		runReplay(asSlice[uint](ob), asSlice[uint](xb), steps, isMax)
	case tensor.Uint64:
		runReplay(asSlice[uint64](ob), asSlice[uint64](xb), steps, isMax)
	case tensor.Uint32:
		runReplay(asSlice[uint32](ob), asSlice[uint32](xb), steps, isMax)
	case tensor.Uint16:
		runReplay(asSlice[uint16](ob), asSlice[uint16](xb), steps, isMax)
	case tensor.Uint8:
		runReplay(asSlice[uint8](ob), asSlice[uint8](xb), steps, isMax)
	default:
		return fmt.Errorf("reduction of %v", dt)
	}
	return nil
}
