package main

import (
	"fmt"
	"runtime"
	"time"

	"github.com/gorgonia-ooc/outofcore/vm"
)

// recordProfile writes the per-op times a training run measured as a device
// profile. The "link" of the CPU device is a memory copy, measured here.
func recordProfile(file string, m *vm.Machine) error {
	ops := m.OpTimes()
	if len(ops) == 0 {
		return fmt.Errorf("-record-profile: no op times were measured")
	}
	machine := fmt.Sprintf("the CPU device of a %s/%s machine with %d CPUs", runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
	return vm.WriteOpTimes(file, machine, m.Device().Capacity(), copyBandwidth(), ops)
}

// copyBandwidth measures host memory-copy bandwidth in bytes/s (best of 5
// copies of 64 MiB).
func copyBandwidth() float64 {
	src := make([]byte, 64<<20)
	dst := make([]byte, len(src))
	best := time.Duration(1 << 62)
	for i := 0; i < 5; i++ {
		t := time.Now()
		copy(dst, src)
		best = min(best, time.Since(t))
	}
	return float64(len(src)) / best.Seconds()
}
