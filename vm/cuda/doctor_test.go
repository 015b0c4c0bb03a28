package cuda

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/internal/fakecuda"
)

// TestDoctor runs the GPU acceptance check against the fake driver: the report has every
// part, and every check passes.
func TestDoctor(t *testing.T) {
	withKernels(t)
	for _, c := range []struct {
		name  string
		knobs map[string]int64
		want  []string
	}{
		{"vmm", nil, []string{
			"driver    ", "libcuda.so.1: CUDA 12.6 (cuDriverGetVersion 12060)",
			"cublas    not found: cuda: no cuBLAS library: tried $OOC_CUBLAS_LIBRARY (unset), ",
			"nccl      not found: cuda: no usable NCCL library: /nonexistent/libnccl.so.2 not found",
			"device    cuda:0: Fake CUDA Device 0 (fakecuda), compute capability 8.0, 4 multiprocessors, 2 copy engines",
			"memory    4 GiB total, 3.938 GiB free with this context; 256 MiB reserved for the driver; capacity 3.688 GiB",
			"VMM       yes: granularity 2 MiB, VA chunks of 2 MiB (2 MiB asked) and 40 MiB (40 MiB asked)",
			"pinned    host-to-device ", "(5 copies of 64 MiB each way); pool holds 64 MiB pinned, 0 B pageable",
			"ok        bestfit allocator, vm/alloc's swap-heavy trace: 1056 steps, bytes intact",
			"ok        va allocator, 2 MiB chunks, vm/alloc's swap-heavy trace: 1056 steps, bytes intact",
			"ok        va allocator, 40 MiB chunks, random trace",
			"ok        ordering of copy in, kernel, copy out on three streams: 3 rounds of 16 MiB",
			"nccl      none: cuda: no usable NCCL library: ",
			"all checks passed on cuda:0 (Fake CUDA Device 0 (fakecuda))"}},
		{"no vmm", map[string]int64{"vmm": 0}, []string{
			"VMM       no: the device reports CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 0; the best-fit allocator only",
			"ok        bestfit allocator, random trace", "all checks passed"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			lib := fakecuda.Build(t)
			f := fakecuda.Open(t, lib)
			t.Setenv(NCCLLibraryEnv, "/nonexistent/libnccl.so.2")
			t.Setenv(BLASLibraryEnv, "")
			for k, v := range c.knobs {
				f.Set(t, k, v)
			}
			var out bytes.Buffer
			// The overrides only: what else this machine has stays out of the report (the
			// lines of libraries found: TestSearchFindsInstalledLibraries).
			must(t, Doctor(&out, 0, WithLibrary(lib), WithSearch(Search{Getenv: os.Getenv})))
			for _, w := range c.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("the report does not say %q:\n%s", w, out.String())
				}
			}
			if c.knobs != nil && strings.Contains(out.String(), "va allocator") {
				t.Errorf("VA checks ran on a device without VMM")
			}
			t.Logf("\n%s", out.String())
		})
	}
}

// TestDoctorFails: a failing check is reported as FAIL and makes Doctor fail; a machine
// without a driver fails at once.
func TestDoctorFails(t *testing.T) {
	t.Setenv("OOC_FAKECUDA_KERNELS", "")
	var out bytes.Buffer
	err := Doctor(&out, 0, WithLibrary(fakecuda.Build(t)))
	if err == nil || !strings.Contains(err.Error(), "1 checks failed: [ordering of copy in, kernel, copy out on three streams]") {
		t.Errorf("Doctor with no kernels: %v", err)
	}
	if !strings.Contains(out.String(), "FAIL      ordering of copy in, kernel, copy out on three streams: kernel \"add_one\"") {
		t.Errorf("the report does not show the failure:\n%s", out.String())
	}
	if err := Doctor(io.Discard, 0, WithLibrary("/nonexistent/libcuda.so.1")); !errors.Is(err, ErrNoDriver) {
		t.Errorf("Doctor with no driver: %v, want ErrNoDriver", err)
	}
}
