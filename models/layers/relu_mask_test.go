package layers

import (
	"math"
	"testing"
)

// TestReLUMasks: the branch-free ReLU and ReLU gradient give, bit for bit, what the branches
// give (x or dy where x > 0, NaN kept in the forward pass, +0 elsewhere), in both precisions.
func TestReLUMasks(t *testing.T) {
	nan := math.NaN()
	xs := []float64{-1, math.Copysign(0, -1), 0, 1, nan, math.Inf(1), math.Inf(-1), 5e-324, -5e-324, 3.5, -2.25}
	dys := []float64{7, -7, 0.5, -0.5, 2, 3, -4, 9, 11, math.Copysign(0, -1), nan}
	fwd := func(v float64) float64 {
		if v > 0 || v != v {
			return v
		}
		return 0
	}
	bwd := func(v, d float64) float64 {
		if v > 0 {
			return d
		}
		return 0
	}
	got := make([]float64, len(xs))
	reluMask64(got, xs, nil)
	for i, v := range xs {
		if math.Float64bits(got[i]) != math.Float64bits(fwd(v)) {
			t.Errorf("float64 relu(%v) = %v, want %v", v, got[i], fwd(v))
		}
	}
	reluMask64(got, xs, dys)
	for i, v := range xs {
		if math.Float64bits(got[i]) != math.Float64bits(bwd(v, dys[i])) {
			t.Errorf("float64 relu'(%v)*%v = %v, want %v", v, dys[i], got[i], bwd(v, dys[i]))
		}
	}
	x32, dy32, got32 := make([]float32, len(xs)), make([]float32, len(xs)), make([]float32, len(xs))
	for i := range xs {
		x32[i], dy32[i] = float32(xs[i]), float32(dys[i])
	}
	x32[7], x32[8] = math.Float32frombits(1), math.Float32frombits(1|1<<31) // float32 denormals
	reluMask32(got32, x32, nil)
	for i, v := range x32 {
		if want := float32(fwd(float64(v))); math.Float32bits(got32[i]) != math.Float32bits(want) {
			t.Errorf("float32 relu(%v) = %v, want %v", v, got32[i], want)
		}
	}
	want32 := append([]float32(nil), got32...)
	reluMask32(got32, x32, dy32)
	for i, v := range x32 {
		if want := float32(bwd(float64(v), float64(dy32[i]))); math.Float32bits(got32[i]) != math.Float32bits(want) {
			t.Errorf("float32 relu'(%v)*%v = %v, want %v", v, dy32[i], got32[i], want)
		}
	}
	// In place, as the VM runs it: the result written over x.
	in := append([]float32(nil), x32...)
	reluMask32(in, in, nil)
	for i := range in {
		if math.Float32bits(in[i]) != math.Float32bits(want32[i]) {
			t.Errorf("in place: element %d = %v", i, in[i])
		}
	}
}
