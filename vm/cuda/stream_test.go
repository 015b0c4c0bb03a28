package cuda

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// orderingSetup loads add_one and gives n floats of device memory and two pinned buffers
// (in twice n floats: see orderingStart).
func orderingSetup(t *testing.T, d *fakeDevice, n int) (*Function, uintptr, *HostBuffer, *HostBuffer) {
	t.Helper()
	f, err := d.checkKernel()
	must(t, err)
	seg, err := d.mem.AllocSegment(int64(4 * n))
	must(t, err)
	t.Cleanup(func() { must(t, d.mem.FreeSegment(seg)) })
	in, err := d.Pinned().Get(int64(8 * n)) // the input, then orderingStart's -1000s
	must(t, err)
	out, err := d.Pinned().Get(int64(4 * n))
	must(t, err)
	return f, seg.Addr, in, out
}

// hold stops the fake's worker of stream k until release: nothing queued on it runs.
func (d *fakeDevice) hold(t *testing.T, k StreamKind) { d.fake.Set(t, "hold", int64(d.Stream(k).h)) }
func (d *fakeDevice) release(t *testing.T)            { d.fake.Set(t, "hold", 0) }

// doneWhileHeld waits until ev has completed, which it must while a stream is held: what
// it waits for does not include that stream.
func doneWhileHeld(t *testing.T, ev *Event, what string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		done, err := ev.Done()
		must(t, err)
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has not completed while the other stream is held: it waits for that stream", what)
		}
	}
}

// TestOrdering copies n floats in on the host-to-device stream, runs add_one on compute and
// copies the result out on the device-to-host stream, with one stream held (its worker
// runs nothing) while the round is queued. With every event wait in place the result is
// right. Without compute's wait for the copy in, the copy out completes while the copy in
// is still held, so the kernel read the stale block; without the copy out's wait for
// compute, it completes while the kernel is held: either way every float is wrong, every
// time, whatever the timing.
func TestOrdering(t *testing.T) {
	withKernels(t)
	const n = 1 << 16
	for _, c := range []struct {
		name            string
		waitIn, waitOut bool
		held            StreamKind
		wrong           int
	}{
		{"both waits, copy in held", true, true, HostToDevice, 0},
		{"both waits, kernel held", true, true, Compute, 0},
		{"compute does not wait for the copy in", false, true, HostToDevice, n},
		{"the copy out does not wait for compute", true, false, Compute, n},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := openFake(t, nil)
			f, block, in, out := orderingSetup(t, d, n)
			d.hold(t, c.held)
			ev, err := d.orderingStart(f, block, in, out, n, c.waitIn, c.waitOut)
			must(t, err)
			if c.wrong > 0 {
				doneWhileHeld(t, ev, "the copy out")
			} else if done, err := ev.Done(); err != nil || done {
				t.Fatalf("the copy out completed (%v, %v) while a stream it waits for is held", done, err)
			}
			d.release(t)
			wrong, err := d.orderingEnd(ev, out, n)
			must(t, err)
			if wrong != c.wrong {
				t.Errorf("%d of %d floats wrong, want %d", wrong, n, c.wrong)
			}
			if got := d.fake.Get(t, "launches"); got != 1 {
				t.Errorf("%d kernel launches, want 1", got)
			}
		})
	}
}

// swapRounds queues three rounds of copy in, wait, add_one, copy out on one block.
// (They reuse the block without waiting for its copy out, which a VM must not do; the
// tests using them check times and waits, not data.)
func swapRounds(t *testing.T, d *fakeDevice, f *Function, block uintptr, in, out *HostBuffer, n int) []*Event {
	t.Helper()
	var evs []*Event
	for range 3 {
		ev, err := d.CopyIn(block, in.Bytes[:4*n])
		must(t, err)
		evs = append(evs, ev)
		must(t, d.WaitFor(ev))
		must(t, d.Launch(f, Dim3{X: uint32(n / 256)}, Dim3{X: 256}, 0, block, uint32(n)))
		ev, err = d.CopyOut(out.Bytes, block)
		must(t, err)
		evs = append(evs, ev)
	}
	return evs
}

