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

// sticky reports whether a result leaves the context unusable. The list is checked against
// the CUresult enum of cuda.h as CUDA 13.0 ships it (the values cross-checked with cudarc's
// CUDA 13000 driver bindings; the texts are those of the CUDA 12.8 header, which 13.0
// keeps, adding only CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER = 36, not sticky). The header
// says "any further CUDA work will return the same error" (or that the process must be
// relaunched) of:
//
//	226 CUDA_ERROR_CONTAINED (an error the GPU's containment caught: NVLink peer access, hardware)
//	700 ILLEGAL_ADDRESS, 702 LAUNCH_TIMEOUT, 710 ASSERT, 714 HARDWARE_STACK_ERROR,
//	715 ILLEGAL_INSTRUCTION, 716 MISALIGNED_ADDRESS, 717 INVALID_ADDRESS_SPACE,
//	718 INVALID_PC, 719 LAUNCH_FAILED, 721 TENSOR_MEMORY_LEAK,
//	810 MPS_CLIENT_TERMINATED, 911 EXTERNAL_DEVICE.
//
// Four more end the context here although the header does not use those words:
// 4 DEINITIALIZED (the driver is shutting down), 709 CONTEXT_IS_DESTROYED (the context is
// gone), 214 ECC_UNCORRECTABLE and 220 NVLINK_UNCORRECTABLE (memory the context holds is
// corrupt: NVIDIA's guidance is to restart the application).
func (r Result) sticky() bool {
	_, ok := stickyResults[r]
	return ok
}

// stickyResults are the results sticky reports, by name (see sticky for the sources).
var stickyResults = map[Result]string{
	resultDeinitialized: "CUDA_ERROR_DEINITIALIZED",
	214:                 "CUDA_ERROR_ECC_UNCORRECTABLE",
	220:                 "CUDA_ERROR_NVLINK_UNCORRECTABLE",
	226:                 "CUDA_ERROR_CONTAINED",
	700:                 "CUDA_ERROR_ILLEGAL_ADDRESS",
	702:                 "CUDA_ERROR_LAUNCH_TIMEOUT",
	709:                 "CUDA_ERROR_CONTEXT_IS_DESTROYED",
	710:                 "CUDA_ERROR_ASSERT",
	714:                 "CUDA_ERROR_HARDWARE_STACK_ERROR",
	715:                 "CUDA_ERROR_ILLEGAL_INSTRUCTION",
	716:                 "CUDA_ERROR_MISALIGNED_ADDRESS",
	717:                 "CUDA_ERROR_INVALID_ADDRESS_SPACE",
	718:                 "CUDA_ERROR_INVALID_PC",
	719:                 "CUDA_ERROR_LAUNCH_FAILED",
	721:                 "CUDA_ERROR_TENSOR_MEMORY_LEAK",
	810:                 "CUDA_ERROR_MPS_CLIENT_TERMINATED",
	911:                 "CUDA_ERROR_EXTERNAL_DEVICE",
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
