package vm

import (
	"bytes"
	"testing"
)

// TestCopyEventsReused: a copy engine's events are reused once waited for, so a steady loop
// of swaps allocates nothing, and every copy still lands before its wait returns.
func TestCopyEventsReused(t *testing.T) {
	e := newCopyEngine()
	defer e.stop()
	src := []byte("the quick brown fox jumps over the lazy dog")
	dst := make([][]byte, 3)
	for i := range dst {
		dst[i] = make([]byte, len(src))
	}
	round := 0
	step := func() {
		round++
		for i := range src {
			src[i] = byte(round + i)
		}
		evs := [3]*copyEvent{}
		for i := range evs {
			evs[i] = e.submit(dst[i], src)
		}
		for i, ev := range evs {
			ev.wait()
			if !bytes.Equal(dst[i], src) {
				t.Fatalf("round %d: copy %d not landed when its wait returned", round, i)
			}
			e.reuse(ev)
		}
	}
	step()
	if allocs := testing.AllocsPerRun(50, step); allocs != 0 {
		t.Errorf("a round of three copies makes %.1f heap allocations, want 0", allocs)
	}
}
