package dispatch_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/gorgonia-ooc/outofcore/vm/cuda"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/dispatch/dispatchtest"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/dispatch/zoocheck"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels/kernelstest"
)

// portableEnv opts in to TestZooWithPortableMath.
const portableEnv = "OOC_CUDA_PORTABLE"

// TestZooWithPortableMath (OOC_CUDA_PORTABLE=1; with OOC_CUDA_ZOO=1 the deep
// models too): the zoo's cases by "ooc doctor"'s rule (not exact: float64
// within 1e-12) on the fake device whose kernels compute exp and log as the
// PTX does (kernelstest.BuildPortable), not as Go's amd64 assembly: what a
// GPU's last-bit differences in exp and log do to a training step. (The
// fake cuBLAS still sums in the CPU's order; a GPU's cuBLAS does not.)
// smallcnn and lstm pass (float64 within 1.7e-15); densenet121 in float64
// fails it, its gradients 6.6e-11 apart (zoocheck.Tolerance says why).
func TestZooWithPortableMath(t *testing.T) {
	if os.Getenv(portableEnv) == "" {
		t.Skipf("set %s=1: a second host build of the kernels (about 20 s of g++) and the zoo again", portableEnv)
	}
	lib := dispatchtest.Setenv(t)
	t.Setenv("OOC_FAKECUDA_KERNELS", kernelstest.BuildPortable(t))
	d, err := cuda.Open(0, cuda.WithLibrary(lib), cuda.WithCapacity(2<<30))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	for _, c := range zoocheck.Cases {
		t.Run(fmt.Sprintf("%s/%v", c.Name, c.Cfg), func(t *testing.T) {
			if c.Deep && os.Getenv(zooEnv) == "" {
				t.Skipf("deep model: set %s=1 to run it (minutes on 2 cores)", zooEnv)
			}
			zoocheck.Run(t, d, c, false)
		})
	}
}
