package train

import (
	"fmt"
	"runtime"

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
	lm, ok := m.Device().(vm.LinkMeasurer)
	if !ok {
		return fmt.Errorf("-record-profile: device %s does not measure its host link", m.Device().Name())
	}
	return vm.WriteOpTimes(file, machine, m.Device().Capacity(), lm.LinkBandwidth(), ops)
}
