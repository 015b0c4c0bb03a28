package ooc

import (
	"fmt"
	"slices"
	"time"

	"github.com/gorgonia-ooc/outofcore/vm"
)

// Recomputation drops a forward variable after its last forward use and
// rebuilds it before the backward reads it, by running its producer again
// (a Recompute instruction), and, where the producer's operands are gone
// too, their producers first: a chain from the nearest variables still
// held (kept, or swapped back in) or leaves.
//
// Planners that recompute plan over a derived trace (recomputeTrace) in
// which each rebuild is a function of its own, placed right before the
// first backward function that needs its output, with a variable of its
// own. Every scheduler then plans that trace as it is (the window
// scheduler swaps the operands a rebuild needs back in, like any other
// read), and the derived tape maps back onto the graph's own variables and
// functions with the rebuilds as Recompute instructions.

// droppable lists, in forward order, the activations (forward variables
// the backward reads) a tape may drop and recompute: computed by a
// recomputable function, intermediates nobody outside reads, and not
// views (a view lives in its base's memory).
func (t *Trace) droppable() []int {
	read := map[int]bool{}
	for _, r := range t.Reads {
		read[r.Var] = true
	}
	for _, s := range t.Sets {
		read[s.From] = true
	}
	var out []int
	for _, v := range t.activations() {
		x := &t.Vars[v]
		if x.View || x.Role != vm.Intermediate || read[v] || !t.Funcs[x.Producer].Recomputable {
			continue
		}
		out = append(out, v)
	}
	return out
}

// recomputeTrace is a trace derived from orig in which some activations are
// dropped and rebuilt.
type recomputeTrace struct {
	*Trace
	orig *Trace
	// funcOf and varOf map each derived function and variable to the
	// original one it computes or is; redo marks the rebuilds.
	funcOf, varOf []int
	redo          []bool
}

// withRecompute derives the trace in which the activations drop (each from
// droppable) are freed after their last forward use and rebuilt before
// their first backward use. A rebuild needs its producer's operands: a
// dropped one is rebuilt first; one dead after the forward whose producer is
// recomputable is rebuilt too (the chain); any other is held until the
// rebuild (the planner sees it live that long).
func (t *Trace) withRecompute(drop []int) (*recomputeTrace, error) {
	end := t.forwardEnd()
	ok := map[int]bool{}
	for _, v := range t.droppable() {
		ok[v] = true
	}
	inD := map[int]bool{}
	for _, v := range drop {
		if v < 0 || v >= len(t.Vars) || !ok[v] {
			return nil, fmt.Errorf("ooc: variable %d cannot be dropped for recomputation", v)
		}
		inD[v] = true
	}
	d := &Trace{Vars: slices.Clone(t.Vars), Reads: t.Reads, Sets: t.Sets, Inference: t.Inference}
	r := &recomputeTrace{Trace: d, orig: t}
	r.varOf = make([]int, len(t.Vars))
	cur := make([]int, len(t.Vars)) // the derived variable that holds each original one now
	for v := range cur {
		r.varOf[v], cur[v] = v, v
	}
	remap := func(f vm.Func) vm.Func {
		f.Inputs = slices.Clone(f.Inputs)
		for k, u := range f.Inputs {
			f.Inputs[k] = cur[u]
		}
		if f.InPlace >= 0 {
			f.InPlace = cur[f.InPlace]
		}
		return f
	}
	redone := map[int]bool{}
	var ensure func(v int)
	ensure = func(v int) {
		x := &t.Vars[v]
		if redone[v] || x.IsLeaf() || x.View {
			return
		}
		chain := inD[v] || (t.Last[v] <= end && x.Role == vm.Intermediate && t.Funcs[x.Producer].Recomputable)
		if !chain {
			return
		}
		redone[v] = true
		f := t.Funcs[x.Producer]
		for _, u := range f.Inputs {
			ensure(u)
		}
		g := remap(f)
		g.InPlace = -1 // a rebuild never overwrites an operand
		nv := len(d.Vars)
		g.Output = nv
		y := *x
		y.Producer = len(d.Funcs)
		d.Vars = append(d.Vars, y)
		r.varOf = append(r.varOf, v)
		d.Funcs = append(d.Funcs, g)
		r.funcOf = append(r.funcOf, x.Producer)
		r.redo = append(r.redo, true)
		cur[v] = nv
	}
	for i, f := range t.Funcs {
		if i > end {
			for _, u := range f.Inputs {
				if inD[u] {
					ensure(u)
				}
			}
		}
		d.Vars[f.Output].Producer = len(d.Funcs)
		d.Funcs = append(d.Funcs, remap(f))
		r.funcOf = append(r.funcOf, i)
		r.redo = append(r.redo, false)
	}
	for v := range t.Vars {
		if x := &d.Vars[v]; x.View && !x.IsLeaf() {
			x.Producer = d.Vars[x.Base].Producer
		}
	}
	d.index()
	// An operand a rebuild reads again is no longer at its last use where
	// the forward overwrote it in place.
	for k := range d.Funcs {
		if g := &d.Funcs[k]; g.InPlace >= 0 && d.Last[g.InPlace] != k {
			g.InPlace = -1
		}
	}
	return r, nil
}

