package ooc_test

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorgonia-ooc/outofcore/ooc"
)

// handChain is a chain of the paper's model with no extra memory and no y
// sizes: stage times in seconds and sizes in units of unit bytes, the link
// moving one unit per second.
func handChain(uf, ub []float64, x []int64, unit int64) *ooc.Chain {
	l := len(uf) - 1
	c := &ooc.Chain{
		UF: make([]time.Duration, l+1), UB: make([]time.Duration, l+1),
		X: make([]int64, l+2), Y: make([]int64, l+2), ExF: make([]int64, l+1), ExB: make([]int64, l+1),
		Beta: float64(unit), Var: make([]int, l+2),
	}
	for i := range uf {
		c.UF[i] = time.Duration(uf[i] * float64(time.Second))
		c.UB[i] = time.Duration(ub[i] * float64(time.Second))
	}
	for i := range x {
		c.X[i] = x[i] * unit
		c.Var[i] = -1
	}
	return c
}

// asSpec is the same chain as a graph for the exact simulator (buildChain):
// x_0 becomes the tiny leaf and size 0 the tiny tensor, unit is exactUnit
// bytes and one time unit exactUnit ns (the exact link moves 1 B/ns).
func asSpec(name string, uf, ub []float64, x []int64) chainSpec {
	s := chainSpec{Name: name}
	for i := range uf {
		s.UF = append(s.UF, time.Duration(uf[i]*float64(exactUnit)))
		s.UB = append(s.UB, time.Duration(ub[i]*float64(exactUnit)))
	}
	for _, b := range x {
		s.X = append(s.X, max(b*exactUnit, tinyBytes))
	}
	return s
}

// TestDynProgHandMadeChains: chains whose best ordered offloading is known
// by hand. The dynamic program finds it, with its idle time, and the
// schedule DynProg derives from it simulates to exactly that makespan.
func TestDynProgHandMadeChains(t *testing.T) {
	for _, tc := range []struct {
		name     string
		uf, ub   []float64
		x        []int64 // x_0..x_{L+1}, units
		budget   int64   // units
		wantOff  []int   // indices of the x to offload
		wantIdle float64 // time units
		why      string
	}{
		{
			name: "fits in core",
			uf:   []float64{0, 0, 0, 0, 0, 0}, ub: []float64{0, 0, 0, 0, 0, 0},
			x: []int64{0, 1, 4, 1, 1, 1, 0}, budget: 8,
			why: "the peak, 8 units, fits",
		},
		{
			name: "two small instead of one large",
			uf:   []float64{0, 0, 0, 0, 0, 0}, ub: []float64{0, 0, 0, 0, 0, 0},
			x: []int64{0, 1, 4, 1, 1, 1, 0}, budget: 6,
			wantOff: []int{1, 3}, wantIdle: 4,
			why: "2 units must go: x_1 before F_3 and x_3 before F_4 move 2 units out and back (4 time units " +
				"with no compute to hide them), where Greedy's prefix x_1, x_2 moves 5, and x_2 alone 4",
		},
		{
			name: "hidden behind compute",
			uf:   []float64{0, 2, 0, 0, 0}, ub: []float64{0, 0, 2, 0, 0},
			x: []int64{0, 2, 1, 1, 1, 0}, budget: 4,
			wantOff: []int{1},
			why: "x_1 copies out while F_1 runs and back while B_2 runs; x_2, the smaller, would make F_3 " +
				"and B_2 wait",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			unit := int64(1 << 20)
			c := handChain(tc.uf, tc.ub, tc.x, unit)
			// With no extra memory, M_peak is every x at once (at F_L).
			var all int64
			for _, b := range tc.x {
				all += b * unit
			}
			require.Equal(t, all, c.Peak())
			off, idle, ok, err := c.OffloadSet(tc.budget*unit, 500)
			require.NoError(t, err)
			require.True(t, ok)
			var got []int
			for i, o := range off {
				if o {
					got = append(got, i)
				}
			}
			require.Equal(t, tc.wantOff, got, tc.why)
			// The program's idle time is in whole slots of budget/500.
			slot := float64(tc.budget) / 500
			require.InDelta(t, tc.wantIdle, idle.Seconds(), float64(len(tc.x))*slot, tc.why)

			// The schedule DynProg makes of the same chain on the exact
			// simulator: compute plus exactly the idle time worked out by
			// hand.
			spec := asSpec(tc.name, tc.uf, tc.ub, tc.x)
			g := buildChain(t, spec)
			sim := exactSim(t)
			tr, err := ooc.NewTrace(g.g)
			require.NoError(t, err)
			// As in TestDynProgGadgets, 1% of the budget for the slots
			// the tiny stand-ins for size 0 take.
			budget := tc.budget*exactUnit*101/100 + g.tinySlack(tr)
			r, err := runChain(t, g, sim, budget, ooc.DynProg{})
			require.NoError(t, err)
			var compute time.Duration
			for i := range spec.UF {
				compute += spec.UF[i] + spec.UB[i]
			}
			require.Equal(t, compute+time.Duration(tc.wantIdle*float64(exactUnit)), r.stats.StepTime)
			_, err = ooc.Verify(r.prog, budget)
			require.NoError(t, err)
		})
	}
}

