package ooc

import (
	"time"

	"github.com/gorgonia-ooc/outofcore/vm"
)

// LowerBound is the offloading paper's bound (Proposition 3) on the makespan
// of one step under a budget, on a simulated device: no schedule can run
// faster than its compute, nor move less than the bytes by which the in-core
// peak exceeds the budget out and back in. Compute is the sum of the
// device's modelled op times plus the optimizer update, as the simulator
// charges them.
//
// The paper states the transfer term for one channel shared by both
// directions. It holds for vm.Sim's two copy engines too: when the peak
// function starts, at least M_peak - M bytes of live variables are off the
// device; each was copied out before that moment (memory is released only
// once its copy lands) and is copied back after it, so one engine spends
// (M_peak - M)/beta before the moment and the other as long after it.
// The term is lowered by one nanosecond per variable because the simulator
// rounds each copy's time down to whole nanoseconds.
func LowerBound(t *Trace, sim *vm.Sim, budget int64) (time.Duration, error) {
	t = t.forDevice(sim)
	peak, err := tracePeak(t)
	if err != nil {
		return 0, err
	}
	tm, err := deviceTiming(t, sim)
	if err != nil {
		return 0, err
	}
	compute := tm.update
	for _, d := range tm.op {
		compute += d
	}
	var transfer time.Duration
	if peak > budget {
		transfer = 2*sim.CopyTime(peak-budget) - 2*time.Duration(len(t.Vars))
		transfer = max(transfer, 0)
	}
	return max(compute, transfer), nil
}
