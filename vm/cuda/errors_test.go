package cuda

import (
	"errors"
	"strings"
	"testing"
)

// TestStickyResults checks the sticky list against the CUresult values of CUDA 13.0's
// cuda.h (see Result.sticky): every result whose description says further CUDA work returns
// the same error loses the context, and the recoverable ones near them do not.
func TestStickyResults(t *testing.T) {
	for _, c := range []struct {
		r      Result
		name   string
		sticky bool
	}{
		{1, "CUDA_ERROR_INVALID_VALUE", false},
		{2, "CUDA_ERROR_OUT_OF_MEMORY", false},
		{4, "CUDA_ERROR_DEINITIALIZED", true},
		{36, "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER", false},
		{46, "CUDA_ERROR_DEVICE_UNAVAILABLE", false},
		{201, "CUDA_ERROR_INVALID_CONTEXT", false},
		{214, "CUDA_ERROR_ECC_UNCORRECTABLE", true},
		{218, "CUDA_ERROR_INVALID_PTX", false},
		{220, "CUDA_ERROR_NVLINK_UNCORRECTABLE", true},
		{225, "CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC", false},
		{226, "CUDA_ERROR_CONTAINED", true},
		{400, "CUDA_ERROR_INVALID_HANDLE", false},
		{600, "CUDA_ERROR_NOT_READY", false},
		{700, "CUDA_ERROR_ILLEGAL_ADDRESS", true},
		{701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", false},
		{702, "CUDA_ERROR_LAUNCH_TIMEOUT", true},
		{709, "CUDA_ERROR_CONTEXT_IS_DESTROYED", true},
		{710, "CUDA_ERROR_ASSERT", true},
		{711, "CUDA_ERROR_TOO_MANY_PEERS", false},
		{714, "CUDA_ERROR_HARDWARE_STACK_ERROR", true},
		{715, "CUDA_ERROR_ILLEGAL_INSTRUCTION", true},
		{716, "CUDA_ERROR_MISALIGNED_ADDRESS", true},
		{717, "CUDA_ERROR_INVALID_ADDRESS_SPACE", true},
		{718, "CUDA_ERROR_INVALID_PC", true},
		{719, "CUDA_ERROR_LAUNCH_FAILED", true},
		{720, "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE", false},
		{721, "CUDA_ERROR_TENSOR_MEMORY_LEAK", true},
		{801, "CUDA_ERROR_NOT_SUPPORTED", false},
		{810, "CUDA_ERROR_MPS_CLIENT_TERMINATED", true},
		{811, "CUDA_ERROR_CDP_NOT_SUPPORTED", false},
		{909, "CUDA_ERROR_TIMEOUT", false},
		{911, "CUDA_ERROR_EXTERNAL_DEVICE", true},
		{912, "CUDA_ERROR_INVALID_CLUSTER_SIZE", false},
		{999, "CUDA_ERROR_UNKNOWN", false},
	} {
		if got := c.r.sticky(); got != c.sticky {
			t.Errorf("%s (%d): sticky = %v, want %v", c.name, c.r, got, c.sticky)
		}
		if name, ok := stickyResults[c.r]; ok && name != c.name {
			t.Errorf("result %d is named %s in the sticky list, cuda.h calls it %s", c.r, name, c.name)
		}
		e := &Error{Call: "cuLaunchKernel", Result: c.r, Name: c.name}
		if got := errors.Is(e, ErrContextLost); got != c.sticky {
			t.Errorf("%s: errors.Is(ErrContextLost) = %v, want %v", c.name, got, c.sticky)
		}
	}
}

// TestContainedLosesContext: a CUDA_ERROR_CONTAINED from the driver loses the device's
// context like an illegal address does, and every later call says so.
func TestContainedLosesContext(t *testing.T) {
	d := openFake(t, nil)
	d.fake.Fail("cuMemAlloc_v2", 226)
	if _, err := d.Memory().AllocSegment(mib); !errors.Is(err, ErrContextLost) {
		t.Fatalf("the failing call: %v, want ErrContextLost", err)
	}
	_, err := d.Memory().AllocSegment(mib)
	if !errors.Is(err, ErrContextLost) || !strings.Contains(err.Error(), "CUDA_ERROR_CONTAINED") {
		t.Fatalf("the next call: %v, want ErrContextLost naming CUDA_ERROR_CONTAINED", err)
	}
}
