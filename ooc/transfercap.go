package ooc

import "fmt"

// The multi-GPU paper's transfer cap (Kim et al., seed 002, section
// III.A) for any planner: with a activations in forward order and x = a/b,
// replica i of a switch group may swap only the activations k with
// k ≡ i (mod x), i.e. layers i%x + j*x, j < b, so the replicas of one host
// link never copy the same layer at the same moment. b is the fewest for
// which every replica of the group gets a schedule within the budget;
// with b = a (x = 1) nothing is restricted and the plan is the planner's
// own. Variables that are not activations (the backward's own
// intermediates) are left to the planner. On one device (a group of one)
// the cap restricts nothing.

// capAllowed says which variables a capped planner may swap: nil, every
// one.
type capAllowed func(v int) bool

func (a capAllowed) ok(v int) bool { return a == nil || a(v) }

// planCapped plans with the cap: plan is the planner given what it may
// swap. It searches b by bisection (the fewer layers a replica may swap,
// the harder the budget is to meet) and returns this replica's schedule at
// the least b that plans for every replica of the group.
func planCapped(p *Problem, plan func(capAllowed) (*Schedule, error)) (*Schedule, error) {
	acts := p.Trace.activations()
	a, group := len(acts), max(p.GroupSize, 1)
	if a == 0 || group == 1 {
		return plan(nil)
	}
	index := make(map[int]int, a)
	for k, v := range acts {
		index[v] = k
	}
	try := func(b int) (*Schedule, error) {
		x := max(a/b, 1)
		if x == 1 {
			return plan(nil)
		}
		var mine *Schedule
		for i := 0; i < group; i++ {
			s, err := plan(func(v int) bool {
				k, ok := index[v]
				return !ok || k%x == i%x
			})
			if err != nil {
				return nil, fmt.Errorf("replica %d of a switch group of %d, layers k %% %d == %d: %w", i, group, x, i%x, err)
			}
			if i == p.Replica%group {
				mine = s
			}
		}
		return mine, nil
	}
	best, err := try(a)
	if err != nil {
		return nil, err
	}
	lo, hi := 1, a // try(hi) plans; below lo nothing does
	for lo < hi {
		mid := (lo + hi) / 2
		if s, err := try(mid); err == nil {
			best, hi = s, mid
		} else {
			lo = mid + 1
		}
	}
	return best, nil
}
