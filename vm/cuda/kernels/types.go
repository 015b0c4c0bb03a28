package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Type is the C type of a kernel parameter.
type Type uint8

// Parameter types. Pointers are device pointers (CUdeviceptr, 8 bytes); the
// element type is part of the type so the host build can check each kernel's
// C signature against its Spec. The struct types are passed by value.
const (
	F32Ptr Type = iota + 1
	F64Ptr
	U8Ptr
	I32
	I64
	F32
	F64
	LayoutT   // struct ooc_layout (Layout)
	ConvGeomT // struct ooc_conv_geom (ConvGeom)
	PoolGeomT // struct ooc_pool_geom (PoolGeom)
	I64Ptr    // Go int (int64 on the platforms the device runs on) tensors
	I32Ptr    // int32 tensors
)

// Size is the parameter's size in bytes, as cuLaunchKernel copies it.
func (t Type) Size() int {
	switch t {
	case I32, F32:
		return 4
	case LayoutT:
		return layoutBytes
	case ConvGeomT:
		return convGeomBytes
	case PoolGeomT:
		return poolGeomBytes
	}
	return 8
}

// IsPtr reports a device pointer.
func (t Type) IsPtr() bool {
	return t == F32Ptr || t == F64Ptr || t == U8Ptr || t == I64Ptr || t == I32Ptr
}

// C is the parameter's C type; in marks a pointer the kernel only reads.
func (t Type) C(in bool) string {
	c := ""
	if in && t.IsPtr() {
		c = "const "
	}
	switch t {
	case F32Ptr:
		return c + "float *"
	case F64Ptr:
		return c + "double *"
	case U8Ptr:
		return c + "u8 *"
	case I64Ptr:
		return c + "i64 *"
	case I32Ptr:
		return c + "int *"
	case I32:
		return "int"
	case I64:
		return "i64"
	case F32:
		return "float"
	case F64:
		return "double"
	case LayoutT:
		return "ooc_layout"
	case ConvGeomT:
		return "ooc_conv_geom"
	case PoolGeomT:
		return "ooc_pool_geom"
	}
	return fmt.Sprintf("Type(%d)", t)
}

// MaxDims is the most axes a Layout walks (OOC_MAX_DIMS).
const MaxDims = 6

const (
	layoutBytes   = 8 * (1 + 5*MaxDims)
	convGeomBytes = 8 * 13
	poolGeomBytes = 8 * 11
)

// Layout is struct ooc_layout: a walk over Dim (row-major, last axis
// fastest) with per-axis strides, in elements, for the output and the inputs
// A and B. A stride of 0 broadcasts an axis; Rep[d] > 1 reads A at index
// k/Rep[d] (gorgonia's Repeat). Rank 0 means contiguous, same-shape operands.
type Layout struct {
	Rank           int
	Dim, Out, A, B [MaxDims]int64
	Rep            [MaxDims]int64 // 0 is taken as 1
}

// Contiguous is the rank-0 layout: every operand dense and of one shape.
func Contiguous() Layout { return Layout{} }

