package ooc

import "github.com/gorgonia-ooc/outofcore/vm"

// WithPoison is withPoison, for the external tests.
var WithPoison = withPoison

// WithTimingModel makes timed planners plan with the simulated device's
// times instead of measuring a first step, for the external tests.
func WithTimingModel(sim *vm.Sim) Option { return func(s *settings) { s.model = sim } }