// TestDynProgGadgets: on the 2-partition gadget's YES instances DynProg
// finds a half (the dynamic program's optimum has no idle time) and its
// schedule simulates to exactly T; on the 3-partition instance whose parts
// are consecutive too. On the NO instances its makespan is above T, as every
// schedule's must be.
//
// The budget is M plus 1% of M: the program rounds every size up to whole
// slots of M/500, and the gadgets' stand-ins for size 0 (4-byte tensors)
// each become a slot. 1% of M is less than one unit of the instances, so it
// lets no other subset fit: the gadget is the same.
func TestDynProgGadgets(t *testing.T) {
	for _, tc := range []struct {
		spec  chainSpec
		exact bool
	}{
		{twoPartition([]int64{3, 1, 1, 2, 2, 1}, exactUnit), true},
		{twoPartition([]int64{2, 5, 1, 4, 3, 1}, exactUnit), true},
		{twoPartition([]int64{1, 2, 3, 2}, exactUnit), true},
		{threePartition([]int64{3, 3, 4, 2, 4, 4}, exactUnit), true},
		{twoPartition([]int64{2, 2, 2, 2, 2}, exactUnit), false},
		{twoPartition([]int64{3, 3, 3, 3, 4}, exactUnit), false},
	} {
		t.Run(tc.spec.Name, func(t *testing.T) {
			c := buildChain(t, tc.spec)
			sim := exactSim(t)
			tr, err := ooc.NewTrace(c.g)
			require.NoError(t, err)
			budget := c.budget(tr) + tc.spec.M/100
			require.Less(t, tc.spec.M/100, int64(exactUnit))
			r, err := runChain(t, c, sim, budget, ooc.DynProg{})
			require.NoError(t, err)
			_, err = ooc.Verify(r.prog, budget)
			require.NoError(t, err)
			if tc.exact {
				require.Equal(t, tc.spec.T, r.stats.StepTime)
			} else {
				require.Greater(t, r.stats.StepTime, tc.spec.T)
			}
			t.Logf("%s: makespan %v = %.3f T", tc.spec.Name, r.stats.StepTime, float64(r.stats.StepTime)/float64(tc.spec.T))
		})
	}
}

// TestDynProgRefusesBadInput: a malformed chain or budget is an error that
// says what is wrong.
func TestDynProgRefusesBadInput(t *testing.T) {
	c := handChain([]float64{0, 0}, []float64{0, 0}, []int64{0, 1, 0}, 1)
	for _, tc := range []struct {
		name  string
		chain *ooc.Chain
		bytes int64
		slots int
		want  string
	}{
		{"zero budget", c, 0, 500, "positive budget"},
		{"no slots", c, 10, 0, "positive budget and slot count"},
		{"short sizes", &ooc.Chain{UF: c.UF, UB: c.UB, ExF: c.ExF, ExB: c.ExB, X: c.X[:2], Y: c.Y, Var: c.Var, Beta: 1}, 10, 500, "data sizes"},
		{"no link", &ooc.Chain{UF: c.UF, UB: c.UB, ExF: c.ExF, ExB: c.ExB, X: c.X, Y: c.Y, Var: c.Var}, 10, 500, "bandwidth"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, _, err := tc.chain.OffloadSet(tc.bytes, tc.slots)
			require.ErrorContains(t, err, tc.want)
		})
	}
	_, err := ooc.DynProg{Slots: -1}.Plan(&ooc.Problem{})
	require.ErrorContains(t, err, fmt.Sprint(-1))
}

// TestLowerBoundOnRandomChains: over random chains (sizes, stage times and
// budgets), the lower bound is never above the simulated makespan of any
// planner, and DynProg's plan always passes the verifier.
func TestLowerBoundOnRandomChains(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	sim := exactSim(t)
	checked := 0
	for trial := 0; trial < 30; trial++ {
		l := 3 + rng.Intn(8)
		var uf, ub []float64
		x := []int64{0}
		for i := 0; i <= l; i++ {
			uf = append(uf, float64(rng.Intn(3)))
			ub = append(ub, float64(rng.Intn(4)))
			x = append(x, int64(1+rng.Intn(4)))
		}
		x[l+1] = 0
		spec := asSpec(fmt.Sprintf("random%d", trial), uf, ub, x)
		c := buildChain(t, spec)
		tr, err := ooc.NewTrace(c.g)
		require.NoError(t, err)
		peak, err := ooc.InCorePeak(c.g)
		require.NoError(t, err)
		budget := peak * int64(40+rng.Intn(61)) / 100
		lb, err := ooc.LowerBound(tr, sim, budget)
		require.NoError(t, err)
		for _, sc := range []ooc.Scheduler{ooc.Window{}, ooc.Greedy{}, ooc.DynProg{}, ooc.VDNN{}} {
			r, err := runChain(t, c, sim, budget, sc)
			if err != nil {
				continue // no schedule within this budget
			}
			_, err = ooc.Verify(r.prog, budget)
			require.NoError(t, err, sc.Name())
			require.LessOrEqual(t, lb, r.stats.StepTime, "%s on %v, budget %d of peak %d", sc.Name(), x, budget, peak)
			checked++
		}
	}
	require.Greater(t, checked, 60)
}