// TestWaitsStayOnTheDevice holds the host-to-device stream while a step is queued: no
// call blocks the host (a WaitFor that did would wait for the release, which comes only
// after a while), no event completes, and the step ends with one host synchronization.
func TestWaitsStayOnTheDevice(t *testing.T) {
	withKernels(t)
	const n, watchdog = 1 << 12, 3 * time.Second
	d := openFake(t, nil)
	f, block, in, out := orderingSetup(t, d, n)
	syncs := d.fake.Get(t, "host_syncs")
	d.hold(t, HostToDevice)
	released := time.AfterFunc(watchdog, func() { d.release(t) })
	start := time.Now()
	evs := swapRounds(t, d, f, block, in, out, n)
	if issued := time.Since(start); issued >= watchdog {
		t.Errorf("queuing the step took %v: a call waited on the host", issued)
	}
	for i, ev := range evs {
		if done, err := ev.Done(); err != nil || done {
			t.Errorf("copy %d is done (%v, %v) while the copy in it depends on is held", i, done, err)
		}
	}
	released.Stop()
	d.release(t)
	_, err := d.EndStep()
	must(t, err)
	if got := d.fake.Get(t, "host_syncs") - syncs; got != 1 {
		t.Errorf("the step made %d host synchronizations, want 1", got)
	}
	for _, ev := range evs {
		if _, err := ev.Done(); err == nil || !strings.Contains(err.Error(), "used after the EndStep") {
			t.Errorf("an event of an ended step: %v, want it refused", err)
		}
	}
}

// TestStallTime slows copies down and checks the time compute spent waiting for swap-ins
// is measured with events, and that a copy out overlaps the next copy in.
func TestStallTime(t *testing.T) {
	withKernels(t)
	const n, delay = 1 << 12, 200 * time.Millisecond // long enough that load does not hide the overlap
	d := openFake(t, map[string]int64{"copy_delay_us": delay.Microseconds()})
	f, block, in, out := orderingSetup(t, d, n)
	swapRounds(t, d, f, block, in, out, n)
	step, err := d.EndStep()
	must(t, err)
	want := Step{CopiesIn: 3, CopiesOut: 3, BytesIn: 3 * 4 * n, BytesOut: 3 * 4 * n}
	if step.CopiesIn != want.CopiesIn || step.CopiesOut != want.CopiesOut || step.BytesIn != want.BytesIn || step.BytesOut != want.BytesOut {
		t.Errorf("step %+v, want the counts of %+v", step, want)
	}
	// Compute waits for each copy in: three delays of stall. A copy out waits for compute,
	// and so does the next copy in, but not for the copy out: the two run at once on their
	// streams, so the step takes about four delays, not six. (Sleeps overrun under load,
	// never underrun: the upper bound has slack.)
	if step.Stall < 3*delay*9/10 || step.Elapsed < 4*delay*9/10 || step.Elapsed > 11*delay/2 || step.Stall > step.Elapsed {
		t.Errorf("step %+v: want a stall of about %v in a step of about %v", step, 3*delay, 4*delay)
	}
	if s := d.Stats(); s.Steps != 1 || s.StallTime != step.Stall || d.StallTime() != step.Stall || s.BytesIn != want.BytesIn {
		t.Errorf("Stats %+v after step %+v", s, step)
	}
	if step, err := d.EndStep(); err != nil || step != (Step{}) {
		t.Errorf("an empty step: %+v, %v", step, err)
	}
}

