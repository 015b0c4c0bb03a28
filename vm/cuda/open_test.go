package cuda

import (
	"errors"
	"strings"
	"testing"

	"github.com/gorgonia-ooc/outofcore/vm"
	"github.com/gorgonia-ooc/outofcore/vm/alloc"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/internal/fakecuda"
)

var _ vm.Device = (*Device)(nil)

// TestOpenErrors opens devices the ways a machine can refuse: each error wraps its
// sentinel and says what is wrong in words a user can act on.
func TestOpenErrors(t *testing.T) {
	onlyVersion := fakecuda.BuildKernels(t, `int cuDriverGetVersion(int *v) { *v = 12060; return 0; }`)
	cases := []struct {
		name    string
		knobs   map[string]int64
		fail    string // a driver call to fail at once, with result failWith
		failRes int
		lib     string // instead of a fresh fake
		ordinal int
		opts    []Option
		is      error
		says    string
	}{
		{name: "no driver", lib: "/nonexistent/libcuda.so.1", is: ErrNoDriver,
			says: "no NVIDIA driver: /nonexistent/libcuda.so.1 not found"},
		{name: "not a CUDA driver", lib: "libm.so.6", says: "has no cuDriverGetVersion: it is not a CUDA driver"},
		{name: "driver too old", knobs: map[string]int64{"driver_version": 10010}, is: ErrDriverTooOld,
			says: "supports CUDA 10.1 (cuDriverGetVersion 10010); this needs CUDA 11.0 or newer"},
		{name: "driver lacks functions", lib: onlyVersion, is: ErrDriverTooOld, says: "lacks cuInit, cuGetErrorName"},
		{name: "stub library", fail: "cuInit", failRes: 34, is: ErrNoDriver, says: "the CUDA toolkit's stub library"},
		{name: "no device", knobs: map[string]int64{"devices": 0}, is: ErrNoDevice,
			says: "no CUDA device: cuInit found no CUDA-capable device"},
		{name: "bad ordinal", knobs: map[string]int64{"devices": 2}, ordinal: 3, is: ErrNoDevice,
			says: "cuda:3 asked for, but this machine has 2 (cuda:0 to cuda:1)"},
		{name: "negative ordinal", ordinal: -1, is: ErrNoDevice, says: "has one (cuda:0)"},
		{name: "capacity above free memory", opts: []Option{WithCapacity(5 * gib)}, is: alloc.ErrOutOfMemory,
			says: "capacity 5368709120 bytes asked for, but 4227858432 bytes are free and 268435456 are reserved"},
		{name: "negative capacity", opts: []Option{WithCapacity(-1)}, says: "capacity -1 is negative"},
		{name: "no memory for a context", fail: "cuDevicePrimaryCtxRetain", failRes: 2, is: alloc.ErrOutOfMemory,
			says: "cuda:0: cuDevicePrimaryCtxRetain: CUDA_ERROR_OUT_OF_MEMORY (out of memory)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lib := c.lib
			if lib == "" {
				lib = fakecuda.Build(t)
				f := fakecuda.Open(t, lib)
				for k, v := range c.knobs {
					f.Set(t, k, v)
				}
				if c.fail != "" {
					f.Fail(c.fail, c.failRes)
				}
			}
			d, err := Open(c.ordinal, append([]Option{WithLibrary(lib)}, c.opts...)...)
			if err == nil {
				d.Close()
				t.Fatalf("Open succeeded")
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("error %q does not wrap %q", err, c.is)
			}
			if !strings.Contains(err.Error(), c.says) {
				t.Errorf("error %q does not say %q", err, c.says)
			}
		})
	}
}

// TestNoDriverHere is what a CPU-only machine sees: the default library is not there.
func TestNoDriverHere(t *testing.T) {
	t.Setenv(LibraryEnv, "")
	d, err := Open(0)
	if err == nil {
		d.Close()
		t.Skip("this machine has a CUDA driver and device")
	}
	if !errors.Is(err, ErrNoDriver) {
		t.Skipf("this machine has a CUDA driver: %v", err)
	}
	if want := "cuda: no NVIDIA driver: tried $OOC_CUDA_LIBRARY (unset), the loader's path (libcuda.so.1), "; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q, want it to start %q", err, want)
	}
	if want := "install the NVIDIA driver"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
}

