package cuda

import (
	"errors"
	"runtime"
	"strings"
	"testing"
	"unsafe"
)

// TestContextLost loses the context mid-run, as a faulting kernel or a hardware error
// does: every call after that fails with ErrContextLost naming the first error, nothing
// hangs or panics, and the device still closes.
func TestContextLost(t *testing.T) {
	withKernels(t)
	for _, c := range []struct {
		name string
		lose func(d *fakeDevice, f *Function, block uintptr) error
		says string
	}{
		{"a kernel fault", func(d *fakeDevice, f *Function, block uintptr) error {
			d.fake.Fail("cuLaunchKernel", 700)
			return d.Launch(f, Dim3{X: 1}, Dim3{X: 256}, 0, block, uint32(16))
		}, "cuLaunchKernel: CUDA_ERROR_ILLEGAL_ADDRESS"},
		{"an error found at a sync", func(d *fakeDevice, f *Function, block uintptr) error {
			must(t, d.Launch(f, Dim3{X: 1}, Dim3{X: 256}, 0, block, uint32(16)))
			d.fake.Set(t, "lose", 719)
			_, err := d.EndStep()
			return err
		}, "CUDA_ERROR_LAUNCH_FAILED"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := openFake(t, nil)
			a, err := d.NewVA(2 * mib)
			must(t, err)
			b, err := a.Alloc(mib)
			must(t, err)
			f, err := d.checkKernel()
			must(t, err)
			buf, err := d.Pinned().Get(mib)
			must(t, err)
			if err := c.lose(d, f, b.Addr()); !errors.Is(err, ErrContextLost) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("the failing call: %v, want ErrContextLost saying %q", err, c.says)
			}
			if err := d.Lost(); !errors.Is(err, ErrContextLost) || !strings.Contains(err.Error(), "close the device") {
				t.Errorf("Lost() = %v", err)
			}
			_, err1 := d.CopyIn(b.Addr(), buf.Bytes)
			_, err2 := a.Alloc(64 * mib)
			_, err3 := d.Memory().AllocSegment(mib)
			err4 := d.Launch(f, Dim3{X: 1}, Dim3{X: 1}, 0, b.Addr(), uint32(1))
			_, err5 := d.EndStep()
			for i, err := range []error{err1, err2, err3, err4, err5} {
				if !errors.Is(err, ErrContextLost) || !strings.Contains(err.Error(), c.says) {
					t.Errorf("call %d after the loss: %v, want ErrContextLost naming the first error", i+1, err)
				}
			}
			if err := a.Close(); err != nil && !errors.Is(err, ErrContextLost) {
				t.Errorf("closing the allocator: %v", err)
			}
			if err := d.Close(); err != nil {
				t.Errorf("Close of a lost device: %v, want nil", err)
			}
		})
	}
}

// TestContextPerThread is the negative control of the context handling: on a thread whose
// current context is cleared, the fake refuses a call, as the driver does; the device's
// own call path makes its context current first and succeeds on the same thread.
func TestContextPerThread(t *testing.T) {
	d := openFake(t, nil)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	drv := d.drv
	must(t, drv.check(fnCtxSetCurrent, drv.call(fnCtxSetCurrent, 0)))
	var free, total uint64
	err := drv.check(fnMemGetInfo, drv.call(fnMemGetInfo, uintptr(unsafe.Pointer(&free)), uintptr(unsafe.Pointer(&total))))
	if err == nil || !strings.Contains(err.Error(), "CUDA_ERROR_INVALID_CONTEXT") {
		t.Fatalf("a call with no current context: %v, want CUDA_ERROR_INVALID_CONTEXT", err)
	}
	seg, err := d.Memory().AllocSegment(mib)
	must(t, err)
	must(t, d.Memory().FreeSegment(seg))
}
