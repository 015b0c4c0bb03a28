package ooc

import (
	"fmt"
	"sort"
	"time"

	"github.com/gorgonia-ooc/outofcore/vm"
)

// MultiVDNN is vDNN as the multi-GPU paper (Kim et al., seed 002) runs it
// on data-parallel replicas. The layers are the forward outputs the
// backward reads again, in forward order. Each swapped layer is copied
// out as it is produced, released after its last forward use, and copied
// back at its trigger: by default the backward function of the layer
// above (vDNN's prefetch one layer ahead). With neither option it swaps
// every layer on every replica: the original vDNN.
type MultiVDNN struct {
	// Cap staggers the replicas behind one host link (section III.A): with
	// a layers, b the fewest that must be swapped for the budget, and
	// x = a/b, replica i of its switch group swaps layers i%x + j*x for
	// j < b, so the replicas' copies of one layer do not collide.
	Cap bool
	// Tune searches each swap-in's trigger (section III.C, steps 2 and 3):
	// the earliest with no out-of-memory in the simulator, then, in the
	// order they fire, the latest whose copy still lands before its use
	// on the step's timeline, kept if the simulated step is no slower.
	// Copies are timed at the bandwidth this replica gets when the
	// replicas of its switch swap together (all of them without Cap). On
	// a device that is not simulated, the op times are those Compile
	// measures in the first step (see TimesOps).
	Tune bool
}

// Name implements Scheduler.
func (s MultiVDNN) Name() string {
	switch {
	case s.Cap && s.Tune:
		return "vdnn-cap-tuned"
	case s.Cap:
		return "vdnn-cap"
	case s.Tune:
		return "vdnn-tuned"
	}
	return "vdnn-original"
}

func (MultiVDNN) plansWithTimes() {}

// Plan implements Scheduler.
func (s MultiVDNN) Plan(p *Problem) (*Schedule, error) {
	t := p.Trace
	layers := t.activations()
	set := layers
	if s.Cap {
		var err error
		if set, err = s.capped(p, layers); err != nil {
			return nil, err
		}
	}
	sched := vdnnSchedule(t, set)
	if err := fits(t, sched, p.Budget); err != nil {
		return nil, fmt.Errorf("ooc: %s: swapping %d of %d layers does not fit the budget: %w", s.Name(), len(set), len(layers), err)
	}
	if s.Tune && len(set) > 0 {
		if err := s.tune(p, sched); err != nil {
			return nil, err
		}
	}
	return sched, nil
}

// capped is this replica's share of the layers: b spaced x = a/b apart,
// offset by the replica's place in its group, b the fewest for which the
// share of every replica of the group fits (the same b for all).
func (s MultiVDNN) capped(p *Problem, layers []int) ([]int, error) {
	a := len(layers)
	group := max(p.GroupSize, 1)
	share := func(i, b int) []int {
		var set []int
		if b > 0 {
			x := max(a/b, 1)
			for j := 0; j < b; j++ {
				if k := i%x + j*x; k < a {
					set = append(set, layers[k])
				}
			}
		}
		return set
	}
	var lastErr error
	for b := 0; b <= a; b++ {
		lastErr = nil
		for i := 0; i < group && lastErr == nil; i++ {
			lastErr = fits(p.Trace, vdnnSchedule(p.Trace, share(i, b)), p.Budget)
		}
		if lastErr == nil {
			return share(p.Replica%group, b), nil
		}
	}
	return nil, fmt.Errorf("ooc: %s: no number of swapped layers fits the budget: %w", s.Name(), lastErr)
}

// vdnnSchedule swaps set with vDNN's triggers: each layer comes back at
// the first backward use of the next layer in forward order (the layer
// above), or at its own use if that comes first.
func vdnnSchedule(t *Trace, set []int) *Schedule {
	end := t.forwardEnd()
	s := NewSchedule(len(t.Funcs))
	order := append([]int(nil), set...)
	sort.Slice(order, func(a, b int) bool { return t.Vars[order[a]].Producer < t.Vars[order[b]].Producer })
	trigger := end + 1
	// Walk from the top layer down: the backward meets them in that order.
	for k := len(order) - 1; k >= 0; k-- {
		v := order[k]
		release := t.Vars[v].Producer + 1
		for _, u := range t.Uses[v] {
			if u <= end {
				release = max(release, u+1)
			}
		}
		use := t.NextUse(v, end)
		if use < 0 || use <= release {
			continue
		}
		at := min(max(trigger, release+1), use)
		s.SwapOut[t.Vars[v].Producer] = append(s.SwapOut[t.Vars[v].Producer], v)
		s.Release[release] = append(s.Release[release], v)
		s.SwapIn[at] = append(s.SwapIn[at], v)
		trigger = use
	}
	return s
}

