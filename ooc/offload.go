package ooc

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/gorgonia-ooc/outofcore/vm"
)

// The offloading paper's planners (Greedy, DynProg, vDNN) choose a set of
// activations to offload and then follow one schedule shape, the no-wait
// ordered schedule of that set (see offloadSchedule). An activation is a
// variable computed in the forward (which ends with the cost's function)
// and read again after it, by the backward; Chain says how the paper's
// chain is made of them.

// activations lists the variables the backward reads from the forward, in
// the order the forward produces them: those allowed (every one with none).
func (t *Trace) activations(allowed ...capAllowed) []int {
	end := t.forwardEnd()
	var out []int
	for v := range t.Vars {
		x := &t.Vars[v]
		if x.IsLeaf() || x.Producer > end || t.Last[v] <= end || len(allowed) > 0 && !allowed[0].ok(v) {
			continue
		}
		out = append(out, v)
	}
	sort.Slice(out, func(a, b int) bool { return t.Vars[out[a]].Producer < t.Vars[out[b]].Producer })
	return out
}

// forwardEnd is the index of the last forward function: the one making the
// cost (the latest producer of an output).
func (t *Trace) forwardEnd() int {
	end := -1
	for v := range t.Vars {
		if x := &t.Vars[v]; x.Role == vm.Output && x.Producer > end {
			end = x.Producer
		}
	}
	if end < 0 {
		end = len(t.Funcs) - 1
	}
	return end
}

// timing is what the offload planners assume about the device: each
// function's time, the optimizer's update, and the host link's bandwidth.
type timing struct {
	op     []time.Duration
	update time.Duration
	beta   float64 // bytes per second, each direction
}

// modelProfile stands in for the device when the problem's device is not
// simulated: the planners need relative op times and a link speed to decide
// when a copy will have landed, and a PCIe-linked GPU is the setting the
// offloading paper plans for.
const modelProfile = "v100-pcie"

// deviceTiming returns the times the simulated device dev, or else the
// model profile, gives the trace's functions and update.
func deviceTiming(t *Trace, dev vm.Device) (timing, error) {
	sim, ok := dev.(*vm.Sim)
	if !ok {
		prof, err := vm.LookupProfile(modelProfile)
		if err != nil {
			return timing{}, err
		}
		if sim, err = vm.NewSim(prof); err != nil {
			return timing{}, err
		}
	}
	p := &vm.Program{Vars: t.Vars, Funcs: t.Funcs}
	tm := timing{op: make([]time.Duration, len(t.Funcs)), beta: sim.Profile().LinkBandwidth}
	for i := range p.Funcs {
		tm.op[i] = sim.OpTime(p, &p.Funcs[i])
	}
	for i := range p.Vars {
		if v := &p.Vars[i]; v.Role == vm.Gradient {
			tm.update += sim.UpdateTime(v.Bytes)
		}
	}
	return tm, nil
}

func (tm timing) copyTime(n int64) time.Duration {
	return time.Duration(float64(n) / tm.beta * float64(time.Second))
}

