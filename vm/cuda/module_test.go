package cuda

import (
	"encoding/binary"
	"strings"
	"testing"
)

// TestLaunch passes every kind of argument to a host kernel of the fake driver and reads
// back what arrived, with the grid, block and shared-memory size.
func TestLaunch(t *testing.T) {
	withKernels(t)
	d := openFake(t, nil)
	image := []byte("// not parsed by the fake\n.visible .entry args()")
	m, err := d.LoadModule(image)
	must(t, err)
	if d.fake.Get(t, "modules_loaded") != 1 || d.fake.Get(t, "image_bytes") != int64(len(image)) {
		t.Errorf("the driver recorded %d modules, the last of %d bytes", d.fake.Get(t, "modules_loaded"), d.fake.Get(t, "image_bytes"))
	}
	f, err := m.Function("args")
	must(t, err)
	if f.Name() != "args" {
		t.Errorf("Name %q", f.Name())
	}
	seg, err := d.mem.AllocSegment(64)
	must(t, err)
	must(t, d.Launch(f, Dim3{X: 3, Y: 2}, Dim3{X: 4, Z: 5}, 48, seg.Addr, int32(-7), uint32(4000000000), int64(-1)<<40, float32(2.5), 1.25))
	_, err = d.EndStep()
	must(t, err)
	out := make([]byte, 64)
	must(t, d.readSync(out, seg.Addr))
	got := make([]int64, 8)
	for i := range got {
		got[i] = int64(binary.LittleEndian.Uint64(out[8*i:]))
	}
	want := []int64{-7, 4000000000, -1 << 40, 2500, 1250, 321, 415, 48}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("the kernel got %v, want %v", got, want)
			break
		}
	}
	must(t, d.mem.FreeSegment(seg))

	for _, c := range []struct {
		name string
		err  error
		says string
	}{
		{"a bad argument", d.Launch(f, Dim3{X: 1}, Dim3{X: 1}, 0, "x"), "argument 0: string is not a kernel argument"},
		{"an empty grid", d.Launch(f, Dim3{}, Dim3{X: 1}, 0), "empty grid"},
		{"no kernel", d.Launch(nil, Dim3{X: 1}, Dim3{X: 1}, 0), "a kernel of another device, or none"},
		{"an unknown kernel", func() error { _, err := m.Function("nope"); return err }(), `kernel "nope": cuda: cuda:0: cuModuleGetFunction: CUDA_ERROR_NOT_FOUND`},
		{"an empty image", func() error { _, err := d.LoadModule(nil); return err }(), "empty module image"},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.says) {
			t.Errorf("%s: %v, want an error saying %q", c.name, c.err, c.says)
		}
	}
	must(t, m.Unload())
	if err := m.Unload(); err == nil {
		t.Errorf("a second Unload: no error")
	}
}

// TestNoKernelLibrary: without OOC_FAKECUDA_KERNELS the fake finds no kernel.
func TestNoKernelLibrary(t *testing.T) {
	t.Setenv("OOC_FAKECUDA_KERNELS", "")
	d := openFake(t, nil)
	if _, err := d.checkKernel(); err == nil || !strings.Contains(err.Error(), "CUDA_ERROR_NOT_FOUND") {
		t.Errorf("add_one with no kernel library: %v, want CUDA_ERROR_NOT_FOUND", err)
	}
}

// TestZeroValues: values not made by the device give errors, not panics.
func TestZeroValues(t *testing.T) {
	d := openFake(t, nil)
	var m *Module
	_, err1 := m.Function("x")
	err2 := (&Module{}).Unload()
	err3 := d.Launch(&Function{}, Dim3{X: 1}, Dim3{X: 1}, 0)
	err4 := d.Stream(numStreams).Synchronize()
	_, err5 := d.Stream(-1).Record()
	err6 := d.Stream(Compute).Wait(&Event{})
	err7 := d.Pinned().Put(&HostBuffer{})
	for i, err := range []error{err1, err2, err3, err4, err5, err6, err7} {
		if err == nil {
			t.Errorf("case %d: no error", i+1)
		}
	}
}