// program maps a tape of the derived trace back onto the original
// variables and functions: rebuilds become Recompute instructions of the
// original producer.
func (r *recomputeTrace) program(p *vm.Program) *vm.Program {
	funcs := slices.Clone(r.orig.Funcs)
	for k := range r.Funcs {
		if g := &r.Funcs[k]; !r.redo[k] {
			in := g.InPlace
			if in >= 0 {
				in = r.varOf[in]
			}
			funcs[r.funcOf[k]].InPlace = in
		}
	}
	out := *p
	out.Vars, out.Funcs, out.Reads, out.Sets = r.orig.Vars, funcs, r.orig.Reads, r.orig.Sets
	out.Instrs = make([]vm.Instr, len(p.Instrs))
	for i, in := range p.Instrs {
		in.Var = r.varOf[in.Var]
		if in.Func >= 0 {
			if r.redo[in.Func] {
				in.Op = vm.Recompute
			}
			in.Func = r.funcOf[in.Func]
		}
		out.Instrs[i] = in
	}
	return &out
}

// schedule wraps a schedule of the derived trace as one of the original:
// its tape, lowered and mapped back.
func (r *recomputeTrace) schedule(s *Schedule) (*Schedule, error) {
	p, err := Lower(r.Trace, s)
	if err != nil {
		return nil, err
	}
	out := &Schedule{Window: s.Window, Timing: s.Timing, tape: r.program(p)}
	return out, nil
}

// recomputeTime is the compute the rebuilds add, by the given op times
// (indexed by original function).
func (r *recomputeTrace) recomputeTime(op []time.Duration) time.Duration {
	var d time.Duration
	for k, redo := range r.redo {
		if redo {
			d += op[r.funcOf[k]]
		}
	}
	return d
}

// Checkpoint is Chen et al.'s sublinear-memory recomputation (MXNet's
// memonger), the recompute-only baseline: the forward is cut into segments
// whose activations are dropped and recomputed in the backward from the
// activation kept at each segment's start, so about sqrt(n) segments of
// sqrt(n) activations each hold O(sqrt(n)) memory. As memonger does, a
// segment closes where the bytes of the activations since the last kept one
// pass a threshold; the threshold is chosen for the budget: of the
// segmentations tried (thresholds total/k for k segments, k = 1 .. 16 and
// then in steps of about 12% up to one per activation, plus keeping nothing
// droppable), the one with the least recompute time whose tape fits (by
// the problem's simulated device's op times, else the model profile's). Activations that cannot be recomputed (batch norm of
// gorgonia, dropout; see vm.Func.Recomputable) are always kept. Nothing is
// swapped.
type Checkpoint struct{}

// Name implements Scheduler.
func (Checkpoint) Name() string { return "checkpoint" }

