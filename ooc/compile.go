package ooc

import (
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/vm"
	"github.com/gorgonia-ooc/outofcore/vm/alloc"
)

func init() {
	// gorgonia and its solvers hand tensor headers back to a pool that may
	// then give out a header the machine still holds; the machine owns its
	// memory, so the pool must be off.
	tensor.DontUsePool()
}

// Compile traces a graph, plans swaps under the budget, lowers and
// verifies the tape, and returns a machine ready to run it. For training,
// the graph holds its backward already (gorgonia.Grad of the cost); a graph
// without one, or any graph compiled with Inference(), runs forward only.
func Compile(g *gorgonia.ExprGraph, opts ...Option) (m *vm.Machine, err error) {
	defer func() {
		if r := recover(); r != nil {
			m, err = nil, fmt.Errorf("ooc: Compile panicked: %v\n%s", r, debug.Stack())
		}
	}()
	s, err := configure(opts)
	if err != nil {
		return nil, err
	}
	return compile(g, s)
}

// compile is Compile for settings already gathered (CompileParallel makes
// one set per replica).
func compile(g *gorgonia.ExprGraph, s *settings) (m *vm.Machine, err error) {
	ownDevice := s.device == nil
	if ownDevice {
		if s.device, err = vm.NewCPU(0); err != nil {
			return nil, err
		}
		defer func() {
			if err != nil {
				_ = s.device.Close()
			}
		}()
	}
	prog, t, replan, err := planCompile(g, s)
	if err != nil {
		return nil, withLeast(err, t, s)
	}
	accum, err := accumulated(t, s)
	if err != nil {
		return nil, err
	}
	var al alloc.Allocator
	switch s.allocator {
	case BestFit:
		al = vm.NewBestFit(s.device)
	default:
		if al, err = vm.NewVA(s.device, s.chunk); err != nil {
			return nil, fmt.Errorf("ooc: device %s: %w", s.device.Name(), err)
		}
	}
	m, err = vm.New(prog, vm.Config{Device: s.device, Allocator: al, Budget: prog.Budget, AccumulateGrads: accum,
		OwnDevice: ownDevice, Poison: s.poison, Replan: replan, HostPersistent: s.hostPers})
	if err != nil {
		_ = al.Close()
		return nil, err
	}
	return m, nil
}

// planCompile plans a program for Compile, and the replanning after a
// first step that measures op times where the planner uses them (see
// measureFirst).
func planCompile(g *gorgonia.ExprGraph, s *settings) (*vm.Program, *Trace, func(map[string]time.Duration) (*vm.Program, error), error) {
	if !mayMeasure(s) {
		prog, t, err := planGraph(g, s)
		return prog, t, nil, err
	}
	// The default planner measures only where the window scheduler's tape,
	// which the first step runs, swaps: plan that first.
	first := *s
	if _, auto := s.scheduler.(Auto); auto || s.scheduler == nil {
		first.scheduler = Window{}
	}
	prog, t, err := planGraph(g, &first)
	if err != nil {
		if first.scheduler != s.scheduler { // hybrid may plan where window does not
			prog, t, err = planGraph(g, s)
		}
		return prog, t, nil, err
	}
	if !measureFirst(s, t, prog) {
		if first.scheduler != s.scheduler {
			prog, err = plan(t, prog.Budget, s)
		}
		return prog, t, nil, err
	}
	return planToMeasure(g, s)
}

// mayMeasure reports whether Compile may run a first step to measure op
// times before planning: for a planner that times ops, on a device that is
// not simulated and (for the default planner) measures its host link,
// without WithPlanningTimes.
func mayMeasure(s *settings) bool {
	sc := s.scheduler
	if sc == nil {
		sc = Auto{}
	}
	if _, timed := sc.(timedScheduler); !timed || s.baseline || s.device.Simulated() || s.model != nil {
		return false
	}
	if _, auto := sc.(Auto); auto {
		_, ok := s.device.(vm.LinkMeasurer)
		return ok
	}
	return true
}

// measureFirst reports whether Compile, where it may measure, does: the
// default planner (Auto) has a choice to make only where the in-core peak
// exceeds the budget; the other timed planners always measure.
func measureFirst(s *settings, t *Trace, prog *vm.Program) bool {
	if _, auto := s.scheduler.(Auto); auto || s.scheduler == nil {
		peak, err := tracePeak(t)
		return err != nil || peak > prog.Budget
	}
	return true
}

