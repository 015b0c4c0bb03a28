package layers

import (
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/gorgonia-ooc/outofcore/blas"
)

// Every index runs exactly once, whatever the split; nested calls (a chunk that calls
// parallelFor) finish too.
func TestParallelForCoversOnce(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 7, 64, 1000} {
		counts := make([]atomic.Int32, n)
		parallelFor(n, 1<<20, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				parallelFor(3, 1<<20, func(a, b int) {
					for k := a; k < b; k++ {
						counts[i].Add(1)
					}
				})
			}
		})
		for i := range counts {
			if c := counts[i].Load(); c != 3 {
				t.Fatalf("n=%d: index %d ran %d times, want 3 (once, with 3 inner)", n, i, c)
			}
		}
	}
}

// A panic in a chunk run by a helper comes back on the caller (where the VM recovers it into an
// error) after the other chunks have finished, instead of ending the process.
func TestParallelForPanicReachesCaller(t *testing.T) {
	if min(runtime.NumCPU(), blas.Workers()) < 2 {
		t.Skip("one worker: every chunk runs on the caller")
	}
	var done atomic.Int32
	got := func() (r any) {
		defer func() { r = recover() }()
		parallelFor(2, 1<<20, func(lo, hi int) {
			if lo > 0 {
				panic("boom in a helper's chunk")
			}
			done.Add(1)
		})
		return nil
	}()
	if got != "boom in a helper's chunk" {
		t.Fatalf("recovered %v, want the helper's panic", got)
	}
	if done.Load() != 1 {
		t.Errorf("the caller's chunk ran %d times", done.Load())
	}
	// The pool still works afterwards.
	var sum atomic.Int64
	parallelFor(4, 1<<20, func(lo, hi int) { sum.Add(int64(hi - lo)) })
	if sum.Load() != 4 {
		t.Errorf("after a panic: %d indices run, want 4", sum.Load())
	}
}
