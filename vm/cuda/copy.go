package cuda

import (
	"errors"
	"fmt"
	"sync"
	"time"
	"unsafe"
)

// The swap protocol. A VM drives a device in steps; within a step:
//
//   - CopyOut(dst, src) swaps a value out: on the device-to-host stream, after the compute
//     work issued so far (which produced the value). The device block may be reused, and
//     the host buffer read, only once the returned event has completed: a VM frees the
//     block to its allocator after Event.Done or Event.Wait, never before.
//   - CopyIn(dst, src) swaps a value in: on the host-to-device stream, after the compute
//     work issued so far (which may still read what the block held before). Compute does
//     not see the data until it waits for the returned event.
//   - WaitFor(ev) makes compute wait for a swap-in, on the device: a VM calls it at the
//     instruction that reads the value, not at the swap-in, so that kernels in between
//     overlap the copy. The host never blocks here; how long compute waits is measured
//     with events and reported as stall time.
//   - EndStep() ends the step with one host synchronization, after compute has waited for
//     the last copy on each copy stream, and reads the step's times from events.
//   - CopyInNext(dst, src) is a swap-in for the next step (its input batch): on the
//     host-to-device stream, after the compute work issued so far (the last kernel that
//     reads what dst holds), but the step's EndStep does not wait for it, so the copy runs
//     on past the step's end, beside what the host queues next (an optimizer update on the
//     device). Its event stays valid through the next step, whose compute waits for it
//     (WaitFor) at the first kernel that reads dst, and whose EndStep waits for it in any
//     case, so that src is free again after that step.

// Step is what one step cost, measured with events on the device's clock.
type Step struct {
	// Elapsed runs from the step's first work on the compute stream to its end.
	Elapsed time.Duration
	// Stall is the time the compute stream spent waiting for swap-ins (WaitFor).
	Stall time.Duration
	// Copies and bytes each way.
	CopiesIn, CopiesOut int
	BytesIn, BytesOut   int64
	// BytesAhead are the bytes of BytesIn copied for the next step (CopyInNext), and
	// AheadTail the time from the first such copy's start on compute (after the work
	// queued before it) to the step's end: the part of the step it may overlap.
	BytesAhead int64
	AheadTail  time.Duration
}

// Stats add up the steps a device has ended.
type Stats struct {
	Steps int
	// StallTime is the sum of the steps' Stall, Elapsed of their Elapsed.
	StallTime, Elapsed time.Duration
	BytesIn, BytesOut  int64
	BytesAhead         int64
}

type stepState struct {
	mu      sync.Mutex
	start   *event // timing event at the step's first work on compute
	stalls  [][2]*event
	lastIn  *event // the last copy recorded on each copy stream
	lastOut *event
	// ahead are the events of this step's CopyInNext copies, carried are the
	// previous step's: EndStep waits for carried and then recycles them.
	ahead, carried []*event
	cur            Step
	total          Stats
}

// CopyOut starts copying len(dst) bytes from device address src into dst, on the
// device-to-host stream, after all compute work issued so far. It returns the event that
// completes with the copy. dst should come from the device's PinnedPool: from pageable
// memory the driver copies synchronously, without overlap.
func (d *Device) CopyOut(dst []byte, src uintptr) (*Event, error) {
	return d.copy(DeviceToHost, len(dst), memcpyOut(dst, src), true)
}

// CopyIn starts copying src into device memory at dst, on the host-to-device stream, after
// all compute work issued so far. It returns the event that completes with the copy; src
// must stay unchanged until then.
func (d *Device) CopyIn(dst uintptr, src []byte) (*Event, error) {
	return d.copy(HostToDevice, len(src), memcpyIn(dst, src), true)
}

// CopyInNext starts copying src into device memory at dst for the next step: on the
// host-to-device stream, after all compute work issued so far, like CopyIn, but this
// step's EndStep does not wait for it, and the event it returns stays valid until the end
// of the next step, whose EndStep waits for it (see the swap protocol above); after that it
// counts as complete (another machine's step on the device may come in between). src must
// stay unchanged until then: src should be pinned (PinnedPool), or the driver copies it
// synchronously, and a caller staging one copy per step alternates two buffers.
func (d *Device) CopyInNext(dst uintptr, src []byte) (*Event, error) {
	return d.queueCopy(HostToDevice, len(src), memcpyIn(dst, src), true, true)
}