// TestEvents records and waits on events directly on the streams.
func TestEvents(t *testing.T) {
	d := openFake(t, nil)
	seg, err := d.mem.AllocSegment(mib)
	must(t, err)
	defer d.mem.FreeSegment(seg)
	buf, err := d.Pinned().Get(mib)
	must(t, err)
	defer d.Pinned().Put(buf)
	h2d, compute := d.Stream(HostToDevice), d.Stream(Compute)
	if h2d.Kind() != HostToDevice || compute.Kind().String() != "compute" {
		t.Errorf("kinds %v, %v", h2d.Kind(), compute.Kind())
	}
	d.hold(t, HostToDevice)
	must(t, memcpyInOn(d, seg.Addr, buf.Bytes))
	ev, err := h2d.Record()
	must(t, err)
	must(t, compute.Wait(ev))
	after, err := compute.Record()
	must(t, err)
	for _, e := range []*Event{ev, after} {
		if done, err := e.Done(); err != nil || done {
			t.Errorf("an event is done (%v, %v) behind a held copy", done, err)
		}
	}
	d.release(t)
	must(t, after.Wait())
	if done, err := ev.Done(); err != nil || !done {
		t.Errorf("the copy's event is not done once compute got past its wait: %v, %v", done, err)
	}
	must(t, compute.Synchronize())
	var nilEvent *Event
	if err := compute.Wait(nilEvent); err == nil {
		t.Errorf("a wait on a nil event: no error")
	}
	if _, err := d.CopyOut(nil, seg.Addr); err == nil {
		t.Errorf("an empty copy: no error")
	}
	// Measuring the bandwidth mid-step gives back its own events only.
	bw, err := d.MeasureBandwidth(mib, 2)
	must(t, err)
	if bw.HostToDevice <= 0 || bw.DeviceToHost <= 0 || !strings.Contains(bw.String(), "(2 copies of 1 MiB each way)") {
		t.Errorf("bandwidth %v", bw)
	}
	if _, err := ev.Done(); err != nil {
		t.Errorf("an event of the step after a bandwidth measurement: %v", err)
	}
	d.events.recycle()
}

// memcpyInOn queues a copy on the host-to-device stream with no event of its own.
func memcpyInOn(d *fakeDevice, dst uintptr, src []byte) error {
	return d.do(func(drv *driver) error { return memcpyIn(dst, src)(drv, d.Stream(HostToDevice)) })
}

// TestSwapRoundTrips swaps blocks out to pinned buffers and back in, through VA over a
// tight capacity, so that the blocks come back in ranges of other chunks, in other orders:
// the bytes survive every round trip.
func TestSwapRoundTrips(t *testing.T) {
	d := openFake(t, nil, WithCapacity(64*mib))
	a, err := d.NewVA(2 * mib)
	must(t, err)
	defer a.Close()
	sizes := []int64{5 * mib, 3*mib + 17, 12 * mib, 700 * kib, 9*mib - 3}
	host := make([]*HostBuffer, len(sizes))
	want := make([][]byte, len(sizes))
	for i, size := range sizes {
		want[i] = make([]byte, size)
		pattern(want[i], i, 0)
		host[i], err = d.Pinned().Get(size)
		must(t, err)
		copy(host[i].Bytes, want[i])
	}
	for round := range 6 {
		blocks := make([]uintptr, len(sizes))
		for i := range sizes {
			b, err := a.Alloc(sizes[i])
			must(t, err)
			ev, err := d.CopyIn(b.Addr(), host[i].Bytes)
			must(t, err)
			must(t, d.WaitFor(ev))
			blocks[i] = b.Addr()
			must(t, ev.Wait()) // the host buffer is reused only after its copy in completed
			clear(host[i].Bytes)
			out, err := d.CopyOut(host[i].Bytes, b.Addr())
			must(t, err)
			must(t, out.Wait()) // the block is reused only after its copy out completed
			must(t, a.Free(b))
			// Something else takes the memory meanwhile, so the next round maps other chunks.
			filler, err := a.Alloc(int64(20+round*7) * mib)
			must(t, err)
			must(t, a.Free(filler))
		}
		_, err := d.EndStep()
		must(t, err)
		for i := range sizes {
			if !bytes.Equal(host[i].Bytes, want[i]) {
				t.Fatalf("round %d: tensor %d of %d bytes changed on its way through the device", round, i, sizes[i])
			}
		}
	}
	if s := d.mem.Stats(); s.Unmaps == 0 {
		t.Errorf("no chunk was ever unmapped: the round trips tested no remapping (%+v)", s)
	}
	for _, h := range host {
		must(t, d.Pinned().Put(h))
	}
}

