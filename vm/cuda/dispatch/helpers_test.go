package dispatch_test

import (
	"testing"

	"github.com/gorgonia-ooc/outofcore/vm/cuda"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/dispatch/dispatchtest"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/dispatch/zoocheck"
)

// openFake opens cuda:0 of a fresh fake driver whose kernels are the host
// builds of the CUDA sources and whose cuBLAS is the fake's host GEMM. The
// test cannot be parallel (it sets environment variables).
func openFake(t testing.TB) *cuda.Device {
	t.Helper()
	lib := dispatchtest.Setenv(t)
	d, err := cuda.Open(0, cuda.WithLibrary(lib), cuda.WithCapacity(2<<30))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("closing the fake device: %v", err)
		}
	})
	return d
}

// The zoo's pair of machines and its comparison rule live in zoocheck,
// which "ooc doctor" runs on a GPU; these names keep the tests short.
type (
	zooCase = zoocheck.Case
	pair    = zoocheck.Pair
)

var (
	newPair   = zoocheck.NewPair
	newPairAt = zoocheck.NewPairAt
	batch     = zoocheck.Batch
	floats    = zoocheck.Floats
	relErr    = zoocheck.RelErr
	set       = zoocheck.SetAt
)
