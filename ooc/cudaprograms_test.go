package ooc_test

import (
	"fmt"
	"math"
	"os"
	"testing"

	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm/cuda"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/dispatch"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/dispatch/dispatchtest"
)

// The program suites on the fake CUDA device (vm/cuda's fake driver, the
// kernels' host builds behind cuLaunchKernel, a host cuBLAS): the same
// builders the CPU suites check bit for bit, run at the same budgets by a
// CUDA machine and compared with the TapeMachine (which the CPU device
// equals bit for bit) within the zoo's tolerance: float64 1e-12 and
// float32 1e-5, normwise relative per tensor, or, for a float32 tensor, at
// most twice as far from the same program's float64 run (on the
// TapeMachine) as the CPU device's (refFactor). They take minutes under load,
// so they run with OOC_CUDA_PROGRAMS=1. The fake device proves the plans,
// layouts and kernels' arithmetic, not a GPU's behaviour.

// cudaTarget is a fake CUDA device the suites run on; nil is the CPU device.
type cudaTarget struct{ d *cuda.Device }

// fakeCUDA opens cuda:0 of a fresh fake driver. Tests using it cannot be
// parallel (it sets environment variables).
func fakeCUDA(t *testing.T) *cudaTarget {
	t.Helper()
	driver := dispatchtest.Setenv(t)
	d, err := cuda.Open(0, cuda.WithLibrary(driver), cuda.WithCapacity(2<<30))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("closing the fake device: %v", err)
		}
	})
	return &cudaTarget{d: d}
}

// cudaPrograms skips unless OOC_CUDA_PROGRAMS=1 and opens the fake device.
func cudaPrograms(t *testing.T) *cudaTarget {
	t.Helper()
	if os.Getenv("OOC_CUDA_PROGRAMS") != "1" {
		t.Skip("the program suites on the fake CUDA device take minutes: set OOC_CUDA_PROGRAMS=1")
	}
	return fakeCUDA(t)
}

func (c *cudaTarget) options() []ooc.Option {
	if c == nil {
		return nil
	}
	return []ooc.Option{ooc.WithDevice(c.d)}
}

// reserve is what the CUDA backend keeps outside the tape (cuBLAS's
// workspace), which a budget must hold besides the program.
func (c *cudaTarget) reserve() int64 {
	if c == nil {
		return 0
	}
	return dispatch.For(c.d).Reserve()
}

// closeTo is the zoo's rule for one tensor (as bits): its normwise relative
// difference from want, NaNs where want has them.
func closeTo(dt tensor.Dtype, want, got []uint64) (float64, error) {
	if len(want) != len(got) {
		return 0, fmt.Errorf("%d elements, want %d", len(got), len(want))
	}
	wf, gf := bitsAsFloats(dt, want), bitsAsFloats(dt, got)
	var d, m float64
	for i := range want {
		w, g := wf[i], gf[i]
		if math.IsNaN(w) != math.IsNaN(g) {
			return math.Inf(1), fmt.Errorf("element %d is %v, want %v", i, g, w)
		}
		if math.IsNaN(w) || w == g {
			continue
		}
		d = max(d, math.Abs(w-g))
		m = max(m, math.Abs(w))
	}
	if m > 0 {
		d /= m
	}
	return d, nil
}

func tolOf(dt tensor.Dtype) float64 {
	if dt == tensor.Float32 {
		return 1e-5
	}
	return 1e-12
}

// refFactor is the zoo's clause for float32 (zoocheck's refFactor): a
// tensor further than 1e-5 from the CPU device's passes when the CUDA
// device's is at most this many times as far from the program's float64 run
// as the CPU device's. Both devices then round their own way to a float32
// answer about equally far from the exact one (Adam's steps and long
// recurrences amplify a last-bit difference past 1e-5); a wrong kernel is
// O(1) off and fails.
const refFactor = 2

// f64Run returns the float64 build of a float32 program's tensors, in the
// order requireClose's want has them. It runs the program at its first call
// only (see once).
type f64Run func(t *testing.T) [][]uint64

