package ooc

import (
	"errors"
	"fmt"
	"runtime/debug"

	"gorgonia.org/gorgonia"

	"github.com/gorgonia-ooc/outofcore/vm"
	"github.com/gorgonia-ooc/outofcore/vm/alloc"
)

// BestFitSegment is the least memory the best-fit allocator serves anything
// from: PyTorch's 2 MiB small-pool segment. A device of fewer bytes serves
// nothing with BestFit.
const BestFitSegment = 2 << 20

// ChunkFor is the VA chunk size LeastBudget assumes for a device of b bytes
// when no WithChunkSize is given, as ooc train chooses it: the paper's 40
// MiB (alloc.DefaultChunkSize) on a GPU-sized device; on a smaller one the
// largest power of two up to b/24, down to the host page, so that the
// device holds many chunks. A power of two because a model's tensors mostly
// are whole multiples of one, so a large block fills its chunks (b/24
// itself wastes a partial chunk on every block: ResNet-18's least device
// was 81% of its peak with it instead of 64%).
func ChunkFor(b int64) int64 {
	if b/24 >= alloc.DefaultChunkSize {
		return alloc.DefaultChunkSize
	}
	c := alloc.HostGranularity()
	for 2*c <= b/24 {
		c *= 2
	}
	return c
}

// LeastBudget returns about the least budget, in bytes, that works for the
// graph with the given options (the scheduler, device, allocator and chunk
// they name; WithBudget is ignored): a device memory of that many bytes
// serves one step, as FitDevice finds it, the scheduler planning under that
// budget or under one lowered by 5% steps so that the allocator's rounding
// to its chunks or segments fits. It is what ooc train accepts as its
// smallest -budget (its CPU device of -budget bytes), exact to within the
// device memory's granularity (a host page on the CPU device, 2 MiB on the
// simulated and CUDA devices). It may exceed the device's capacity, when
// no budget works there. Compile plans under it; a budget far enough below
// it that nothing plans is refused by Compile with a *BudgetError that
// carries it. With the default planner (Auto) the search plans with
// Window, which Auto falls back on: Hybrid's recomputation may plan lower
// (WithScheduler(Hybrid{}) searches with it), but planning it at every
// step of the search is slow.
func LeastBudget(g *gorgonia.ExprGraph, opts ...Option) (least int64, err error) {
	defer func() {
		if r := recover(); r != nil {
			least, err = 0, fmt.Errorf("ooc: LeastBudget panicked: %v\n%s", r, debug.Stack())
		}
	}()
	s, t, err := traceFor(g, opts)
	if err != nil {
		return 0, err
	}
	least, _, err = leastBudget(t, s)
	return least, err
}

// DeviceFit is how a device memory of Device bytes serves one step.
type DeviceFit struct {
	// Device is the memory's size: the bytes asked for, or one VA chunk or
	// best-fit segment (BestFitSegment) where that is more.
	Device int64
	// Planned is the budget the scheduler plans under: the bytes asked for,
	// or less, in steps of 5%, until the allocator serves the step.
	Planned int64
	// Chunk is the VA chunk that serves it (WithChunkSize's, else ChunkFor
	// of the bytes asked for, or its half or quarter).
	Chunk int64
	// Tries counts the simulated steps tried (budgets times chunks).
	Tries int
}

// FitDevice finds how a device memory of bytes bytes serves one step of the
// graph with the given options (WithBudget is ignored): it plans under
// bytes, replays the step's allocations on a simulated device of that size
// shaped like the chosen one (its granularity; no compute; holding what
// the CPU device holds, HostPersistent) with the chosen allocator, and
// lowers the scheduling budget by 5% of bytes, 11 times at most, until the
// allocator serves every allocation. Without WithChunkSize, VA tries
// ChunkFor(bytes) and its half and quarter at each budget: tensors that are
// no whole number of chunks waste less in smaller ones. With the default
// planner the tape replayed is Window's (see LeastBudget). The error is the
// planner's when bytes itself does not plan, and wraps
// alloc.ErrOutOfMemory when no budget tried is served.
func FitDevice(g *gorgonia.ExprGraph, bytes int64, opts ...Option) (f DeviceFit, err error) {
	defer func() {
		if r := recover(); r != nil {
			f, err = DeviceFit{}, fmt.Errorf("ooc: FitDevice panicked: %v\n%s", r, debug.Stack())
		}
	}()
	if bytes <= 0 {
		return DeviceFit{}, fmt.Errorf("ooc: FitDevice(%d): the device must have some bytes", bytes)
	}
	s, t, err := traceFor(g, opts)
	if err != nil {
		return DeviceFit{}, err
	}
	return fitDevice(t, s, bytes)
}

// traceFor gathers the options and traces the graph for their device.
func traceFor(g *gorgonia.ExprGraph, opts []Option) (*settings, *Trace, error) {
	s, err := configure(opts)
	if err != nil {
		return nil, nil, err
	}
	if g == nil {
		return nil, nil, errors.New("ooc: nil graph")
	}
	t, err := newTrace(g, traceConfig{outputs: s.outputs, inference: s.inference, device: s.device, wsLimit: s.wsLimit, nodeValues: s.nodeValues})
	return s, t, err
}

