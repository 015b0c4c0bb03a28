package cuda

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"unsafe"
)

// StreamKind names one of a device's three streams.
type StreamKind int

const (
	// Compute runs kernels.
	Compute StreamKind = iota
	// DeviceToHost runs swap-outs: copies from device memory into host buffers.
	DeviceToHost
	// HostToDevice runs swap-ins: copies from host buffers into device memory.
	HostToDevice
	numStreams
)

func (k StreamKind) String() string {
	switch k {
	case Compute:
		return "compute"
	case DeviceToHost:
		return "device-to-host"
	case HostToDevice:
		return "host-to-device"
	}
	return fmt.Sprintf("StreamKind(%d)", int(k))
}

// Stream is a CUDA stream of a device: a queue the GPU runs in order. The three streams
// are created non-blocking, so none of them waits for the legacy default stream; the
// only order between them is the events they wait for.
type Stream struct {
	d    *Device
	kind StreamKind
	h    uintptr // CUstream
}

// Stream returns one of the device's streams (nil for a kind that is not one).
func (d *Device) Stream(k StreamKind) *Stream {
	if k < 0 || k >= numStreams {
		return nil
	}
	return d.streams[k]
}

// Kind says which stream it is.
func (s *Stream) Kind() StreamKind { return s.kind }

var errNoStream = errors.New("cuda: no such stream")

// Synchronize makes the host wait until everything queued on the stream has run.
func (s *Stream) Synchronize() error {
	if s == nil || s.d == nil {
		return errNoStream
	}
	return s.d.do(func(drv *driver) error { return drv.check(fnStreamSynchronize, drv.call(fnStreamSynchronize, s.h)) })
}

// Record records a new event on the stream: it completes when the stream reaches it.
func (s *Stream) Record() (*Event, error) {
	if s == nil || s.d == nil {
		return nil, errNoStream
	}
	e, err := s.d.events.get(false)
	if err != nil {
		return nil, err
	}
	err = s.d.do(func(drv *driver) error { return recordOn(drv, e, s) })
	if err != nil {
		return nil, err
	}
	return e.handle(), nil
}

// Wait makes the stream wait, on the device, until e has completed: work queued on it
// afterwards runs only then. The host does not block (cuStreamWaitEvent).
func (s *Stream) Wait(e *Event) error {
	if s == nil || s.d == nil {
		return errNoStream
	}
	if err := e.valid(); err != nil {
		return err
	}
	return s.d.do(func(drv *driver) error { return waitOn(drv, s, e.ev) })
}

func recordOn(drv *driver, e *event, s *Stream) error {
	return drv.check(fnEventRecord, drv.call(fnEventRecord, e.h, s.h))
}

func waitOn(drv *driver, s *Stream, e *event) error {
	return drv.check(fnStreamWaitEvent, drv.call(fnStreamWaitEvent, s.h, e.h, 0))
}

// Event is a CUDA event recorded on a stream. Events come from a pool: one handed out is
// valid until the device's next EndStep, which recycles it; using it later is an error,
// except for CopyInNext's, which count as complete once recycled.
type Event struct {
	ev    *event
	gen   uint64 // the event's generation when handed out
	ahead bool   // a CopyInNext's: once recycled, its copy has landed
}

type event struct {
	d      *Device
	h      uintptr // CUevent
	timing bool
	gen    uint64 // bumped when recycled
}

func (e *event) handle() *Event { return &Event{ev: e, gen: e.gen} }

// landed reports whether e is a CopyInNext event that an EndStep has recycled. Such an
// event may be waited for by a machine whose next step comes after another machine's step
// on the device: the EndStep that recycled it waited for its copy, so it has landed, and
// waiting for it returns at once.
func (e *Event) landed() bool { return e != nil && e.ev != nil && e.ahead && e.gen != e.ev.gen }

func (e *Event) valid() error {
	if e == nil || e.ev == nil {
		return errors.New("cuda: nil event")
	}
	if e.gen != e.ev.gen {
		return errors.New("cuda: event used after the EndStep that recycled it")
	}
	return nil
}

