package ooc

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorgonia-ooc/outofcore/models"
)

// planWindow answers its questions about the variable-sequence (where each
// window ends, whether it holds a variable, what to prefetch) with a
// seqIndex, by binary search, where it walked every window; the plans
// must not change. planWindowReference is the walking planner as it was
// at commit e23f40f: both plan small models' traces, and a trace with
// recomputes, at budgets across each one's range, with every release rule
// and windows from one smaller than any function to the automatic mode's
// largest, with and without a transfer cap's choice of variables.
func TestWindowIndexMatchesWalk(t *testing.T) {
	cases := []struct {
		model string
		cfg   models.Config
	}{
		{"smallcnn", models.Config{Batch: 8, Channels: 3, Height: 16, Width: 16, Classes: 4, Seed: 7}},
		{"lstm", models.Config{Batch: 2, SeqLen: 5, Vocab: 24, Hidden: 8, Seed: 7}},
		{"unet", models.Config{Batch: 1, Channels: 3, Height: 32, Width: 32, Classes: 2, Seed: 7}},
		{"resnet18", models.Config{Batch: 2, Channels: 3, Height: 32, Width: 32, Classes: 4, Seed: 7}},
	}
	for _, c := range cases {
		m, err := models.Build(c.model, c.cfg)
		require.NoError(t, err)
		tr, err := NewTrace(m.Graph)
		require.NoError(t, err)
		traces := map[string]*Trace{"plain": tr}
		if segs := segmentations(tr); len(segs) > 2 {
			r, err := tr.withRecompute(segs[len(segs)/2])
			require.NoError(t, err)
			traces["recompute"] = r.Trace
		}
		for name, tr := range traces {
			t.Run(c.model+"/"+name, func(t *testing.T) {
				need, _ := tr.MaxNeed()
				swapIns := 0
				peak, err := tracePeak(tr)
				require.NoError(t, err)
				for _, pct := range []int64{0, 30, 80} {
					budget := need + (peak-need)*pct/100
					for _, rule := range []release{releaseOldest, releaseFurthest, releaseFit, releaseCapped} {
						for _, w := range []int64{1, budget / 2, AutoWindow(budget), 4 * budget, 16 * budget} {
							for _, allowed := range []capAllowed{nil, func(v int) bool { return v%3 != 0 }} {
								want, wantErr := planWindowReference(tr, budget, w, rule, allowed)
								got, err := planWindow(tr, budget, w, rule, allowed)
								at := fmt.Sprintf("budget %d (%d%%), rule %d, window %d, capped %v", budget, pct, rule, w, allowed != nil)
								require.Equal(t, fmt.Sprint(wantErr), fmt.Sprint(err), at)
								require.Equal(t, want, got, at)
								if got != nil {
									for _, in := range got.SwapIn {
										swapIns += len(in)
									}
								}
							}
						}
					}
				}
				require.Positive(t, swapIns, "no plan swapped anything in: the comparison covered nothing of the window's prefetch")
			})
		}
	}
}

