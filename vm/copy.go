package vm

import (
	"time"

	"github.com/gorgonia-ooc/outofcore/internal/freelist"
)

// copyEngine is one DMA engine: a goroutine that performs copies in the
// order they were submitted, as a GPU's host-to-device and device-to-host
// engines do. Two engines let a swap-in and a swap-out overlap each other and
// compute.
type copyEngine struct {
	jobs chan copyJob
	done chan struct{}
	// spare are events that have fired and been waited for, for submit to use again: a new
	// event (and its channel) per copy were two heap allocations per swap. Only the machine's
	// goroutine, which submits and waits, touches it.
	spare freelist.List[copyEvent]
}

type copyJob struct {
	dst, src []byte
	ev       *copyEvent
}

// copyEvent tells compute that a copy has landed: the engine sends one value on done, which
// wait receives.
type copyEvent struct {
	done chan struct{}
}

func newCopyEngine() *copyEngine {
	e := &copyEngine{jobs: make(chan copyJob, 1024), done: make(chan struct{})}
	go e.run()
	return e
}

func (e *copyEngine) run() {
	defer close(e.done)
	for j := range e.jobs {
		copy(j.dst, j.src)
		j.ev.done <- struct{}{}
	}
}

// submit queues a copy; the slices must stay untouched until the event fires.
func (e *copyEngine) submit(dst, src []byte) *copyEvent {
	ev := e.spare.Get()
	if ev.done == nil {
		ev.done = make(chan struct{}, 1)
	}
	e.jobs <- copyJob{dst: dst, src: src, ev: ev}
	return ev
}

// reuse takes back an event of this engine that wait has returned for: its one signal is
// consumed, so it is as new.
func (e *copyEngine) reuse(ev *copyEvent) {
	e.spare.Put(ev)
}

func (e *copyEngine) stop() {
	close(e.jobs)
	<-e.done
}

// wait blocks until the copy has landed and says how long that took. It is called once per
// event and submission.
func (ev *copyEvent) wait() time.Duration {
	select {
	case <-ev.done:
		return 0
	default:
	}
	t := time.Now()
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
