package vm

import (
	"sync/atomic"
	"time"
)

// copyEngine is one DMA engine: a goroutine that starts copies in the order
// they were submitted, as a GPU's host-to-device and device-to-host engines
// do. Two engines let a swap-in and a swap-out overlap each other and
// compute.
//
// Unlike a DMA engine, this one is a CPU core: while compute waits for a
// copy (a swap-in needed now, or a swap-out whose memory is needed now) its
// core would idle, so the waiter copies the pieces the engine has not taken
// yet. A copy is cut into pieces of copyPiece bytes or more for that.
type copyEngine struct {
	jobs  chan *copyEvent
	done  chan struct{}
	piece int // the least piece of a copy one core takes at a time
	// spare are events that have been waited for, for submit to use again once the engine
	// has passed them too: a new event (and its channel) per copy were two heap allocations
	// per swap. Only the machine's goroutine, which submits and waits, touches the list.
	spare []*copyEvent
}

// copyPiece is the least piece of a copy one core takes at a time. Go's
// memmove streams copies of 1 MiB and more past the cache (non-temporal
// stores), as a DMA engine's land in memory, and smaller pieces would not.
var copyPiece = 1 << 20

// copyEvent is one copy, and tells compute that it has landed: whoever
// copies its last piece sends one value on done, which wait receives.
type copyEvent struct {
	dst, src []byte
	piece    int // bytes in each piece; the last may be shorter
	pieces   int32
	next     atomic.Int32 // the next piece to take
	left     atomic.Int32 // pieces not yet copied
	// passed is set once the engine has taken its last look at the event: a
	// waiter may have copied every piece before the engine came to it.
	passed atomic.Bool
	done   chan struct{}
}

func newCopyEngine(piece int) *copyEngine {
	e := &copyEngine{jobs: make(chan *copyEvent, 1024), done: make(chan struct{}), piece: piece}
	go e.run()
	return e
}

func (e *copyEngine) run() {
	defer close(e.done)
	for ev := range e.jobs {
		ev.work()
		ev.passed.Store(true)
	}
}

// submit queues a copy; the slices must stay untouched until the event fires.
func (e *copyEngine) submit(dst, src []byte) *copyEvent {
	ev := e.spareEvent()
	n := len(src)
	pieces := max(1, n/e.piece)
	ev.dst, ev.src, ev.piece, ev.pieces = dst[:n], src, (n+pieces-1)/pieces, int32(pieces)
	ev.next.Store(0)
	ev.left.Store(ev.pieces)
	e.jobs <- ev
	return ev
}

// spareEvent takes an event off the spare list that the engine is done
// with, or makes one.
func (e *copyEngine) spareEvent() *copyEvent {
	for i, ev := range e.spare {
		if ev.passed.Load() {
			last := len(e.spare) - 1
			e.spare[i] = e.spare[last]
			e.spare[last] = nil
			e.spare = e.spare[:last]
			ev.passed.Store(false)
			return ev
		}
	}
	return &copyEvent{done: make(chan struct{}, 1)}
}

// reuse takes back an event of this engine that wait has returned for: its
// one signal is consumed, so once the engine has passed it, it is as new.
func (e *copyEngine) reuse(ev *copyEvent) {
	ev.dst, ev.src = nil, nil
	e.spare = append(e.spare, ev)
}

func (e *copyEngine) stop() {
	close(e.jobs)
	<-e.done
}

// work copies pieces of the event's copy until none is left to take; the
// one that copies the last piece signals the event.
func (ev *copyEvent) work() {
	for {
		p := ev.next.Add(1) - 1
		if p >= ev.pieces {
			return
		}
		lo, hi := int(p)*ev.piece, min(int(p+1)*ev.piece, len(ev.src))
		copy(ev.dst[lo:hi], ev.src[lo:hi])
		if ev.left.Add(-1) == 0 {
			ev.done <- struct{}{}
		}
	}
}

// wait blocks until the copy has landed, copying pieces the engine has not
// taken yet meanwhile, and says how long that took. It is called once per
// event and submission.
func (ev *copyEvent) wait() time.Duration {
	select {
	case <-ev.done:
		return 0
	default:
	}
	t := time.Now()
	ev.work()
	<-ev.done
	return time.Since(t)
}

// hostPool recycles host buffers for swapped-out data across steps, so a
// steady training loop allocates none.
type hostPool struct {
	free map[int][][]byte
}

func (p *hostPool) get(n int) []byte {
	if l := p.free[n]; len(l) > 0 {
		b := l[len(l)-1]
		p.free[n] = l[:len(l)-1]
		return b
	}
	return make([]byte, n)
}

func (p *hostPool) put(b []byte) {
	p.free[len(b)] = append(p.free[len(b)], b)
}
