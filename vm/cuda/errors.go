package cuda

import (
	"errors"
	"fmt"

	"github.com/gorgonia-ooc/outofcore/vm/alloc"
)

// Result is a CUresult: the status every driver call returns.
type Result int32

// The results this package acts on (cuda.h's cudaError_enum).
const (
	resultSuccess              Result = 0
	resultOutOfMemory          Result = 2
	resultDeinitialized        Result = 4
	resultStubLibrary          Result = 34
	resultNoDevice             Result = 100
	resultInvalidDevice        Result = 101
	resultNotReady             Result = 600
	resultNotSupported         Result = 801
	resultSystemDriverMismatch Result = 803
	resultCompatNotSupported   Result = 804
)

// sticky reports whether a result leaves the context unusable: cuda.h says of these that
// "any further CUDA work will return the same error" (a kernel fault, a hardware error, a
// context torn down under the caller).
func (r Result) sticky() bool {
	switch r {
	case resultDeinitialized, 214, 220, 700, 702, 709, 710, 714, 715, 716, 717, 718, 719, 810, 911:
		return true
	}
	return false
}

var (
	// ErrNoDriver is wrapped when no libcuda.so.1 loads: no NVIDIA driver here.
	ErrNoDriver = errors.New("no NVIDIA driver")
	// ErrDriverTooOld is wrapped when the driver predates MinDriverVersion or lacks a
	// function this package needs.
	ErrDriverTooOld = errors.New("NVIDIA driver too old")
	// ErrNoDevice is wrapped when there is no CUDA device, or none with the ordinal asked for.
	ErrNoDevice = errors.New("no CUDA device")
	// ErrContextLost is wrapped by every error of a device whose context a sticky error
	// (an illegal address in a kernel, an uncorrectable ECC error, ...) made unusable. Such
	// a device can still be closed; the driver then wants the process restarted before
	// CUDA is used again.
	ErrContextLost = errors.New("CUDA context lost")
	// ErrNoVMM is wrapped by the chunk and range calls of a device without virtual memory
	// management; use the best-fit allocator there (Device.NewVA does so by itself).
	ErrNoVMM = errors.New("no CUDA virtual memory management")
	// ErrClosed is returned by a closed device and everything made from it.
	ErrClosed = errors.New("cuda: device closed")
)

// Error is a driver call that did not return CUDA_SUCCESS.
type Error struct {
	// Device is the device's name (cuda:N), empty for calls before a device is chosen.
	Device string
	// Call is the driver function by its ABI name, e.g. cuMemAlloc_v2.
	Call string
	// Result is what it returned; Name and Description are cuGetErrorName and
	// cuGetErrorString of it.
	Result            Result
	Name, Description string
}

func (e *Error) Error() string {
	where := "cuda: "
	if e.Device != "" {
		where += e.Device + ": "
	}
	return fmt.Sprintf("%s%s: %s (%s)", where, e.Call, e.Name, e.Description)
}

// Is makes errors.Is see a sticky error as ErrContextLost, an out-of-memory result as
// alloc.ErrOutOfMemory, and a missing device as ErrNoDevice.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrContextLost:
		return e.Result.sticky()
	case alloc.ErrOutOfMemory:
		return e.Result == resultOutOfMemory
	case ErrNoDevice:
		return e.Result == resultNoDevice || e.Result == resultInvalidDevice
	}
	return false
}
