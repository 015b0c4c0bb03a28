package ooc

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// DynProg is the offloading paper's DYNPROG: the dynamic program of its
// Algorithm 1 picks which activations to offload, optimally for the model
// where a copy may be interrupted and resumed (section 5), on the trace's
// chain (see Chain); the plan is then the no-wait, ordered schedule that
// offloads exactly those activations.
//
// Memory is discretized in Slots slots of budget/Slots bytes (the paper's
// S, 500 by default): extra memory and y sizes are rounded up, the partial
// sums of u*beta down, and the partial sums of activation sizes up (the
// paper's optimistic rounding). If the schedule does not fit the budget,
// the rounded size that is below its true size and closest to it grows by
// one slot and the program is solved again, up to a bound; after that, as
// Greedy, it also offloads activations in forward order until one fits.
//
// Times come from the problem's device if it is simulated, else from the
// model profile (v100-pcie).
type DynProg struct {
	// Slots is the number of memory slots (0: 500).
	Slots int
	// Cap applies the multi-GPU paper's transfer cap to data-parallel
	// replicas (see Greedy.Cap): the dynamic program may offload only the
	// activations of this replica's share.
	Cap bool
}

// dynProgFixes bounds the paper's iterative fix of the activation sizes,
// one slot at a time. On a long chain whose tape misses the budget by more
// than rounding (the chain model of a DAG is not exact), that converges
// slowly; dynProgTightens more rounds then lower the program's memory by
// what the tape was over.
const (
	dynProgFixes    = 4
	dynProgTightens = 8
)

// Name implements Scheduler.
func (d DynProg) Name() string {
	if d.Cap {
		return "dynprog-cap"
	}
	return "dynprog"
}

func (DynProg) plansWithTimes() {}

// Plan implements Scheduler.
func (d DynProg) Plan(p *Problem) (*Schedule, error) {
	if d.Slots < 0 {
		return nil, fmt.Errorf("ooc: dynprog: %d memory slots: want a positive number, or 0 for 500", d.Slots)
	}
	if d.Cap {
		return planCapped(p, func(allowed capAllowed) (*Schedule, error) { return d.plan(p, allowed) })
	}
	return d.plan(p, nil)
}

func (d DynProg) plan(p *Problem, allowed capAllowed) (*Schedule, error) {
	slots := d.Slots
	if slots == 0 {
		slots = 500
	}
	t := p.Trace
	tm, err := deviceTiming(t, p.timingDevice())
	if err != nil {
		return nil, err
	}
	c, err := chainOf(t, tm)
	if err != nil {
		return nil, err
	}
	dc := discretize(c, p.Budget, slots)
	if allowed != nil {
		dc.keep = make([]bool, len(c.Var))
		for i, v := range c.Var {
			dc.keep[i] = v >= 0 && !allowed(v)
		}
	}
	var set []int
	var lastErr error
	for fix := 0; fix <= dynProgFixes+dynProgTightens; fix++ {
		off, ok := dc.solve()
		if !ok {
			lastErr = fmt.Errorf("ooc: dynprog: no ordered schedule of the chain fits %d slots of %d bytes", dc.s, p.Budget/int64(slots))
			break
		}
		set = set[:0]
		for i, o := range off {
			if o && c.Var[i] >= 0 {
				set = append(set, c.Var[i])
			}
		}
		s, err := offloadSchedule(t, set, p.Budget, tm)
		if err != nil {
			return nil, err
		}
		if lastErr = fits(t, s, p.Budget); lastErr == nil {
			return s, nil
		}
		if fix < dynProgFixes {
			if dc.grow() {
				continue
			}
			fix = dynProgFixes
		}
		var be *BudgetError
		if !errors.As(lastErr, &be) || !dc.tighten(be.Need-be.Budget) {
			break
		}
	}
	// Last resort: add activations in forward order.
	s, err := offloadMore(t, set, p.Budget, tm, allowed)
	if err != nil {
		return nil, fmt.Errorf("ooc: dynprog: %w", err)
	}
	return s, nil
}

