package cuda

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// orderingSetup loads add_one and gives n floats of device memory and two pinned buffers.
func orderingSetup(t *testing.T, d *fakeDevice, n int) (*Function, uintptr, *HostBuffer, *HostBuffer) {
	t.Helper()
	f, err := d.checkKernel()
	must(t, err)
	seg, err := d.mem.AllocSegment(int64(4 * n))
	must(t, err)
	t.Cleanup(func() { must(t, d.mem.FreeSegment(seg)) })
	in, err := d.Pinned().Get(int64(4 * n))
	must(t, err)
	out, err := d.Pinned().Get(int64(4 * n))
	must(t, err)
	return f, seg.Addr, in, out
}

// TestOrdering copies n floats in on the host-to-device stream, runs add_one on compute and
// copies the result out on the device-to-host stream. With the fake's streams as threads
// and a copy or the kernel slowed down, leaving out either event wait makes the result
// wrong every time: the ordering comes from the waits, not from luck.
func TestOrdering(t *testing.T) {
	withKernels(t)
	const n = 1 << 16
	for _, c := range []struct {
		name            string
		waitIn, waitOut bool
		slow            string // the knob that slows a copy or the kernel down
		wrong           int
	}{
		{"both waits, slow copies", true, true, "copy_delay_us", 0},
		{"both waits, slow kernel", true, true, "kernel_delay_us", 0},
		{"compute does not wait for the copy in", false, true, "copy_delay_us", n},
		{"the copy out does not wait for compute", true, false, "kernel_delay_us", n},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := openFake(t, map[string]int64{c.slow: 30000})
			f, block, in, out := orderingSetup(t, d, n)
			wrong, err := d.ordering(f, block, in, out, n, c.waitIn, c.waitOut)
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

// TestStepTimes slows copies down and checks the stall compute spent waiting for a swap-in
// is measured, that WaitFor does not make the host wait, and that a step ends with one host
// synchronization however many copies it made.
func TestStepTimes(t *testing.T) {
	withKernels(t)
	const n, delay = 1 << 12, 40 * time.Millisecond
	d := openFake(t, map[string]int64{"copy_delay_us": delay.Microseconds()})
	f, block, in, out := orderingSetup(t, d, n)
	syncs := d.fake.Get(t, "host_syncs")
	start := time.Now()
	var evs []*Event
	for range 3 {
		ev, err := d.CopyIn(block, in.Bytes)
		must(t, err)
		must(t, d.WaitFor(ev))
		must(t, d.Launch(f, Dim3{X: n / 256}, Dim3{X: 256}, 0, block, uint32(n)))
		ev, err = d.CopyOut(out.Bytes, block)
		must(t, err)
		evs = append(evs, ev)
	}
	if issued := time.Since(start); issued > delay {
		t.Errorf("issuing the step took %v: something waited on the host", issued)
	}
	if done, err := evs[2].Done(); err != nil || done {
		t.Errorf("the last copy out is done (%v, %v) before a copy of %v could have run", done, err, delay)
	}
	step, err := d.EndStep()
	must(t, err)
	if got := d.fake.Get(t, "host_syncs") - syncs; got != 1 {
		t.Errorf("the step made %d host synchronizations, want 1", got)
	}
	for _, ev := range evs {
		if _, err := ev.Done(); err == nil || !strings.Contains(err.Error(), "used after the EndStep") {
			t.Errorf("an event of an ended step: %v, want it refused", err)
		}
	}
	want := Step{CopiesIn: 3, CopiesOut: 3, BytesIn: 3 * 4 * n, BytesOut: 3 * 4 * n}
	if step.CopiesIn != want.CopiesIn || step.CopiesOut != want.CopiesOut || step.BytesIn != want.BytesIn || step.BytesOut != want.BytesOut {
		t.Errorf("step %+v, want the counts of %+v", step, want)
	}
	// Compute waits for each copy in (one delay each). A copy out waits for compute, and
	// the next copy in for compute too but not for the copy out, so the two overlap on
	// their streams: about 3 delays of stall in a step of about 4. (This test reuses the
	// block without waiting for its copy out, which a VM must not do; it checks no data.)
	if step.Stall < 3*delay*9/10 || step.Elapsed < 4*delay*9/10 || step.Elapsed > 5*delay || step.Stall > step.Elapsed {
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
	d := openFake(t, map[string]int64{"copy_delay_us": 20000})
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
	must(t, memcpyInOn(d, seg.Addr, buf.Bytes))
	ev, err := h2d.Record()
	must(t, err)
	if done, err := ev.Done(); err != nil || done {
		t.Errorf("Done before a slowed copy ran: %v, %v", done, err)
	}
	must(t, compute.Wait(ev))
	after, err := compute.Record()
	must(t, err)
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
