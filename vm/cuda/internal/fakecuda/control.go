package fakecuda

import (
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Fake controls one instance of the fake driver, the one loaded from a given path.
type Fake struct {
	set, get, fail, failAt, layout, trace uintptr
}

// Open loads the fake driver at lib (the same instance package cuda loads from that path)
// and returns its controls.
func Open(t testing.TB, lib string) *Fake {
	t.Helper()
	return open(t, lib, "fakecuda", true)
}

// OpenNCCL loads the fake NCCL at lib (BuildNCCL) and returns its controls: Set knobs
// version (ncclGetVersion's, default $OOC_FAKENCCL_VERSION or 22304: 2.23.4), timeout_ms (how long a rank waits for
// the others, default $OOC_FAKENCCL_TIMEOUT_MS or 60000), poll_ms (how often a waiting rank
// looks at its peers' processes, default 100) and slot_bytes (what one round carries of
// each rank's data, default $OOC_FAKENCCL_SLOT_BYTES or 1 MiB; the rank that creates a
// communicator's shared memory sets it for all); Get those and the counters comms (live
// communicators) and allreduces (completed calls); Fail the next call of an nccl function.
// The environment variables reach ranks in other processes, which the controls do not.
func OpenNCCL(t testing.TB, lib string) *Fake {
	t.Helper()
	return open(t, lib, "fakenccl", false)
}

func open(t testing.TB, lib, prefix string, layout bool) *Fake {
	t.Helper()
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		t.Fatalf("%s: %v", prefix, err)
	}
	f := &Fake{}
	syms := map[string]*uintptr{"_set": &f.set, "_get": &f.get, "_fail": &f.fail}
	if layout {
		syms["_layout"] = &f.layout
		syms["_trace"] = &f.trace
		syms["_fail_at"] = &f.failAt
	}
	for name, p := range syms {
		if *p, err = purego.Dlsym(h, prefix+name); err != nil {
			t.Fatalf("%s: %v", prefix, err)
		}
	}
	return f
}

func cstring(s string) []byte { return append([]byte(s), 0) }

// Set sets a knob of the fake (csrc/state.c): devices, driver_version, memory, vmm, granularity,
// pinned, pinned_limit, copy_delay_us, kernel_delay_us, ctx_overhead, cc_major, cc_minor,
// hold (a stream's handle: its worker runs nothing until hold changes), trace, watch_lo and
// watch_hi (see Trace); or "lose", which
// loses every context with the given sticky result.
func (f *Fake) Set(t testing.TB, key string, v int64) {
	t.Helper()
	k := cstring(key)
	if r, _, _ := purego.SyscallN(f.set, uintptr(unsafe.Pointer(&k[0])), uintptr(v)); int32(r) != 0 {
		t.Fatalf("fakecuda: no knob %q", key)
	}
}

// Get returns a knob or a count of live objects: used (device bytes), allocs, handles,
// handles_held, mappings, reservations, pinned_bytes, pinned_allocs, streams, events,
// modules, modules_loaded, image_bytes, launches, contexts, primary_retains (every
// cuDevicePrimaryCtxRetain so far), host_syncs (calls that make
// the host wait for the device), and freed_by_destroy: the
// objects context destroys had to free because their owner had not.
func (f *Fake) Get(t testing.TB, key string) int64 {
	t.Helper()
	k := cstring(key)
	r, _, _ := purego.SyscallN(f.get, uintptr(unsafe.Pointer(&k[0])))
	if int64(r) == -1 {
		t.Fatalf("fakecuda: no counter %q", key)
	}
	return int64(r)
}

// Fail makes the next call of the named driver function (its ABI name, e.g.
// "cuMemCreate") return result and do nothing; a sticky result also loses the context.
func (f *Fake) Fail(call string, result int) {
	c := cstring(call)
	purego.SyscallN(f.fail, uintptr(unsafe.Pointer(&c[0])), uintptr(result))
}

// Always, as FailAt's times, fails every call from the first failing one on.
const Always = -1

// FailAt makes calls of the named driver function fail with result, doing nothing: the
// next after calls succeed, then times calls fail (Always: every later one; 0 removes the
// rule). A sticky result also loses the context. A new rule for a function replaces the
// old; Fail(call, r) is FailAt(call, r, 0, 1).
func (f *Fake) FailAt(t testing.TB, call string, result int, after, times int64) {
	t.Helper()
	if f.failAt == 0 {
		t.Fatalf("fakecuda: FailAt is the driver's, not NCCL's")
	}
	c := cstring(call)
	if r, _, _ := purego.SyscallN(f.failAt, uintptr(unsafe.Pointer(&c[0])), uintptr(result), uintptr(after), uintptr(times)); int32(r) != 0 {
		t.Fatalf("fakecuda: no room for another failure rule (%s)", call)
	}
}

// Layout returns the size or offset the C compiler gives an ABI struct or field, e.g.
// "CUmemAllocationProp" or "CUmemAccessDesc.flags"; -1 if unknown.
func (f *Fake) Layout(what string) int64 {
	w := cstring(what)
	r, _, _ := purego.SyscallN(f.layout, uintptr(unsafe.Pointer(&w[0])))
	return int64(r)
}
