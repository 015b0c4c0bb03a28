package alloc

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
)

const (
	kib = int64(1) << 10
	mib = int64(1) << 20
	gib = int64(1) << 30
)

// memKind makes a fresh Memory of the given capacity, closed when the test ends.
type memKind struct {
	name string
	new  func(t testing.TB, capacity int64) Memory
}

// memKinds are host memory (the memfd), accounting memory and recycled host memory, at
// these indices.
var memKinds = []memKind{
	hostKind("host", NewHostMemory),
	{"accounting", func(t testing.TB, capacity int64) Memory {
		m := NewAccountingMemory(capacity)
		t.Cleanup(func() { _ = m.Close() })
		return m
	}},
	hostKind("recycled", NewRecycledHostMemory),
}

// hostKind is a kind of real host memory, which exists on Linux only.
func hostKind(name string, open func(capacity int64) (Memory, error)) memKind {
	return memKind{name, func(t testing.TB, capacity int64) Memory {
		t.Helper()
		m, err := open(capacity)
		if err != nil && runtime.GOOS != "linux" {
			t.Skipf("no host memory here: %v", err)
		}
		if err != nil {
			t.Fatalf("%s memory: %v", name, err)
		}
		t.Cleanup(func() { _ = m.Close() })
		return m
	}}
}

// allocKind makes an allocator over a Memory.
type allocKind struct {
	name  string
	chunk int64 // 0 for best-fit
	new   func(t testing.TB, mem Memory) Allocator
}

func vaKind(chunk int64) allocKind {
	return allocKind{fmt.Sprintf("va-%dMiB", chunk/mib), chunk, func(t testing.TB, mem Memory) Allocator {
		t.Helper()
		a, err := NewVA(mem, chunk)
		if err != nil {
			t.Fatalf("NewVA: %v", err)
		}
		return a
	}}
}

var bestFitKind = allocKind{"bestfit", 0, func(_ testing.TB, mem Memory) Allocator { return NewBestFit(mem) }}

var allocKinds = []allocKind{bestFitKind, vaKind(2 * mib), vaKind(8 * mib)}

// countingMemory counts the calls that change a Memory's state, to check Stats.MapCalls and to
// see that a trace really made the VA allocator unmap and remap chunks.
type countingMemory struct {
	Memory
	calls, unmaps, maps int64
}

func (m *countingMemory) AllocSegment(size int64) (Segment, error) {
	m.calls++
	return m.Memory.AllocSegment(size)
}
func (m *countingMemory) FreeSegment(s Segment) error { m.calls++; return m.Memory.FreeSegment(s) }
func (m *countingMemory) CreateChunk(size int64) (Chunk, error) {
	m.calls++
	return m.Memory.CreateChunk(size)
}
func (m *countingMemory) ReleaseChunk(c Chunk) error { m.calls++; return m.Memory.ReleaseChunk(c) }
func (m *countingMemory) ReserveRange(size int64) (Range, error) {
	m.calls++
	return m.Memory.ReserveRange(size)
}
func (m *countingMemory) ReleaseRange(r Range) error { m.calls++; return m.Memory.ReleaseRange(r) }
func (m *countingMemory) Map(r Range, off int64, cs []Chunk) error {
	m.calls++
	m.maps++
	return m.Memory.Map(r, off, cs)
}
func (m *countingMemory) Unmap(r Range, off, size int64) error {
	m.calls++
	m.unmaps++
	return m.Memory.Unmap(r, off, size)
}

// op is one step of a trace: allocate size bytes as tensor id, or free tensor id.
type op struct {
	alloc bool
	id    int
	size  int64
}

// pattern is the byte a block of tensor id holds at offset off.
func pattern(id int, off int64) byte {
	x := uint64(id)*0x9e3779b97f4a7c15 ^ uint64(off)*0xbf58476d1ce4e5b9
	return byte(x ^ x>>29 ^ x>>47)
}

// samples calls f for the offsets of a block that the pattern checks touch: its first and
// last 512 bytes, and a byte every ~64 KiB between. That catches blocks that overlap (their
// ends), and chunks (>= 2 MiB) mapped in the wrong place or under two blocks, while touching
// few pages: a first touch of a page is slow here, and every byte touched is slow under -race.
func samples(size int64, f func(off int64)) {
	const edge, stride = 512, 65521 // a prime stride, so that the offset wanders within pages
	if size <= 2*edge {
		for off := range size {
			f(off)
		}
		return
	}
	for off := range int64(edge) {
		f(off)
		f(size - 1 - off)
	}
	for off := int64(edge); off < size-edge; off += stride {
		f(off)
	}
}

