package cuda

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/gorgonia-ooc/outofcore/vm/alloc"
)

// BLASLibraries are the cuBLAS sonames tried in order by OpenBLAS, unless
// $OOC_CUBLAS_LIBRARY names a library.
var BLASLibraries = []string{"libcublas.so.12", "libcublas.so.11"}

// ErrNoBLAS is wrapped by OpenBLAS when no cuBLAS library loads.
var ErrNoBLAS = errors.New("no cuBLAS library")

// BLAS is cuBLAS on a device: one handle whose work runs on the device's compute
// stream, in order with the kernels launched there. Its methods are safe for concurrent
// use (calls are serialised, as a cuBLAS handle wants).
type BLAS struct {
	d    *Device
	path string
	h    uintptr // cublasHandle_t
	create, destroy, setStream, setWorkspace,
	sgemm, dgemm uintptr
	ws     alloc.Segment // cuBLAS's workspace, from the device's memory
	mu     sync.Mutex
	closed bool
}

// OpenBLAS loads cuBLAS ($OOC_CUBLAS_LIBRARY, else BLASLibraries) and makes a handle in
// the device's context, bound to its compute stream, with a workspace of
// BLASWorkspaceBytes taken from the device's memory (cublasSetWorkspace_v2 after
// cublasSetStream_v2, which resets it): cuBLAS then allocates none of its own, and the
// planner counts the workspace inside the budget (package dispatch reports it as the
// backend's reserve). Close frees it.
func (d *Device) OpenBLAS() (*BLAS, error) {
	paths := BLASLibraries
	if p := os.Getenv("OOC_CUBLAS_LIBRARY"); p != "" {
		paths = []string{p}
	}
	var errs []error
	for _, p := range paths {
		b, err := d.openBLAS(p)
		if err == nil {
			return b, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("cuda: %s: %w (tried %v): %v", d.name, ErrNoBLAS, paths, errors.Join(errs...))
}

func (d *Device) openBLAS(path string) (*BLAS, error) {
	runtime.LockOSThread()
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	runtime.UnlockOSThread()
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	b := &BLAS{d: d, path: path}
	for _, s := range []struct {
		name string
		p    *uintptr
	}{{"cublasCreate_v2", &b.create}, {"cublasDestroy_v2", &b.destroy}, {"cublasSetStream_v2", &b.setStream},
		{"cublasSetWorkspace_v2", &b.setWorkspace}, {"cublasSgemm_v2", &b.sgemm}, {"cublasDgemm_v2", &b.dgemm}} {
		if *s.p, err = purego.Dlsym(h, s.name); err != nil || *s.p == 0 {
			return nil, fmt.Errorf("%s lacks %s", path, s.name)
		}
	}
	if b.ws, err = d.mem.AllocSegment(d.BLASWorkspaceBytes()); err != nil {
		return nil, fmt.Errorf("%s: the cuBLAS workspace of %d bytes: %w", path, d.BLASWorkspaceBytes(), err)
	}
	err = d.do(func(*driver) error {
		if st := blasCall(b.create, uintptr(unsafe.Pointer(&b.h))); st != 0 {
			return fmt.Errorf("cublasCreate_v2: status %d", st)
		}
		if st := blasCall(b.setStream, b.h, d.streams[Compute].h); st != 0 {
			_ = blasCall(b.destroy, b.h)
			return fmt.Errorf("cublasSetStream_v2: status %d", st)
		}
		if st := blasCall(b.setWorkspace, b.h, b.ws.Addr, uintptr(b.ws.Size)); st != 0 {
			_ = blasCall(b.destroy, b.h)
			return fmt.Errorf("cublasSetWorkspace_v2 (%d bytes at %#x): status %d", b.ws.Size, b.ws.Addr, st)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, errors.Join(err, d.mem.FreeSegment(b.ws)))
	}
	return b, nil
}

// BLASWorkspaceBytes is the workspace OpenBLAS gives cuBLAS: 32 MiB on compute
// capability 9.0 and later (Hopper), 4 MiB before, the sizes of cuBLAS's own default
// pool on those devices, so GEMMs choose among the same algorithms as with cuBLAS's
// default. cuBLAS needs at least 16 KiB.
func (d *Device) BLASWorkspaceBytes() int64 {
	var major, minor int
	if _, err := fmt.Sscanf(d.info.ComputeCapability, "%d.%d", &major, &minor); err == nil && major >= 9 {
		return 32 << 20
	}
	return 4 << 20
}

// Workspace is the device memory cuBLAS works in: its address and size.
func (b *BLAS) Workspace() (addr uintptr, size int64) { return b.ws.Addr, b.ws.Size }

//go:uintptrescapes
func blasCall(f uintptr, args ...uintptr) int32 {
	r, _, _ := purego.SyscallN(f, args...)
	return int32(r)
}

// Library is the path cuBLAS was loaded from.
func (b *BLAS) Library() string { return b.path }

// Gemm queues C = alpha·op(A)·op(B) + beta·C on the compute stream, in cuBLAS's
// column-major convention (cublasSgemm_v2 for float32, cublasDgemm_v2 for float64):
// op(A) is m x k, op(B) k x n, C m x n, leading dimensions in elements.
func (b *BLAS) Gemm(float64s bool, transA, transB bool, m, n, k int, alpha float64, a uintptr, lda int,
	bm uintptr, ldb int, beta float64, c uintptr, ldc int) error {
	if m < 0 || n < 0 || k < 0 || lda < 1 || ldb < 1 || ldc < 1 {
		return fmt.Errorf("cuda: gemm %dx%dx%d with leading dimensions %d, %d, %d", m, n, k, lda, ldb, ldc)
	}
	op := func(t bool) uintptr {
		if t {
			return 1 // CUBLAS_OP_T
		}
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrClosed
	}
	st := &b.d.step
	st.mu.Lock()
	defer st.mu.Unlock()
	if err := b.d.begin(); err != nil {
		return err
	}
	return b.d.do(func(*driver) error {
		var s int32
		if float64s {
			al, be := alpha, beta
			s = blasCall(b.dgemm, b.h, op(transA), op(transB), uintptr(m), uintptr(n), uintptr(k),
				uintptr(unsafe.Pointer(&al)), a, uintptr(lda), bm, uintptr(ldb), uintptr(unsafe.Pointer(&be)), c, uintptr(ldc))
		} else {
			al, be := float32(alpha), float32(beta)
			s = blasCall(b.sgemm, b.h, op(transA), op(transB), uintptr(m), uintptr(n), uintptr(k),
				uintptr(unsafe.Pointer(&al)), a, uintptr(lda), bm, uintptr(ldb), uintptr(unsafe.Pointer(&be)), c, uintptr(ldc))
		}
		if s != 0 {
			return fmt.Errorf("cuda: cublas gemm %dx%dx%d: status %d", m, n, k, s)
		}
		return nil
	})
}

// Close destroys the handle and frees its workspace.
func (b *BLAS) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	err := b.d.do(func(*driver) error {
		if s := blasCall(b.destroy, b.h); s != 0 {
			return fmt.Errorf("cuda: cublasDestroy_v2: status %d", s)
		}
		return nil
	})
	return errors.Join(err, b.d.mem.FreeSegment(b.ws))
}

// LaunchPacked queues kernel f on the compute stream with kernelParams already packed
// as the driver reads them (an array of pointers to the arguments, as
// kernels.Launch.Params gives it). The memory params points to must stay alive until
// the call returns; the driver copies the arguments at the call.
func (d *Device) LaunchPacked(f *Function, grid, block Dim3, sharedBytes uint32, params unsafe.Pointer) error {
	if f == nil || f.m == nil || f.m.d != d {
		return fmt.Errorf("cuda: %s: launch of a kernel of another device, or none", d.name)
	}
	grid, block = grid.norm(), block.norm()
	if grid.X == 0 || block.X == 0 {
		return fmt.Errorf("cuda: %s: launch of %s with an empty grid %v or block %v", d.name, f.name, grid, block)
	}
	st := &d.step
	st.mu.Lock()
	defer st.mu.Unlock()
	if err := d.begin(); err != nil {
		return err
	}
	err := d.do(func(drv *driver) error {
		return drv.check(fnLaunchKernel, drv.call(fnLaunchKernel, f.h,
			uintptr(grid.X), uintptr(grid.Y), uintptr(grid.Z), uintptr(block.X), uintptr(block.Y), uintptr(block.Z),
			uintptr(sharedBytes), d.streams[Compute].h, uintptr(params), 0))
	})
	runtime.KeepAlive(params)
	return err
}

// ComputesOnDevice implements vm.DeviceComputer: a machine on a CUDA device computes
// through a backend (package vm/cuda/dispatch), never on the host.
func (d *Device) ComputesOnDevice() bool { return true }