// offloadSchedule is the no-wait, ordered schedule offloading set (Proposition
// 1 of the paper, in the tape's program order): each activation starts
// copying to the host when it is produced (the copies queue in that order),
// its memory is released before the first function that starts after its
// copy should have landed, or earlier where the budget needs the memory at
// once (compute then waits for the copy), and it comes back, in the order
// the backward needs them, as early as the budget allows.
func offloadSchedule(t *Trace, set []int, budget int64, tm timing) (*Schedule, error) {
	n := len(t.Funcs)
	end := t.forwardEnd()
	s := NewSchedule(n)
	type item struct {
		v, release, use int
		late            int // release point if memory allowed: where the copy has landed
		size            int64
	}
	var items []*item
	for _, v := range set {
		release := -1
		for _, u := range t.Uses[v] {
			if u <= end {
				release = u
			}
		}
		release++ // right after the last forward use
		if release == 0 {
			release = t.Vars[v].Producer + 1
		}
		use := t.NextUse(v, end)
		if use < 0 || use <= release {
			continue // nothing to gain: it is needed again at once
		}
		items = append(items, &item{v: v, release: release, use: use, size: t.DeviceBytes(v)})
		s.SwapOut[t.Vars[v].Producer] = append(s.SwapOut[t.Vars[v].Producer], v)
		s.Release[release] = append(s.Release[release], v)
		s.SwapIn[use] = append(s.SwapIn[use], v)
	}
	// Device bytes each function needs with every release as early as it
	// can be and every prefetch just in time: the least this set allows.
	need, err := execNeeds(t, s)
	if err != nil {
		return nil, err
	}
	// When each copy lands, if compute never waits: the D2H engine takes the
	// copies in the order they are issued.
	start := make([]time.Duration, n+1)
	for i := range n {
		start[i+1] = start[i] + tm.op[i]
	}
	var d2h time.Duration
	for _, it := range items {
		d2h = max(d2h, start[t.Vars[it.v].Producer+1]) + tm.copyTime(it.size)
		it.late = it.release
		for it.late < it.use && start[it.late] < d2h {
			it.late++
		}
		for k := it.release; k < it.late; k++ {
			need[k] += it.size
		}
	}
	// Where that is over the budget, release earlier, oldest copy first.
	for k := 0; k < n; k++ {
		for _, it := range items {
			if need[k] <= budget {
				break
			}
			if it.release <= k && k < it.late {
				for j := k; j < it.late; j++ {
					need[j] -= it.size
				}
				it.late = k
			}
		}
	}
	for _, it := range items {
		s.Release[it.release] = remove(s.Release[it.release], it.v)
		if it.late >= it.use {
			// Its copy would land after it is needed: keep it instead.
			s.SwapOut[t.Vars[it.v].Producer] = remove(s.SwapOut[t.Vars[it.v].Producer], it.v)
			s.SwapIn[it.use] = remove(s.SwapIn[it.use], it.v)
			continue
		}
		s.Release[it.late] = append(s.Release[it.late], it.v)
	}
	// Each prefetch as early as the budget allows, in the order of use.
	if err := hoistSwapIns(t, s, budget); err != nil {
		return nil, err
	}
	return s, nil
}

// execNeeds is the device bytes held while each function runs under s.
func execNeeds(t *Trace, s *Schedule) ([]int64, error) {
	prog, err := Lower(t, s)
	if err != nil {
		return nil, err
	}
	live, err := Timeline(prog)
	if err != nil {
		return nil, err
	}
	need := make([]int64, len(t.Funcs))
	for pc, in := range prog.Instrs {
		if in.Op == vm.Exec {
			need[in.Func] = live[pc]
		}
	}
	return need, nil
}

func remove(s []int, v int) []int {
	for i, x := range s {
		if x == v {
			return append(s[:i], s[i+1:]...)
		}
	}
	return s
}

// Greedy is the offloading paper's GREEDY heuristic: offload the first k
// activations, k the least whose sizes sum to at least M_peak - M, in the
// no-wait, eager, ordered schedule. If that schedule does not fit the budget
// (the relaxation ignores when memory is needed), it offloads more, one
// activation at a time, until one does.
type Greedy struct {
	// Cap applies the multi-GPU paper's transfer cap to data-parallel
	// replicas (see MultiVDNN.Cap): replica i of a switch group offloads
	// only activations i%x + j*x, x as large as lets every replica of the
	// group fit the budget. It changes nothing on one device.
	Cap bool
}

// Name implements Scheduler.
func (g Greedy) Name() string {
	if g.Cap {
		return "greedy-cap"
	}
	return "greedy"
}

func (Greedy) plansWithTimes() {}

// Plan implements Scheduler.
func (g Greedy) Plan(p *Problem) (*Schedule, error) {
	if g.Cap {
		return planCapped(p, func(allowed capAllowed) (*Schedule, error) { return greedy(p, allowed) })
	}
	return greedy(p, nil)
}

func greedy(p *Problem, allowed capAllowed) (*Schedule, error) {
	t := p.Trace
	peak, err := tracePeak(t)
	if err != nil {
		return nil, err
	}
	tm, err := deviceTiming(t, p.timingDevice())
	if err != nil {
		return nil, err
	}
	acts := t.activations(allowed)
	var sum int64
	k := 0
	for k < len(acts) && sum < peak-p.Budget {
		sum += t.DeviceBytes(acts[k])
		k++
	}
	s, err := offloadMore(t, acts[:k], p.Budget, tm, allowed)
	if err != nil {
		return nil, fmt.Errorf("ooc: greedy: %w", err)
	}
	return s, nil
}