// planToMeasure plans the first step of a planner that times the trace,
// on a device that is not simulated: the window scheduler's tape runs it
// while the machine measures every op, and replan then plans with the
// device's own times (and its host link) instead of a model profile's.
func planToMeasure(g *gorgonia.ExprGraph, s *settings) (*vm.Program, *Trace, func(map[string]time.Duration) (*vm.Program, error), error) {
	first := *s
	first.scheduler = Window{}
	prog, t, err := planGraph(g, &first)
	if err != nil {
		return nil, nil, nil, err
	}
	prog.Timing = fmt.Sprintf("first step: the window scheduler's tape, while op times are measured on %s; %s replans with them after it",
		s.device.Name(), schedulerName(s))
	budget := prog.Budget
	replan := func(ops map[string]time.Duration) (*vm.Program, error) {
		model, err := measuredModel(s.device, ops)
		if err != nil {
			return nil, err
		}
		again := *s
		again.model = model
		return plan(t, budget, &again)
	}
	return prog, t, replan, nil
}

// schedulerName names s's scheduler, the default's when none is given.
func schedulerName(s *settings) string {
	if s.scheduler == nil {
		return Auto{}.Name()
	}
	return s.scheduler.Name()
}

// measuredModel is a simulated device with the op times measured on dev
// and its host link's bandwidth.
func measuredModel(dev vm.Device, ops map[string]time.Duration) (*vm.Sim, error) {
	lm, ok := dev.(vm.LinkMeasurer)
	if !ok {
		return nil, fmt.Errorf("ooc: device %s does not measure its host link", dev.Name())
	}
	bw := lm.LinkBandwidth()
	secs := make(map[string]float64, len(ops))
	for k, d := range ops {
		secs[k] = d.Seconds()
	}
	return vm.NewSim(vm.Profile{
		Name: "measured-" + dev.Name(), Capacity: dev.Capacity(), Granularity: dev.Memory().Granularity(), LinkBandwidth: bw,
		// Every op of the step was measured; the roofs only time the
		// optimizer's update, which runs outside the step.
		PeakFLOPS: 1e10, MemBandwidth: 5e9, Efficiency: 1,
		Source: fmt.Sprintf("measured on %s in the first step: %d op times, host link %.2f GB/s (optimizer update assumed at 5 GB/s)",
			dev.Name(), len(ops), bw/1e9),
		Measured: secs,
	})
}

// Plan does what Compile does short of making a machine: it returns the
// verified tape, whose Peak says how much device memory the step needs.
// Without WithDevice, the budget defaults to a CPU device's capacity.
func Plan(g *gorgonia.ExprGraph, opts ...Option) (p *vm.Program, err error) {
	defer func() {
		if r := recover(); r != nil {
			p, err = nil, fmt.Errorf("ooc: Plan panicked: %v\n%s", r, debug.Stack())
		}
	}()
	s, err := configure(opts)
	if err != nil {
		return nil, err
	}
	p, _, err = planGraph(g, s)
	return p, err
}

func configure(opts []Option) (*settings, error) {
	s := &settings{allocator: VA, chunk: alloc.DefaultChunkSize, nodeValues: DefaultNodeValueLimit}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("ooc: nil Option")
		}
		o(s)
	}
	if len(s.errs) > 0 {
		return nil, errors.Join(s.errs...)
	}
	return s, nil
}

