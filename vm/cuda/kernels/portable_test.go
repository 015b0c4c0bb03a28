package kernels_test

import (
	"os"
	"testing"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels/kernelcheck"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels/kernelstest"
)

// portableEnv opts in to TestGPUToleranceOnPortableMath (a second host build,
// about 20 s of g++ here).
const portableEnv = "OOC_KERNELS_PORTABLE"

// TestGPUToleranceOnPortableMath (OOC_KERNELS_PORTABLE=1): every kernel
// check, run as "ooc doctor" runs it on a GPU (not exact), passes on a host
// build whose exp and log are the portable ports the PTX runs rather than Go's
// amd64 assembly: the last-bit differences a GPU's exp and log make are
// within the doctor's tolerances (the worst errors print with -v).
func TestGPUToleranceOnPortableMath(t *testing.T) {
	if os.Getenv(portableEnv) == "" {
		t.Skipf("set %s=1: it builds the kernels a second time (about 20 s of g++ here)", portableEnv)
	}
	l, err := openHost(kernelstest.BuildPortable(t))
	if err != nil {
		t.Fatal(err)
	}
	inexact := 0
	for _, c := range kernelcheck.Cases {
		m := kernelcheck.NewMem(t, &hostDev{t: t, lib: l, raw: map[uintptr][]byte{}}, false)
		c.Run(t, m)
		for _, a := range m.Report() {
			if !a.Exact {
				inexact++
				t.Logf("%-18s %-24s max rel err %.3g (tol %g)", c.Name(), a.Kernel, a.MaxRelErr, a.Tol)
			}
		}
	}
	if inexact == 0 {
		t.Errorf("every result bit for bit: the build did not use the portable exp and log (%d kernels)", len(kernels.Specs))
	}
}