func (l Layout) bytes() []byte {
	b := make([]byte, 0, layoutBytes)
	b = binary.LittleEndian.AppendUint64(b, uint64(l.Rank))
	for _, arr := range [][MaxDims]int64{l.Dim, l.Out, l.A, l.B} {
		for _, v := range arr {
			b = binary.LittleEndian.AppendUint64(b, uint64(v))
		}
	}
	for _, v := range l.Rep {
		if v == 0 {
			v = 1
		}
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	return b
}

// Size is the number of elements the layout walks (1 for rank 0: the caller's n counts).
func (l Layout) Size() int64 {
	n := int64(1)
	for d := 0; d < l.Rank; d++ {
		n *= l.Dim[d]
	}
	return n
}

func (l Layout) check() error {
	if l.Rank < 0 || l.Rank > MaxDims {
		return fmt.Errorf("kernels: layout rank %d outside 0..%d", l.Rank, MaxDims)
	}
	for d := 0; d < l.Rank; d++ {
		if l.Dim[d] < 1 {
			return fmt.Errorf("kernels: layout axis %d has length %d", d, l.Dim[d])
		}
		if l.Rep[d] < 0 {
			return fmt.Errorf("kernels: layout axis %d repeats %d times", d, l.Rep[d])
		}
	}
	return nil
}

// ConvGeom is struct ooc_conv_geom: x is (·, C, H, W), the kernel KH x KW,
// the output OH x OW, strides, paddings and dilations as models/layers'
// ConvParams (all ≥ 1 but paddings ≥ 0).
type ConvGeom struct {
	C, H, W, KH, KW, OH, OW int64
	SH, SW, PH, PW, DH, DW  int64
}

func (g ConvGeom) bytes() []byte {
	b := make([]byte, 0, convGeomBytes)
	for _, v := range []int64{g.C, g.H, g.W, g.KH, g.KW, g.OH, g.OW, g.SH, g.SW, g.PH, g.PW, g.DH, g.DW} {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	return b
}

func (g ConvGeom) check() error {
	if g.C < 1 || g.H < 1 || g.W < 1 || g.KH < 1 || g.KW < 1 || g.OH < 1 || g.OW < 1 ||
		g.SH < 1 || g.SW < 1 || g.DH < 1 || g.DW < 1 || g.PH < 0 || g.PW < 0 {
		return fmt.Errorf("kernels: bad convolution geometry %+v", g)
	}
	return nil
}

// PoolGeom is struct ooc_pool_geom: Planes (N·C) planes of H x W pooled to
// OH x OW by KH x KW windows at strides SH, SW with paddings PH, PW.
type PoolGeom struct {
	Planes, H, W, OH, OW   int64
	KH, KW, SH, SW, PH, PW int64
}

func (g PoolGeom) bytes() []byte {
	b := make([]byte, 0, poolGeomBytes)
	for _, v := range []int64{g.Planes, g.H, g.W, g.OH, g.OW, g.KH, g.KW, g.SH, g.SW, g.PH, g.PW} {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	return b
}

func (g PoolGeom) check() error {
	if g.Planes < 0 || g.H < 1 || g.W < 1 || g.OH < 1 || g.OW < 1 || g.KH < 1 || g.KW < 1 ||
		g.SH < 1 || g.SW < 1 || g.PH < 0 || g.PW < 0 || 2*g.PH > g.KH || 2*g.PW > g.KW {
		return fmt.Errorf("kernels: bad pooling geometry %+v", g)
	}
	return nil
}

// Arg is one kernel argument: make it with Ptr, Int, Float or one of the
// struct constructors; Spec.Prepare checks it against the parameter.
type Arg struct {
	kind  argKind
	u     uint64
	f     float64
	raw   []byte
	geomC *ConvGeom
	geomP *PoolGeom
	lay   *Layout
}

type argKind uint8

const (
	argPtr argKind = iota + 1
	argInt
	argFloat
	argLayout
	argConv
	argPool
)

// Ptr is a device pointer argument (CUdeviceptr, or on the host build a
// host address).
func Ptr(p uintptr) Arg { return Arg{kind: argPtr, u: uint64(p)} }

// Int is an integer argument, for I32 or I64 parameters.
func Int(v int64) Arg { return Arg{kind: argInt, u: uint64(v)} }

// Float is a floating-point argument; an F32 parameter gets float32(v), so
// pass float32 constants exactly (float64(x) of a float32 x round-trips).
func Float(v float64) Arg { return Arg{kind: argFloat, f: v} }

// LayoutArg passes a Layout by value.
func LayoutArg(l Layout) Arg { return Arg{kind: argLayout, raw: l.bytes(), lay: &l} }

// ConvArg passes a ConvGeom by value.
func ConvArg(g ConvGeom) Arg { return Arg{kind: argConv, raw: g.bytes(), geomC: &g} }

// PoolArg passes a PoolGeom by value.
func PoolArg(g PoolGeom) Arg { return Arg{kind: argPool, raw: g.bytes(), geomP: &g} }

// encode writes the argument as parameter type t into dst (t.Size() bytes).
func (a Arg) encode(t Type, dst []byte) error {
	want := map[Type]argKind{F32Ptr: argPtr, F64Ptr: argPtr, U8Ptr: argPtr, I64Ptr: argPtr, I32Ptr: argPtr, I32: argInt, I64: argInt,
		F32: argFloat, F64: argFloat, LayoutT: argLayout, ConvGeomT: argConv, PoolGeomT: argPool}[t]
	if a.kind != want {
		return fmt.Errorf("wrong kind of argument for a %s parameter", t.C(false))
	}
	switch t {
	case I32:
		v := int64(a.u)
		if v < math.MinInt32 || v > math.MaxInt32 {
			return fmt.Errorf("%d does not fit an int", v)
		}
		binary.LittleEndian.PutUint32(dst, uint32(int32(v)))
	case F32:
		binary.LittleEndian.PutUint32(dst, math.Float32bits(float32(a.f)))
	case F64:
		binary.LittleEndian.PutUint64(dst, math.Float64bits(a.f))
	case LayoutT, ConvGeomT, PoolGeomT:
		copy(dst, a.raw)
		switch {
		case a.lay != nil:
			return a.lay.check()
		case a.geomC != nil:
			return a.geomC.check()
		default:
			return a.geomP.check()
		}
	default:
		binary.LittleEndian.PutUint64(dst, a.u)
	}
	return nil
}
