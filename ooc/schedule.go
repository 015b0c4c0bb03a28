package ooc

import (
	"fmt"
	"math"
	"slices"

	"github.com/gorgonia-ooc/outofcore/vm"
)

// Problem is what a scheduler plans for.
type Problem struct {
	Trace *Trace
	// Budget is the device memory the program may hold at once, in bytes.
	Budget int64
	// Window is the schedule-window in bytes (0: the scheduler's own default).
	Window int64
	// Device is where the program will run (nil: a CPU device); schedulers
	// that tune themselves simulate on it when it is simulated.
	Device vm.Device
	// Replica is this program's place among CompileParallel's Replicas
	// (0 of 1 under Compile), and GroupSize how many replicas share one
	// host link (a switch): planners that stagger the replicas' transfers
	// (MultiVDNN) read them.
	Replica, Replicas, GroupSize int

	// model, when set, is the simulated device planners time the trace on
	// instead: one whose op times were measured on Device.
	model *vm.Sim
}

// timingDevice is the device whose op and copy times planners use: the
// measured model, else Device (deviceTiming stands in a profile for a
// device that is not simulated).
func (p *Problem) timingDevice() vm.Device {
	if p.model != nil {
		return p.model
	}
	return p.Device
}

// timingNote says where the times a planner used come from.
func (p *Problem) timingNote() string {
	switch sim, ok := p.Device.(*vm.Sim); {
	case p.model != nil:
		return p.model.Profile().Source
	case ok:
		return "simulated: profile " + sim.Name()
	}
	return fmt.Sprintf("assumed: the %s profile's op and link times (nothing was measured on this device)", modelProfile)
}

// timedScheduler is implemented by schedulers that plan with op and copy
// times on any device (not only by simulating on a simulated one).
type timedScheduler interface {
	Scheduler
	plansWithTimes()
}

// TimesOps reports whether sc plans with op and copy times on any device
// (Greedy, DynProg, VDNN). On a device that is not simulated, a machine
// Compile makes for such a scheduler runs its first step with the window
// scheduler's tape while it measures every op, then replans with the
// measured times (Program.Timing says so); Plan alone measures nothing and
// assumes a profile's times.
func TimesOps(sc Scheduler) bool {
	_, ok := sc.(timedScheduler)
	return ok
}

// Schedule is a scheduler's decision, per function of the trace. Lowering
// adds the rest: a wait before each function for operands still being
// swapped in, and a free after each variable's last use.
type Schedule struct {
	// Release[i]: variables whose swap-out must complete, and whose device
	// memory is released, before f_i runs.
	Release [][]int
	// SwapIn[i]: variables to start copying back to the device before f_i.
	SwapIn [][]int
	// SwapOut[i]: variables to start copying to the host after f_i.
	SwapOut [][]int
	// Window is the schedule-window the plan was made with (window
	// scheduler only); Timing says where the op and copy times it assumed
	// came from.
	Window int64
	Timing string

	// picked names the planner a planner that chooses among others (Auto)
	// kept; the program's Scheduler says it.
	picked string

	// tape, when set, is the schedule already lowered: planners that drop
	// variables for recomputation plan over a derived trace and lower it
	// themselves (see recomputeTrace).
	tape *vm.Program
}

// NewSchedule returns an empty schedule for n functions.
func NewSchedule(n int) *Schedule {
	return &Schedule{Release: make([][]int, n), SwapIn: make([][]int, n), SwapOut: make([][]int, n)}
}

// A Scheduler decides which variables move between device and host, and when.
type Scheduler interface {
	// Name identifies the scheduler in programs, tables and plots.
	Name() string
	// Plan returns a schedule for the problem, or an error saying why the
	// budget cannot be met.
	Plan(p *Problem) (*Schedule, error)
}

// baseline never swaps: every variable stays on the device from its
// producer to its last use. It is the in-core reference.
type baseline struct{}

func (baseline) Name() string { return "baseline" }

func (b baseline) Plan(p *Problem) (*Schedule, error) { return b.plan(p.Trace), nil }

func (baseline) plan(t *Trace) *Schedule { return NewSchedule(len(t.Funcs)) }

