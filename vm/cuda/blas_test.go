package cuda

import (
	"runtime"
	"testing"
	"unsafe"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/internal/fakecuda"
)

// TestBLASWorkspaceInDeviceMemory: OpenBLAS gives cuBLAS a workspace of
// BLASWorkspaceBytes from the device's memory (counted in what the memory
// has in use), the fake cuBLAS refuses a GEMM without one (so a missing
// cublasSetWorkspace_v2 fails here and in every dispatch test) and refuses a
// workspace under 16 KiB or outside device memory, and Close gives it back.
func TestBLASWorkspaceInDeviceMemory(t *testing.T) {
	d := openFake(t, nil, WithCapacity(64*mib))
	t.Setenv("OOC_CUBLAS_LIBRARY", fakecuda.BuildBLAS(t))
	t.Setenv("OOC_FAKECUBLAS_DRIVER", d.lib)
	if got := d.BLASWorkspaceBytes(); got != 4*mib {
		t.Fatalf("BLASWorkspaceBytes on compute capability %s = %d, want 4 MiB", d.Info().ComputeCapability, got)
	}
	if h := openFake(t, map[string]int64{"cc_major": 9, "cc_minor": 0}); h.BLASWorkspaceBytes() != 32*mib {
		t.Fatalf("BLASWorkspaceBytes on compute capability %s = %d, want 32 MiB", h.Info().ComputeCapability, h.BLASWorkspaceBytes())
	}
	before := d.mem.Used()
	b, err := d.OpenBLAS()
	if err != nil {
		t.Fatal(err)
	}
	addr, size := b.Workspace()
	if size != 4*mib || addr == 0 || d.mem.Used()-before != size {
		t.Fatalf("workspace %d bytes at %#x; memory in use grew by %d", size, addr, d.mem.Used()-before)
	}
	buf, err := d.mem.AllocSegment(4 * kib)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = d.mem.FreeSegment(buf) }()
	gemm := func() error {
		return b.Gemm(false, false, false, 4, 4, 4, 1, buf.Addr, 4, buf.Addr, 4, 0, buf.Addr+1024, 4)
	}
	if err := gemm(); err != nil {
		t.Fatalf("gemm with the workspace: %v", err)
	}
	host := make([]byte, 64*kib)
	for _, c := range []struct {
		name string
		ptr  uintptr
		size int64
	}{
		{"8 KiB", addr, 8 * kib},
		{"host memory", uintptr(unsafe.Pointer(&host[0])), 64 * kib},
		{"past the allocation", addr + uintptr(size-8*kib), 16 * kib},
		{"unaligned", addr + 8, 16 * kib},
	} {
		if st := d.blasDo(t, b.lib.setWorkspace, b.h, c.ptr, uintptr(c.size)); st == 0 {
			t.Errorf("fake cublasSetWorkspace_v2 took a workspace of %s", c.name)
		}
	}
	runtime.KeepAlive(host)
	// cublasSetStream_v2 resets the workspace, as cuBLAS's does: a GEMM then
	// would allocate outside the budget, which the fake refuses.
	if st := d.blasDo(t, b.lib.setStream, b.h, d.streams[Compute].h); st != 0 {
		t.Fatalf("cublasSetStream_v2: status %d", st)
	}
	if err := gemm(); err == nil {
		t.Fatal("the fake cuBLAS ran a GEMM without a workspace")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if d.mem.Used() != before+buf.Size {
		t.Fatalf("after Close the memory has %d bytes in use, %d before OpenBLAS and %d of the test's", d.mem.Used(), before, buf.Size)
	}
}

// blasDo calls a cuBLAS entry point on the device's thread.
func (d *Device) blasDo(t *testing.T, f uintptr, args ...uintptr) int32 {
	t.Helper()
	var st int32
	if err := d.do(func(*driver) error { st = blasCall(f, args...); return nil }); err != nil {
		t.Fatal(err)
	}
	return st
}