func planWindowReference(t *Trace, B, W int64, rule release, allowed capAllowed) (*Schedule, error) {
	n, nv := len(t.Funcs), len(t.Vars)
	s := NewSchedule(n)
	res := make([]bool, nv)    // holds device memory
	onHost := make([]bool, nv) // a host copy exists (swap-out issued)
	queued := make([]bool, nv) // swap-out issued, memory not yet released
	var fifo []int             // queued variables, oldest first (may hold cancelled entries)
	var live int64
	size := t.DeviceBytes

	// windowEnd is e_i + 1: the exclusive end in Seq of f_i's window.
	windowEnd := func(i int) int {
		var sum int64
		k := t.Start[i]
		for ; k < len(t.Seq); k++ {
			sum += size(t.Seq[k])
			if sum > W && k >= t.Start[i+1] {
				break
			}
		}
		return k
	}
	var future []int64 // future[i]: the most any f_k, k >= i, needs in-core
	if rule == releaseCapped {
		need, err := execNeeds(t, baseline{}.plan(t))
		if err != nil {
			return nil, err
		}
		future = make([]int64, n+1)
		for i := n - 1; i >= 0; i-- {
			future[i] = max(future[i+1], need[i])
		}
	}
	var off int64 // bytes released and not swapped back in
	// release completes one pending swap-out at f_i, where missing bytes
	// are still over the budget, by the rule; false when none is pending.
	release := func(i int, missing int64) bool {
		// One pass finds each rule's candidate; a next use of -1 (none) is
		// the furthest of all.
		oldest, fit, first, furthest, far := -1, -1, -1, -1, -1
		for k, v := range fifo {
			if !queued[v] {
				continue
			}
			if oldest < 0 {
				oldest = k
			}
			if sz := size(v); sz >= missing && (fit < 0 || sz < size(fifo[fit])) {
				fit = k
			}
			switch rule {
			case releaseCapped:
				if off+size(v) <= future[i]-B && (first < 0 || t.Vars[v].Producer < t.Vars[fifo[first]].Producer) {
					first = k
				}
			case releaseFurthest:
				if far >= 0 || furthest < 0 {
					if nu := t.NextUse(v, i-1); furthest < 0 || nu < 0 || nu > far {
						furthest, far = k, nu
					}
				}
			}
		}
		at := oldest
		switch {
		case rule == releaseCapped && first >= 0:
			at = first
		case rule == releaseFurthest:
			at = furthest
		case (rule == releaseCapped || rule == releaseFit) && fit >= 0:
			at = fit
		}
		if at < 0 {
			fifo = fifo[:0]
			return false
		}
		v := fifo[at]
		fifo = append(fifo[:at], fifo[at+1:]...)
		queued[v], res[v] = false, false
		live -= size(v)
		off += size(v)
		s.Release[i] = append(s.Release[i], v)
		return true
	}
	inV := make([]int, nv) // inV[v] == i+1 when v is in V(f_i)
	for i, f := range t.Funcs {
		for _, v := range t.V(i) {
			inV[v] = i + 1
		}
		end := windowEnd(i)
		// Step 1: what f_i reads must be on the device; anything in the
		// window keeps its memory.
		for k := t.Start[i]; k < end; k++ {
			if v := t.Seq[k]; queued[v] {
				queued[v] = false
			}
		}
		for _, v := range f.Inputs {
			if size(v) > 0 && !res[v] {
				s.SwapIn[i] = append(s.SwapIn[i], v)
				res[v] = true
				live += size(v)
				off -= size(v)
			}
		}
		// Step 2: make room for the output and workspace.
		newBytes := size(f.Output)
		if f.InPlace >= 0 {
			newBytes = 0 // the output takes over its operand's memory
		}
		need := func() int64 { return live + newBytes + f.Transient() }
		for need() > B {
			if release(i, need()-B) {
				continue
			}
			victim := -1
			far := -1
			for v := 0; v < nv; v++ {
				if !res[v] || inV[v] == i+1 || i == 0 || !allowed.ok(v) {
					continue
				}
				nu := t.NextUse(v, i-1)
				if nu < 0 {
					continue
				}
				if nu > far {
					victim, far = v, nu
				}
			}
			if victim < 0 {
				return nil, &BudgetError{Func: f.Node.Name(), Index: i, Need: need(), Budget: B}
			}
			if !onHost[victim] {
				s.SwapOut[i-1] = append(s.SwapOut[i-1], victim)
				onHost[victim] = true
			}
			res[victim] = false
			live -= size(victim)
			off += size(victim)
			s.Release[i] = append(s.Release[i], victim)
		}
		// Step 1, continued: prefetch the rest of the window while it fits.
		for k := t.Start[i+1]; k < end; k++ {
			v := t.Seq[k]
			if res[v] || !onHost[v] || size(v) == 0 {
				continue
			}
			for need()+size(v) > B && release(i, need()+size(v)-B) {
			}
			if need()+size(v) > B {
				break
			}
			s.SwapIn[i] = append(s.SwapIn[i], v)
			res[v] = true
			live += size(v)
			off -= size(v)
		}
		// f_i runs.
		res[f.Output] = true
		live += newBytes
		if f.InPlace >= 0 {
			res[f.InPlace], queued[f.InPlace] = false, false
		}
		// Step 3: free what is dead, reserve swap-outs for what is needed
		// only beyond the next window.
		nextStart, nextEnd := 0, 0
		if i+1 < n {
			nextStart, nextEnd = t.Start[i+1], windowEnd(i+1)
		}
		inNext := func(v int) bool {
			for k := nextStart; k < nextEnd; k++ {
				if t.Seq[k] == v {
					return true
				}
			}
			return false
		}
		for _, v := range t.V(i) {
			if !res[v] || size(v) == 0 {
				continue
			}
			if t.Last[v] == i {
				res[v], queued[v] = false, false
				live -= size(v)
				continue
			}
			if queued[v] || inNext(v) || !allowed.ok(v) {
				continue
			}
			s.SwapOut[i] = append(s.SwapOut[i], v)
			onHost[v], queued[v] = true, true
			fifo = append(fifo, v)
		}
	}
	dropUnreleasedSwapOuts(t, s)
	s.Window = W
	return s, nil
}
