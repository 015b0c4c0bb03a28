package vm

import (
	"fmt"
	"slices"
	"unsafe"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// valueKind records how an op hands a variable's value around: as a
// *tensor.Dense, or as one of gorgonia's scalar types (*gorgonia.F64, ...).
// Consumers must get the same kind back, or gorgonia's type checks refuse it.
type valueKind uint8

const (
	kindUnknown valueKind = iota
	kindDense
	kindScalar
)

// denseOver builds a tensor header over device bytes. The bytes are owned by
// the allocator; the header must not outlive the block.
func denseOver(b []byte, dt tensor.Dtype, shape tensor.Shape) *tensor.Dense {
	if len(b) == 0 {
		return tensor.New(tensor.Of(dt), tensor.WithShape(shape.Clone()...))
	}
	return tensor.New(tensor.Of(dt), tensor.WithShape(shape.Clone()...),
		tensor.FromMemory(uintptr(unsafe.Pointer(&b[0])), uintptr(len(b))))
}

// header is one operand or output slot of one function, whose tensor header
// is kept across steps: building one (tensor.New, its pool, the shape's
// clone) was most of a training step's allocations. Each slot has its own
// header, so no two uses in one call share one; an op that mutated its
// header (gorgonia's Reshape and T() work in place) leaves it failing
// fits, and the slot gets a new one. Only ops see these headers: what the
// user keeps (published results, bindings) is host memory (newHostValue).
type header struct {
	d       *tensor.Dense
	strides []int // d's strides when built, owned here
	order   tensor.DataOrder
	// The shape's and strides' backing arrays when built: tensor hands
	// such arrays back to its pool when it reshapes, so a header now on
	// other arrays (even with the same numbers) is not reused.
	shapeAt, stridesAt *int
}

// over is denseOver(b, dt, shape), reusing the slot's last header when it
// still is exactly what denseOver would build. A nil slot builds afresh.
func (h *header) over(b []byte, dt tensor.Dtype, shape tensor.Shape) *tensor.Dense {
	if h == nil || len(b) == 0 {
		return denseOver(b, dt, shape)
	}
	if h.d != nil && h.fits(b, dt, shape) {
		return h.d
	}
	d := denseOver(b, dt, shape)
	h.d, h.order = d, d.DataOrder()
	h.strides = append(h.strides[:0], d.Strides()...)
	h.shapeAt, h.stridesAt = first(d.Shape()), first(d.Strides())
	return d
}

func first(s []int) *int {
	if len(s) == 0 {
		return nil
	}
	return &s[0]
}

// fits checks that the kept header still is a plain header over exactly b:
// the same bytes, dtype, shape and strides, not a view, transpose or mask.
func (h *header) fits(b []byte, dt tensor.Dtype, shape tensor.Shape) bool {
	d := h.d
	return len(d.Raw) == len(b) && cap(d.Raw) == len(b) && sameMemory(d.Raw, b) &&
		d.Dtype() == dt && slices.Equal(d.Shape(), shape) && slices.Equal(d.Strides(), h.strides) &&
		first(d.Shape()) == h.shapeAt && first(d.Strides()) == h.stridesAt &&
		d.DataOrder() == h.order && !d.IsMaterializable() && !d.IsMasked() &&
		d.IsManuallyManaged() && d.IsNativelyAccessible()
}

// scalarOver returns gorgonia's scalar value type living in device bytes.
func scalarOver(b []byte, dt tensor.Dtype) (gorgonia.Value, error) {
	p := unsafe.Pointer(&b[0])
	switch dt {
	case tensor.Float64:
		return (*gorgonia.F64)(p), nil
	case tensor.Float32:
		return (*gorgonia.F32)(p), nil
	case tensor.Int:
		return (*gorgonia.I)(p), nil
	case tensor.Int64:
		return (*gorgonia.I64)(p), nil
	case tensor.Int32:
		return (*gorgonia.I32)(p), nil
	case tensor.Uint8:
		return (*gorgonia.U8)(p), nil
	case tensor.Bool:
		return (*gorgonia.B)(p), nil
	}
	return nil, fmt.Errorf("scalar of dtype %v is not supported", dt)
}

// scalarSlab hands out the host scalars publish binds, a new one per scalar
// node per run (see publish), carved from one allocation of slabRuns runs'
// worth instead of one allocation each. No piece is handed out twice, so a
// value a script keeps is never written again; a kept one keeps its slab
// alive (8 bytes per scalar node per run, 64 runs' worth: 5 KiB for
// smallcnn's 10 scalar nodes).
type scalarSlab struct {
	free []uint64 // 8-byte pieces: aligned for any scalar dtype
	per  int      // pieces a run takes
}

// slabRuns is how many runs' scalars one allocation holds: a steady step
// then allocates nothing on the Go heap but once every slabRuns steps.
const slabRuns = 64

func (s *scalarSlab) next(dt tensor.Dtype) (gorgonia.Value, error) {
	if dt.Size() > 8 {
		return newHostValue(kindScalar, dt, nil)
	}
	if len(s.free) == 0 {
		s.free = make([]uint64, max(s.per, 1)*slabRuns)
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(&s.free[0])), dt.Size())
	s.free = s.free[1:]
	return scalarOver(b, dt)
}

// newHostValue allocates a value of the given kind in Go memory, for results
// handed to the user: they must survive the device memory being reused.
func newHostValue(k valueKind, dt tensor.Dtype, shape tensor.Shape) (gorgonia.Value, error) {
	if k == kindScalar {
		b := make([]byte, dt.Size())
		return scalarOver(b, dt)
	}
	return tensor.New(tensor.Of(dt), tensor.WithShape(shape.Clone()...)), nil
}

// rawBytes views a value's contiguous data as bytes. A view (a slice, a lazy
// transpose) is materialised first, so the bytes are the value in row-major order.
func rawBytes(v gorgonia.Value) ([]byte, error) {
	switch t := v.(type) {
	case *tensor.Dense:
		if t.IsMaterializable() {
			t = t.Materialize().(*tensor.Dense)
		}
		return t.Raw, nil
	case gorgonia.Scalar:
		if p, ok := v.(interface{ Pointer() unsafe.Pointer }); ok {
			return unsafe.Slice((*byte)(p.Pointer()), v.MemSize()), nil
		}
	}
	return nil, fmt.Errorf("value of type %T has no raw bytes", v)
}

// kindOf tells the value kind of an op's result.
func kindOf(v gorgonia.Value) (valueKind, error) {
	switch v.(type) {
	case *tensor.Dense:
		return kindDense, nil
	case gorgonia.Scalar:
		return kindScalar, nil
	}
	return kindUnknown, fmt.Errorf("values of type %T are not supported", v)
}

// sameMemory reports whether two byte slices start at the same address.
func sameMemory(a, b []byte) bool {
	return len(a) > 0 && len(b) > 0 && &a[0] == &b[0]
}
