package alloc

import (
	"bytes"
	"errors"
	"os"
	"testing"
)

// TestHostMemoryRemap maps two chunks into one range in one order, writes through the range,
// then maps them into another range in the other order: the bytes follow the chunks, which is
// what makes a VA block one []byte over scattered physical memory.
func TestHostMemoryRemap(t *testing.T) {
	mem := memKinds[0].new(t, 8*mib)
	c0, err := mem.CreateChunk(Granularity)
	must(t, err)
	c1, err := mem.CreateChunk(Granularity)
	must(t, err)
	r1, err := mem.ReserveRange(2 * Granularity)
	must(t, err)
	must(t, mem.Map(r1, 0, []Chunk{c1, c0}))
	copy(r1.Data[:Granularity], bytes.Repeat([]byte{1}, Granularity))
	copy(r1.Data[Granularity:], bytes.Repeat([]byte{2}, Granularity))

	r2, err := mem.ReserveRange(2 * Granularity)
	must(t, err)
	must(t, mem.Map(r2, 0, []Chunk{c0, c1}))
	if r2.Data[0] != 2 || r2.Data[Granularity-1] != 2 || r2.Data[Granularity] != 1 || r2.Data[2*Granularity-1] != 1 {
		t.Fatalf("remapped chunks do not carry their bytes")
	}
	r2.Data[5] = 7 // a chunk mapped in two places is shared, as MAP_SHARED promises
	if r1.Data[Granularity+5] != 7 {
		t.Fatalf("a write through one mapping is not seen through the other")
	}

	must(t, mem.Unmap(r1, 0, 2*Granularity))
	must(t, mem.Unmap(r2, 0, 2*Granularity))
	must(t, mem.ReleaseRange(r1))
	must(t, mem.ReleaseRange(r2))
	must(t, mem.ReleaseChunk(c0))
	// A released chunk's pages are punched out, so a new chunk at the same place reads zero.
	c2, err := mem.CreateChunk(Granularity)
	must(t, err)
	r3, err := mem.ReserveRange(Granularity)
	must(t, err)
	must(t, mem.Map(r3, 0, []Chunk{c2}))
	if !bytes.Equal(r3.Data, make([]byte, Granularity)) {
		t.Fatalf("a new chunk holds an old chunk's bytes")
	}
	if mem.Used() != 2*Granularity {
		t.Fatalf("Used = %d, want two chunks", mem.Used())
	}
}

// TestMemoryMisuse checks that both memories refuse misuse with an error, not a panic.
func TestMemoryMisuse(t *testing.T) {
	for _, mk := range memKinds {
		t.Run(mk.name, func(t *testing.T) {
			mem := mk.new(t, 8*mib)
			seg, err := mem.AllocSegment(mib)
			must(t, err)
			if _, err := mem.AllocSegment(8 * mib); !errors.Is(err, ErrOutOfMemory) {
				t.Errorf("segment beyond capacity: err = %v, want ErrOutOfMemory", err)
			}
			must(t, mem.FreeSegment(seg))
			fails(t, "double segment free", mem.FreeSegment(seg))
			fails(t, "unknown segment", mem.FreeSegment(Segment{Handle: 999}))

			_, err = mem.CreateChunk(mem.Granularity() / 2)
			fails(t, "chunk not a multiple of the granularity", err)
			_, err = mem.ReserveRange(0)
			fails(t, "empty range", err)

			c, err := mem.CreateChunk(Granularity)
			must(t, err)
			r, err := mem.ReserveRange(2 * Granularity)
			must(t, err)
			fails(t, "map beyond the range", mem.Map(r, Granularity, []Chunk{c, c}))
			fails(t, "map at an unaligned offset", mem.Map(r, mem.Granularity()/2, []Chunk{c}))
			fails(t, "map of an unknown chunk", mem.Map(r, 0, []Chunk{{Size: Granularity, Handle: 999}}))
			must(t, mem.Map(r, 0, []Chunk{c}))
			fails(t, "map over a mapping", mem.Map(r, 0, []Chunk{c}))
			fails(t, "release of a mapped chunk", mem.ReleaseChunk(c))
			fails(t, "release of a range with mappings", mem.ReleaseRange(r))
			fails(t, "unmap cutting a chunk", mem.Unmap(r, 0, mib))
			must(t, mem.Unmap(r, 0, 2*Granularity))
			must(t, mem.ReleaseRange(r))
			fails(t, "double range release", mem.ReleaseRange(r))
			must(t, mem.ReleaseChunk(c))
			fails(t, "double chunk release", mem.ReleaseChunk(c))
			if mem.Used() != 0 {
				t.Errorf("Used = %d after releasing everything", mem.Used())
			}

			// Close returns what is still held, mapped or not.
			_, err = mem.AllocSegment(mib)
			must(t, err)
			c, err = mem.CreateChunk(Granularity)
			must(t, err)
			r, err = mem.ReserveRange(Granularity)
			must(t, err)
			must(t, mem.Map(r, 0, []Chunk{c}))
			must(t, mem.Close())
			if mem.Used() != 0 {
				t.Errorf("Used = %d after Close", mem.Used())
			}
			if _, err := mem.CreateChunk(Granularity); !errors.Is(err, ErrClosed) {
				t.Errorf("CreateChunk after Close: err = %v, want ErrClosed", err)
			}
			must(t, mem.Close())
		})
	}
}

