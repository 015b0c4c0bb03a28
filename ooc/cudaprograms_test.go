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
// float32 1e-5, normwise relative per tensor. They take minutes under load,
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
	f := func(b uint64) float64 {
		if dt == tensor.Float32 {
			return float64(math.Float32frombits(uint32(b)))
		}
		return math.Float64frombits(b)
	}
	var d, m float64
	for i := range want {
		w, g := f(want[i]), f(got[i])
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

// requireClose fails unless every tensor of got is within the tolerance of
// want's.
func (c *cudaTarget) requireClose(t *testing.T, dt tensor.Dtype, what string, want, got [][]uint64) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("%s: %d tensors, want %d", what, len(got), len(want))
	}
	for i := range want {
		e, err := closeTo(dt, want[i], got[i])
		if err != nil || e > tolOf(dt) {
			t.Fatalf("%s, tensor %d: %.3g apart on the fake CUDA device (tolerance %.0g) %v", what, i, e, tolOf(dt), err)
		}
	}
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