// checker runs traces against an allocator and checks it after every step.
type checker struct {
	t      testing.TB
	a      Allocator
	mem    *countingMemory
	chunk  int64
	real   bool
	live   map[int]*Block
	dead   map[int]*Block // freed: freeing them again must fail cleanly
	byAddr []*Block       // live blocks by address, to find overlaps with neighbours only
	ooms   int
}

func newChecker(t testing.TB, ak allocKind, mk memKind, capacity int64) *checker {
	t.Helper()
	mem := &countingMemory{Memory: mk.new(t, capacity)}
	return &checker{t: t, a: ak.new(t, mem), mem: mem, chunk: ak.chunk, real: mk.name == "host" || mk.name == "recycled", live: map[int]*Block{}, dead: map[int]*Block{}}
}

// do runs one step; it returns false if an allocation ran out of memory.
func (c *checker) do(o op) bool {
	c.t.Helper()
	if !o.alloc {
		b, ok := c.live[o.id]
		if !ok {
			if b, ok := c.dead[o.id]; ok {
				if err := c.a.Free(b); !errors.Is(err, ErrInvalidFree) {
					c.t.Fatalf("second Free(%d): err = %v, want ErrInvalidFree", o.id, err)
				}
			}
			return true // else the trace frees what an out-of-memory never allocated
		}
		c.verify(o.id, b)
		if err := c.a.Free(b); err != nil {
			c.t.Fatalf("Free(%d): %v", o.id, err)
		}
		delete(c.live, o.id)
		c.dead[o.id] = b
		i := c.index(b)
		c.byAddr = slices.Delete(c.byAddr, i, i+1)
		c.checkStats()
		return true
	}
	b, err := c.a.Alloc(o.size)
	if err != nil {
		if !errors.Is(err, ErrOutOfMemory) {
			c.t.Fatalf("Alloc(%d): %v, want an out-of-memory error", o.size, err)
		}
		c.checkOOM(o.size, err)
		c.ooms++
		return false
	}
	if _, dup := c.live[o.id]; dup {
		c.t.Fatalf("trace allocates tensor %d twice", o.id)
	}
	c.checkBlock(b, o.size)
	c.live[o.id] = b
	i := c.index(b)
	c.byAddr = slices.Insert(c.byAddr, i, b)
	for _, j := range []int{i - 1, i + 1} {
		if j >= 0 && j < len(c.byAddr) {
			lo, hi := c.byAddr[min(i, j)], c.byAddr[max(i, j)]
			if lo.Addr()+uintptr(lo.Size()) > hi.Addr() {
				c.t.Fatalf("blocks overlap: [%#x +%d) and [%#x +%d)", lo.Addr(), lo.Size(), hi.Addr(), hi.Size())
			}
		}
	}
	if c.real {
		data := b.Bytes()
		samples(b.Size(), func(off int64) { data[off] = pattern(o.id, off) })
	}
	c.checkStats()
	return true
}

func (c *checker) index(b *Block) int {
	i, _ := slices.BinarySearchFunc(c.byAddr, b.Addr(), func(x *Block, a uintptr) int {
		switch {
		case x.Addr() < a:
			return -1
		case x.Addr() > a:
			return 1
		}
		return 0
	})
	return i
}

func (c *checker) checkBlock(b *Block, size int64) {
	c.t.Helper()
	if b.Size() != size {
		c.t.Fatalf("Size() = %d, want %d", b.Size(), size)
	}
	if b.Addr()%256 != 0 || b.Addr() == 0 {
		c.t.Fatalf("Addr() = %#x, not 256-byte aligned", b.Addr())
	}
	if c.real && int64(len(b.Bytes())) != size {
		c.t.Fatalf("len(Bytes()) = %d, want %d", len(b.Bytes()), size)
	}
	if !c.real && b.Bytes() != nil {
		c.t.Fatalf("accounting memory gave bytes")
	}
	if c.chunk > 0 {
		if c.chunk-1 < b.mapped-size {
			c.t.Fatalf("va block of %d bytes maps %d: internal fragmentation %d >= chunk %d", size, b.mapped, b.mapped-size, c.chunk)
		}
	}
}

