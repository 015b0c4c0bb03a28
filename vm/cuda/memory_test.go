package cuda

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"unsafe"

	"github.com/gorgonia-ooc/outofcore/vm/alloc"
)

// TestABILayout checks the Go structs against the C compiler's layout of cuda.h's
// declarations (as copied into the fake driver): a wrong offset would hand the driver a
// garbled allocation property.
func TestABILayout(t *testing.T) {
	d := openFake(t, nil)
	var p memAllocationProp
	var a memAccessDesc
	for _, c := range []struct {
		what string
		got  uintptr
	}{
		{"CUmemAllocationProp", unsafe.Sizeof(p)},
		{"CUmemAllocationProp.type", unsafe.Offsetof(p.typ)},
		{"CUmemAllocationProp.requestedHandleTypes", unsafe.Offsetof(p.requestedHandleTypes)},
		{"CUmemAllocationProp.location", unsafe.Offsetof(p.location)},
		{"CUmemAllocationProp.win32HandleMetaData", unsafe.Offsetof(p.win32HandleMetaData)},
		{"CUmemAllocationProp.allocFlags", unsafe.Offsetof(p.compressionType)},
		{"CUmemAllocationProp.allocFlags.usage", unsafe.Offsetof(p.usage)},
		{"CUmemLocation", unsafe.Sizeof(p.location)},
		{"CUmemLocation.id", unsafe.Offsetof(p.location.id)},
		{"CUmemAccessDesc", unsafe.Sizeof(a)},
		{"CUmemAccessDesc.flags", unsafe.Offsetof(a.flags)},
	} {
		if want := d.fake.Layout(c.what); int64(c.got) != want {
			t.Errorf("%s: Go has %d, C has %d", c.what, c.got, want)
		}
	}
}

// TestMemoryMisuse has the CUDA memory refuse what any alloc.Memory must refuse, with an
// error, not a panic, and what the driver refuses, before the driver sees it.
func TestMemoryMisuse(t *testing.T) {
	d := openFake(t, nil, WithCapacity(8*mib))
	mem := d.Memory()
	refuses := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Errorf("%s: no error", what)
		}
	}
	seg, err := mem.AllocSegment(mib)
	must(t, err)
	if _, err := mem.AllocSegment(8 * mib); !errors.Is(err, alloc.ErrOutOfMemory) {
		t.Errorf("segment beyond capacity: %v, want alloc.ErrOutOfMemory", err)
	}
	must(t, mem.FreeSegment(seg))
	refuses("double segment free", mem.FreeSegment(seg))
	refuses("unknown segment", mem.FreeSegment(alloc.Segment{Handle: 999}))
	_, err = mem.AllocSegment(0)
	refuses("empty segment", err)

	_, err = mem.CreateChunk(mib)
	if !errors.Is(err, alloc.ErrInvalidSize) || !strings.Contains(err.Error(), "2097152-byte granularity") {
		t.Errorf("chunk of 1 MiB: %v, want alloc.ErrInvalidSize naming the granularity", err)
	}
	_, err = mem.ReserveRange(0)
	refuses("empty range", err)
	c, err := mem.CreateChunk(2 * mib)
	must(t, err)
	r, err := mem.ReserveRange(4 * mib)
	must(t, err)
	refuses("map beyond the range", mem.Map(r, 2*mib, []alloc.Chunk{c, c}))
	refuses("map at an unaligned offset", mem.Map(r, 4096, []alloc.Chunk{c}))
	refuses("map of an unknown chunk", mem.Map(r, 0, []alloc.Chunk{{Size: 2 * mib, Handle: 999}}))
	must(t, mem.Map(r, 0, []alloc.Chunk{c}))
	refuses("map over a mapping", mem.Map(r, 0, []alloc.Chunk{c}))
	refuses("release of a mapped chunk", mem.ReleaseChunk(c))
	refuses("release of a range with mappings", mem.ReleaseRange(r))
	refuses("unmap cutting a chunk", mem.Unmap(r, 0, mib))
	refuses("unmap beyond the range", mem.Unmap(r, 0, 8*mib))
	must(t, mem.Unmap(r, 0, 4*mib)) // a span with a hole: only what is mapped goes
	must(t, mem.ReleaseRange(r))
	refuses("double range release", mem.ReleaseRange(r))
	must(t, mem.ReleaseChunk(c))
	refuses("double chunk release", mem.ReleaseChunk(c))
	if mem.Used() != 0 {
		t.Errorf("Used = %d after releasing everything", mem.Used())
	}
	for _, k := range []string{"allocs", "handles_held", "mappings", "reservations"} {
		if n := d.fake.Get(t, k); n != 0 {
			t.Errorf("the driver still holds %d %s", n, k)
		}
	}

	// Close returns what is still held, mapped or not, and the memory refuses further use.
	_, err = mem.AllocSegment(mib)
	must(t, err)
	c, err = mem.CreateChunk(2 * mib)
	must(t, err)
	r, err = mem.ReserveRange(2 * mib)
	must(t, err)
	must(t, mem.Map(r, 0, []alloc.Chunk{c}))
	must(t, mem.Close())
	if mem.Used() != 0 || d.fake.Get(t, "used") != 64*mib {
		t.Errorf("after Close: Used %d, the driver has %d bytes in use (64 MiB is the context's)", mem.Used(), d.fake.Get(t, "used"))
	}
	if _, err := mem.CreateChunk(2 * mib); !errors.Is(err, alloc.ErrClosed) {
		t.Errorf("CreateChunk after Close: %v, want alloc.ErrClosed", err)
	}
	must(t, mem.Close())
}

