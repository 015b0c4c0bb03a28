package dispatch_test

import (
	"fmt"
	"math/rand"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/gorgonia-ooc/outofcore/ooc"

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

// The default planner, Auto, on the fake CUDA device: the device measures
// no host link, so Auto plans with the v100-pcie profile's times and says
// so; whichever tape it picks (window's swaps or hybrid's recomputes) the
// steps give the CPU device's float64 bits (FAKE driver, not a GPU).
func TestAutoOnFakeDevice(t *testing.T) {
	d := openFake(t)
	c := zoocheck.Cases[0]
	peak, err := ooc.InCorePeak(c.Build(t).Graph)
	if err != nil {
		t.Fatal(err)
	}
	p := zoocheck.NewPairAt(t, d, c, peak/2)
	defer p.MC.Close()
	defer p.MG.Close()
	p.SGD()
	rng := rand.New(rand.NewSource(c.Cfg.Seed))
	for s := 0; s < c.Steps; s++ {
		p.Step(t, rng)
	}
	prog := p.MG.Program()
	t.Logf("%s: %s", prog.Scheduler, prog.Timing)
	if !strings.HasPrefix(prog.Scheduler, "auto: ") || !strings.Contains(prog.Timing, "assumed: nothing was measured on "+d.Name()) {
		t.Errorf("scheduler %q, timing %q: want auto's pick, planned on assumed times", prog.Scheduler, prog.Timing)
	}
	tol := 1e-12
	if runtime.GOARCH == "amd64" {
		tol = 0
	}
	p.Check(t, "smallcnn float64 at 50% under auto", tol)
}
