package prealloc

import (
	"fmt"
	"reflect"
	"unsafe"
)

// gorgonia keeps its ops' parameters (axes, patterns, probabilities) in
// unexported fields. They are read by name and kind here, and every reader
// fails (so For declines the op) if a gorgonia release renames or retypes
// one; the tests pin the names for the version in go.mod.

func structOf(op any) (reflect.Value, error) {
	v := reflect.ValueOf(op)
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return reflect.Value{}, fmt.Errorf("nil %T", op)
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return reflect.Value{}, fmt.Errorf("%T is not a struct", op)
	}
	return v, nil
}

func field(op any, name string, kind reflect.Kind) (reflect.Value, error) {
	v, err := structOf(op)
	if err != nil {
		return reflect.Value{}, err
	}
	f := v.FieldByName(name)
	if !f.IsValid() {
		return reflect.Value{}, fmt.Errorf("%T has no field %s", op, name)
	}
	if f.Kind() != kind {
		return reflect.Value{}, fmt.Errorf("%T.%s is a %v, not a %v", op, name, f.Kind(), kind)
	}
	return f, nil
}

func intField(op any, name string) (int, error) {
	f, err := field(op, name, reflect.Int)
	if err != nil {
		return 0, err
	}
	return int(f.Int()), nil
}

func boolField(op any, name string) (bool, error) {
	f, err := field(op, name, reflect.Bool)
	if err != nil {
		return false, err
	}
	return f.Bool(), nil
}

func floatField(op any, name string) (float64, error) {
	f, err := field(op, name, reflect.Float64)
	if err != nil {
		return 0, err
	}
	return f.Float(), nil
}

// intsField copies an []int field.
func intsField(op any, name string) ([]int, error) {
	f, err := field(op, name, reflect.Slice)
	if err != nil {
		return nil, err
	}
	if f.Type().Elem().Kind() != reflect.Int {
		return nil, fmt.Errorf("%T.%s is not a slice of int", op, name)
	}
	out := make([]int, f.Len())
	for i := range out {
		out[i] = int(f.Index(i).Int())
	}
	return out, nil
}

// sharedInts is an []int field's own backing array, not a copy, for the
// one case where Do mutates it (reductions sort their axes in place).
func sharedInts(op any, name string) ([]int, error) {
	f, err := field(op, name, reflect.Slice)
	if err != nil {
		return nil, err
	}
	if f.Type().Elem().Kind() != reflect.Int || f.Type().Elem().Size() != unsafe.Sizeof(int(0)) {
		return nil, fmt.Errorf("%T.%s is not a slice of int", op, name)
	}
	if f.Len() == 0 {
		return nil, nil
	}
	return unsafe.Slice((*int)(unsafe.Pointer(f.Pointer())), f.Len()), nil
}

// fieldAddr is the address of a field of the struct op points to; only
// fields of pointer ops are addressable.
func fieldAddr(op any, name string, kind reflect.Kind) (unsafe.Pointer, reflect.Type, error) {
	if reflect.ValueOf(op).Kind() != reflect.Pointer {
		return nil, nil, fmt.Errorf("%T is not a pointer", op)
	}
	f, err := field(op, name, kind)
	if err != nil {
		return nil, nil, err
	}
	if !f.CanAddr() {
		return nil, nil, fmt.Errorf("%T.%s is not addressable", op, name)
	}
	return unsafe.Pointer(f.UnsafeAddr()), f.Type(), nil
}
