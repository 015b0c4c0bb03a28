package kernelcheck

import (
	"math"
	"math/rand"
	"unsafe"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Helpers to run the CPU ops the kernels are compared with.

func dtOf[T float32 | float64]() tensor.Dtype {
	var z T
	if unsafe.Sizeof(z) == 4 {
		return tensor.Float32
	}
	return tensor.Float64
}

func dense[T float32 | float64](v []T, shape ...int) *tensor.Dense {
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(append([]T(nil), v...)))
}

func data[T float32 | float64](t TB, v G.Value) []T {
	t.Helper()
	if sc, ok := v.(G.Scalar); ok {
		return []T{sc.Data().(T)}
	}
	d, ok := v.(*tensor.Dense)
	if !ok {
		t.Fatalf("CPU op returned %T", v)
	}
	if d.RequiresIterator() {
		d = d.Materialize().(*tensor.Dense)
	}
	return append([]T(nil), d.Data().([]T)...)
}

// do runs op.Do and fails the test on error.
func do(t TB, op G.Op, in ...G.Value) G.Value {
	t.Helper()
	v, err := op.Do(in...)
	if err != nil {
		t.Fatalf("%v.Do: %v", op, err)
	}
	return v
}

// input makes a graph input node of T with the given shape.
func input[T float32 | float64](g *G.ExprGraph, name string, shape ...int) *G.Node {
	return G.NewTensor(g, dtOf[T](), len(shape), G.WithShape(shape...), G.WithName(name))
}

func must(t TB) func(n *G.Node, err error) *G.Node {
	return func(n *G.Node, err error) *G.Node {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
}

// randn is n normal values times scale.
func randn[T float32 | float64](rng *rand.Rand, n int, scale float64) []T {
	v := make([]T, n)
	for i := range v {
		v[i] = T(rng.NormFloat64() * scale)
	}
	return v
}

// specials are the values every elementwise kernel is also fed.
func specials[T float32 | float64]() []T {
	inf := math.Inf(1)
	s := []float64{0, math.Copysign(0, -1), 1, -1, 0.5, 2, 3, inf, -inf, math.NaN(), 1e-30, -1e-30, 100, -100,
		88.5, -88.5, 89, -104, 710, -710, 20, -20, 15.5, 14.5, 1e6, -1e6, 1e-5}
	v := make([]T, len(s))
	for i, x := range s {
		v[i] = T(x)
	}
	return v
}

// sizes are the element counts tests walk: odd, one, and more than a grid-stride.
var sizes = []int{1, 7, 1031}