// TestRemap maps two chunks into a range in one order and into another range in the other
// order: the bytes written through the first follow the chunks, as on the GPU.
func TestRemap(t *testing.T) {
	d := openFake(t, nil)
	mem := d.Memory()
	c0, err := mem.CreateChunk(2 * mib)
	must(t, err)
	c1, err := mem.CreateChunk(2 * mib)
	must(t, err)
	r1, err := mem.ReserveRange(4 * mib)
	must(t, err)
	must(t, mem.Map(r1, 0, []alloc.Chunk{c1, c0}))
	must(t, d.copySync(r1.Addr, bytes.Repeat([]byte{1}, int(2*mib))))
	must(t, d.copySync(r1.Addr+uintptr(2*mib), bytes.Repeat([]byte{2}, int(2*mib))))
	must(t, mem.Unmap(r1, 0, 4*mib))
	r2, err := mem.ReserveRange(4 * mib)
	must(t, err)
	must(t, mem.Map(r2, 0, []alloc.Chunk{c0, c1}))
	got := make([]byte, 4*mib)
	must(t, d.readSync(got, r2.Addr))
	if got[0] != 2 || got[2*mib-1] != 2 || got[2*mib] != 1 || got[4*mib-1] != 1 {
		t.Fatalf("remapped chunks do not carry their bytes: %d %d %d %d", got[0], got[2*mib-1], got[2*mib], got[4*mib-1])
	}
	// The unmapped range is not device memory any more: a copy into it is refused.
	if err := d.copySync(r1.Addr, []byte{1}); err == nil || !strings.Contains(err.Error(), "cuMemcpyHtoD_v2: CUDA_ERROR_INVALID_VALUE") {
		t.Errorf("copy into an unmapped range: %v, want CUDA_ERROR_INVALID_VALUE", err)
	}
	must(t, mem.Close())
	if s := d.mem.Stats(); s.Maps != 4 || s.SetAccesses != 2 || s.Unmaps != 2 {
		t.Errorf("driver calls: %+v, want 4 maps, 2 set-accesses (one per batch), 2 unmaps (one per run)", s)
	}
}

// TestDriverOutOfMemory has the driver refuse an allocation the capacity had room for
// (another process took the memory): the error wraps alloc.ErrOutOfMemory and says what
// was free and unusable, and the allocators report out of memory as ever.
func TestDriverOutOfMemory(t *testing.T) {
	d := openFake(t, nil)
	for _, call := range []string{"cuMemCreate", "cuMemAlloc_v2"} {
		d.fake.Fail(call, 2)
		var err error
		if call == "cuMemCreate" {
			_, err = d.Memory().CreateChunk(2 * mib)
		} else {
			_, err = d.Memory().AllocSegment(mib)
		}
		if !errors.Is(err, alloc.ErrOutOfMemory) {
			t.Fatalf("%s refused: %v, want alloc.ErrOutOfMemory", call, err)
		}
		for _, s := range []string{"the driver refused", "unusable", "bytes free", call + ": CUDA_ERROR_OUT_OF_MEMORY"} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s refused: error %q does not say %q", call, err, s)
			}
		}
	}
	a, err := d.NewVA(2 * mib)
	must(t, err)
	d.fake.Fail("cuMemCreate", 2)
	_, err = a.Alloc(3 * mib)
	if !errors.Is(err, alloc.ErrOutOfMemory) || !strings.Contains(err.Error(), "free, of which") {
		t.Errorf("VA over a refusing driver: %v, want the allocator's out-of-memory report", err)
	}
	must(t, a.Close())
}

// TestNoVMM runs a device without virtual memory management: chunks are refused with
// ErrNoVMM, NewVA falls back to best-fit and says so, and best-fit runs.
func TestNoVMM(t *testing.T) {
	d := openFake(t, map[string]int64{"vmm": 0})
	if in := d.Info(); in.VMM || in.Granularity != 0 || !strings.Contains(in.NoVMMReason, "VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 0") {
		t.Errorf("Info: %+v", in)
	}
	if !strings.Contains(d.log.String(), "has no virtual memory management") {
		t.Errorf("Open logged %q, want a word on the missing VMM", d.log.String())
	}
	if _, err := d.Memory().CreateChunk(2 * mib); !errors.Is(err, ErrNoVMM) {
		t.Errorf("CreateChunk: %v, want ErrNoVMM", err)
	}
	a, err := d.NewVA(40 * mib)
	must(t, err)
	if a.Name() != "bestfit" || !strings.Contains(d.log.String(), "using the best-fit allocator instead of VA") {
		t.Errorf("NewVA gave %s and logged %q", a.Name(), d.log.String())
	}
	c := newTraceCheck(d.Device, a)
	must(t, c.run(randomTrace(3, 300, 256*mib, 32*mib)))
	_, err = c.finish()
	must(t, err)
}

func TestChunkSize(t *testing.T) {
	for _, c := range []struct{ gran, want, got int64 }{
		{2 * mib, 2 * mib, 2 * mib}, {2 * mib, 3 * mib, 4 * mib}, {2 * mib, 0, 40 * mib},
		{4 * mib, 2 * mib, 4 * mib}, {4 * mib, 40 * mib, 40 * mib}, {6 * mib, 2 * mib, 6 * mib}, {6 * mib, 40 * mib, 42 * mib},
		{64 * kib, 2 * mib, 2 * mib}, {64 * kib, 100 * kib, 128 * kib}, {0, 3 * mib, 4 * mib},
	} {
		d := &Device{info: Info{Granularity: c.gran}}
		if got := d.ChunkSize(c.want); got != c.got {
			t.Errorf("granularity %d: ChunkSize(%d) = %d, want %d", c.gran, c.want, got, c.got)
		}
	}
}