// TestHostMemoryNoLeaks creates and closes host memories with traffic on them, and checks
// the process has no more file descriptors or mappings than before.
func TestHostMemoryNoLeaks(t *testing.T) {
	count := func(dir string) int {
		entries, err := os.ReadDir(dir)
		must(t, err)
		return len(entries)
	}
	maps := func() int {
		b, err := os.ReadFile("/proc/self/maps")
		must(t, err)
		return bytes.Count(b, []byte{'\n'})
	}
	fds, vmas := count("/proc/self/fd"), maps()
	for i := range 20 {
		mem, err := []func(int64) (Memory, error){NewHostMemory, NewRecycledHostMemory}[i%2](64 * mib)
		must(t, err)
		for _, ak := range allocKinds {
			a := ak.new(t, mem)
			var live []*Block
			for i := range 30 {
				b, err := a.Alloc(int64(i%10+1) * 200 * kib)
				must(t, err)
				live = append(live, b)
				if i%3 == 0 {
					must(t, a.Free(live[0]))
					live = live[1:]
				}
			}
			must(t, a.Close()) // some blocks are still live: Close must return them too
		}
		if mem.Used() != 0 {
			t.Fatalf("Used = %d after every allocator closed", mem.Used())
		}
		must(t, mem.Close())
	}
	if got := count("/proc/self/fd"); got > fds {
		t.Errorf("%d file descriptors open, %d before", got, fds)
	}
	// The runtime may map a little more meanwhile; leaked ranges would be hundreds.
	if got := maps(); got > vmas+10 {
		t.Errorf("%d mappings, %d before", got, vmas)
	}
}

// TestRecycledHostMemoryRepeats runs the same swapping step again and again through the VA
// allocator on recycled host memory, as a training loop does. The step evicts cached ranges to
// map their chunks into ranges of other sizes (on NewHostMemory an mmap and an munmap each);
// on recycled memory every range comes from the arena, without a system call, and live blocks
// keep their bytes.
func TestRecycledHostMemoryRepeats(t *testing.T) {
	const chunk = 64 * kib
	step := randomTrace(3, 200, 24*chunk, 9*chunk)
	ch := newChecker(t, vaKind(chunk), memKinds[2], 32*chunk)
	h := ch.mem.Memory.(*ledger).be.(*recycledBackend)
	for range 5 {
		for _, o := range step {
			ch.do(o)
		}
		ch.freeAll() // the step's end: everything freed, as the machine does
	}
	if ch.mem.unmaps < 5 {
		t.Fatalf("the steps evicted %d cached ranges: the trace tests no remapping", ch.mem.unmaps)
	}
	if h.outside != 0 {
		t.Errorf("%d ranges were mapped outside the arena, want none", h.outside)
	}
	ch.finish()
}

