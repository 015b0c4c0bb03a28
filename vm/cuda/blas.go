package cuda

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/gorgonia-ooc/outofcore/vm/alloc"
)

// BLASLibraries are the cuBLAS sonames OpenBLAS looks for, newest first, in each place
// of the device's Search, unless $OOC_CUBLAS_LIBRARY (BLASLibraryEnv) names a library.
var BLASLibraries = []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11"}

// BLASLibraryEnv names an environment variable that, when set, is the only cuBLAS
// OpenBLAS tries.
const BLASLibraryEnv = "OOC_CUBLAS_LIBRARY"

// ErrNoBLAS is wrapped by OpenBLAS when no cuBLAS library loads.
var ErrNoBLAS = errors.New("no cuBLAS library")

// BLAS is cuBLAS on a device: one handle whose work runs on the device's compute
// stream, in order with the kernels launched there. Its methods are safe for concurrent
// use (calls are serialised, as a cuBLAS handle wants).
type BLAS struct {
	d      *Device
	lib    *blasLib
	h      uintptr       // cublasHandle_t
	ws     alloc.Segment // cuBLAS's workspace, from the device's memory
	mu     sync.Mutex
	closed bool
	// scalars are the alpha and beta of the call under mu, read by cuBLAS through host
	// pointers (CUBLAS_POINTER_MODE_HOST).
	scalars struct {
		f64 [2]float64
		f32 [2]float32
	}
}

// blasLib is a loaded cuBLAS: its path, version and the functions this package calls.
type blasLib struct {
	path    string
	version string // "13.0.2", from cublasGetProperty; "" when it lacks that
	create, destroy, setStream, setWorkspace, setPointerMode,
	sgemm, dgemm, sgemmBatched, dgemmBatched, sgemv, dgemv, sger, dger, sdot, ddot uintptr
}

// OpenBLAS loads cuBLAS ($OOC_CUBLAS_LIBRARY, else the first of BLASLibraries the
// device's Search finds) and makes a handle in the device's context, bound to its compute
// stream, with a workspace of BLASWorkspaceBytes taken from the device's memory
// (cublasSetWorkspace_v2 after cublasSetStream_v2, which resets it): cuBLAS then
// allocates none of its own, and the planner counts the workspace inside the budget
// (package dispatch reports it as the backend's reserve). Close frees it.
func (d *Device) OpenBLAS() (*BLAS, error) {
	lib, err := findBLAS(d.search)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.name, err)
	}
	return d.openBLAS(lib)
}

// findBLAS loads the first cuBLAS the search finds.
func findBLAS(s Search) (*blasLib, error) {
	var lib *blasLib
	_, err := s.find(blasLibrary(), ErrNoBLAS, func(p string) (err error) {
		lib, err = loadBLAS(p)
		return err
	})
	return lib, err
}