// once returns f's result, running f at the first call only: a program's
// float64 reference runs only when one of its float32 tensors needs it, and
// once for all the budgets that compare with it.
func once[T any](f func(t *testing.T) T) func(t *testing.T) T {
	var done bool
	var v T
	return func(t *testing.T) T {
		t.Helper()
		if !done {
			v, done = f(t), true
		}
		return v
	}
}

// bitsAsFloats reads one tensor's bits as dt.
func bitsAsFloats(dt tensor.Dtype, b []uint64) []float64 {
	out := make([]float64, len(b))
	for i, x := range b {
		if dt == tensor.Float32 {
			out[i] = float64(math.Float32frombits(uint32(x)))
		} else {
			out[i] = math.Float64frombits(x)
		}
	}
	return out
}

// requireClose fails unless every tensor of got is within the tolerance of
// want's, or, for float32, within refFactor times as far from the same
// program's float64 run (ref, run only then) as want's.
func (c *cudaTarget) requireClose(t *testing.T, dt tensor.Dtype, what string, want, got [][]uint64, ref f64Run) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("%s: %d tensors, want %d", what, len(got), len(want))
	}
	for i := range want {
		e, err := closeTo(dt, want[i], got[i])
		switch {
		case err == nil && e <= tolOf(dt):
		case err != nil || dt != tensor.Float32 || ref == nil:
			t.Fatalf("%s, tensor %d: %.3g apart on the fake CUDA device (tolerance %.0g) %v", what, i, e, tolOf(dt), err)
		default:
			requireAsNearFloat64(t, what, i, e, want, got, ref(t))
		}
	}
}

// requireAsNearFloat64 is the float32 clause for tensor i of got, e apart
// from want's: it passes, and logs the three distances, when got's is at
// most refFactor times as far from the float64 run's as want's.
func requireAsNearFloat64(t *testing.T, what string, i int, e float64, want, got, f64 [][]uint64) {
	t.Helper()
	if len(f64) != len(want) || len(f64[i]) != len(want[i]) {
		t.Fatalf("%s, tensor %d: %.3g apart on the fake CUDA device (tolerance 1e-5), and the float64 run gives no tensor of its shape to compare with (%d tensors, want %d)",
			what, i, e, len(f64), len(want))
	}
	dCUDA, dCPU, ok := asNearFloat64(want[i], got[i], f64[i])
	if !ok {
		t.Fatalf("%s, tensor %d: %.3g apart on the fake CUDA device (tolerance 1e-5), and %.3g from the float64 run where the CPU device is %.3g (more than %dx as far)",
			what, i, e, dCUDA, dCPU, refFactor)
	}
	t.Logf("%s, tensor %d: %.3g apart on the fake CUDA device (tolerance 1e-5), accepted: %.3g from the float64 run where the CPU device is %.3g (at most %dx as far)",
		what, i, e, dCUDA, dCPU, refFactor)
}

// asNearFloat64 is the float32 clause for one tensor: the normwise relative
// distances of the CUDA device's (got) and the CPU device's (want) float32
// bits from the float64 run's bits, and whether got's is at most refFactor
// times want's, which must be finite (a CPU device's NaN or overflow that
// the float64 run lacks is no yardstick).
func asNearFloat64(want, got, f64 []uint64) (dCUDA, dCPU float64, ok bool) {
	exact := bitsAsFloats(tensor.Float64, f64)
	dCUDA = relErr(bitsAsFloats(tensor.Float32, got), exact)
	dCPU = relErr(bitsAsFloats(tensor.Float32, want), exact)
	return dCUDA, dCPU, !math.IsInf(dCPU, 1) && dCUDA <= refFactor*dCPU
}

