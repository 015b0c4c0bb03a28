package dispatch_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/dispatch/zoocheck"
)

// zooEnv opts in to the deep models on the fake device (each takes tens of
// seconds to minutes on 2 cores: the fake's GEMM is a plain host loop).
const zooEnv = "OOC_CUDA_ZOO"

// TestZooOnFakeDevice runs zoocheck's cases (zoocheck.Run says what is
// compared and by which rule) on the fake CUDA device: smallcnn and lstm by
// default, the deep models with OOC_CUDA_ZOO=1. The fake is exact: float64
// steps must be the CPU device's bits on amd64.
func TestZooOnFakeDevice(t *testing.T) {
	d := openFake(t)
	for _, c := range zoocheck.Cases {
		t.Run(fmt.Sprintf("%s/%v", c.Name, c.Cfg), func(t *testing.T) {
			if c.Deep && os.Getenv(zooEnv) == "" {
				t.Skipf("deep model: set %s=1 to run it (minutes on 2 cores)", zooEnv)
			}
			zoocheck.Run(t, d, c, true)
		})
	}
}
