package prealloc

import (
	"fmt"
	"slices"
	"unsafe"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// layout is where a tensor's elements live: element i0,i1,... of a tensor
// of the given shape is the es bytes at offset es*(i0*strides[0]+...) of
// data. It describes views (slices, lazy transposes) as well as plain
// tensors, so data movement needs no materialised copy.
type layout struct {
	data    []byte
	es      int
	shape   []int
	strides []int
}

// maxDims bounds the rank the copy loops handle with fixed-size counters;
// gorgonia's ops stay far below it.
const maxDims = 16

// denseLayout describes a *tensor.Dense's memory without copying it.
func denseLayout(t *tensor.Dense) (layout, error) {
	if t == nil {
		return layout{}, fmt.Errorf("nil tensor")
	}
	if t.IsMasked() {
		return layout{}, fmt.Errorf("masked tensors are not supported")
	}
	if !t.IsNativelyAccessible() {
		return layout{}, fmt.Errorf("tensor memory is not accessible from Go")
	}
	if !t.DataOrder().IsRowMajor() {
		return layout{}, fmt.Errorf("column-major tensors are not supported")
	}
	shape := t.Shape()
	if len(shape) > maxDims {
		return layout{}, fmt.Errorf("%d dimensions are more than the %d supported", len(shape), maxDims)
	}
	es := int(t.Dtype().Size())
	l := layout{data: t.Raw, es: es, shape: shape, strides: t.Strides()}
	if shape.IsScalar() {
		l.shape, l.strides = nil, nil
	}
	if len(l.strides) != len(l.shape) {
		// tensor gives vectors and scalar-likes strides of its own; a
		// contiguous tensor's are the row-major ones.
		if t.RequiresIterator() {
			return layout{}, fmt.Errorf("view of shape %v with strides %v is not supported", shape, t.Strides())
		}
		l.strides = rowMajorStrides(l.shape, make([]int, len(l.shape)))
	}
	if err := l.check(); err != nil {
		return layout{}, err
	}
	return l, nil
}

// contiguousBytes is a tensor's elements as one row-major byte run.
func contiguousBytes(t *tensor.Dense) ([]byte, error) {
	l, err := denseLayout(t)
	if err != nil {
		return nil, err
	}
	if !l.contiguous() {
		return nil, fmt.Errorf("tensor is a non-contiguous view")
	}
	return l.data[:l.size()*l.es], nil
}

// valueLayout is denseLayout for any gorgonia value: scalars are a
// single element.
func valueLayout(v gorgonia.Value) (layout, error) {
	switch t := v.(type) {
	case *tensor.Dense:
		return denseLayout(t)
	case gorgonia.Scalar:
		p, ok := v.(interface{ Pointer() unsafe.Pointer })
		if !ok {
			return layout{}, fmt.Errorf("scalar %T has no memory", v)
		}
		return layout{data: unsafe.Slice((*byte)(p.Pointer()), v.MemSize()), es: int(v.MemSize())}, nil
	case nil:
		return layout{}, fmt.Errorf("nil value")
	}
	return layout{}, fmt.Errorf("values of type %T are not supported", v)
}

func rowMajorStrides(shape []int, into []int) []int {
	acc := 1
	for i := len(shape) - 1; i >= 0; i-- {
		into[i] = acc
		acc *= shape[i]
	}
	return into
}

func (l layout) size() int {
	n := 1
	for _, d := range l.shape {
		n *= d
	}
	return n
}

func (l layout) contiguous() bool {
	acc := 1
	for i := len(l.shape) - 1; i >= 0; i-- {
		if l.shape[i] != 1 && l.strides[i] != acc {
			return false
		}
		acc *= l.shape[i]
	}
	return true
}

// check makes sure every element the layout names lies inside data, so
// the copy loops cannot run off the end.
func (l layout) check() error {
	if l.es <= 0 {
		return fmt.Errorf("element size %d", l.es)
	}
	last := 0
	for i, d := range l.shape {
		// The messages format copies, so that the layout's arrays (often on the caller's
		// stack) do not escape to the heap on every call.
		if d < 0 {
			return fmt.Errorf("negative dimension in %v", slices.Clone(l.shape))
		}
		if d == 0 {
			return nil
		}
		if l.strides[i] < 0 {
			return fmt.Errorf("negative stride in %v", slices.Clone(l.strides))
		}
		last += (d - 1) * l.strides[i]
	}
	if (last+1)*l.es > len(l.data) {
		return fmt.Errorf("shape %v with strides %v needs %d bytes, the tensor has %d",
			slices.Clone(l.shape), slices.Clone(l.strides), (last+1)*l.es, len(l.data))
	}
	return nil
}

// copyLayout copies src's elements into dst's, which must have the same
// shape and element size. The two must not overlap (except as the very
// same layout). Bits are moved as they are, so NaN payloads survive.
func copyLayout(dst, src layout) error {
	if dst.es != src.es {
		return fmt.Errorf("element sizes %d and %d differ", dst.es, src.es)
	}
	if !slices.Equal(dst.shape, src.shape) {
		// Copies: formatting the shapes themselves would put every caller's shape array on
		// the heap, an allocation per call.
		return fmt.Errorf("shapes %v and %v differ", slices.Clone(dst.shape), slices.Clone(src.shape))
	}
	if err := dst.check(); err != nil {
		return err
	}
	if err := src.check(); err != nil {
		return err
	}
	n := src.size()
	if n == 0 {
		return nil
	}
	es := src.es
	if src.contiguous() && dst.contiguous() {
		copy(dst.data[:n*es], src.data[:n*es])
		return nil
	}
	// Walk all but the last axis with a counter; the last axis is a run.
	d := len(src.shape)
	if d == 0 {
		copy(dst.data[:es], src.data[:es])
		return nil
	}
	// Trailing axes that both layouts keep as one run are walked as one: a concat along the
	// channels copies an image's channels at once instead of a row at a time. The same
	// elements go to the same places.
	var shape, sstr, dstr [maxDims]int
	copy(shape[:], src.shape)
	copy(sstr[:], src.strides)
	copy(dstr[:], dst.strides)
	for d > 1 && sstr[d-2] == sstr[d-1]*shape[d-1] && dstr[d-2] == dstr[d-1]*shape[d-1] {
		shape[d-2] *= shape[d-1]
		sstr[d-2], dstr[d-2] = sstr[d-1], dstr[d-1]
		d--
	}
	inner := shape[d-1]
	ss, ds := sstr[d-1], dstr[d-1]
	var idx [maxDims]int
	so, do := 0, 0
	for {
		copyRun(dst.data, do, ds, src.data, so, ss, inner, es)
		k := d - 2
		for ; k >= 0; k-- {
			idx[k]++
			so += sstr[k]
			do += dstr[k]
			if idx[k] < shape[k] {
				break
			}
			so -= shape[k] * sstr[k]
			do -= shape[k] * dstr[k]
			idx[k] = 0
		}
		if k < 0 {
			return nil
		}
	}
}

// copyRun copies n elements of es bytes, the i-th from element so+i*ss of
// src to element do+i*ds of dst.
func copyRun(dst []byte, do, ds int, src []byte, so, ss, n, es int) {
	if ss == 1 && ds == 1 {
		copy(dst[do*es:(do+n)*es], src[so*es:(so+n)*es])
		return
	}
	switch es {
	case 8:
		d := unsafe.Slice((*uint64)(unsafe.Pointer(&dst[0])), len(dst)/8)
		s := unsafe.Slice((*uint64)(unsafe.Pointer(&src[0])), len(src)/8)
		for i := 0; i < n; i++ {
			d[do+i*ds] = s[so+i*ss]
		}
	case 4:
		d := unsafe.Slice((*uint32)(unsafe.Pointer(&dst[0])), len(dst)/4)
		s := unsafe.Slice((*uint32)(unsafe.Pointer(&src[0])), len(src)/4)
		for i := 0; i < n; i++ {
			d[do+i*ds] = s[so+i*ss]
		}
	default:
		for i := 0; i < n; i++ {
			copy(dst[(do+i*ds)*es:(do+i*ds+1)*es], src[(so+i*ss)*es:(so+i*ss+1)*es])
		}
	}
}

// sameStart reports whether two byte runs begin at the same address: the
// in-place case, where out is given the memory of an operand.
func sameStart(a, b []byte) bool {
	return len(a) > 0 && len(b) > 0 && &a[0] == &b[0]
}

// overlap reports whether two byte runs share any byte.
func overlap(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	a0 := uintptr(unsafe.Pointer(&a[0]))
	b0 := uintptr(unsafe.Pointer(&b[0]))
	return a0 < b0+uintptr(len(b)) && b0 < a0+uintptr(len(a))
}

// asSlice views bytes as a slice of T (the bytes are a tensor's, so
// aligned for its element type).
func asSlice[T any](b []byte) []T {
	var z T
	n := len(b) / int(unsafe.Sizeof(z))
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n)
}