// memcpyOut and memcpyIn are the asynchronous copies each way, on a given stream.
func memcpyOut(dst []byte, src uintptr) func(*driver, *Stream) error {
	return func(drv *driver, s *Stream) error {
		return drv.check(fnMemcpyDtoHAsync, drv.call(fnMemcpyDtoHAsync, uintptr(unsafe.Pointer(&dst[0])), src, uintptr(len(dst)), s.h))
	}
}

func memcpyIn(dst uintptr, src []byte) func(*driver, *Stream) error {
	return func(drv *driver, s *Stream) error {
		return drv.check(fnMemcpyHtoDAsync, drv.call(fnMemcpyHtoDAsync, dst, uintptr(unsafe.Pointer(&src[0])), uintptr(len(src)), s.h))
	}
}

// copySync copies src into device memory at dst and returns when it has landed, and
// readSync the other way. cuMemcpyHtoD from pageable memory returns once src is staged,
// with the copy to dst still on the legacy stream ("the DMA to final destination may not
// have completed"), which the device's non-blocking streams do not wait for: so copySync
// synchronizes the legacy stream (cuStreamSynchronize(0)) before it returns, and work
// queued on the device's streams afterwards sees the bytes.
func (d *Device) copySync(dst uintptr, src []byte) error {
	return d.do(func(drv *driver) error {
		if err := drv.check(fnMemcpyHtoD, drv.call(fnMemcpyHtoD, dst, uintptr(unsafe.Pointer(&src[0])), uintptr(len(src)))); err != nil {
			return err
		}
		return drv.check(fnStreamSynchronize, drv.call(fnStreamSynchronize, 0))
	})
}

func (d *Device) readSync(dst []byte, src uintptr) error {
	return d.do(func(drv *driver) error {
		return drv.check(fnMemcpyDtoH, drv.call(fnMemcpyDtoH, uintptr(unsafe.Pointer(&dst[0])), src, uintptr(len(dst))))
	})
}

// copy queues a copy of n bytes on stream k, after compute's work so far if afterCompute
// (tests leave that wait out to see it matter), and records the event that ends it.
func (d *Device) copy(k StreamKind, n int, memcpy func(*driver, *Stream) error, afterCompute bool) (*Event, error) {
	return d.queueCopy(k, n, memcpy, afterCompute, false)
}

// queueCopy is copy, or with next CopyInNext's copy for the next step.
func (d *Device) queueCopy(k StreamKind, n int, memcpy func(*driver, *Stream) error, afterCompute, next bool) (*Event, error) {
	if n == 0 {
		return nil, fmt.Errorf("cuda: %s: empty %s copy", d.name, k)
	}
	st := &d.step
	st.mu.Lock()
	defer st.mu.Unlock()
	if err := d.begin(); err != nil {
		return nil, err
	}
	mark, err := d.events.get(next) // timed for the next step's copies: Step.AheadTail
	if err != nil {
		return nil, err
	}
	done, err := d.events.get(false)
	if err != nil {
		return nil, err
	}
	s, compute := d.streams[k], d.streams[Compute]
	err = d.do(func(drv *driver) error {
		if afterCompute {
			if err := recordOn(drv, mark, compute); err != nil {
				return err
			}
			if err := waitOn(drv, s, mark); err != nil {
				return err
			}
		}
		if err := memcpy(drv, s); err != nil {
			return err
		}
		return recordOn(drv, done, s)
	})
	if err != nil {
		return nil, err
	}
	if next {
		// Not the step's: its events outlive this step's recycling.
		d.events.hold(mark, done)
		st.ahead = append(st.ahead, mark, done)
		st.cur.BytesAhead += int64(n)
	}
	if k == HostToDevice {
		if !next {
			st.lastIn = done
		}
		st.cur.CopiesIn++
		st.cur.BytesIn += int64(n)
	} else {
		st.lastOut = done
		st.cur.CopiesOut++
		st.cur.BytesOut += int64(n)
	}
	h := done.handle()
	h.ahead = next
	return h, nil
}