// OffloadSet solves the dynamic program on a chain for a budget in bytes and
// returns, per x_i, whether to offload it, and the idle time of the best
// ordered schedule in the interruptible-copy model, as computed on the
// discretized chain. ok is false when no ordered schedule fits.
func (c *Chain) OffloadSet(budget int64, slots int) (off []bool, idle time.Duration, ok bool, err error) {
	if err := c.check(); err != nil {
		return nil, 0, false, err
	}
	if budget <= 0 || slots <= 0 {
		return nil, 0, false, fmt.Errorf("ooc: dynprog needs a positive budget and slot count, got %d bytes in %d slots", budget, slots)
	}
	dc := discretize(c, budget, slots)
	off, ok = dc.solve()
	if !ok {
		return nil, 0, false, nil
	}
	return off, time.Duration(float64(dc.best) / dc.scale / c.Beta * float64(time.Second)), true, nil
}

// discrete is a chain in slots: every size and every u*beta in units of
// budget/S bytes.
type discrete struct {
	c              *Chain
	s              int64
	scale          float64 // slots per byte
	x, y           []int64 // i = 0..L+1
	uF, uB         []int64 // i = 0..L, in slots of data the link moves meanwhile
	exF, exB       []int64
	best           int64 // the last solve's total idle, in slots
	clampF, clampB int64
	keep           []bool // x_i may not be offloaded (the transfer cap), if set
}

func discretize(c *Chain, budget int64, slots int) *discrete {
	l := c.L()
	d := &discrete{c: c, s: int64(slots), scale: float64(slots) / float64(budget),
		x: make([]int64, l+2), y: make([]int64, l+2), uF: make([]int64, l+1), uB: make([]int64, l+1),
		exF: make([]int64, l+1), exB: make([]int64, l+1)}
	up := func(b int64) int64 { return int64(math.Ceil(float64(b) * d.scale)) }
	for i := 0; i <= l; i++ {
		d.exF[i], d.exB[i] = up(c.ExF[i]), up(c.ExB[i])
	}
	for i := range d.y {
		d.y[i] = up(c.Y[i])
	}
	// Partial sums of u*beta rounded down, of sizes rounded up.
	partial := func(u []time.Duration) []int64 {
		out := make([]int64, len(u))
		var sum, prev float64
		for i, t := range u {
			sum += t.Seconds() * c.Beta
			next := math.Floor(sum * d.scale)
			out[i] = int64(next - prev)
			prev = next
		}
		return out
	}
	d.uF, d.uB = partial(c.UF), partial(c.UB)
	var sum int64
	var prev int64
	for i, b := range c.X {
		sum += b
		next := up(sum)
		d.x[i] = next - prev
		prev = next
	}
	var totX, totF, totB int64
	for i := range d.x {
		totX += d.x[i]
	}
	for i := 0; i <= l; i++ {
		totF += d.uF[i]
		totB += d.uB[i]
	}
	// Below these, idle link time makes no difference (see solve).
	d.clampF, d.clampB = -(totF + totX + 1), -(totB + totX + 1)
	return d
}

// grow adds one slot to the rounded activation size that is below its true
// size and closest to it; false if none is below.
func (d *discrete) grow() bool {
	best, gap := -1, math.Inf(1)
	for i := 1; i < len(d.x); i++ {
		short := float64(d.c.X[i])*d.scale - float64(d.x[i])
		if short > 0 && short < gap {
			best, gap = i, short
		}
	}
	if best < 0 {
		return false
	}
	d.x[best]++
	return true
}

// tighten lowers the program's memory by over bytes (at least one slot);
// false when nothing would be left.
func (d *discrete) tighten(over int64) bool {
	cut := max(int64(math.Ceil(float64(over)*d.scale)), 1)
	if cut >= d.s {
		return false
	}
	d.s -= cut
	return true
}

type dpKey struct{ mF, dF, dB int32 }

func (a dpKey) cmp(b dpKey) int {
	if c := cmp.Compare(a.mF, b.mF); c != 0 {
		return c
	}
	if c := cmp.Compare(a.dF, b.dF); c != 0 {
		return c
	}
	return cmp.Compare(a.dB, b.dB)
}

type dpEntry struct {
	idle int64
	from dpKey
	off  bool
}