// tune moves the swap-ins: first each as early as the budget allows (step
// 2), then each, in the order they fire, as late as it can go without
// adding a delay (step 3).
func (s MultiVDNN) tune(p *Problem, sched *Schedule) error {
	t := p.Trace
	sim, err := s.tuningDevice(p)
	if err != nil {
		return err
	}
	stepTime := func() (time.Duration, error) {
		prog, err := Lower(t, sched)
		if err != nil {
			return 0, err
		}
		return simulate(prog, sim, p.Budget)
	}
	// Step 2: the earliest triggers the budget allows by its accounting;
	// where the allocator then runs out of memory, earlier ones under a
	// budget 2% smaller, and so on, or vDNN's own triggers.
	original := cloneSchedule(sched)
	var base time.Duration
	for k := int64(0); ; k++ {
		if k == 5 {
			// Not even vDNN's triggers run in the simulator: leave them,
			// and the step, to the machine.
			*sched = *original
			return nil
		}
		*sched = *cloneSchedule(original)
		if err := hoistSwapIns(t, sched, p.Budget-k*p.Budget/50); err != nil {
			return err
		}
		if base, err = stepTime(); err == nil {
			break
		}
	}
	// Step 3, in the order the swap-ins fire (the host-to-device engine
	// serves them in that order): each as late as it can start and still
	// land before its use on the step's timeline, no earlier than the one
	// before it. The result must simulate no slower than step 2's, else
	// step 2's stands.
	tm, err := deviceTiming(t, sim)
	if err != nil {
		return err
	}
	startAt := make([]time.Duration, len(t.Funcs)+1)
	for i, d := range tm.op {
		startAt[i+1] = startAt[i] + d
	}
	earliest := cloneSchedule(sched)
	end := t.forwardEnd()
	var h2d time.Duration
	floor := 0
	for i := range t.Funcs {
		for _, v := range earliest.SwapIn[i] {
			use := t.NextUse(v, end)
			copyTime := tm.copyTime(t.DeviceBytes(v))
			at := max(i, floor)
			for at < use && max(startAt[at+1], h2d)+copyTime <= startAt[use] {
				at++
			}
			if at != i {
				sched.SwapIn[i] = remove(sched.SwapIn[i], v)
				sched.SwapIn[at] = append(sched.SwapIn[at], v)
			}
			floor = at
			h2d = max(startAt[at], h2d) + copyTime
		}
	}
	if d, err := stepTime(); err != nil || d > base {
		*sched = *earliest
	}
	sched.Timing = p.timingNote()
	return nil
}

// tuningDevice times copies at what this replica gets of a shared link
// when the replicas of its switch swap at once (only itself under Cap).
func (s MultiVDNN) tuningDevice(p *Problem) (*vm.Sim, error) {
	sim, ok := p.timingDevice().(*vm.Sim)
	var prof vm.Profile
	if ok {
		prof = sim.Profile()
	} else {
		var err error
		if prof, err = vm.LookupProfile(modelProfile); err != nil {
			return nil, err
		}
	}
	if prof.DevicesPerSwitch > 0 && prof.SwitchBandwidth > 0 {
		sharing := 1
		if !s.Cap {
			sharing = min(max(p.GroupSize, 1), prof.DevicesPerSwitch)
		}
		prof.LinkBandwidth = min(prof.LinkBandwidth, prof.SwitchBandwidth/float64(sharing))
	}
	prof.DevicesPerSwitch = 0
	return vm.NewSim(prof)
}

func cloneSchedule(s *Schedule) *Schedule {
	c := *s
	c.Release, c.SwapIn, c.SwapOut = cloneLists(s.Release), cloneLists(s.SwapIn), cloneLists(s.SwapOut)
	return &c
}

func cloneLists(l [][]int) [][]int {
	out := make([][]int, len(l))
	for i, x := range l {
		out[i] = append([]int(nil), x...)
	}
	return out
}
