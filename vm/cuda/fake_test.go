package cuda

import (
	"testing"
	"unsafe"
)

// TestFakeRefuses calls the driver directly, past the Go bookkeeping that refuses misuse
// first, and checks the fake driver refuses what cuda.h says the driver refuses: the fake
// must not be more lenient than a GPU, or the tests on it prove less than they claim.
func TestFakeRefuses(t *testing.T) {
	d := openFake(t, nil)
	const g = 2 << 20
	// The driver gets raw addresses here: what they point to lives in a package variable,
	// which neither moves nor goes away.
	m := &refusesScratch
	m.prop = allocationProp(d.dev)
	m.desc = memAccessDesc{location: memLocation{typ: memLocationTypeDevice, id: d.dev}, flags: memAccessFlagsProtReadWrite}
	h1, h2, va := &m.h1, &m.h2, &m.va
	call := func(f fn, args ...uintptr) Result {
		var r Result
		must(t, d.do(func(drv *driver) error { r = drv.call(f, args...); return nil }))
		return r
	}
	p := func(x *uint64) uintptr { return uintptr(unsafe.Pointer(x)) }
	pp, descp := uintptr(unsafe.Pointer(&m.prop)), uintptr(unsafe.Pointer(&m.desc))
	if r := call(fnMemCreate, p(h1), g, pp, 0); r != 0 {
		t.Fatalf("cuMemCreate: %d", r)
	}
	if r := call(fnMemCreate, p(h2), g, pp, 0); r != 0 {
		t.Fatalf("cuMemCreate: %d", r)
	}
	if r := call(fnMemAddressReserve, p(va), 2*g, g, 0, 0); r != 0 {
		t.Fatalf("cuMemAddressReserve: %d", r)
	}
	hostBuf := uintptr(unsafe.Pointer(&m.buf[0]))
	scratch := p(&m.scratch)
	const invalid = Result(1)
	steps := []struct {
		what string
		f    fn
		args []uintptr
		want Result
	}{
		{"a chunk not a multiple of the granularity", fnMemCreate, []uintptr{scratch, g + 4096, pp, 0}, invalid},
		{"a chunk with flags", fnMemCreate, []uintptr{scratch, g, pp, 1}, invalid},
		{"a map at a non-zero handle offset", fnMemMap, []uintptr{uintptr(*va), g, g, uintptr(*h1), 0}, invalid},
		{"a misaligned map", fnMemMap, []uintptr{uintptr(*va) + 4096, g, 0, uintptr(*h1), 0}, invalid},
		{"a map of more than the handle", fnMemMap, []uintptr{uintptr(*va), 2 * g, 0, uintptr(*h1), 0}, invalid},
		{"a map outside any reservation", fnMemMap, []uintptr{uintptr(*va) + 2*g, g, 0, uintptr(*h1), 0}, invalid},
		{"a map of an unknown handle", fnMemMap, []uintptr{uintptr(*va), g, 0, 12345, 0}, invalid},
		{"a map", fnMemMap, []uintptr{uintptr(*va), g, 0, uintptr(*h1), 0}, 0},
		{"a second map over it", fnMemMap, []uintptr{uintptr(*va), g, 0, uintptr(*h2), 0}, invalid},
		{"a copy into mapped memory before cuMemSetAccess", fnMemcpyHtoD, []uintptr{uintptr(*va), hostBuf, 16}, invalid},
		{"access over a span with an unmapped part", fnMemSetAccess, []uintptr{uintptr(*va), 2 * g, descp, 1}, invalid},
		{"access over the mapping", fnMemSetAccess, []uintptr{uintptr(*va), g, descp, 1}, 0},
		{"a copy into it", fnMemcpyHtoD, []uintptr{uintptr(*va), hostBuf, 16}, 0},
		{"a copy running past the mapping", fnMemcpyHtoD, []uintptr{uintptr(*va) + g - 8, hostBuf, 16}, invalid},
		{"a copy from an unmapped address", fnMemcpyDtoH, []uintptr{hostBuf, uintptr(*va) + g, 16}, invalid},
		{"an unmap cutting the mapping", fnMemUnmap, []uintptr{uintptr(*va), g / 2}, invalid},
		{"freeing the reservation with a mapping in it", fnMemAddressFree, []uintptr{uintptr(*va), 2 * g}, invalid},
		{"freeing the reservation at a wrong size", fnMemAddressFree, []uintptr{uintptr(*va), g}, invalid},
		// cuda.h: "The generic memory handle can be freed when there are still outstanding
		// mappings": the driver accepts this and frees the memory at the last unmap.
		{"releasing the mapped handle", fnMemRelease, []uintptr{uintptr(*h1)}, 0},
		{"releasing it again", fnMemRelease, []uintptr{uintptr(*h1)}, invalid},
		{"a copy out of it, still mapped", fnMemcpyDtoH, []uintptr{hostBuf, uintptr(*va), 16}, 0},
		{"the unmap", fnMemUnmap, []uintptr{uintptr(*va), g}, 0},
		{"a copy from the unmapped address", fnMemcpyDtoH, []uintptr{hostBuf, uintptr(*va), 16}, invalid},
		{"freeing a segment never allocated", fnMemFree, []uintptr{uintptr(*va)}, invalid},
		{"the release of the other handle", fnMemRelease, []uintptr{uintptr(*h2)}, 0},
		{"freeing the reservation", fnMemAddressFree, []uintptr{uintptr(*va), 2 * g}, 0},
	}
	for _, s := range steps {
		if r := call(s.f, s.args...); r != s.want {
			t.Errorf("%s (%s): result %d, want %d", s.what, symbols[s.f], r, s.want)
		}
	}
	if used := d.fake.Get(t, "used"); used != 64<<20 {
		t.Errorf("the driver has %d bytes in use, want only the context's 64 MiB", used)
	}
}

var refusesScratch struct {
	h1, h2, va, scratch uint64
	prop                memAllocationProp
	desc                memAccessDesc
	buf                 [16]byte
}