func planGraph(g *gorgonia.ExprGraph, s *settings) (*vm.Program, *Trace, error) {
	if g == nil {
		return nil, nil, errors.New("ooc: nil graph")
	}
	t, err := newTrace(g, traceConfig{outputs: s.outputs, inference: s.inference, device: s.device, wsLimit: s.wsLimit, nodeValues: s.nodeValues})
	if err != nil {
		return nil, nil, err
	}
	capacity := vm.DefaultCPUCapacity()
	name := "cpu"
	if s.device != nil {
		capacity, name = s.device.Capacity(), s.device.Name()
	}
	budget := s.budget
	if budget == 0 {
		budget = capacity
	}
	if budget > capacity {
		return nil, nil, fmt.Errorf("ooc: budget %d bytes exceeds the %s device's capacity of %d bytes", budget, name, capacity)
	}
	// What the backend holds (cuBLAS's workspace) is inside the budget: the
	// program is planned for the rest.
	if r := vm.BackendReserve(s.device); r > 0 {
		if r >= budget {
			hint := ""
			if peak, err := tracePeak(t); err == nil {
				hint = fmt.Sprintf("; %d bytes run this graph in core there (ooc.InCorePeakOn(g, device): InCorePeak's %d plus the %d)", peak+r, peak, r)
			}
			return nil, nil, fmt.Errorf("ooc: budget %d bytes is infeasible: it leaves nothing beside the %d bytes the %s device's backend holds (its cuBLAS workspace)%s",
				budget, r, name, hint)
		}
		budget -= r
	}
	return planTiled(t, budget, s)
}

// plan schedules and lowers a trace for a budget, and verifies the tape.
func plan(t *Trace, budget int64, s *settings) (*vm.Program, error) {
	sc := s.scheduler
	switch {
	case s.baseline:
		sc = baseline{}
	case sc == nil:
		sc = Auto{}
	}
	p := &Problem{Trace: t, Budget: budget, Window: s.window, Device: s.device, model: s.model,
		Replica: s.replica.index, Replicas: max(s.replica.count, 1), GroupSize: max(s.replica.group, 1)}
	sched, err := sc.Plan(p)
	if err != nil {
		return nil, err
	}
	prog, err := Lower(t, sched)
	if err != nil {
		return nil, err
	}
	prog.Budget = budget
	prog.Reserve = vm.BackendReserve(s.device)
	prog.Scheduler = sc.Name()
	if sched.picked != "" {
		prog.Scheduler += ": " + sched.picked
	}
	if prog.Timing == "" {
		if _, ok := sc.(timedScheduler); ok {
			prog.Timing = p.timingNote()
		}
	}
	if prog.Peak, err = Verify(prog, budget); err != nil {
		return nil, fmt.Errorf("%w (scheduler %s)", err, sc.Name())
	}
	return prog, nil
}

// accumulated resolves BindDualValues to the set of learnables whose
// gradients accumulate.
func accumulated(t *Trace, s *settings) (map[*gorgonia.Node]bool, error) {
	learnables := map[*gorgonia.Node]bool{}
	for i := range t.Vars {
		if v := &t.Vars[i]; v.Role == vm.Gradient {
			learnables[v.Learnable] = true
			for _, l := range v.Shared {
				learnables[l] = true
			}
		}
	}
	acc := map[*gorgonia.Node]bool{}
	if s.bindAll {
		return learnables, nil
	}
	for _, n := range s.bind {
		if n == nil {
			return nil, errors.New("ooc: BindDualValues(nil)")
		}
		if !learnables[n] {
			return nil, fmt.Errorf("ooc: BindDualValues: %s has no gradient in this graph (pass it to gorgonia.Grad or gorgonia.Backpropagate)", n.Name())
		}
		acc[n] = true
	}
	return acc, nil
}

// InCorePeakOn is InCorePeak on device d: the peak plus what d's backend
// holds outside the program in the budget (a CUDA device's cuBLAS
// workspace; nothing on the CPU and simulated devices). It is the budget
// that runs g in core on d: ooc.WithBudget(ooc.InCorePeakOn(g, d)) with
// ooc.WithDevice(d). InCorePeak's own figure, given to a CUDA machine, is
// planned for that figure less the workspace, so it swaps (or, for a graph
// smaller than the workspace, is refused with this function's number).
func InCorePeakOn(g *gorgonia.ExprGraph, d vm.Device) (int64, error) {
	peak, err := InCorePeak(g)
	if err != nil {
		return 0, err
	}
	return peak + vm.BackendReserve(d), nil
}

// InCorePeak is the device memory one step needs without swapping
// (Baseline(): every variable from its producer to its last use, workspace
// included), whatever any device's capacity.
func InCorePeak(g *gorgonia.ExprGraph) (peak int64, err error) {
	defer func() {
		if r := recover(); r != nil {
			peak, err = 0, fmt.Errorf("ooc: InCorePeak panicked: %v", r)
		}
	}()
	t, err := NewTrace(g)
	if err != nil {
		return 0, err
	}
	return tracePeak(t)
}