// Done reports whether the event has completed, without waiting (cuEventQuery).
func (e *Event) Done() (bool, error) {
	if e.landed() {
		return true, nil
	}
	if err := e.valid(); err != nil {
		return false, err
	}
	done := false
	err := e.ev.d.do(func(drv *driver) error {
		r := drv.call(fnEventQuery, e.ev.h)
		if r == resultNotReady {
			return nil
		}
		done = r == resultSuccess
		return drv.check(fnEventQuery, r)
	})
	return done, err
}

// Wait makes the host wait until the event has completed (cuEventSynchronize). With the
// context's blocking synchronization the thread sleeps meanwhile.
func (e *Event) Wait() error {
	if e.landed() {
		return nil
	}
	if err := e.valid(); err != nil {
		return err
	}
	return e.ev.d.do(func(drv *driver) error { return drv.check(fnEventSynchronize, drv.call(fnEventSynchronize, e.ev.h)) })
}

// eventPool keeps a device's events for reuse: creating one costs a driver call, and a
// step records several per swap.
type eventPool struct {
	d      *Device
	mu     sync.Mutex
	closed bool
	free   [2][]*event // by timing
	all    []*event
	lent   []*event // handed out since the last recycle
	held   []*event // lent, but kept past the next recycle (hold)
}

func (p *eventPool) get(timing bool) (*event, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	t := 0
	if timing {
		t = 1
	}
	var e *event
	if n := len(p.free[t]); n > 0 {
		e, p.free[t] = p.free[t][n-1], p.free[t][:n-1]
	} else {
		e = &event{d: p.d, timing: timing}
		flags := uintptr(eventDisableTiming) // lighter, for events that only order and sync
		if timing {
			flags = 0
		}
		err := p.d.do(func(drv *driver) error {
			return drv.check(fnEventCreate, drv.call(fnEventCreate, uintptr(unsafe.Pointer(&e.h)), flags))
		})
		if err != nil {
			return nil, err
		}
		p.all = append(p.all, e)
	}
	p.lent = append(p.lent, e)
	return e, nil
}

// recycle takes back every event lent: the step that used them has synchronized.
func (p *eventPool) recycle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.lent {
		p.putLocked(e)
	}
	p.lent = p.lent[:0]
}

// hold keeps lent events out of the next recycle: they order a copy that runs on past
// the step's end (CopyInNext). unhold gives them back to the pool once that copy has
// been waited for.
func (p *eventPool) hold(es ...*event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range es {
		if removeEvent(&p.lent, e) {
			p.held = append(p.held, e)
		}
	}
}

func (p *eventPool) unhold(es ...*event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range es {
		if removeEvent(&p.held, e) {
			p.putLocked(e)
		}
	}
}

// put takes back events whose work the caller has waited for, ahead of the step's end.
func (p *eventPool) put(es ...*event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range es {
		if removeEvent(&p.lent, e) {
			p.putLocked(e)
		}
	}
}

// removeEvent takes e out of list, saying whether it was there.
func removeEvent(list *[]*event, e *event) bool {
	i := slices.Index(*list, e)
	if i < 0 {
		return false
	}
	*list = slices.Delete(*list, i, i+1)
	return true
}

func (p *eventPool) putLocked(e *event) {
	e.gen++
	t := 0
	if e.timing {
		t = 1
	}
	p.free[t] = append(p.free[t], e)
}

func (p *eventPool) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	for _, e := range p.all {
		e.gen++
	}
	err := p.d.do(func(drv *driver) error {
		var errs []error
		for _, e := range p.all {
			errs = append(errs, drv.check(fnEventDestroy, drv.call(fnEventDestroy, e.h)))
		}
		return errors.Join(errs...)
	})
	p.all, p.free, p.lent, p.held = nil, [2][]*event{}, nil, nil
	return closeError(err)
}
