//go:build gpu

package cuda

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"testing"
)

// The tests of a machine with a GPU: go test -tags gpu ./vm/cuda/... runs the checks the
// fake-driver tests run, against the real driver (libcuda.so.1, or $OOC_CUDA_LIBRARY) and
// device $OOC_GPU (default 0). They have not run yet: no machine of this project has a GPU.

func gpuOrdinal(t *testing.T) int {
	n, err := strconv.Atoi(os.Getenv("OOC_GPU"))
	if err != nil {
		return 0
	}
	return n
}

func openGPU(t *testing.T, opts ...Option) *Device {
	t.Helper()
	d, err := Open(gpuOrdinal(t), opts...)
	if err != nil {
		t.Fatalf("the gpu tag wants a GPU: %v", err)
	}
	t.Cleanup(func() { must(t, d.Close()) })
	return d
}

// TestGPUDoctor runs ooc doctor's report and checks.
func TestGPUDoctor(t *testing.T) {
	var out bytes.Buffer
	err := Doctor(&out, gpuOrdinal(t))
	t.Logf("\n%s", out.String())
	must(t, err)
}

// TestGPURandomTraces is TestRandomTraces on the GPU, under a tight budget.
func TestGPURandomTraces(t *testing.T) {
	for _, k := range allocKinds {
		for seed := int64(1); seed <= 2; seed++ {
			t.Run(fmt.Sprintf("%s/seed=%d", k.name, seed), func(t *testing.T) {
				d := openGPU(t, WithCapacity(192*mib))
				c := newTraceCheck(d, k.new(t, d.Memory()))
				must(t, c.run(randomTrace(seed, 1500, 144*mib, 48*mib)))
				s, err := c.finish()
				must(t, err)
				t.Logf("%d out-of-memory failures; %v; driver calls %+v", c.ooms, s, d.MemoryStats())
			})
		}
	}
}

// TestGPUConcurrent is TestConcurrent on the GPU: goroutines on any threads, one context.
func TestGPUConcurrent(t *testing.T) {
	for _, k := range allocKinds {
		t.Run(k.name, func(t *testing.T) { concurrently(t, openGPU(t, WithCapacity(256*mib)), k) })
	}
}

// TestGPUOrdering runs the ordering check many rounds with the waits in place (without
// them the outcome on a GPU depends on timing, so only the fake tests their absence).
func TestGPUOrdering(t *testing.T) {
	d := openGPU(t)
	must(t, d.checkOrdering(16<<20, 20))
}
