package cuda

import (
	"bytes"
	"sync"
	"testing"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/internal/fakecuda"
)

const (
	kib = int64(1) << 10
	mib = int64(1) << 20
	gib = int64(1) << 30
)

// logBuffer collects a device's warnings; devices write from any goroutine.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// fakeDevice is a device on a fresh instance of the fake driver.
type fakeDevice struct {
	*Device
	fake *fakecuda.Fake
	lib  string
	log  *logBuffer
}

// openFake opens cuda:0 of a fresh fake driver whose knobs are set first. At cleanup it
// closes the device and checks the driver was left nothing to free: every byte, stream,
// event and module went back through an explicit call, not with the context.
func openFake(t testing.TB, knobs map[string]int64, opts ...Option) *fakeDevice {
	t.Helper()
	lib := fakecuda.Build(t)
	f := fakecuda.Open(t, lib)
	for k, v := range knobs {
		f.Set(t, k, v)
	}
	log := &logBuffer{}
	d, err := Open(0, append([]Option{WithLibrary(lib), WithLog(log)}, opts...)...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		lost := d.Lost() != nil
		if err := d.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if n := f.Get(t, "contexts"); n != 0 {
			t.Errorf("%d contexts left after Close", n)
		}
		if n := f.Get(t, "freed_by_destroy"); n != 0 && !lost {
			t.Errorf("the context destroy freed %d objects Close should have returned", n)
		}
	})
	return &fakeDevice{Device: d, fake: f, lib: lib, log: log}
}

// hostKernels are the host builds of the test kernels, for the fake's
// OOC_FAKECUDA_KERNELS: params[i] points to argument i.
const hostKernels = `
#include <string.h>

void ooc_host_add_one(const unsigned int grid[3], const unsigned int block[3], unsigned int shared, void **params) {
	float *x = *(float **)params[0];
	unsigned int n = *(unsigned int *)params[1];
	unsigned long long threads = (unsigned long long)grid[0] * block[0];
	for (unsigned long long i = 0; i < threads; i++)
		if (i < n)
			x[i] += 1.0f;
}

/* ooc_host_args writes what it was given into out[0..8]. */
void ooc_host_args(const unsigned int grid[3], const unsigned int block[3], unsigned int shared, void **params) {
	long long *out = *(long long **)params[0];
	float f;
	double g;
	memcpy(&f, params[4], sizeof f);
	memcpy(&g, params[5], sizeof g);
	out[0] = *(int *)params[1];
	out[1] = *(unsigned int *)params[2];
	out[2] = *(long long *)params[3];
	out[3] = (long long)(f * 1000);
	out[4] = (long long)(g * 1000);
	out[5] = grid[0] * 100 + grid[1] * 10 + grid[2];
	out[6] = block[0] * 100 + block[1] * 10 + block[2];
	out[7] = shared;
}
`

// withKernels points the fake driver at the host kernels (so the test cannot be parallel).
func withKernels(t *testing.T) {
	t.Helper()
	t.Setenv("OOC_FAKECUDA_KERNELS", fakecuda.BuildKernels(t, hostKernels))
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
