package cuda

import (
	"bytes"
	"testing"
)

// TestCopyInNext: a copy for the next step is ordered after the compute work queued
// before it, the step that queued it ends without waiting for it (its stream is held, so
// an EndStep that waited would hang), its event outlives that EndStep, and the next
// step's compute waits for it; the EndStep after that recycles it.
func TestCopyInNext(t *testing.T) {
	d := openFake(t, nil)
	const n = 64 * kib
	seg, err := d.mem.AllocSegment(n)
	must(t, err)
	defer d.mem.FreeSegment(seg)
	buf, err := d.Pinned().Get(n)
	must(t, err)
	defer d.Pinned().Put(buf)
	back, err := d.Pinned().Get(n)
	must(t, err)
	defer d.Pinned().Put(back)
	for i := range buf.Bytes {
		buf.Bytes[i] = byte(i * 7)
	}

	// Step N: some compute, then the copy for step N+1 behind a held stream.
	first, err := d.CopyIn(seg.Addr, make([]byte, n))
	must(t, err)
	must(t, first.Wait()) // before the hold, which stops the stream's worker at once
	d.hold(t, HostToDevice)
	ev, err := d.CopyInNext(seg.Addr, buf.Bytes)
	must(t, err)
	stepN, err := d.EndStep()
	must(t, err)
	if stepN.AheadTail < 0 || stepN.AheadTail > stepN.Elapsed {
		t.Errorf("step N: the copy for the next step may overlap %v of a %v step", stepN.AheadTail, stepN.Elapsed)
	}
	if stepN.BytesAhead != n || stepN.BytesIn != 2*n {
		t.Errorf("step N: %d bytes ahead of %d in, want %d of %d", stepN.BytesAhead, stepN.BytesIn, n, 2*n)
	}
	if done, err := ev.Done(); err != nil || done {
		t.Fatalf("the held copy for the next step: done %v, %v", done, err)
	}

	// Step N+1: compute waits for it on the device, then reads what it wrote.
	must(t, d.WaitFor(ev))
	d.release(t)
	_, err = d.CopyOut(back.Bytes, seg.Addr)
	must(t, err)
	_, err = d.EndStep() // one synchronization: the copy out has landed
	must(t, err)
	if !bytes.Equal(back.Bytes, buf.Bytes) {
		t.Errorf("the next step read other bytes than the copy for it wrote")
	}
	// Recycled, it counts as landed (it has: the EndStep that recycled it waited for it).
	if done, err := ev.Done(); err != nil || !done {
		t.Errorf("the recycled event of a copy for the next step: done %v, %v", done, err)
	}
	must(t, d.WaitFor(ev))
	if s := d.Stats(); s.BytesAhead != n {
		t.Errorf("stats: %d bytes ahead, want %d", s.BytesAhead, n)
	}
}
