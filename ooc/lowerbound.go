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
// The paper's device has one channel shared by both directions, hence its
// 2(M_peak - M)/beta. vm.Sim has one copy engine per direction (as a GPU
// has), so the offload of one byte can overlap the prefetch of another: here
// the transfer term is (M_peak - M)/beta, which keeps the bound below every
// makespan the simulator can produce.
func LowerBound(t *Trace, sim *vm.Sim, budget int64) (time.Duration, error) {
	peak, err := tracePeak(t)
	if err != nil {
		return 0, err
	}
	p := &vm.Program{Vars: t.Vars, Funcs: t.Funcs}
	var compute time.Duration
	for i := range p.Funcs {
		compute += sim.OpTime(p, &p.Funcs[i])
	}
	for i := range p.Vars {
		if v := &p.Vars[i]; v.Role == vm.Gradient {
			compute += sim.UpdateTime(v.Bytes)
		}
	}
	var transfer time.Duration
	if peak > budget {
		transfer = sim.CopyTime(peak - budget)
	}
	return max(compute, transfer), nil
}