// loadBLAS dlopens cuBLAS at path and binds its functions.
func loadBLAS(path string) (*blasLib, error) {
	if err := loadBLASLt(path); err != nil {
		return nil, err
	}
	h, err := dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, fmt.Errorf("cuda: %w: %s %s (%w)", ErrNoBLAS, path, missing(path, err), err)
	}
	lib := &blasLib{path: path}
	var missing []string
	for _, s := range []struct {
		name string
		p    *uintptr
	}{{"cublasCreate_v2", &lib.create}, {"cublasDestroy_v2", &lib.destroy}, {"cublasSetStream_v2", &lib.setStream},
		{"cublasSetWorkspace_v2", &lib.setWorkspace}, {"cublasSetPointerMode_v2", &lib.setPointerMode},
		{"cublasSgemm_v2", &lib.sgemm}, {"cublasDgemm_v2", &lib.dgemm},
		{"cublasSgemmBatched", &lib.sgemmBatched}, {"cublasDgemmBatched", &lib.dgemmBatched},
		{"cublasSgemv_v2", &lib.sgemv}, {"cublasDgemv_v2", &lib.dgemv}, {"cublasSger_v2", &lib.sger},
		{"cublasDger_v2", &lib.dger}, {"cublasSdot_v2", &lib.sdot}, {"cublasDdot_v2", &lib.ddot}} {
		if *s.p, _ = purego.Dlsym(h, s.name); *s.p == 0 {
			missing = append(missing, s.name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("cuda: %w: %s lacks %s", ErrNoBLAS, path, strings.Join(missing, ", "))
	}
	if prop, _ := purego.Dlsym(h, "cublasGetProperty"); prop != 0 {
		var v [3]int32 // MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
		ok := true
		for i := range v {
			ok = ok && blasCall(prop, uintptr(i), uintptr(unsafe.Pointer(&v[i]))) == 0
		}
		if ok {
			lib.version = fmt.Sprintf("%d.%d.%d", v[0], v[1], v[2])
		}
	}
	return lib, nil
}

// loadBLASLt loads libcublasLt from cuBLAS's own directory, when cuBLAS is loaded by path
// and the directory has one. libcublas needs it (DT_NEEDED) and finds it through its
// RUNPATH $ORIGIN, but LD_LIBRARY_PATH comes before RUNPATH: a toolkit of another version
// on it would give this cuBLAS a libcublasLt it was not built with (unresolved symbol
// versions), and a copy without that RUNPATH would not load at all. Loaded first, its
// soname is taken, and libcublas's dependency resolves to it.
func loadBLASLt(path string) error {
	dir, base := filepath.Split(path)
	suffix, ok := strings.CutPrefix(base, "libcublas")
	if dir == "" || !ok || !strings.HasPrefix(suffix, ".so") {
		return nil
	}
	lt := filepath.Join(dir, "libcublasLt"+suffix)
	if _, err := os.Stat(lt); err != nil {
		return nil
	}
	if _, err := dlopen(lt, purego.RTLD_NOW|purego.RTLD_GLOBAL); err != nil {
		return fmt.Errorf("cuda: %w: %s, beside %s: %v", ErrNoBLAS, lt, base, err)
	}
	return nil
}

// openBLAS makes a handle of lib on the device's compute stream, with its workspace.
func (d *Device) openBLAS(lib *blasLib) (*BLAS, error) {
	path := lib.path
	b := &BLAS{d: d, lib: lib}
	var err error
	if b.ws, err = d.mem.AllocSegment(d.BLASWorkspaceBytes()); err != nil {
		return nil, fmt.Errorf("%s: the cuBLAS workspace of %d bytes: %w", path, d.BLASWorkspaceBytes(), err)
	}
	err = d.do(func(*driver) error {
		if st := blasCall(lib.create, uintptr(unsafe.Pointer(&b.h))); st != 0 {
			return fmt.Errorf("cublasCreate_v2: status %d", st)
		}
		if st := blasCall(lib.setStream, b.h, d.streams[Compute].h); st != 0 {
			_ = blasCall(lib.destroy, b.h)
			return fmt.Errorf("cublasSetStream_v2: status %d", st)
		}
		if st := blasCall(lib.setWorkspace, b.h, b.ws.Addr, uintptr(b.ws.Size)); st != 0 {
			_ = blasCall(lib.destroy, b.h)
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
func (b *BLAS) Library() string { return b.lib.path }

// Version is cuBLAS's version (cublasGetProperty), as "13.0.2"; "" when the library
// does not say.
func (b *BLAS) Version() string { return b.lib.version }

// Gemm queues C = alpha·op(A)·op(B) + beta·C on the compute stream, in cuBLAS's
// column-major convention (cublasSgemm_v2 for float32, cublasDgemm_v2 for float64):
// op(A) is m x k, op(B) k x n, C m x n, leading dimensions in elements.
func (b *BLAS) Gemm(float64s bool, transA, transB bool, m, n, k int, alpha float64, a uintptr, lda int,
	bm uintptr, ldb int, beta float64, c uintptr, ldc int) error {
	if m < 0 || n < 0 || k < 0 || lda < 1 || ldb < 1 || ldc < 1 {
		return fmt.Errorf("cuda: gemm %dx%dx%d with leading dimensions %d, %d, %d", m, n, k, lda, ldb, ldc)
	}
	f := b.lib.sgemm
	if float64s {
		f = b.lib.dgemm
	}
	return b.call(fmt.Sprintf("gemm %dx%dx%d", m, n, k), func(al, be uintptr) int32 {
		return blasCall(f, b.h, op(transA), op(transB), uintptr(m), uintptr(n), uintptr(k),
			al, a, uintptr(lda), bm, uintptr(ldb), be, c, uintptr(ldc))
	}, float64s, alpha, beta)
}

// GemmBatched queues batch products C[i] = alpha·op(A[i])·op(B[i]) + beta·C[i] as one
// call (cublasSgemmBatched / cublasDgemmBatched), with Gemm's shapes; aArray, bArray and
// cArray are device addresses of arrays of batch matrix addresses, as cuBLAS reads them
// in its kernels. (cublas{S,D}gemmStridedBatched, which needs no arrays, takes 18
// arguments: more than purego passes, 15.)
func (b *BLAS) GemmBatched(float64s bool, transA, transB bool, m, n, k int, alpha float64, aArray uintptr, lda int,
	bArray uintptr, ldb int, beta float64, cArray uintptr, ldc int, batch int) error {
	if m < 0 || n < 0 || k < 0 || lda < 1 || ldb < 1 || ldc < 1 || batch < 0 {
		return fmt.Errorf("cuda: gemmBatched %dx%dx%d x %d with leading dimensions %d, %d, %d", m, n, k, batch, lda, ldb, ldc)
	}
	f := b.lib.sgemmBatched
	if float64s {
		f = b.lib.dgemmBatched
	}
	return b.call(fmt.Sprintf("gemmBatched %dx%dx%d x %d", m, n, k, batch), func(al, be uintptr) int32 {
		return blasCall(f, b.h, op(transA), op(transB), uintptr(m), uintptr(n), uintptr(k),
			al, aArray, uintptr(lda), bArray, uintptr(ldb), be, cArray, uintptr(ldc), uintptr(batch))
	}, float64s, alpha, beta)
}

// Gemv queues y = alpha·op(A)·x + beta·y (cublasSgemv_v2 / cublasDgemv_v2): A is m x n
// column-major with leading dimension lda, op(A) = Aᵀ when trans; increments in
// elements, not 0 (negative ones walk the vector from its end, as BLAS).
func (b *BLAS) Gemv(float64s bool, trans bool, m, n int, alpha float64, a uintptr, lda int,
	x uintptr, incx int, beta float64, y uintptr, incy int) error {
	if m < 0 || n < 0 || lda < max(1, m) || incx == 0 || incy == 0 {
		return fmt.Errorf("cuda: gemv %dx%d with leading dimension %d, increments %d, %d", m, n, lda, incx, incy)
	}
	f := b.lib.sgemv
	if float64s {
		f = b.lib.dgemv
	}
	return b.call(fmt.Sprintf("gemv %dx%d", m, n), func(al, be uintptr) int32 {
		return blasCall(f, b.h, op(trans), uintptr(m), uintptr(n), al, a, uintptr(lda),
			x, uintptr(incx), be, y, uintptr(incy))
	}, float64s, alpha, beta)
}

// Ger queues the rank-one update A += alpha·x·yᵀ (cublasSger_v2 / cublasDger_v2): A is
// m x n column-major with leading dimension lda, x m long, y n long.
func (b *BLAS) Ger(float64s bool, m, n int, alpha float64, x uintptr, incx int, y uintptr, incy int, a uintptr, lda int) error {
	if m < 0 || n < 0 || lda < max(1, m) || incx == 0 || incy == 0 {
		return fmt.Errorf("cuda: ger %dx%d with leading dimension %d, increments %d, %d", m, n, lda, incx, incy)
	}
	f := b.lib.sger
	if float64s {
		f = b.lib.dger
	}
	return b.call(fmt.Sprintf("ger %dx%d", m, n), func(al, _ uintptr) int32 {
		return blasCall(f, b.h, uintptr(m), uintptr(n), al, x, uintptr(incx), y, uintptr(incy), a, uintptr(lda))
	}, float64s, alpha, 0)
}

// Dot queues the dot product of x and y (n elements each) into the device address result
// (cublasSdot_v2 / cublasDdot_v2). The handle is switched to CUBLAS_POINTER_MODE_DEVICE
// for the call and back to HOST after it: with a host result cuBLAS would wait for the
// stream, a host synchronisation per dot; with a device one the call is queued like a
// kernel, and the result lands in order with the work after it.
func (b *BLAS) Dot(float64s bool, n int, x uintptr, incx int, y uintptr, incy int, result uintptr) error {
	if n < 0 || result == 0 {
		return fmt.Errorf("cuda: dot of %d elements into %#x", n, result)
	}
	f := b.lib.sdot
	if float64s {
		f = b.lib.ddot
	}
	return b.call(fmt.Sprintf("dot of %d", n), func(uintptr, uintptr) int32 {
		if s := blasCall(b.lib.setPointerMode, b.h, pointerModeDevice); s != 0 {
			return s
		}
		s := blasCall(f, b.h, uintptr(n), x, uintptr(incx), y, uintptr(incy), result)
		if r := blasCall(b.lib.setPointerMode, b.h, pointerModeHost); s == 0 {
			s = r
		}
		return s
	}, float64s, 0, 0)
}

// cublasPointerMode_t.
const (
	pointerModeHost   = 0
	pointerModeDevice = 1
)

func op(t bool) uintptr {
	if t {
		return 1 // CUBLAS_OP_T
	}
	return 0 // CUBLAS_OP_N
}

// call runs one cuBLAS call on the compute stream, with the handle's lock and the step
// begun, passing it host pointers to alpha and beta in the element type (the handle is
// in CUBLAS_POINTER_MODE_HOST between calls); what names the call in an error.
func (b *BLAS) call(what string, f func(alpha, beta uintptr) int32, float64s bool, alpha, beta float64) error {
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
		// The scalars live in b (on the heap, which does not move), not in this frame:
		// f's own calls may grow the stack and move it under a uintptr.
		sc := &b.scalars
		var s int32
		if float64s {
			sc.f64 = [2]float64{alpha, beta}
			s = f(uintptr(unsafe.Pointer(&sc.f64[0])), uintptr(unsafe.Pointer(&sc.f64[1])))
		} else {
			sc.f32 = [2]float32{float32(alpha), float32(beta)}
			s = f(uintptr(unsafe.Pointer(&sc.f32[0])), uintptr(unsafe.Pointer(&sc.f32[1])))
		}
		if s != 0 {
			return fmt.Errorf("cuda: cublas %s: status %d", what, s)
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
		if s := blasCall(b.lib.destroy, b.h); s != 0 {
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