// TestPinnedPool checks that buffers are reused, that pinned bytes are counted, and that a
// device that cannot pin falls back to pageable buffers with one warning, and still copies
// right.
func TestPinnedPool(t *testing.T) {
	d := openFake(t, nil)
	p := d.Pinned()
	for range 3 {
		var bufs []*HostBuffer
		for _, n := range []int64{100, 3 * mib, 30 * mib} {
			b, err := p.Get(n)
			must(t, err)
			if !b.Pinned() || int64(len(b.Bytes)) != n {
				t.Fatalf("Get(%d): %d bytes, pinned %v", n, len(b.Bytes), b.Pinned())
			}
			bufs = append(bufs, b)
		}
		for _, b := range bufs {
			must(t, p.Put(b))
		}
	}
	s := p.Stats()
	if s.PinnedBytes != 2*mib+20*mib+30*mib || s.PeakPinnedBytes != s.PinnedBytes || s.PageableBytes != 0 || s.Allocator.Allocs != 9 {
		t.Errorf("after three rounds of the same buffers: %+v, want 52 MiB pinned once", s)
	}
	if got := d.fake.Get(t, "pinned_bytes"); got != s.PinnedBytes {
		t.Errorf("the driver has %d bytes pinned, the pool says %d", got, s.PinnedBytes)
	}
	if err := p.Put(nil); err == nil {
		t.Errorf("Put(nil): no error")
	}

	for _, c := range []struct {
		name   string
		knobs  map[string]int64
		limit  int64
		pinned int // how many of the three buffers (of their own 12 MiB segments) are pinned
		says   string
	}{
		{"pinning refused", map[string]int64{"pinned": 0}, 0, 0, "cuMemHostAlloc: CUDA_ERROR_OUT_OF_MEMORY"},
		{"pinned limit", nil, 30 * mib, 2, "the pool's pinned limit of 31457280 bytes is reached"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := openFake(t, c.knobs, WithPinnedLimit(c.limit))
			var bufs []*HostBuffer
			pinned := 0
			for range 3 {
				b, err := d.Pinned().Get(12 * mib)
				must(t, err)
				bufs = append(bufs, b)
				if b.Pinned() {
					pinned++
				}
			}
			if pinned != c.pinned || bufs[2].Pinned() {
				t.Errorf("%d buffers pinned, want %d", pinned, c.pinned)
			}
			log := d.log.String()
			if strings.Count(log, "using pageable memory") != 1 || !strings.Contains(log, c.says) {
				t.Errorf("log %q: want one warning saying %q", log, c.says)
			}
			seg, err := d.mem.AllocSegment(12 * mib)
			must(t, err)
			pattern(bufs[2].Bytes, 7, 0)
			want := bytes.Clone(bufs[2].Bytes)
			in, err := d.CopyIn(seg.Addr, bufs[2].Bytes)
			must(t, err)
			must(t, d.WaitFor(in))
			clear(bufs[2].Bytes)
			out, err := d.CopyOut(bufs[2].Bytes, seg.Addr)
			must(t, err)
			must(t, out.Wait())
			if !bytes.Equal(bufs[2].Bytes, want) {
				t.Errorf("a round trip through a pageable buffer changed it")
			}
			_, err = d.EndStep()
			must(t, err)
			must(t, d.mem.FreeSegment(seg))
			if s := d.Pinned().Stats(); s.PageableBytes == 0 || s.PinFailures == 0 {
				t.Errorf("stats %+v: want pageable bytes and failures counted", s)
			}
			for _, b := range bufs {
				must(t, d.Pinned().Put(b))
			}
		})
	}
}