// relErr is zoocheck.RelErr's normwise relative difference max|a-b| /
// max|ref| (absolute when ref is all zeros), with NaNs where both have them
// and equal elements (infinities) skipped (zoocheck's models have none; a program's reads may): a NaN in one
// only is +Inf.
func relErr(a, ref []float64) float64 {
	var d, m float64
	for i := range a {
		if math.IsNaN(a[i]) != math.IsNaN(ref[i]) {
			return math.Inf(1)
		}
		if math.IsNaN(a[i]) || a[i] == ref[i] {
			continue
		}
		d = max(d, math.Abs(a[i]-ref[i]))
		m = max(m, math.Abs(ref[i]))
	}
	if m == 0 {
		return d
	}
	return d / m
}

// cudaBuilders are the builder-based suites' programs, by suite.
func cudaBuilders() map[string]builder {
	all := map[string]builder{"mlp": mlp, "cnn": cnn, "stock-cnn": stockCNN, "convnet-example": convnetExample,
		"logreg": logReg, "regression-l2": regressionL2, "rnn": rnn, "lstm": lstmNet, "attention": attention}
	for name, f := range moreOpsCases {
		all["moreops/"+name] = asBuilder(f)
	}
	for name, p := range userPrograms {
		all["users/"+name] = asUserBuilder(p)
	}
	return all
}

// TestProgramsOnCUDA: every builder-based program of the CPU suites
// (TestBitForBitWithTapeMachine, TestUsersProgramsBitForBit,
// TestMoreOpsBitForBit, TestMoreUsersProgramsBitForBit, the convnet
// example) trains 3 Adam steps on the fake CUDA device in core, at half
// the in-core peak (where a schedule exists) and at the least budget.
func TestProgramsOnCUDA(t *testing.T) {
	checkBitForBitOn(t, cudaBuilders(), cudaPrograms(t))
}

// TestRealProgramsOnCUDA: the ported programs of TestRealProgramsBitForBit
// run their own loops on the fake CUDA device, in core and at the least
// budget.
func TestRealProgramsOnCUDA(t *testing.T) {
	checkRealProgramsOn(t, realPrograms, cudaPrograms(t))
}

// TestSolversOnCUDA: TestSolversBitForBit's solvers and options step on
// the host the weights a fake CUDA machine computes the gradients of, in
// core and at the least budget.
func TestSolversOnCUDA(t *testing.T) {
	checkSolversOn(t, cudaPrograms(t))
}

// TestFloat32ClauseAgainstFloat64: a float32 tensor further than 1e-5 from
// the CPU device's passes only when it is at most twice as far from the
// float64 run as the CPU device's; a kernel's error does not.
func TestFloat32ClauseAgainstFloat64(t *testing.T) {
	f32 := func(v ...float32) []uint64 {
		out := make([]uint64, len(v))
		for i, x := range v {
			out[i] = uint64(math.Float32bits(x))
		}
		return out
	}
	exact := []uint64{math.Float64bits(1), math.Float64bits(-2), math.Float64bits(math.NaN())}
	nan := float32(math.NaN())
	cpu := f32(1.00003, -2, nan) // 1.5e-5 from float64
	for _, c := range []struct {
		name string
		cpu  []uint64 // nil: cpu
		cuda []uint64
		want bool
	}{
		{"rounds the other way, as far", nil, f32(0.99997, -2, nan), true},
		{"under twice as far", nil, f32(0.99995, -2, nan), true},
		{"three times as far", nil, f32(0.99991, -2, nan), false},
		{"a kernel's error", nil, f32(1.5, -2, nan), false},
		{"both devices with a NaN the float64 run lacks", f32(1.00003, nan, nan), f32(0.9, nan, nan), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			want := cpu
			if c.cpu != nil {
				want = c.cpu
			}
			if e, err := closeTo(tensor.Float32, want, c.cuda); err != nil || e <= tolOf(tensor.Float32) {
				t.Fatalf("the case is within 1e-5 (%.3g) or fails before the clause (%v)", e, err)
			}
			dCUDA, dCPU, ok := asNearFloat64(want, c.cuda, exact)
			if ok != c.want {
				t.Fatalf("accepted %v, want %v: %.3g from float64, the CPU device %.3g", ok, c.want, dCUDA, dCPU)
			}
		})
	}
}