// TestRecycledHostMemoryArena reserves more ranges than the arena holds: the rest are mapped
// by themselves and unmapped on release, the arena's stretches are reused with their bytes,
// and Close unmaps the arena.
func TestRecycledHostMemoryArena(t *testing.T) {
	page := HostGranularity()
	mem := memKinds[2].new(t, 4*page)
	h := mem.(*ledger).be.(*recycledBackend)
	var rs []Range
	for range 3 { // 3 x 3 pages: two fit the 8-page arena
		r, err := mem.ReserveRange(3 * page)
		must(t, err)
		r.Data[len(r.Data)-1] = byte(len(rs) + 1) // a range is read-write memory, chunks mapped or not
		rs = append(rs, r)
	}
	if h.outside != 1 {
		t.Fatalf("%d ranges outside an arena of %d pages after three of 3 pages, want 1", h.outside, h.arenaSize/page)
	}
	for _, r := range rs {
		must(t, mem.ReleaseRange(r))
	}
	again, err := mem.ReserveRange(3 * page)
	must(t, err)
	if again.Addr != rs[0].Addr || again.Data[len(again.Data)-1] != 1 {
		t.Errorf("a released stretch of the arena is not reused, bytes and all")
	}
	if len(h.pieces) != 1 {
		t.Errorf("%d ranges held, want 1", len(h.pieces))
	}
	must(t, mem.Close())
	if h.arenaData != nil {
		t.Errorf("Close left the arena mapped")
	}
}

// TestRecycledHostMemoryNoArena: an arena the system will not map (here 2^62 bytes, beyond any
// address space) leaves every range mapped by itself, working as before.
func TestRecycledHostMemoryNoArena(t *testing.T) {
	mem := memKinds[2].new(t, 1<<61)
	r, err := mem.ReserveRange(2 * HostGranularity())
	must(t, err)
	r.Data[len(r.Data)-1] = 1
	if h := mem.(*ledger).be.(*recycledBackend); h.arenaData != nil || h.outside != 1 {
		t.Fatalf("arena mapped %v, %d ranges outside it; want no arena and the range outside", h.arenaData != nil, h.outside)
	}
	must(t, mem.ReleaseRange(r))
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func fails(t testing.TB, what string, err error) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error", what)
	}
}

// TestGranularity checks that each memory states its own unit of mapping and enforces it, and
// that the VA allocator takes chunks of any multiple of it: a page on host memory, where the
// paper's 2 MiB would round a small model's budget far above its peak.
func TestGranularity(t *testing.T) {
	page := HostGranularity()
	paged := memKind{"accounting-page", func(t testing.TB, capacity int64) Memory {
		m, err := NewGranularAccountingMemory(capacity, page)
		must(t, err)
		t.Cleanup(func() { _ = m.Close() })
		return m
	}}
	for _, c := range []struct {
		mk    memKind
		gran  int64
		chunk int64 // a VA chunk the memory takes: 16 units
	}{
		{memKinds[0], page, 16 * page},
		{paged, page, 16 * page},
		{memKinds[1], Granularity, 16 * Granularity},
	} {
		t.Run(c.mk.name, func(t *testing.T) {
			mem := c.mk.new(t, 64*mib)
			if g := mem.Granularity(); g != c.gran {
				t.Fatalf("Granularity() = %d, want %d", g, c.gran)
			}
			if _, err := NewVA(mem, c.gran+c.gran/2); err == nil {
				t.Errorf("NewVA took a chunk of 1.5 units")
			}
			ak := allocKind{"va", c.chunk, func(t testing.TB, mem Memory) Allocator {
				a, err := NewVA(mem, c.chunk)
				must(t, err)
				return a
			}}
			capacity := 64 * c.chunk
			ch := newChecker(t, ak, c.mk, capacity)
			for i, o := range randomTrace(7, 600, capacity*3/4, 6*c.chunk) {
				ch.do(o)
				if i%100 == 0 {
					ch.verifyAll()
				}
			}
			if ch.mem.unmaps == 0 {
				t.Errorf("the trace never made va unmap a cached range: it tests no remapping")
			}
			ch.finish()
		})
	}
	for _, g := range []int64{0, -4096, 1000} {
		if _, err := NewGranularAccountingMemory(mib, g); !errors.Is(err, ErrInvalidSize) {
			t.Errorf("granularity %d: err = %v, want ErrInvalidSize", g, err)
		}
	}
}