// solve runs Algorithm 1: per stage i a table from (M_F, Delta_F, Delta_B)
// to the least idle time reaching it, forward and backward phases advanced
// together (equations 1-8), then the idle time between the phases
// (equations 9 and 10), and a backtrack to the offload decisions.
func (d *discrete) solve() ([]bool, bool) {
	l := d.c.L()
	S := d.s
	tables := make([]map[dpKey]dpEntry, l+2)
	tables[0] = map[dpKey]dpEntry{{mF: int32(d.x[0])}: {}}
	put := func(tab map[dpKey]dpEntry, k dpKey, e dpEntry) {
		old, ok := tab[k]
		if !ok || e.idle < old.idle || e.idle == old.idle && (e.from.cmp(old.from) < 0 || e.from == old.from && !e.off) {
			tab[k] = e
		}
	}
	for i := 0; i <= l; i++ {
		next := make(map[dpKey]dpEntry, len(tables[i]))
		// put's tie-break makes the tables independent of map order.
		for k, e := range tables[i] {
			mF, dF, dB := int64(k.mF), int64(k.dF), int64(k.dB)
			dFp, dBp := max(dF, 0), max(dB, 0)
			mB := d.y[i] + dBp + mF - dFp
			if mF-dFp+d.exF[i]+d.x[i+1] > S || mB-dBp+d.exB[i]+d.x[i+1]+d.y[i+1] > S {
				continue
			}
			epsF := max(0, mF+d.exF[i]+d.x[i+1]-S)
			epsB := max(0, mB+d.exB[i]+d.x[i+1]+d.y[i+1]-S)
			idle := e.idle + epsF + epsB
			movedF, movedB := epsF+d.uF[i], epsB+d.uB[i]
			if d.x[i] > 0 && d.c.X[i] > 0 && (d.keep == nil || !d.keep[i]) {
				put(next, d.key(mF+d.x[i+1]-min(dFp+d.x[i], movedF), dFp+d.x[i]-movedF, d.x[i]+max(0, dB-movedB)),
					dpEntry{idle: idle, from: k, off: true})
			}
			put(next, d.key(mF+d.x[i+1]-min(dFp, movedF), dF-movedF, dB-movedB), dpEntry{idle: idle, from: k})
		}
		tables[i+1] = next
	}
	final := tables[l+1]
	if len(final) == 0 {
		return nil, false
	}
	// Suffix sums for equations 9 and 10.
	uBAfter := make([]int64, l+1) // U_j^B = sum_{i>j} uB_i
	uFAfter := make([]int64, l+1)
	xAfter := make([]int64, l+3) // sum_{i>=j} x_i
	for j := l + 1; j >= 0; j-- {
		xAfter[j] = xAfter[j+1] + d.x[j]
	}
	for j := l - 1; j >= 0; j-- {
		uBAfter[j] = uBAfter[j+1] + d.uB[j+1]
		uFAfter[j] = uFAfter[j+1] + d.uF[j+1]
	}
	gap := func(k dpKey) int64 {
		mF, dF, dB := int64(k.mF), int64(k.dF), int64(k.dB)
		switch {
		case dF <= 0 && dB <= 0:
			return 0
		case dF > 0 && dB > 0:
			return dF + dB
		case dF > 0: // offloads still running when the backward starts
			av := -dB
			g := max(0, dF-av)
			for j := l; j >= 0 && uBAfter[j] < av; j-- {
				r := d.exB[j] + d.y[j] + d.y[j+1] - xAfter[j+2]
				g = max(g, r+mF-S-uBAfter[j])
			}
			return g
		default: // prefetches starting before the forward ends
			av := -dF
			mB := dB + mF
			g := max(0, dB-av)
			for j := l; j >= 0 && uFAfter[j] < av; j-- {
				r := d.exF[j] - xAfter[j+2]
				g = max(g, r+mB-S-uFAfter[j])
			}
			return g
		}
	}
	var bestKey dpKey
	d.best = -1
	for _, k := range sortedKeys(final) {
		if total := final[k].idle + gap(k); d.best < 0 || total < d.best {
			d.best, bestKey = total, k
		}
	}
	off := make([]bool, l+1)
	k := bestKey
	for i := l + 1; i > 0; i-- {
		e := tables[i][k]
		off[i-1] = e.off
		k = e.from
	}
	return off, true
}

// key clamps the Delta values below which the link's idle time no longer
// matters (they only enter the program through max(0, Delta) and through
// the waits of equations 9 and 10, which saturate there).
func (d *discrete) key(mF, dF, dB int64) dpKey {
	return dpKey{mF: int32(mF), dF: int32(max(dF, d.clampF)), dB: int32(max(dB, d.clampB))}
}

func sortedKeys(m map[dpKey]dpEntry) []dpKey {
	keys := make([]dpKey, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, dpKey.cmp)
	return keys
}
