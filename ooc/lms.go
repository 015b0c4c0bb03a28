package ooc

import (
	"fmt"
	"time"

	"github.com/gorgonia-ooc/outofcore/vm"
	"github.com/gorgonia-ooc/outofcore/vm/alloc"
)

// LMS is the Large Model Support baseline (Le et al.), as the Sony paper
// describes it: after f_i, swap out each variable f_i used whose next use
// f_j is at least SwapoutThreshold functions away, releasing its memory at
// once; swap it back in SwapinAhead functions before f_j. Distances count
// functions of the topological order, not bytes, which is what the window
// scheduler improves on.
//
// With both hyperparameters 0, Plan tunes them: it tries a grid of
// thresholds and distances, keeps the tapes that fit the budget, and picks
// the fastest in the simulator when the problem's device is simulated (the
// fewest swapped bytes otherwise).
type LMS struct {
	SwapoutThreshold, SwapinAhead int
}

// Name implements Scheduler.
func (l LMS) Name() string {
	if l.SwapoutThreshold == 0 && l.SwapinAhead == 0 {
		return "lms"
	}
	return fmt.Sprintf("lms(threshold=%d,ahead=%d)", l.SwapoutThreshold, l.SwapinAhead)
}

// Plan implements Scheduler.
func (l LMS) Plan(p *Problem) (*Schedule, error) {
	if l.SwapoutThreshold < 0 || l.SwapinAhead < 0 {
		return nil, fmt.Errorf("ooc: LMS hyperparameters must not be negative: %+v", l)
	}
	if l.SwapoutThreshold == 0 && l.SwapinAhead == 0 {
		best, _, err := TuneLMS(p)
		if err != nil {
			return nil, err
		}
		return best.plan(p.Trace), nil
	}
	if l.SwapoutThreshold == 0 || l.SwapinAhead == 0 {
		return nil, fmt.Errorf("ooc: LMS needs both hyperparameters, or neither to tune them: %+v", l)
	}
	return l.plan(p.Trace), nil
}

func (l LMS) plan(t *Trace) *Schedule {
	s := NewSchedule(len(t.Funcs))
	n := len(t.Funcs)
	for i := range t.Funcs {
		seen := map[int]bool{}
		for _, v := range t.V(i) {
			if seen[v] || t.DeviceBytes(v) == 0 {
				continue
			}
			seen[v] = true
			j := t.NextUse(v, i)
			if j < 0 || j-i < l.SwapoutThreshold {
				continue
			}
			s.SwapOut[i] = append(s.SwapOut[i], v)
			if i+1 < n {
				s.Release[i+1] = append(s.Release[i+1], v)
			}
			at := max(j-l.SwapinAhead, i+1)
			s.SwapIn[at] = append(s.SwapIn[at], v)
		}
	}
	return s
}

// LMSTrial is one point of the LMS auto-tune.
type LMSTrial struct {
	LMS
	Err      error         // why the tape was refused, if it was
	Peak     int64         // device bytes the tape needs
	Swap     int64         // bytes swapped in
	StepTime time.Duration // simulated, when the device is simulated
}

// TuneLMS searches LMS's hyperparameters for the problem and returns the
// best and every trial.
func TuneLMS(p *Problem) (LMS, []LMSTrial, error) {
	// Fibonacci thresholds up to the graph's length: the last one swaps
	// nothing, which is the best choice when everything fits.
	thresholds := []int{1, 2}
	for n := len(p.Trace.Funcs); thresholds[len(thresholds)-1] <= n; {
		k := len(thresholds)
		thresholds = append(thresholds, thresholds[k-1]+thresholds[k-2])
	}
	aheads := []int{1, 2, 3, 5, 8, 13}
	var trials []LMSTrial
	bestAt := -1
	better := func(a, b LMSTrial) bool {
		if a.StepTime != b.StepTime {
			return a.StepTime < b.StepTime
		}
		return a.Swap < b.Swap
	}
	for _, th := range thresholds {
		for _, ah := range aheads {
			l := LMS{SwapoutThreshold: th, SwapinAhead: ah}
			tr := LMSTrial{LMS: l}
			prog, err := Lower(p.Trace, l.plan(p.Trace))
			if err == nil {
				if tr.Peak, err = Verify(prog, p.Budget); err != nil {
					// The whole tape's peak, for the error below: Verify
					// stops at the first instruction over the budget.
					tr.Peak, _ = Verify(prog, 0)
				}
			}
			if err == nil {
				_, tr.Swap = prog.Count(vm.SwapIn)
				if sim, ok := p.Device.(*vm.Sim); ok {
					tr.StepTime, err = simulate(prog, sim, p.Budget)
				}
			}
			tr.Err = err
			trials = append(trials, tr)
			if err == nil && (bestAt < 0 || better(tr, trials[bestAt])) {
				bestAt = len(trials) - 1
			}
		}
	}
	if bestAt < 0 {
		least := int64(-1)
		for _, tr := range trials {
			if tr.Peak > 0 && (least < 0 || tr.Peak < least) {
				least = tr.Peak
			}
		}
		return LMS{}, trials, fmt.Errorf("ooc: LMS: none of its %d settings (swapout_threshold in %v, swapin_ahead in %v) "+
			"keeps the step under the scheduling budget of %d bytes (%.1f MiB: the memory the tape may hold, not the "+
			"device's capacity); the least peak among them is %d bytes (%.1f MiB): give at least that budget, or a "+
			"scheduler that swaps by bytes (window, hybrid)", len(trials), thresholds, aheads, p.Budget,
			float64(p.Budget)/(1<<20), least, float64(least)/(1<<20))
	}
	return trials[bestAt].LMS, trials, nil
}

// simulate runs a tape once on a simulated device with a VA allocator and
// returns the step time.
func simulate(prog *vm.Program, sim *vm.Sim, budget int64) (time.Duration, error) {
	al, err := vm.NewVA(sim, alloc.DefaultChunkSize)
	if err != nil {
		return 0, err
	}
	m, err := vm.New(prog, vm.Config{Device: sim.Alone(), Allocator: al, Budget: budget})
	if err != nil {
		_ = al.Close()
		return 0, err
	}
	defer m.Close()
	if err := m.RunAll(); err != nil {
		return 0, err
	}
	return m.Stats().StepTime, nil
}
