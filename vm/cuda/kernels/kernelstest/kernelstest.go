// Package kernelstest builds the kernels for the host, for tests that run
// them without a GPU (this package's own, and the CUDA VM's with the fake
// driver): every kernel K of kernels.Specs is exported from a shared library
// as
//
//	extern "C" void ooc_host_K(const unsigned int grid[3], const unsigned int block[3],
//	                           unsigned int sharedBytes, void **params)
//
// with params as cuLaunchKernel's kernelParams (params[i] points at argument
// i; kernels.Launch.Params packs them so), running K for every block and
// thread of the grid. ooc_host_set_order(int reverse) makes later launches run
// blocks and threads in reverse order (the race test). See src/host.h.
package kernelstest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels/internal/build"
)

var (
	once    sync.Map // build.Kind -> *result
	cxxName = "g++"
)

type result struct {
	once sync.Once
	path string
	err  error
}

// CacheDir is where host builds are kept, keyed by a hash of sources, flags
// and compiler: a directory under the system's temporary directory.
func CacheDir() string {
	return filepath.Join(os.TempDir(), "ooc-kernels-"+strconv.Itoa(os.Getuid()))
}

// BuildHost builds (once per process, and once per source change across
// processes) the host shared library with g++ and returns its path. It skips
// the test when g++ is missing and fails it when the build fails.
func BuildHost(t testing.TB) (libPath string) {
	t.Helper()
	return buildKind(t, build.Library)
}

// BuildPortable builds the host library with the portable exp and log the
// PTX runs instead of Go's amd64 ones: a GPU's arithmetic, for checking that
// "ooc doctor"'s tolerances hold on it.
func BuildPortable(t testing.TB) (libPath string) {
	t.Helper()
	return buildKind(t, build.Portable)
}

// BuildSanitized builds the sanitizer harness (AddressSanitizer and
// UndefinedBehaviorSanitizer) and returns its path; it skips when the
// compiler cannot build with sanitizers.
func BuildSanitized(t testing.TB) (harnessPath string) {
	t.Helper()
	return buildKind(t, build.Sanitized)
}

func buildKind(t testing.TB, k build.Kind) string {
	t.Helper()
	cxx, err := exec.LookPath(cxxName)
	if err != nil {
		t.Skipf("kernelstest: %s not found, the host build of the kernels needs it (apt-get install -y g++)", cxxName)
	}
	v, _ := once.LoadOrStore(k, &result{})
	r := v.(*result)
	r.once.Do(func() { r.path, r.err = build.Host(cxx, CacheDir(), k) })
	if r.err != nil {
		if k == build.Sanitized {
			t.Skipf("kernelstest: cannot build with -fsanitize=address,undefined here: %v", r.err)
		}
		t.Fatalf("kernelstest: host build: %v", r.err)
	}
	return r.path
}
