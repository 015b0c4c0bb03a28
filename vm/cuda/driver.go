package cuda

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// DefaultLibrary is the driver library Open loads unless told otherwise: the soname the
// NVIDIA driver installs, found through the dynamic loader's search path.
const DefaultLibrary = "libcuda.so.1"

// LibraryEnv names an environment variable that, when set, is the only driver library
// Open tries (for a driver Search does not find, or the test driver of internal/fakecuda).
const LibraryEnv = "OOC_CUDA_LIBRARY"

// driver is a loaded libcuda: the addresses of the functions this package calls.
type driver struct {
	path    string
	version int // cuDriverGetVersion
	fns     [numFns]uintptr
	vmm     bool // the virtual memory management functions are all there
}

// Drivers are loaded once per path and never unloaded: the real driver starts threads of
// its own and is not meant to be dlclosed, and a path loads one instance of a library.
var (
	driversMu sync.Mutex
	drivers   = map[string]*driver{}
)

// findDriver loads the driver library: path when set (WithLibrary), else the first that
// loads of the search's candidates.
func findDriver(path string, s Search) (*driver, error) {
	if path != "" {
		return loadDriver(path)
	}
	var d *driver
	_, err := s.find(driverLibrary, ErrNoDriver, func(p string) (err error) {
		d, err = loadDriver(p)
		return err
	})
	return d, err
}

// loadDriver dlopens the library at path, checks its version and binds its functions.
func loadDriver(path string) (*driver, error) {
	driversMu.Lock()
	defer driversMu.Unlock()
	if d, ok := drivers[path]; ok {
		return d, nil
	}
	h, err := dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, fmt.Errorf("cuda: %w: %s %s (%w)", ErrNoDriver, path, missing(path, err), err)
	}
	d := &driver{path: path}
	sym := func(f fn) uintptr {
		p, _ := purego.Dlsym(h, symbols[f])
		d.fns[f] = p
		return p
	}
	// The version first, so that an old driver is reported as old rather than as one
	// lacking this or that function.
	if sym(fnDriverGetVersion) == 0 {
		return nil, fmt.Errorf("cuda: %s has no cuDriverGetVersion: it is not a CUDA driver", path)
	}
	var v int32
	if r := d.call(fnDriverGetVersion, uintptr(unsafe.Pointer(&v))); r != resultSuccess {
		return nil, fmt.Errorf("cuda: %s: cuDriverGetVersion returned %d", path, r)
	}
	d.version = int(v)
	if d.version < MinDriverVersion {
		return nil, fmt.Errorf("cuda: %w: %s supports CUDA %s (cuDriverGetVersion %d); this needs CUDA %s or newer "+
			"(the primary-context and virtual memory management calls): update the NVIDIA driver", ErrDriverTooOld, path,
			versionString(d.version), d.version, versionString(MinDriverVersion))
	}
	var missing []string
	for f := fn(0); f < numFns; f++ {
		if sym(f) == 0 && !isVMM(f) {
			missing = append(missing, symbols[f])
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("cuda: %w: %s (CUDA %s) lacks %s", ErrDriverTooOld, path, versionString(d.version),
			strings.Join(missing, ", "))
	}
	d.vmm = true
	for _, f := range vmmFns {
		d.vmm = d.vmm && d.fns[f] != 0
	}
	drivers[path] = d
	return d, nil
}

func isVMM(f fn) bool {
	for _, v := range vmmFns {
		if v == f {
			return true
		}
	}
	return false
}

// versionString writes a cuDriverGetVersion number as CUDA writes versions: 12060 is 12.6.
func versionString(v int) string { return fmt.Sprintf("%d.%d", v/1000, v%1000/10) }

// call calls a driver function. Pointer arguments must be converted to uintptr in the
// argument list itself, uintptr(unsafe.Pointer(&x)): the directive below then keeps what
// they point to alive, and off the stack, until the call returns.
//
//go:uintptrescapes
func (d *driver) call(f fn, args ...uintptr) Result {
	r, _, _ := purego.SyscallN(d.fns[f], args...)
	return Result(int32(r))
}

// check turns a result into nil or an *Error naming the call.
func (d *driver) check(f fn, r Result) error {
	if r == resultSuccess {
		return nil
	}
	return &Error{Call: symbols[f], Result: r, Name: d.errorText(fnGetErrorName, r), Description: d.errorText(fnGetErrorString, r)}
}

// errorText asks the driver for a result's name or description; the driver knows codes
// newer than this package.
func (d *driver) errorText(f fn, r Result) string {
	var p *byte
	if d.call(f, uintptr(r), uintptr(unsafe.Pointer(&p))) != resultSuccess || p == nil {
		if f == fnGetErrorName {
			return fmt.Sprintf("CUresult %d", r)
		}
		return "unknown to the driver"
	}
	return goString(p)
}

// goString copies a NUL-terminated C string.
func goString(p *byte) string {
	var n int
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}

// initDriver runs cuInit and counts the devices, turning the ways a machine can have a
// driver but no usable GPU into errors that say so.
func (d *driver) initDriver() (int, error) {
	err := d.check(fnInit, d.call(fnInit, 0))
	var ce *Error
	switch {
	case err == nil:
	case errors.As(err, &ce) && ce.Result == resultNoDevice:
		return 0, fmt.Errorf("cuda: %w: cuInit found no CUDA-capable device (%v)", ErrNoDevice, err)
	case errors.As(err, &ce) && ce.Result == resultStubLibrary:
		return 0, fmt.Errorf("cuda: %w: %s is the CUDA toolkit's stub library, not the driver's (%v)", ErrNoDriver, d.path, err)
	case errors.As(err, &ce) && (ce.Result == resultSystemDriverMismatch || ce.Result == resultCompatNotSupported):
		return 0, fmt.Errorf("cuda: %w: the driver library does not match the kernel module; reboot or reinstall the driver (%v)",
			ErrDriverTooOld, err)
	default:
		return 0, err
	}
	var n int32
	if err := d.check(fnDeviceGetCount, d.call(fnDeviceGetCount, uintptr(unsafe.Pointer(&n)))); err != nil {
		return 0, err
	}
	return int(n), nil
}
