package kernels_test

import (
	"math"
	"math/rand"
	"testing"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

// TestConvert: float32 to float64 and back as Go converts (bit for bit),
// specials and values that round included.
func TestConvert(t *testing.T) {
	m := newMem(t)
	rng := rand.New(rand.NewSource(27))
	x32 := append(specials[float32](), randn[float32](rng, 300, 3)...)
	y64 := newOut[float64](m, len(x32))
	m.launch("convert_f32_f64", p(y64), p(put(m, x32)), kernels.Int(int64(len(x32))))
	want64 := make([]float64, len(x32))
	for i, v := range x32 {
		want64[i] = float64(v)
	}
	compare(t, "convert_f32_f64", get[float64](y64), want64, false)
	bitsEqual(t, "convert_f32_f64", get[float64](y64), want64)

	x64 := append(specials[float64](), randn[float64](rng, 300, 3)...)
	x64 = append(x64, 1+0x1p-24, 1+3*0x1p-24, math.MaxFloat64, 1e-300) // ties to even, overflow, underflow
	y32 := newOut[float32](m, len(x64))
	m.launch("convert_f64_f32", p(y32), p(put(m, x64)), kernels.Int(int64(len(x64))))
	want32 := make([]float32, len(x64))
	for i, v := range x64 {
		want32[i] = float32(v)
	}
	compare(t, "convert_f64_f32", get[float32](y32), want32, false)
	bitsEqual(t, "convert_f64_f32", get[float32](y32), want32)
}

// bitsEqual fails unless got and want are the same bits (any NaN equals any NaN).
func bitsEqual[T float32 | float64](t *testing.T, kernel string, got, want []T) {
	t.Helper()
	for i := range got {
		g, w := float64(got[i]), float64(want[i])
		if math.Float64bits(g) != math.Float64bits(w) && !(g != g && w != w) {
			t.Fatalf("%s: element %d is %v, want %v (bits differ)", kernel, i, g, w)
		}
	}
}