// Plan implements Scheduler.
func (Checkpoint) Plan(p *Problem) (*Schedule, error) {
	t := p.Trace
	tm, err := deviceTiming(t, p.timingDevice())
	if err != nil {
		return nil, err
	}
	var best *Schedule
	var bestCost time.Duration
	var bestErr error
	var bestNeed int64 = -1
	for _, drop := range segmentations(t) {
		r, err := t.withRecompute(drop)
		if err != nil {
			return nil, err
		}
		s, err := r.schedule(baseline{}.plan(r.Trace))
		if err != nil {
			return nil, err
		}
		if _, err := Verify(s.tape, p.Budget); err != nil {
			if peak, _ := Verify(s.tape, 0); bestNeed < 0 || peak < bestNeed {
				bestNeed, bestErr = peak, err
			}
			continue
		}
		cost := r.recomputeTime(tm.op)
		if best == nil || cost < bestCost {
			best, bestCost = s, cost
		}
	}
	if best == nil {
		return nil, fmt.Errorf("ooc: checkpoint: no segmentation fits: %w", bestErr)
	}
	return best, nil
}

// segmentations are the drop sets Checkpoint tries, from Chen et al.'s
// greedy segmentation of the droppable activations at thresholds total/k,
// and the set of every droppable activation. Each is in forward order.
func segmentations(t *Trace) [][]int {
	acts := t.droppable()
	var total int64
	for _, v := range acts {
		total += t.DeviceBytes(v)
	}
	seen := map[string]bool{}
	var out [][]int
	add := func(drop []int) {
		key := fmt.Sprint(drop)
		if !seen[key] {
			seen[key] = true
			out = append(out, drop)
		}
	}
	add(nil)
	add(slices.Clone(acts))
	for _, k := range segmentCounts(len(acts)) {
		b := total / int64(k)
		var sum int64
		var drop []int
		for _, v := range acts {
			sum += t.DeviceBytes(v)
			if sum > b {
				sum = 0 // v is kept: the next segment starts from it
				continue
			}
			drop = append(drop, v)
		}
		add(drop)
	}
	return out
}

// segmentCounts are the segment counts tried for n activations: every
// count up to 16, then steps of about 12% up to n.
func segmentCounts(n int) []int {
	var out []int
	for k := 1; k <= n; {
		out = append(out, k)
		if k < 16 {
			k++
		} else {
			k += max(1, k/8)
		}
	}
	return out
}

// Hybrid is our planner that both swaps and recomputes, with no learning:
// each activation is kept, offloaded or dropped and recomputed. Dropping
// costs the producer's time again, on compute; offloading costs the stall
// the host link cannot hide. Hybrid ranks the droppable activations by
// recompute time per byte freed, cheapest first, and tries dropping every
// prefix of that ranking up to 1/8, 2/8, ... of their bytes, each with the
// rest planned by the window scheduler on the derived trace (by Window and
// DynProg when nothing is dropped);
// it also tries every Checkpoint segmentation that needs no swapping, and a
// few of those that do, with the window scheduler swapping the rest. It
// keeps the tape that simulates fastest, so an activation is recomputed
// exactly where, with the others' choices, that beats the stall its swap
// would cost. The empty drop set is among those tried, so Hybrid is never
// slower, by the simulator, than the swap planners it runs.
//
// Times come from the problem's device if it is simulated, else from a
// measured model (Compile on a device that is not simulated measures its
// first step) or the model profile (v100-pcie).
type Hybrid struct{}

// Name implements Scheduler.
func (Hybrid) Name() string { return "hybrid" }

func (Hybrid) plansWithTimes() {}

// hybridSwappers are the swap planners Hybrid runs with nothing dropped,
// and hybridDropSwappers those it runs on each derived trace (DynProg's
// slot fixing converges slowly on a derived trace, minutes on ResNet-50).
var (
	hybridSwappers     = []Scheduler{Window{}, DynProg{}}
	hybridDropSwappers = []Scheduler{Window{}}
)

