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
}

// copyPiece is the least piece of a copy one core takes at a time. Go's
// memmove streams copies of 1 MiB and more past the cache (non-temporal
// stores), as a DMA engine's land in memory, and smaller pieces would not.
var copyPiece = 1 << 20

// copyEvent is one copy, and tells compute that it has landed.
type copyEvent struct {
	dst, src []byte
	piece    int // bytes in each piece but the last
	pieces   int32
	next     atomic.Int32 // the next piece to take
	left     atomic.Int32 // pieces not yet copied
	done     chan struct{}
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
	}
}

// submit queues a copy; the slices must stay untouched until the event fires.
func (e *copyEngine) submit(dst, src []byte) *copyEvent {
	n := len(src)
	pieces := max(1, n/e.piece)
	ev := &copyEvent{dst: dst[:n], src: src, piece: (n + pieces - 1) / pieces, pieces: int32(pieces), done: make(chan struct{})}
	ev.left.Store(ev.pieces)
	e.jobs <- ev
	return ev
}

func (e *copyEngine) stop() {
	close(e.jobs)
	<-e.done
}

// work copies pieces of the event's copy until none is left to take; the
// one that copies the last piece fires the event.
func (ev *copyEvent) work() {
	for {
		p := ev.next.Add(1) - 1
		if p >= ev.pieces {
			return
		}
		lo, hi := int(p)*ev.piece, min(int(p+1)*ev.piece, len(ev.src))
		copy(ev.dst[lo:hi], ev.src[lo:hi])
		if ev.left.Add(-1) == 0 {
			close(ev.done)
		}
	}
}

// wait blocks until the copy has landed, copying pieces the engine has not
// taken yet meanwhile, and says how long that took.
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
