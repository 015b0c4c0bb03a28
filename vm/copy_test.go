package vm

import (
	"bytes"
	"fmt"
	"runtime"
	"sync"
	"testing"
)

// TestCopyEngineWaiterHelps checks that every copy lands whole, whether the
// engine copies it alone or a waiter takes some of its pieces: sizes around
// the piece size, and many copies queued behind each other with waiters on
// other goroutines (run it with -race).
func TestCopyEngineWaiterHelps(t *testing.T) {
	defer func(p int) { copyPiece = p }(copyPiece)
	copyPiece = 4 << 10
	for _, n := range []int{0, 1, 4<<10 - 1, 4 << 10, 4<<10 + 1, 3*4<<10 + 17, 64 << 10, 1<<20 + 3} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			e := newCopyEngine(copyPiece)
			defer e.stop()
			const copies = 16
			src := make([][]byte, copies)
			dst := make([][]byte, copies)
			evs := make([]*copyEvent, copies)
			for i := range src {
				src[i] = make([]byte, n)
				for j := range src[i] {
					src[i][j] = byte(i*7 + j*13 + j>>8)
				}
				dst[i] = make([]byte, n)
				evs[i] = e.submit(dst[i], src[i])
			}
			// Waited for out of order, half from other goroutines, so waiters
			// and the engine take pieces of the same copies.
			var wg sync.WaitGroup
			for i := copies - 1; i >= 0; i-- {
				if i%2 == 0 {
					evs[i].wait()
					continue
				}
				wg.Add(1)
				go func(ev *copyEvent) { defer wg.Done(); ev.wait() }(evs[i])
			}
			wg.Wait()
			for i := range src {
				if !bytes.Equal(dst[i], src[i]) {
					t.Fatalf("copy %d of %d bytes differs after its wait", i, n)
				}
			}
		})
	}
}

// TestCopyEventPieces checks how copies are cut: pieces of copyPiece bytes
// or more, as even as may be, covering the copy once.
func TestCopyEventPieces(t *testing.T) {
	defer func(p int) { copyPiece = p }(copyPiece)
	copyPiece = 1 << 20
	for _, c := range []struct{ n, pieces, piece int }{
		{0, 1, 0}, {5, 1, 5}, {1<<20 - 1, 1, 1<<20 - 1}, {1 << 20, 1, 1 << 20},
		{3211264, 3, 1070422}, {4 << 20, 4, 1 << 20}, {4<<20 + 1, 4, 1<<20 + 1},
	} {
		e := newCopyEngine(copyPiece)
		ev := e.submit(make([]byte, c.n), make([]byte, c.n))
		ev.wait()
		e.stop()
		if int(ev.pieces) != c.pieces || ev.piece != c.piece {
			t.Errorf("%d bytes: %d pieces of %d, want %d of %d", c.n, ev.pieces, ev.piece, c.pieces, c.piece)
		}
		if ev.pieces > 1 && ev.piece < copyPiece {
			t.Errorf("%d bytes: piece %d is under copyPiece", c.n, ev.piece)
		}
	}
}

// TestCopyEventsReused: a copy engine's events are reused once waited for, so a steady loop
// of swaps allocates nothing, and every copy still lands before its wait returns.
func TestCopyEventsReused(t *testing.T) {
	e := newCopyEngine(copyPiece)
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
		// An event is used again once the engine has passed it too; the
		// engine may still be taking its last look (a few instructions) when
		// a wait returns, which would cost a new event now and then.
		for _, ev := range evs {
			for !ev.passed.Load() {
				runtime.Gosched()
			}
		}
	}
	step()
	if allocs := testing.AllocsPerRun(50, step); allocs != 0 {
		t.Errorf("a round of three copies makes %.1f heap allocations, want 0", allocs)
	}
}