func TestInfo(t *testing.T) {
	d := openFake(t, map[string]int64{"cc_major": 7, "cc_minor": 5})
	in := d.Info()
	want := Info{Library: d.lib, DriverVersion: 12060, Name: "Fake CUDA Device 0 (fakecuda)", ComputeCapability: "7.5",
		Multiprocessors: 4, AsyncEngines: 2, TotalMemory: 4 * gib, FreeMemory: 4*gib - 64*mib, Reserve: 256 * mib,
		Capacity: 4*gib - 64*mib - 256*mib, VMM: true, Granularity: 2 * mib}
	if in != want {
		t.Errorf("Info() =\n%+v, want\n%+v", in, want)
	}
	if d.Name() != "cuda:0" || d.Capacity() != want.Capacity || d.Simulated() || d.Memory().Capacity() != want.Capacity {
		t.Errorf("Name %q, Capacity %d, Simulated %v, Memory().Capacity %d", d.Name(), d.Capacity(), d.Simulated(), d.Memory().Capacity())
	}
}

func TestCapacityOptions(t *testing.T) {
	d := openFake(t, nil, WithCapacity(gib))
	if d.Capacity() != gib {
		t.Errorf("WithCapacity(1 GiB): Capacity %d", d.Capacity())
	}
	d = openFake(t, nil, WithReserve(0))
	if in := d.Info(); in.Capacity != in.FreeMemory || in.Reserve != 0 {
		t.Errorf("WithReserve(0): %+v", in)
	}
	if DefaultReserve(80*gib) != 80*gib/32 || DefaultReserve(gib) != 256*mib {
		t.Errorf("DefaultReserve: %d for 80 GiB, %d for 1 GiB", DefaultReserve(80*gib), DefaultReserve(gib))
	}
}

// TestNewDevice opens the fake through vm.NewDevice, as -device cuda:N does.
func TestNewDevice(t *testing.T) {
	lib := fakecuda.Build(t)
	fakecuda.Open(t, lib).Set(t, "devices", 2)
	t.Setenv(LibraryEnv, lib)
	for _, c := range []struct {
		spec     string
		capacity int64
		name     string
		err      string
	}{
		{"cuda", 0, "cuda:0", ""},
		{"cuda:1", gib, "cuda:1", ""},
		{"cuda:2", 0, "", "cuda:2 asked for, but this machine has 2"},
		{"cuda:x", 0, "", `device name "cuda:x": want cuda or cuda:N`},
		{"cuda:01", 0, "", `device name "cuda:01"`},
		{"cudax", 0, "", `unknown device "cudax"`},
	} {
		d, err := vm.NewDevice(c.spec, c.capacity)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("NewDevice(%q): %v, want an error saying %q", c.spec, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("NewDevice(%q): %v", c.spec, err)
		}
		if d.Name() != c.name || (c.capacity > 0 && d.Capacity() != c.capacity) {
			t.Errorf("NewDevice(%q): %s with capacity %d", c.spec, d.Name(), d.Capacity())
		}
		must(t, d.Close())
	}
	if _, err := vm.NewDevice("tpu", 0); !errors.Is(err, vm.ErrUnknownDevice) || !strings.Contains(err.Error(), "cuda, cuda:N") {
		t.Errorf("NewDevice(tpu): %v, want ErrUnknownDevice listing cuda", err)
	}
}

// TestCloseIdempotent closes twice, and uses a closed device: errors, not panics.
func TestCloseIdempotent(t *testing.T) {
	d := openFake(t, nil)
	must(t, d.Close())
	must(t, d.Close())
	if _, err := d.Memory().AllocSegment(mib); !errors.Is(err, alloc.ErrClosed) {
		t.Errorf("AllocSegment after Close: %v, want alloc.ErrClosed", err)
	}
	if _, err := d.CopyIn(0x1000, make([]byte, 8)); !errors.Is(err, ErrClosed) {
		t.Errorf("CopyIn after Close: %v, want ErrClosed", err)
	}
	if _, err := d.Pinned().Get(mib); !errors.Is(err, alloc.ErrClosed) {
		t.Errorf("Pinned().Get after Close: %v, want alloc.ErrClosed", err)
	}
	if _, err := d.LoadModule([]byte("x")); !errors.Is(err, ErrClosed) {
		t.Errorf("LoadModule after Close: %v, want ErrClosed", err)
	}
}