// Lower turns a schedule into a tape: per function, releases, swap-ins,
// waits for operands still in flight, the exec, swap-outs, and frees of the
// variables at their last use.
func Lower(t *Trace, s *Schedule) (*vm.Program, error) {
	if s.tape != nil {
		p := *s.tape
		p.Instrs = slices.Clone(p.Instrs)
		p.Window, p.Timing = s.Window, s.Timing
		return &p, nil
	}
	n := len(t.Funcs)
	if len(s.Release) != n || len(s.SwapIn) != n || len(s.SwapOut) != n {
		return nil, fmt.Errorf("ooc: schedule covers %d/%d/%d functions, the trace has %d",
			len(s.Release), len(s.SwapIn), len(s.SwapOut), n)
	}
	p := &vm.Program{Vars: t.Vars, Funcs: t.Funcs, Reads: t.Reads, Sets: t.Sets, Inference: t.Inference,
		Window: s.Window, Timing: s.Timing}
	emit := func(op vm.OpCode, f, v int) {
		p.Instrs = append(p.Instrs, vm.Instr{Op: op, Func: f, Var: v, Bytes: t.Vars[v].Bytes})
	}
	inFlight := make(map[int]bool)
	resident := make(map[int]bool)
	for i, f := range t.Funcs {
		for _, v := range s.Release[i] {
			if resident[v] {
				emit(vm.Free, -1, v)
				delete(resident, v)
			}
		}
		for _, v := range s.SwapIn[i] {
			emit(vm.SwapIn, -1, v)
			inFlight[v] = true
			resident[v] = true
		}
		for _, v := range f.Inputs {
			if inFlight[v] {
				emit(vm.Wait, -1, v)
				delete(inFlight, v)
			}
		}
		emit(vm.Exec, i, f.Output)
		resident[f.Output] = true
		if f.InPlace >= 0 {
			delete(resident, f.InPlace)
		}
		for _, v := range s.SwapOut[i] {
			emit(vm.SwapOut, -1, v)
		}
		for _, v := range t.V(i) {
			if t.Last[v] == i && resident[v] && !t.Vars[v].IsLeaf() {
				if inFlight[v] {
					emit(vm.Wait, -1, v)
					delete(inFlight, v)
				}
				emit(vm.Free, -1, v)
				delete(resident, v)
			}
		}
	}
	return p, nil
}

// BudgetError says which function cannot run within the budget.
type BudgetError struct {
	Func   string // the function's node name
	Index  int    // its position in the function-sequence
	Need   int64  // bytes that must be resident while it runs
	Budget int64
	// Least is about the least budget that works (LeastBudget), and Peak
	// the in-core peak, both in bytes; Compile sets them (0 from Plan and
	// the schedulers, which would otherwise search for it at every budget
	// they try).
	Least, Peak int64
}

func (e *BudgetError) Error() string {
	s := fmt.Sprintf("ooc: budget %d bytes is infeasible: function f%d (%s) needs %d bytes resident",
		e.Budget, e.Index, e.Func, e.Need)
	if e.Least > 0 && e.Peak > 0 {
		s += fmt.Sprintf("; least that works: %d bytes, %.0f%% of the in-core peak (%d bytes)",
			e.Least, math.Ceil(100*float64(e.Least)/float64(e.Peak)), e.Peak)
	}
	return s
}

// Verify replays a tape's memory accounting: every read is of a resident,
// landed variable, every swap-in has a host copy to read, no variable is
// allocated twice, the device holds at most budget bytes at any moment
// (workspace included) and is empty at the end. It returns the peak.
func Verify(p *vm.Program, budget int64) (peak int64, err error) {
	return replay(p, budget, nil)
}

// Timeline replays a tape's memory accounting and returns the device bytes
// held after each instruction (workspace counted while its exec runs).
func Timeline(p *vm.Program) ([]int64, error) {
	out := make([]int64, len(p.Instrs))
	_, err := replay(p, 0, func(pc int, live int64) { out[pc] = live })
	return out, err
}