// verify checks that a block still holds its pattern.
func (c *checker) verify(id int, b *Block) {
	c.t.Helper()
	if !c.real {
		return
	}
	data := b.Bytes()
	samples(b.Size(), func(off int64) {
		if data[off] != pattern(id, off) {
			c.t.Fatalf("tensor %d (%d bytes at %#x): byte %d is %#x, want %#x", id, b.Size(), b.Addr(), off, data[off], pattern(id, off))
		}
	})
}

func (c *checker) verifyAll() {
	c.t.Helper()
	for id, b := range c.live {
		c.verify(id, b)
	}
}

// freeAll checks and frees every live block, in the order of their ids.
func (c *checker) freeAll() {
	c.t.Helper()
	c.verifyAll()
	ids := make([]int, 0, len(c.live))
	for id := range c.live {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		c.do(op{id: id})
	}
}

func (c *checker) checkStats() {
	c.t.Helper()
	s := c.a.Stats()
	var req int64
	for _, b := range c.live {
		req += b.Size()
	}
	switch {
	case s.Requested != req:
		c.t.Fatalf("Requested = %d, want %d", s.Requested, req)
	case s.Mapped < s.Requested || s.Reserved < s.Mapped || s.Reserved > s.Capacity:
		c.t.Fatalf("want requested <= mapped <= reserved <= capacity: %v", s)
	case s.PeakRequested < s.Requested || s.PeakMapped < s.Mapped || s.PeakReserved < s.Reserved:
		c.t.Fatalf("a peak is below its current value: %v", s)
	case s.Reserved != c.mem.Used():
		c.t.Fatalf("Reserved = %d but the Memory has %d in use", s.Reserved, c.mem.Used())
	case s.MapCalls != c.mem.calls:
		c.t.Fatalf("MapCalls = %d, but the Memory saw %d calls", s.MapCalls, c.mem.calls)
	case s.Allocs-s.Frees != int64(len(c.live)):
		c.t.Fatalf("Allocs - Frees = %d, want %d live", s.Allocs-s.Frees, len(c.live))
	}
	// The bound of DESIGN.md: every large VA block wastes less than a chunk, a small one
	// less than 512 bytes.
	if c.chunk > 0 && len(c.live) > 0 && s.InternalFragmentation() >= int64(len(c.live))*c.chunk {
		c.t.Fatalf("va internal fragmentation %d >= %d live blocks x chunk %d", s.InternalFragmentation(), len(c.live), c.chunk)
	}
}

// checkOOM checks the error text, and for VA that the failure was legitimate: the chunks
// that live blocks pin leave too few for the request.
func (c *checker) checkOOM(size int64, err error) {
	c.t.Helper()
	s := c.a.Stats()
	for _, want := range []string{fmt.Sprint(size), fmt.Sprintf("capacity %d", s.Capacity), "unusable"} {
		if !strings.Contains(err.Error(), want) {
			c.t.Fatalf("out-of-memory error %q does not mention %q", err, want)
		}
	}
	if c.chunk == 0 {
		return
	}
	pinned := int64(0)
	pools := map[*region]bool{}
	for _, b := range c.live {
		if b.rng != nil {
			pinned += int64(len(b.rng.chunks))
		} else {
			pools[b.piece.reg] = true
		}
	}
	pinned += int64(len(pools))
	need := (size + c.chunk - 1) / c.chunk
	if size <= c.chunk/smallDivisor {
		need = 1 // a small block that fits no pool chunk needs a fresh one
	}
	if have := s.Capacity/c.chunk - pinned; have >= need {
		c.t.Fatalf("va failed to allocate %d bytes (%d chunks) with %d chunks not pinned by live blocks: %v", size, need, have, err)
	}
}

// finish frees everything, checks the counters are back to zero, closes the allocator and
// checks the Memory got every byte back.
func (c *checker) finish() {
	c.t.Helper()
	c.freeAll()
	s := c.a.Stats()
	if s.Requested != 0 || s.Mapped != 0 {
		c.t.Fatalf("after freeing all: Requested %d, Mapped %d", s.Requested, s.Mapped)
	}
	if err := c.a.Close(); err != nil {
		c.t.Fatalf("Close: %v", err)
	}
	if used := c.mem.Used(); used != 0 {
		c.t.Fatalf("after Close the Memory still has %d bytes in use", used)
	}
	if s := c.a.Stats(); s.Reserved != 0 {
		c.t.Fatalf("after Close Reserved = %d", s.Reserved)
	}
}