// leastBudget is LeastBudget on a trace, with the trace's in-core peak
// (the backend's reserve included).
func leastBudget(t *Trace, s *settings) (least, peak int64, err error) {
	s = windowForAuto(s)
	if peak, err = tracePeak(t); err != nil {
		return 0, 0, err
	}
	reserve := vm.BackendReserve(s.device)
	peak += reserve
	prof, err := fitProfile(s)
	if err != nil {
		return 0, peak, err
	}
	works := func(b int64) bool { _, err := fitDevice(t, s, b); return err == nil }
	// Above the peak nothing need swap, but the allocator rounds blocks up
	// to its chunks or segments, which a small model's peak may not hold.
	hi := peak
	if !works(hi) {
		hi = max(2*peak, peak+16*BestFitSegment)
		if _, err := fitDevice(t, s, hi); err != nil {
			return 0, peak, fmt.Errorf("ooc: no budget up to %d bytes (%.0f%% of the in-core peak %d) works: %w", hi, 100*float64(hi)/float64(max(peak, 1)), peak, err)
		}
	}
	lo := reserve // nothing is left to plan in at or below the reserve
	for hi-lo > prof.Granularity {
		mid := lo + (hi-lo)/2
		if m := mid - mid%prof.Granularity; m > lo {
			mid = m // budgets on the device's granularity where it can
		}
		if works(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi, peak, nil
}

// fitProfile is the simulated device fitDevice replays steps on, but for
// its capacity: s's device if simulated, else the model profile with the
// device's granularity (a host page without a device).
func fitProfile(s *settings) (vm.Profile, error) {
	if d, ok := s.device.(*vm.Sim); ok {
		return d.Profile(), nil
	}
	prof, err := vm.LookupProfile(modelProfile)
	if err != nil {
		return prof, err
	}
	prof.Granularity = alloc.HostGranularity()
	if s.device != nil {
		prof.Granularity = s.device.Memory().Granularity()
	}
	return prof, nil
}

// windowForAuto is s with the default planner's fitting and search for
// the least budget done by Window: planning Hybrid at every step of the
// bisection took minutes where Window takes a second; a budget Window
// plans under is one Auto plans under (it keeps Window where Hybrid
// fails); and on the CPU device Window's tape is the first step's.
func windowForAuto(s *settings) *settings {
	if _, auto := s.scheduler.(Auto); !auto && s.scheduler != nil {
		return s
	}
	w := *s
	w.scheduler = Window{}
	return &w
}

// fitDevice is FitDevice on a trace.
func fitDevice(t *Trace, s *settings, b int64) (DeviceFit, error) {
	s = windowForAuto(s)
	prof, err := fitProfile(s)
	if err != nil {
		return DeviceFit{}, err
	}
	f := DeviceFit{Planned: b, Chunk: s.chunk}
	chunks := []int64{s.chunk}
	if s.allocator == VA && !s.chunkSet {
		c := max(ChunkFor(b)/prof.Granularity*prof.Granularity, prof.Granularity)
		chunks = []int64{c}
		for i := 0; i < 2 && c/2 >= prof.Granularity; i++ {
			c /= 2
			chunks = append(chunks, c)
		}
	}
	// The device holds at least one chunk (a segment for best-fit):
	// nothing smaller can serve an allocation.
	f.Device = max(b, chunks[0], prof.Granularity)
	if s.allocator == BestFit {
		f.Device = max(f.Device, BestFitSegment)
	}
	prof.Capacity = f.Device
	reserve := vm.BackendReserve(s.device)
	var last error
	for budgets := 1; budgets <= 12 && f.Planned > reserve; budgets++ {
		prog, _, err := planTiled(t, f.Planned-reserve, s)
		if err != nil {
			if budgets == 1 {
				return f, err // the budget itself does not plan
			}
			break // lowered until nothing plans
		}
		for _, c := range chunks {
			f.Chunk = c
			f.Tries++
			err := stepOn(prog, prof, s.allocator, c)
			switch {
			case err == nil:
				return f, nil
			case !errors.Is(err, alloc.ErrOutOfMemory):
				return f, err
			}
			last = err
		}
		f.Planned -= b / 20
	}
	return f, fmt.Errorf("a device of %d bytes cannot hold a step: the budget plans, but the allocator, rounding blocks to its chunks or segments, runs out of the device's memory under every budget tried (last: %w)", f.Device, last)
}

// stepOn runs one simulated step of prog (no compute) on a new device of
// profile prof, holding what the CPU device holds (HostPersistent), with
// the given allocator and VA chunk.
func stepOn(prog *vm.Program, prof vm.Profile, kind AllocatorKind, chunk int64) error {
	dev, err := vm.NewSim(prof)
	if err != nil {
		return err
	}
	var al alloc.Allocator
	if kind == BestFit {
		al = alloc.NewBestFit(dev.Memory())
	} else if al, err = alloc.NewVA(dev.Memory(), chunk); err != nil {
		_ = dev.Close()
		return err
	}
	p := *prog
	m, err := vm.New(&p, vm.Config{Device: dev, Allocator: al, Budget: p.Budget, HostPersistent: true, OwnDevice: true})
	if err != nil {
		_ = al.Close()
		_ = dev.Close()
		return err
	}
	defer m.Close()
	return m.RunAll()
}

// withLeast completes an infeasible budget's error with the least budget
// that works and the in-core peak, when it is a *BudgetError.
func withLeast(err error, t *Trace, s *settings) error {
	var be *BudgetError
	if t == nil || !errors.As(err, &be) || be.Least > 0 {
		return err
	}
	least, peak, lerr := leastBudget(t, s)
	if lerr != nil {
		return err
	}
	be.Least, be.Peak = least, peak
	return err
}