// replay is Verify's accounting; onLive, when set, sees the bytes held at
// each instruction.
func replay(p *vm.Program, budget int64, onLive func(pc int, live int64)) (peak int64, err error) {
	const (
		absent = iota
		resident
		arriving
	)
	state := make([]uint8, len(p.Vars))
	onHost := make([]bool, len(p.Vars))
	made := make([]bool, len(p.Vars)) // computed once (a recompute must follow an exec)
	var live int64
	take := func(pc int, bytes int64, what string) error {
		live += bytes
		if live > peak {
			peak = live
		}
		if budget > 0 && live > budget {
			in := p.Instrs[pc]
			if in.Op == vm.Exec || in.Op == vm.Recompute {
				return &BudgetError{Func: p.Vars[in.Var].Name, Index: in.Func, Need: live, Budget: budget}
			}
			return fmt.Errorf("ooc: tape exceeds the budget at instruction %d (%s): %d bytes resident, budget %d", pc, what, live, budget)
		}
		return nil
	}
	for pc, in := range p.Instrs {
		v := &p.Vars[in.Var]
		if v.IsLeaf() {
			return peak, fmt.Errorf("ooc: instruction %d (%s) acts on leaf %s", pc, in.Op, v.Name)
		}
		switch in.Op {
		case vm.Exec, vm.Recompute:
			f := &p.Funcs[in.Func]
			for _, u := range f.Inputs {
				if p.Vars[u].IsLeaf() {
					continue
				}
				switch state[u] {
				case absent:
					return peak, fmt.Errorf("ooc: instruction %d (%s %s) reads %s, which is not resident", pc, in.Op, v.Name, p.Vars[u].Name)
				case arriving:
					return peak, fmt.Errorf("ooc: instruction %d (%s %s) reads %s before waiting for its swap-in", pc, in.Op, v.Name, p.Vars[u].Name)
				}
			}
			if state[f.Output] != absent {
				return peak, fmt.Errorf("ooc: instruction %d computes %s, which is already resident", pc, v.Name)
			}
			if in.Op == vm.Recompute {
				switch {
				case !f.Recomputable:
					return peak, fmt.Errorf("ooc: instruction %d recomputes %s, whose op %v is not recomputable", pc, v.Name, f.Op)
				case !made[f.Output]:
					return peak, fmt.Errorf("ooc: instruction %d recomputes %s, which was never computed", pc, v.Name)
				}
			}
			made[f.Output] = true
			outBytes := v.Bytes
			if f.InPlace >= 0 && in.Op == vm.Exec {
				if state[f.InPlace] != resident || !contains(f.Inputs, f.InPlace) || p.Vars[f.InPlace].Bytes != v.Bytes {
					return peak, fmt.Errorf("ooc: instruction %d computes %s in place of %s, which it cannot", pc, v.Name, p.Vars[f.InPlace].Name)
				}
				outBytes = 0
				state[f.InPlace] = absent
			}
			if err := take(pc, outBytes+f.Transient(), "exec "+v.Name); err != nil {
				return peak, err
			}
			if onLive != nil {
				onLive(pc, live)
			}
			live -= f.Transient()
			state[f.Output] = resident
		case vm.SwapOut:
			if state[in.Var] != resident {
				return peak, fmt.Errorf("ooc: instruction %d swaps out %s, which is not resident", pc, v.Name)
			}
			onHost[in.Var] = true
		case vm.SwapIn:
			if state[in.Var] != absent {
				return peak, fmt.Errorf("ooc: instruction %d swaps in %s, which is already resident", pc, v.Name)
			}
			if !onHost[in.Var] {
				return peak, fmt.Errorf("ooc: instruction %d swaps in %s, which was never swapped out", pc, v.Name)
			}
			if err := take(pc, v.Bytes, "swapin "+v.Name); err != nil {
				return peak, err
			}
			state[in.Var] = arriving
		case vm.Wait:
			if state[in.Var] != arriving {
				return peak, fmt.Errorf("ooc: instruction %d waits for %s, which is not being swapped in", pc, v.Name)
			}
			state[in.Var] = resident
		case vm.Free:
			if state[in.Var] == absent {
				return peak, fmt.Errorf("ooc: instruction %d frees %s, which is not resident", pc, v.Name)
			}
			live -= v.Bytes
			state[in.Var] = absent
		default:
			return peak, fmt.Errorf("ooc: instruction %d: unknown op %v", pc, in.Op)
		}
		if onLive != nil && in.Op != vm.Exec && in.Op != vm.Recompute {
			onLive(pc, live)
		}
	}
	for i, s := range state {
		if s != absent {
			return peak, fmt.Errorf("ooc: tape leaves %s on the device", p.Vars[i].Name)
		}
	}
	return peak, nil
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