// begin records the step's start on compute before its first work; st.mu is held.
func (d *Device) begin() error {
	st := &d.step
	if st.start != nil {
		return nil
	}
	e, err := d.events.get(true)
	if err != nil {
		return err
	}
	if err := d.do(func(drv *driver) error { return recordOn(drv, e, d.streams[Compute]) }); err != nil {
		return err
	}
	st.start = e
	return nil
}

// WaitFor makes the compute stream wait, on the device, until ev has completed: work
// queued on compute afterwards runs only then. The host does not block. Timing events on
// either side of the wait measure how long compute stalled.
func (d *Device) WaitFor(ev *Event) error {
	if ev.landed() {
		return nil
	}
	if err := ev.valid(); err != nil {
		return err
	}
	st := &d.step
	st.mu.Lock()
	defer st.mu.Unlock()
	if err := d.begin(); err != nil {
		return err
	}
	before, err := d.events.get(true)
	if err != nil {
		return err
	}
	after, err := d.events.get(true)
	if err != nil {
		return err
	}
	compute := d.streams[Compute]
	err = d.do(func(drv *driver) error {
		return errors.Join(recordOn(drv, before, compute), waitOn(drv, compute, ev.ev), recordOn(drv, after, compute))
	})
	if err != nil {
		return err
	}
	st.stalls = append(st.stalls, [2]*event{before, after})
	return nil
}

// EndStep ends a step with one host synchronization: compute waits (on the device) for the
// last copy on each copy stream, an event recorded after that on compute is waited for,
// and the step's times are read from the events. Events handed out during the step are
// recycled. A step with no work returns a zero Step.
func (d *Device) EndStep() (Step, error) {
	st := &d.step
	st.mu.Lock()
	defer st.mu.Unlock()
	defer d.events.recycle()
	if st.start == nil {
		return Step{}, nil
	}
	end, err := d.events.get(true)
	if err != nil {
		return Step{}, err
	}
	compute := d.streams[Compute]
	step := st.cur
	err = d.do(func(drv *driver) error {
		for _, last := range append([]*event{st.lastIn, st.lastOut}, st.carried...) {
			if last != nil {
				if err := waitOn(drv, compute, last); err != nil {
					return err
				}
			}
		}
		if err := recordOn(drv, end, compute); err != nil {
			return err
		}
		if err := drv.check(fnEventSynchronize, drv.call(fnEventSynchronize, end.h)); err != nil {
			return err
		}
		var err error
		if step.Elapsed, err = elapsed(drv, st.start, end); err != nil {
			return err
		}
		if len(st.ahead) > 0 {
			if step.AheadTail, err = elapsed(drv, st.ahead[0], end); err != nil {
				return err
			}
		}
		for _, p := range st.stalls {
			t, err := elapsed(drv, p[0], p[1])
			if err != nil {
				return err
			}
			step.Stall += t
		}
		return nil
	})
	d.events.unhold(st.carried...)
	st.start, st.stalls, st.lastIn, st.lastOut, st.cur = nil, nil, nil, nil, Step{}
	st.carried, st.ahead = st.ahead, nil
	if err != nil {
		return Step{}, err
	}
	st.total.Steps++
	st.total.Elapsed += step.Elapsed
	st.total.StallTime += step.Stall
	st.total.BytesIn += step.BytesIn
	st.total.BytesOut += step.BytesOut
	st.total.BytesAhead += step.BytesAhead
	return step, nil
}

// elapsed is the time between two completed timing events.
func elapsed(drv *driver, from, to *event) (time.Duration, error) {
	var ms float32
	if err := drv.check(fnEventElapsedTime, drv.call(fnEventElapsedTime, uintptr(unsafe.Pointer(&ms)), from.h, to.h)); err != nil {
		return 0, err
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// Stats returns the totals of the steps ended so far.
func (d *Device) Stats() Stats {
	d.step.mu.Lock()
	defer d.step.mu.Unlock()
	return d.step.total
}

// StallTime is the time compute has waited for swap-ins over all steps ended so far.
func (d *Device) StallTime() time.Duration { return d.Stats().StallTime }
