package fakecuda

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
)

// TraceKind is what a traced call queued.
type TraceKind int64

// The kinds of trace entries (csrc/trace.c).
const (
	TraceRecord   TraceKind = iota + 1 // cuEventRecord on Stream
	TraceWait                          // cuStreamWaitEvent: Stream waits for Event's record Seq
	TraceHtoD                          // an asynchronous copy of N bytes to device address Addr
	TraceDtoH                          // an asynchronous copy of N bytes from device address Addr
	TraceKernel                        // cuLaunchKernel; Watched if an argument points into the watched range
	TraceHostWait                      // cuEventSynchronize (Event, Seq) or cuStreamSynchronize: the host waits
)

func (k TraceKind) String() string {
	switch k {
	case TraceRecord:
		return "record"
	case TraceWait:
		return "wait"
	case TraceHtoD:
		return "htod"
	case TraceDtoH:
		return "dtoh"
	case TraceKernel:
		return "kernel"
	case TraceHostWait:
		return "host-wait"
	}
	return fmt.Sprintf("TraceKind(%d)", int64(k))
}

// TraceEntry is one call of the trace, in the order the calls were made. Stream and Event
// are the driver's handles (0 for none); Seq is the event's record number (the one a wait
// waits for).
type TraceEntry struct {
	Kind                     TraceKind
	Stream, Event, Seq, Addr uint64
	N                        int64
	Watched                  bool
}

type cEntry struct {
	kind                     int64
	stream, event, seq, addr uint64
	n, watched               int64
}

// Trace returns the calls traced since the knob trace was last set to 1 (Set(t, "trace",
// 1) starts a new log; 0 stops logging and drops the log). Set watch_lo and watch_hi to a device range to
// mark the kernel launches that take a pointer into it.
func (f *Fake) Trace(t testing.TB) []TraceEntry {
	t.Helper()
	n, _, _ := purego.SyscallN(f.trace, 0, 0)
	if int64(n) <= 0 {
		return nil
	}
	buf := make([]cEntry, int64(n))
	got, _, _ := purego.SyscallN(f.trace, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
	buf = buf[:min(int64(got), int64(len(buf)))]
	out := make([]TraceEntry, len(buf))
	for i, e := range buf {
		out[i] = TraceEntry{Kind: TraceKind(e.kind), Stream: e.stream, Event: e.event, Seq: e.seq, Addr: e.addr, N: e.n, Watched: e.watched != 0}
	}
	return out
}