// Plan implements Scheduler.
func (Hybrid) Plan(p *Problem) (*Schedule, error) {
	t := p.Trace
	sim, err := planningSim(p)
	if err != nil {
		return nil, err
	}
	tm, err := deviceTiming(t, sim)
	if err != nil {
		return nil, err
	}
	var best *Schedule
	var bestTime time.Duration
	var firstErr error
	try := func(s *Schedule, err error) {
		if err == nil {
			var d time.Duration
			if d, err = simulate(s.tape, sim, p.Budget); err == nil && (best == nil || d < bestTime) {
				best, bestTime = s, d
			}
		}
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	// Recompute only: Checkpoint's segmentations that fit as they are; of
	// those that do not, a few are kept for swapping the rest.
	var tooBig [][]int
	for _, drop := range segmentations(t) {
		r, err := t.withRecompute(drop)
		if err != nil {
			return nil, err
		}
		s, err := r.schedule(baseline{}.plan(r.Trace))
		if err == nil {
			if _, err = Verify(s.tape, p.Budget); err != nil {
				if len(drop) > 0 {
					tooBig = append(tooBig, drop)
				}
				continue
			}
		}
		try(s, err)
	}
	// Cheapest recomputes first, or segments, the rest swapped.
	for _, drop := range append(cheapestFirst(t, tm), spread(tooBig, hybridSegmentSwaps)...) {
		r, err := t.withRecompute(drop)
		if err != nil {
			return nil, err
		}
		swappers := hybridDropSwappers
		if len(drop) == 0 {
			swappers = hybridSwappers
		}
		for _, sc := range swappers {
			s, err := sc.Plan(&Problem{Trace: r.Trace, Budget: p.Budget, Device: sim})
			if err == nil {
				s, err = r.schedule(s)
			}
			if err == nil {
				_, err = Verify(s.tape, p.Budget)
			}
			try(s, err)
		}
	}
	if best == nil {
		if firstErr == nil {
			firstErr = fmt.Errorf("nothing droppable and no swap plan")
		}
		return nil, fmt.Errorf("ooc: hybrid: no plan fits %d bytes: %w", p.Budget, firstErr)
	}
	n, _ := best.tape.Count(vm.Recompute)
	best.Timing = fmt.Sprintf("simulated: profile %s (the fastest of the plans tried; %d recomputes)", sim.Name(), n)
	if p.Device != sim {
		best.Timing = p.timingNote() + fmt.Sprintf(" (the fastest plan by those times; %d recomputes)", n)
	}
	return best, nil
}

// planningSim is the simulated device a planner times plans on: the
// problem's measured model, its device if simulated, else the model
// profile.
func planningSim(p *Problem) (*vm.Sim, error) {
	if sim, ok := p.timingDevice().(*vm.Sim); ok {
		return sim, nil
	}
	prof, err := vm.LookupProfile(modelProfile)
	if err != nil {
		return nil, err
	}
	return vm.NewSim(prof)
}

// hybridSegmentSwaps is how many of the segmentations that do not fit
// alone Hybrid plans with swapping.
const hybridSegmentSwaps = 4

// spread returns at most n of xs, evenly spaced, the last included.
func spread[T any](xs []T, n int) []T {
	if len(xs) <= n {
		return xs
	}
	out := make([]T, 0, n)
	for k := 1; k <= n; k++ {
		out = append(out, xs[k*len(xs)/n-1])
	}
	return out
}

// cheapestFirst are Hybrid's drop sets: none, then the droppable
// activations ranked by recompute time per byte, cheapest first, cut where
// the bytes reach k/8 of their total, k = 1..8.
func cheapestFirst(t *Trace, tm timing) [][]int {
	acts := t.droppable()
	cost := func(v int) float64 { return float64(tm.op[t.Vars[v].Producer]) / float64(max(t.DeviceBytes(v), 1)) }
	slices.SortStableFunc(acts, func(a, b int) int {
		switch ca, cb := cost(a), cost(b); {
		case ca < cb:
			return -1
		case ca > cb:
			return 1
		}
		return 0
	})
	var total int64
	for _, v := range acts {
		total += t.DeviceBytes(v)
	}
	out := [][]int{nil}
	var sum int64
	k := 1
	for i, v := range acts {
		sum += t.DeviceBytes(v)
		if sum*8 >= int64(k)*total {
			out = append(out, slices.Clone(acts[:i+1]))
			for sum*8 >= int64(k)*total {
				k++
			}
		}
	}
	return out
}
