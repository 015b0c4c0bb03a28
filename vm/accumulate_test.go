package vm

import (
	"fmt"
	"math"
	"testing"

	"gorgonia.org/tensor"
)

// accumulate adds a gradient into a learnable's running sum through blas.Add (addInto): the
// bits of tensor.Add(a, g, UseUnsafe()), which it replaces, NaN payloads included where both
// are NaN, over vector bodies and tails, every special value against every other.
func TestAccumulateSameBitsAsTensorAdd(t *testing.T) {
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		for _, n := range []int{1, 7, 121, 1030} {
			t.Run(fmt.Sprint(dt, n), func(t *testing.T) {
				v := &Var{Dtype: dt, Shape: tensor.Shape{n}}
				acc, g := specialDense(dt, n, false), specialDense(dt, n, true)
				want := acc.Clone().(*tensor.Dense)
				if _, err := tensor.Add(want, g, tensor.UseUnsafe()); err != nil {
					t.Fatal(err)
				}
				if !addInto(acc, g.Raw, v) {
					t.Fatal("addInto declined a plain tensor")
				}
				for i := range want.Raw {
					if want.Raw[i] != acc.Raw[i] {
						t.Fatalf("byte %d of %d differs from tensor.Add's", i, len(want.Raw))
					}
				}
				if err := accumulate(acc, g.Raw, v); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
	// Another shape of the same size is tensor's business, as before.
	a := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(2, 3))
	if addInto(a, make([]byte, 24), &Var{Dtype: tensor.Float32, Shape: tensor.Shape{3, 2}}) {
		t.Error("addInto took a tensor of another shape")
	}
}

// specialDense cycles through NaNs of several payloads and signs, infinities, signed zeros, a
// subnormal and plain numbers; shifted pairs every value with every other.
func specialDense(dt tensor.Dtype, n int, shifted bool) *tensor.Dense {
	v64 := []float64{math.Float64frombits(0x7ff8000000000001), math.Float64frombits(0xfff8000000000022),
		math.Float64frombits(0x7ff0000000000011), math.Inf(1), math.Inf(-1), 0, math.Copysign(0, -1),
		math.Float64frombits(1), 1.5, -2.25, 1.7e308}
	v32 := []float32{math.Float32frombits(0x7fc00001), math.Float32frombits(0xffc00022), math.Float32frombits(0x7f800011),
		float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)), math.Float32frombits(1), 1.5, -2.25, 3e38}
	t := tensor.New(tensor.Of(dt), tensor.WithShape(n))
	for i := 0; i < n; i++ {
		j := i % len(v64)
		if shifted {
			j = (i / len(v64)) % len(v64)
		}
		if dt == tensor.Float32 {
			t.Float32s()[i] = v32[j]
		} else {
			t.Float64s()[i] = v64[j]
		}
	}
	return t
}
