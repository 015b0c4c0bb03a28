package cuda

import (
	"runtime"
	"strings"
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

// hostOne is alpha and beta for the calls below, in host memory that does not
// move (a global), read through CUBLAS_POINTER_MODE_HOST.
var hostOne = [2]float32{1, 0}

// TestFakeCuBLASChecksArguments: the fake cuBLAS refuses, as cuBLAS does
// (CUBLAS_STATUS_INVALID_VALUE, 7), a bad size, leading dimension, increment
// or operation of gemv, ger and the batched GEMM; refuses scalars and a dot's
// result on the wrong side of the pointer mode (a real one would fault) and
// arrays of matrix addresses in host memory; BLAS's methods say what is wrong
// before calling it; and Dot leaves the handle in host pointer mode (a GEMM
// with host scalars runs after it).
func TestFakeCuBLASChecksArguments(t *testing.T) {
	d := openFake(t, nil, WithCapacity(64*mib))
	t.Setenv("OOC_CUBLAS_LIBRARY", fakecuda.BuildBLAS(t))
	t.Setenv("OOC_FAKECUBLAS_DRIVER", d.lib)
	b, err := d.OpenBLAS()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	}()
	buf, err := d.mem.AllocSegment(64 * kib)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = d.mem.FreeSegment(buf) }()
	dev := buf.Addr // 4 x 4 float32 matrices and vectors at 1 KiB steps
	at := func(i uintptr) uintptr { return dev + i*1024 }
	one, zero := uintptr(unsafe.Pointer(&hostOne[0])), uintptr(unsafe.Pointer(&hostOne[1]))
	host := uintptr(unsafe.Pointer(&hostArrays[0]))
	const invalid = 7
	for _, c := range []struct {
		name string
		f    uintptr
		args []uintptr
	}{
		{"gemv lda < m", b.lib.sgemv, []uintptr{0, 4, 4, one, at(0), 3, at(1), 1, zero, at(2), 1}},
		{"gemv incx 0", b.lib.sgemv, []uintptr{0, 4, 4, one, at(0), 4, at(1), 0, zero, at(2), 1}},
		{"gemv incy 0", b.lib.sgemv, []uintptr{1, 4, 4, one, at(0), 4, at(1), 1, zero, at(2), 0}},
		{"gemv operation 3", b.lib.sgemv, []uintptr{3, 4, 4, one, at(0), 4, at(1), 1, zero, at(2), 1}},
		{"gemv m < 0", b.lib.sgemv, []uintptr{0, negative, 4, one, at(0), 4, at(1), 1, zero, at(2), 1}},
		{"gemv alpha in device memory", b.lib.sgemv, []uintptr{0, 4, 4, at(3), at(0), 4, at(1), 1, zero, at(2), 1}},
		{"ger lda < m", b.lib.sger, []uintptr{4, 4, one, at(1), 1, at(2), 1, at(0), 2}},
		{"ger incy 0", b.lib.sger, []uintptr{4, 4, one, at(1), 1, at(2), 0, at(0), 4}},
		{"ger n < 0", b.lib.sger, []uintptr{4, negative, one, at(1), 1, at(2), 1, at(0), 4}},
		{"dot result in device memory, host pointer mode", b.lib.sdot, []uintptr{4, at(1), 1, at(2), 1, at(3)}},
		{"gemm alpha in device memory", b.lib.sgemm, []uintptr{0, 0, 4, 4, 4, at(3), at(0), 4, at(1), 4, zero, at(2), 4}},
		{"gemmBatched arrays in host memory", b.lib.sgemmBatched, []uintptr{0, 0, 4, 4, 4, one, host, 4, host, 4, zero, host, 4, 1}},
		{"gemmBatched ldc < m", b.lib.sgemmBatched, []uintptr{0, 0, 4, 4, 4, one, at(4), 4, at(4), 4, zero, at(4), 3, 1}},
		{"gemmBatched batch < 0", b.lib.sgemmBatched, []uintptr{0, 0, 4, 4, 4, one, at(4), 4, at(4), 4, zero, at(4), 4, negative}},
	} {
		if st := d.blasDo(t, c.f, append([]uintptr{b.h}, c.args...)...); st != invalid {
			t.Errorf("fake cuBLAS, %s: status %d, want %d (CUBLAS_STATUS_INVALID_VALUE)", c.name, st, invalid)
		}
	}
	if st := d.blasDo(t, b.lib.setPointerMode, b.h, pointerModeDevice); st != 0 {
		t.Fatalf("cublasSetPointerMode_v2: status %d", st)
	}
	if st := d.blasDo(t, b.lib.sdot, b.h, 4, at(1), 1, at(2), 1, uintptr(unsafe.Pointer(&hostOne[0]))); st != invalid {
		t.Errorf("fake cuBLAS, dot into host memory in device pointer mode: status %d, want %d", st, invalid)
	}
	if st := d.blasDo(t, b.lib.setPointerMode, b.h, pointerModeHost); st != 0 {
		t.Fatalf("cublasSetPointerMode_v2: status %d", st)
	}
	runtime.KeepAlive(&hostOne)
	for _, c := range []struct {
		name string
		err  error
	}{
		{"gemv lda < m", b.Gemv(false, false, 4, 4, 1, at(0), 3, at(1), 1, 0, at(2), 1)},
		{"ger incx 0", b.Ger(false, 4, 4, 1, at(1), 0, at(2), 1, at(0), 4)},
		{"dot into address 0", b.Dot(false, 4, at(1), 1, at(2), 1, 0)},
		{"gemmBatched batch < 0", b.GemmBatched(false, false, false, 4, 4, 4, 1, at(4), 4, at(4), 4, 0, at(4), 4, -1)},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), strings.Fields(c.name)[0]) {
			t.Errorf("BLAS, %s: error %v, want one naming the call", c.name, c.err)
		}
	}
	if err := b.Dot(false, 4, at(1), 1, at(2), 1, at(3)); err != nil {
		t.Fatalf("dot into device memory: %v", err)
	}
	if err := b.Gemm(false, false, false, 4, 4, 4, 1, at(0), 4, at(1), 4, 0, at(2), 4); err != nil {
		t.Fatalf("a GEMM with host scalars after Dot (the handle left in device pointer mode?): %v", err)
	}
}

// hostArrays is an array of matrix addresses in host memory, which cuBLAS's
// batched GEMM cannot read.
var hostArrays [3]uintptr

// negative is -1 as a C int argument.
const negative = ^uintptr(0)
