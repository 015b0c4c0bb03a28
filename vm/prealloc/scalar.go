package prealloc

import (
	"math"
	"reflect"
	"unsafe"

	"github.com/chewxy/math32"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// ScalarFunc computes an op's scalar result into out, the bytes of one element of the
// result's dtype, and reports whether it did: where it does not apply (other operand types,
// a wrong out) it computes nothing and the caller runs Do. The result equals Do's bit for bit.
type ScalarFunc func(out []byte, inputs ...gorgonia.Value) (bool, error)

// ScalarFor returns how to compute a scalar node's op into memory the caller owns, for the ops
// a loss is made of, where Do makes a new scalar (and gorgonia's type checks allocate) every
// call: arithmetic of two float scalars (gorgonia's scalarBinOp: Go's own + - * / and
// math.Pow, with the left operand's NaN kept where both are NaNs, as gorgonia's compiled code
// keeps it on amd64), a unary function of a float scalar (the op's own function), a tensor's
// size along an axis, and the sum of a float tensor over all its axes (tensor's SumF32/SumF64
// loop). It returns false for every other op.
func ScalarFor(op gorgonia.Op) (f ScalarFunc, ok bool) {
	defer func() {
		// Reading a gorgonia op that is not what this package expects declines.
		if recover() != nil {
			f, ok = nil, false
		}
	}()
	if op == nil || reflect.TypeOf(op).PkgPath() != "gorgonia.org/gorgonia" {
		return nil, false
	}
	switch reflect.TypeOf(op).Name() {
	case "elemBinOp":
		return scalarBinary(op)
	case "elemUnaryOp":
		return scalarUnary(op)
	case "sizeOp":
		return scalarSize(op)
	case "sumOp":
		return scalarSum(op)
	}
	return nil, false
}

// gorgonia v0.9.18's ʘBinaryOperatorType values (an iota list from addOpType).
const (
	addOp = iota
	subOp
	mulOp
	divOp
	powOp
)

func scalarBinary(op gorgonia.Op) (ScalarFunc, bool) {
	bo, err := field(op, "ʘBinaryOperator", reflect.Interface)
	if err != nil || bo.IsNil() {
		return nil, false
	}
	sb := bo.Elem()
	if sb.Kind() != reflect.Struct || sb.Type().Name() != "scalarBinOp" || sb.Type().PkgPath() != "gorgonia.org/gorgonia" {
		return nil, false
	}
	kind := sb.FieldByName("ʘBinaryOperatorType")
	if !kind.IsValid() || kind.Kind() != reflect.Uint8 || kind.Uint() > powOp {
		return nil, false
	}
	k := int(kind.Uint())
	return func(out []byte, inputs ...gorgonia.Value) (bool, error) {
		if len(inputs) != 2 {
			return false, nil
		}
		switch a := inputs[0].(type) {
		case *gorgonia.F32:
			b, ok := inputs[1].(*gorgonia.F32)
			if !ok || len(out) != 4 {
				return false, nil
			}
			*(*float32)(unsafe.Pointer(&out[0])) = arith(k, float32(*a), float32(*b), math32.Pow)
			return true, nil
		case *gorgonia.F64:
			b, ok := inputs[1].(*gorgonia.F64)
			if !ok || len(out) != 8 {
				return false, nil
			}
			*(*float64)(unsafe.Pointer(&out[0])) = arith(k, float64(*a), float64(*b), math.Pow)
			return true, nil
		}
		return false, nil
	}, true
}

// arith is scalarBinOp.Do's arithmetic.
func arith[T float](k int, a, b T, pow func(T, T) T) T {
	switch k {
	case addOp:
		return addFirst(a, b)
	case subOp:
		return a - b
	case mulOp:
		return mulFirst(a, b)
	case divOp:
		return a / b
	default:
		return pow(a, b)
	}
}

func scalarUnary(op gorgonia.Op) (ScalarFunc, bool) {
	uo, err := field(op, "ʘUnaryOperator", reflect.Interface)
	if err != nil || uo.IsNil() {
		return nil, false
	}
	p := uo.Elem() // *sf32UnaryOperator or *sf64UnaryOperator: a pointer to a func
	if p.Kind() != reflect.Pointer || p.IsNil() || p.Type().Elem().Kind() != reflect.Func {
		return nil, false
	}
	ft := p.Type().Elem()
	if ft.NumIn() != 1 || ft.NumOut() != 1 || ft.IsVariadic() || ft.In(0) != ft.Out(0) {
		return nil, false
	}
	switch ft.In(0).Kind() {
	case reflect.Float32:
		fn := *(*func(float32) float32)(unsafe.Pointer(p.Pointer()))
		return func(out []byte, inputs ...gorgonia.Value) (bool, error) {
			x, ok := oneInput[*gorgonia.F32](inputs)
			if !ok || len(out) != 4 {
				return false, nil
			}
			*(*float32)(unsafe.Pointer(&out[0])) = fn(float32(*x))
			return true, nil
		}, true
	case reflect.Float64:
		fn := *(*func(float64) float64)(unsafe.Pointer(p.Pointer()))
		return func(out []byte, inputs ...gorgonia.Value) (bool, error) {
			x, ok := oneInput[*gorgonia.F64](inputs)
			if !ok || len(out) != 8 {
				return false, nil
			}
			*(*float64)(unsafe.Pointer(&out[0])) = fn(float64(*x))
			return true, nil
		}, true
	}
	return nil, false
}

func oneInput[V gorgonia.Value](inputs []gorgonia.Value) (V, bool) {
	var zero V
	if len(inputs) != 1 {
		return zero, false
	}
	v, ok := inputs[0].(V)
	return v, ok
}

// scalarSize: sizeOp.Do of a float tensor is its length along the op's axis, as that dtype.
func scalarSize(op gorgonia.Op) (ScalarFunc, bool) {
	axis, err := intField(op, "axis")
	if err != nil {
		return nil, false
	}
	return func(out []byte, inputs ...gorgonia.Value) (bool, error) {
		t, ok := oneInput[*tensor.Dense](inputs)
		if !ok {
			return false, nil
		}
		sh := t.Shape()
		if axis < 0 || axis >= len(sh) {
			return false, nil // Do's error
		}
		switch {
		case t.Dtype() == tensor.Float32 && len(out) == 4:
			*(*float32)(unsafe.Pointer(&out[0])) = float32(sh[axis])
		case t.Dtype() == tensor.Float64 && len(out) == 8:
			*(*float64)(unsafe.Pointer(&out[0])) = float64(sh[axis])
		default:
			return false, nil
		}
		return true, nil
	}, true
}

// scalarSum: sumOp.Do over every axis, in order (or none named), is tensor's MonotonicSum: a
// zero accumulator added every element of the input's array in turn, the accumulator's NaN
// kept once it is one (see add). Any other list of axes goes through tensor's per-axis
// reductions, and a view is materialised first: for those the caller runs Do.
func scalarSum(op gorgonia.Op) (ScalarFunc, bool) {
	along, err := sharedInts(op, "along")
	if err != nil {
		return nil, false
	}
	return func(out []byte, inputs ...gorgonia.Value) (bool, error) {
		t, ok := oneInput[*tensor.Dense](inputs)
		if !ok || t.Dims() == 0 || t.IsMaterializable() || t.IsMasked() || !t.IsNativelyAccessible() {
			return false, nil
		}
		if len(along) != 0 && (len(along) != t.Dims() || !allAxesInOrder(along)) {
			return false, nil
		}
		switch {
		case t.Dtype() == tensor.Float32 && len(out) == 4:
			*(*float32)(unsafe.Pointer(&out[0])) = sumAll(asSlice[float32](t.Raw))
		case t.Dtype() == tensor.Float64 && len(out) == 8:
			*(*float64)(unsafe.Pointer(&out[0])) = sumAll(asSlice[float64](t.Raw))
		default:
			return false, nil
		}
		return true, nil
	}, true
}

// allAxesInOrder is tensor's IsMonotonicInts' both answers true: each axis one more than
// the one before.
func allAxesInOrder(along []int) bool {
	for i := 1; i < len(along); i++ {
		if along[i] != along[i-1]+1 {
			return false
		}
	}
	return true
}

func sumAll[T float](x []T) T {
	var acc T
	for _, v := range x {
		acc = add(acc, v)
	}
	return acc
}
