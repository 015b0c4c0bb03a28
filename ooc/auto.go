package ooc

import (
	"fmt"
	"time"

	"github.com/gorgonia-ooc/outofcore/vm"
)

// Auto is the default planner: per compiled graph and device it plans with
// Window and with Hybrid, simulates both tapes on the device's profile and
// keeps the faster (Window on a tie, and wherever Hybrid fails to plan).
// The profile is the simulated device's own; on the CPU device one
// measured there (Compile's first step runs Window's tape while it times
// every op and the host link, then Auto replans with those times, as the
// other timed planners do); on a device that measures nothing (CUDA), and
// for Plan alone, the v100-pcie profile's times, which the program's
// Timing says. Both tapes are bit for bit with TapeMachine, so the pick
// changes the time a step takes, never its results.
//
// Where the in-core peak fits the budget nothing is swapped or recomputed
// and Auto is Window, without planning Hybrid or measuring.
//
// Program.Scheduler says which was picked ("auto: hybrid") and
// Program.Timing why ("auto: hybrid, simulated 1.23 s vs window 1.40 s on
// sim:v100-pcie"). WithScheduler(Window{}) gives the paper's scheduler
// alone.
type Auto struct{}

// Name implements Scheduler.
func (Auto) Name() string { return "auto" }

func (Auto) plansWithTimes() {}

// Plan implements Scheduler.
func (Auto) Plan(p *Problem) (*Schedule, error) {
	w, werr := Window{}.Plan(p)
	if fitsInCore(p) {
		if werr == nil {
			w.picked = "window"
			w.Timing = "auto: window (the in-core peak fits the budget: nothing to swap or recompute)"
		}
		return w, werr
	}
	if need, _ := p.Trace.MaxNeed(); werr != nil && need > p.Budget {
		return nil, werr // a function alone needs more: nothing can plan
	}
	h, herr := Hybrid{}.Plan(p)
	switch {
	case werr != nil && herr != nil:
		return nil, werr
	case herr != nil:
		w.picked = "window"
		w.Timing = fmt.Sprintf("auto: window (hybrid found no plan: %v); %s", herr, w.Timing)
		return w, nil
	case werr != nil:
		h.picked = "hybrid"
		h.Timing = fmt.Sprintf("auto: hybrid (window found no plan: %v); %s", werr, h.Timing)
		return h, nil
	}
	sim, err := planningSim(p)
	if err != nil {
		return nil, err
	}
	wt, werr := simulateSchedule(p, w, sim)
	ht, herr := simulateSchedule(p, h, sim)
	where := sim.Name()
	if p.model == nil && p.Device != vm.Device(sim) {
		where += " (assumed: nothing was measured on " + deviceName(p.Device) + ")"
	}
	switch {
	case herr == nil && (werr != nil || ht < wt):
		h.picked = "hybrid"
		h.Timing = fmt.Sprintf("auto: hybrid, simulated %s vs window %s on %s", seconds(ht, nil), seconds(wt, werr), where)
		return h, nil
	default:
		w.picked = "window"
		w.Timing = fmt.Sprintf("auto: window, simulated %s vs hybrid %s on %s", seconds(wt, werr), seconds(ht, herr), where)
		return w, nil
	}
}

// fitsInCore reports whether the trace's in-core peak fits the budget.
func fitsInCore(p *Problem) bool {
	peak, err := tracePeak(p.Trace)
	return err == nil && peak <= p.Budget
}

// simulateSchedule lowers a schedule and times its step on sim.
func simulateSchedule(p *Problem, s *Schedule, sim *vm.Sim) (time.Duration, error) {
	prog, err := Lower(p.Trace, s)
	if err != nil {
		return 0, err
	}
	return simulate(prog, sim, p.Budget)
}

// seconds prints a simulated step time, or why there is none.
func seconds(d time.Duration, err error) string {
	if err != nil {
		return "(not simulated: " + err.Error() + ")"
	}
	return fmt.Sprintf("%.4g s", d.Seconds())
}

func deviceName(d vm.Device) string {
	if d == nil {
		return "cpu"
	}
	return d.Name()
}
