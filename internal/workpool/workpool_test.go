package workpool

import (
	"sync/atomic"
	"testing"
)

// countJob counts each item's runs and flags two goroutines sharing a worker number.
type countJob struct {
	runs   []atomic.Int32
	busy   []atomic.Int32 // per worker: goroutines inside Run now
	shared atomic.Bool
	inner  int // if > 0, each item runs a nested call of this many items
}

func (j *countJob) Run(item, worker int) {
	if j.busy[worker].Add(1) != 1 {
		j.shared.Store(true)
	}
	j.runs[item].Add(1)
	if j.inner > 0 {
		in := &countJob{runs: make([]atomic.Int32, j.inner), busy: make([]atomic.Int32, 2)}
		Run(2, j.inner, in)
		for i := range in.runs {
			if in.runs[i].Load() != 1 {
				j.shared.Store(true)
			}
		}
	}
	j.busy[worker].Add(-1)
}

func TestRunEveryItemOnce(t *testing.T) {
	for _, tc := range []struct{ workers, n, inner int }{
		{1, 5, 0}, {2, 1, 0}, {2, 1000, 0}, {4, 37, 0}, {3, 0, 0}, {2, 50, 20}, {4, 8, 300},
	} {
		j := &countJob{runs: make([]atomic.Int32, tc.n), busy: make([]atomic.Int32, max(tc.workers, 1)), inner: tc.inner}
		Run(tc.workers, tc.n, j)
		for i := range j.runs {
			if got := j.runs[i].Load(); got != 1 {
				t.Fatalf("%+v: item %d ran %d times", tc, i, got)
			}
		}
		if j.shared.Load() {
			t.Fatalf("%+v: two goroutines ran with one worker number at once, or a nested call missed items", tc)
		}
	}
}

type nopJob struct{}

func (nopJob) Run(int, int) {}

// TestRunAllocatesNothing: once helpers exist, a call allocates nothing (the point of the package).
func TestRunAllocatesNothing(t *testing.T) {
	j := nopJob{}
	for i := 0; i < 100; i++ {
		Run(2, 64, j)
	}
	if a := testing.AllocsPerRun(200, func() { Run(2, 64, j) }); a > 0.1 {
		t.Errorf("Run allocates %.2f times per call", a)
	}
}

// TestLateHelpersStayOut: many short calls in a row, so helpers invited to one call often
// arrive after it has closed (and its team serves the next call): each call still runs each of
// its items once, with no worker number shared.
func TestLateHelpersStayOut(t *testing.T) {
	for i := 0; i < 3000; i++ {
		j := &countJob{runs: make([]atomic.Int32, 1+i%5), busy: make([]atomic.Int32, 4)}
		Run(4, len(j.runs), j)
		for k := range j.runs {
			if got := j.runs[k].Load(); got != 1 {
				t.Fatalf("call %d: item %d ran %d times", i, k, got)
			}
		}
		if j.shared.Load() {
			t.Fatalf("call %d: two goroutines ran with one worker number at once", i)
		}
	}
}

type panicJob struct{ ran []atomic.Int32 }

func (j *panicJob) Run(item, _ int) {
	j.ran[item].Add(1)
	if item == 3 {
		panic("item 3")
	}
}

// TestPanicReachesCaller: an item's panic, on whichever goroutine, comes back on the caller
// after every worker has stopped, no item runs twice, and the pool works afterwards.
func TestPanicReachesCaller(t *testing.T) {
	for i := 0; i < 200; i++ {
		j := &panicJob{ran: make([]atomic.Int32, 64)}
		got := func() (r any) {
			defer func() { r = recover() }()
			Run(4, len(j.ran), j)
			return nil
		}()
		if got != "item 3" {
			t.Fatalf("call %d: recovered %v, want item 3's panic", i, got)
		}
		for k := range j.ran {
			if n := j.ran[k].Load(); n > 1 || (k <= 3 && n != 1) {
				t.Fatalf("call %d: item %d ran %d times", i, k, n)
			}
		}
	}
	j := &countJob{runs: make([]atomic.Int32, 8), busy: make([]atomic.Int32, 4)}
	Run(4, len(j.runs), j)
	for k := range j.runs {
		if got := j.runs[k].Load(); got != 1 {
			t.Fatalf("after the panics: item %d ran %d times", k, got)
		}
	}
}