// offloadMore returns the no-wait schedule offloading set if it fits the
// budget; if not, it offloads the trace's other activations too, one at a
// time in forward order (those allowed), until a schedule fits.
func offloadMore(t *Trace, set []int, budget int64, tm timing, allowed capAllowed) (*Schedule, error) {
	set = slices.Clone(set)
	chosen := map[int]bool{}
	for _, v := range set {
		chosen[v] = true
	}
	acts := t.activations(allowed)
	for k := 0; ; k++ {
		slices.SortFunc(set, func(a, b int) int { return cmp.Compare(t.Vars[a].Producer, t.Vars[b].Producer) })
		s, err := offloadSchedule(t, set, budget, tm)
		if err != nil {
			return nil, err
		}
		fitErr := fits(t, s, budget)
		if fitErr == nil {
			return s, nil
		}
		for k < len(acts) && chosen[acts[k]] {
			k++
		}
		if k == len(acts) {
			return nil, fmt.Errorf("offloading every activation does not fit the budget: %w", fitErr)
		}
		chosen[acts[k]] = true
		set = append(set, acts[k])
	}
}

// VDNN is the offloading paper's variant of vDNN++: rank forward functions
// by u_F/|x| (compute time per byte of their output; on a simulated device
// its modelled time, else FLOPs), and for every threshold offload all the
// activations whose ratio is above it, or every other one of them; keep the
// schedule that fits the budget and is fastest in the simulator (fewest
// swapped bytes without one).
type VDNN struct{}

// Name implements Scheduler.
func (VDNN) Name() string { return "vdnn" }

func (VDNN) plansWithTimes() {}

// Plan implements Scheduler.
func (VDNN) Plan(p *Problem) (*Schedule, error) {
	t := p.Trace
	acts := t.activations()
	sim, _ := p.timingDevice().(*vm.Sim)
	tm, err := deviceTiming(t, p.timingDevice())
	if err != nil {
		return nil, err
	}
	prog := &vm.Program{Vars: t.Vars, Funcs: t.Funcs}
	ratio := make(map[int]float64, len(acts))
	for _, v := range acts {
		f := &t.Funcs[t.Vars[v].Producer]
		var cost float64
		if sim != nil {
			cost = sim.OpTime(prog, f).Seconds()
		} else {
			flops, _ := vm.OpCost(prog, f)
			cost = float64(flops)
		}
		ratio[v] = cost / float64(max(t.DeviceBytes(v), 1))
	}
	thresholds := make([]float64, 0, len(acts))
	for _, v := range acts {
		thresholds = append(thresholds, ratio[v])
	}
	sort.Float64s(thresholds)
	var best *Schedule
	var bestTime time.Duration
	var bestSwap int64
	var lastErr error
	for _, th := range thresholds {
		var all []int
		for _, v := range acts {
			if ratio[v] >= th {
				all = append(all, v)
			}
		}
		var half []int
		for i, v := range all {
			if i%2 == 0 {
				half = append(half, v)
			}
		}
		for _, set := range [][]int{all, half} {
			s, err := offloadSchedule(t, set, p.Budget, tm)
			if err != nil {
				return nil, err
			}
			if lastErr = fits(t, s, p.Budget); lastErr != nil {
				continue
			}
			var swap int64
			for _, v := range set {
				swap += t.DeviceBytes(v)
			}
			var d time.Duration
			if sim != nil {
				prog, err := Lower(t, s)
				if err != nil {
					return nil, err
				}
				if d, err = simulate(prog, sim, p.Budget); err != nil {
					lastErr = err
					continue
				}
			}
			if best == nil || d < bestTime || d == bestTime && swap < bestSwap {
				best, bestTime, bestSwap = s, d, swap
			}
		}
	}
	if best == nil {
		return nil, fmt.Errorf("ooc: vdnn: no threshold gives a schedule within the budget: %w", lastErr)
	}
	return best, nil
}

// fits reports whether a schedule's tape stays within the budget.
func fits(t *Trace, s *Schedule, budget int64) error {
	prog, err := Lower(t, s)
	if err != nil {
		return err
	}
	_, err = Verify(prog, budget)
	return err
}

// tracePeak is the in-core peak of a trace.
func tracePeak(t *Trace) (int64, error) {
	p, err := Lower(t, baseline{}.plan(t))
	if err != nil {
		return 0, err
	}
	return Verify(p, 0)
}
