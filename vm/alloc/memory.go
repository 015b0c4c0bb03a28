package alloc

import (
	"errors"
	"fmt"
	"sync"
)

// Memory is the physical memory behind an allocator: "the device". It is modelled on CUDA's
// two ways of getting memory:
//
//   - contiguous segments, as cudaMalloc / cudaFree (the best-fit allocator);
//   - physical chunks with no address (cuMemCreate / cuMemRelease), virtual ranges with no
//     memory (cuMemAddressReserve / cuMemAddressFree), and maps of chunks into ranges
//     (cuMemMap + cuMemSetAccess / cuMemUnmap) (the VA allocator).
//
// Segments and chunks count against the capacity; ranges do not. Implementations are safe for
// concurrent use, and refuse (with an error, not a panic) handles they did not make or no
// longer hold.
type Memory interface {
	// Capacity is the physical bytes the Memory may hand out in all.
	Capacity() int64
	// Used is the physical bytes handed out now (segments and chunks).
	Used() int64
	// Granularity is the unit of physical mapping in bytes: chunk and range sizes and map
	// offsets are multiples of it. It is a multiple of 512.
	Granularity() int64

	// AllocSegment returns size bytes of contiguous, addressable memory.
	AllocSegment(size int64) (Segment, error)
	FreeSegment(s Segment) error

	// CreateChunk returns size bytes of physical memory, size a positive multiple of Granularity().
	CreateChunk(size int64) (Chunk, error)
	// ReleaseChunk returns a chunk; it must not be mapped anywhere.
	ReleaseChunk(c Chunk) error
	// ReserveRange reserves size bytes of address space, size a positive multiple of Granularity().
	ReserveRange(size int64) (Range, error)
	// ReleaseRange returns a range; nothing may be mapped in it.
	ReleaseRange(r Range) error
	// Map maps chunks back to back into r starting at offset, in one call however many
	// chunks there are. The span must be inside r and not mapped already.
	Map(r Range, offset int64, chunks []Chunk) error
	// Unmap unmaps every chunk mapped in [offset, offset+size) of r; the span must not cut a chunk.
	// The address space stays reserved.
	Unmap(r Range, offset, size int64) error

	// Close returns everything still held and makes the Memory unusable.
	Close() error
}

// Segment is contiguous physical memory at a fixed address.
type Segment struct {
	Addr   uintptr
	Size   int64
	Data   []byte // nil on accounting memory
	Handle uint64 // the provider's identifier
}

// Chunk is physical memory that has no address until it is mapped into a Range.
type Chunk struct {
	Size   int64
	Handle uint64
}

// Range is reserved address space. Data covers all of it (nil on accounting memory), but only
// the parts with a chunk mapped may be touched: the rest faults.
type Range struct {
	Addr   uintptr
	Size   int64
	Data   []byte
	Handle uint64
}

// backend is what differs between real and accounting memory: the system calls. The ledger
// around it does all checking and bookkeeping, so both providers refuse the same misuse.
type backend interface {
	allocSegment(size int64) (uintptr, []byte, error)
	freeSegment(s Segment) error
	createChunk(size int64) (token int64, err error)
	releaseChunk(token, size int64) error
	reserve(size int64) (uintptr, []byte, error)
	release(r Range) error
	mapChunks(r Range, offset int64, chunks []*chunkState) error
	unmap(r Range, offset, size int64) error
	close() error
}

type chunkState struct {
	Chunk
	token  int64 // backend's own: the memfd offset on host memory
	mapped int   // how many places it is mapped in
}

type mapping struct {
	offset int64
	chunk  *chunkState
}

type rangeState struct {
	Range
	maps []mapping
}

// ledger implements Memory over a backend.
type ledger struct {
	mu       sync.Mutex
	name     string
	capacity int64
	gran     int64
	used     int64
	next     uint64
	closed   bool
	segments map[uint64]Segment
	chunks   map[uint64]*chunkState
	ranges   map[uint64]*rangeState
	be       backend
}

// maxCapacity caps capacities so that rounding a size up never overflows an int64.
const maxCapacity = 1 << 62

func newLedger(name string, capacity, gran int64, be backend) *ledger {
	return &ledger{
		name:     name,
		capacity: min(max(capacity, 0), maxCapacity),
		gran:     gran,
		segments: map[uint64]Segment{},
		chunks:   map[uint64]*chunkState{},
		ranges:   map[uint64]*rangeState{},
		be:       be,
	}
}

// NewAccountingMemory returns a Memory with no bytes behind it: Data is always nil and
// addresses are made up (distinct and 2 MiB aligned), so any capacity costs nothing.
// Its granularity is CUDA's 2 MiB (Granularity). It is what the simulated device runs on.
// Capacities above 4 EiB are taken as 4 EiB.
func NewAccountingMemory(capacity int64) Memory {
	m, _ := NewGranularAccountingMemory(capacity, Granularity)
	return m
}

// NewGranularAccountingMemory is NewAccountingMemory with a granularity of its own, a
// positive multiple of 512 bytes: HostGranularity() makes it account as the CPU device maps.
func NewGranularAccountingMemory(capacity, granularity int64) (Memory, error) {
	if granularity <= 0 || granularity%minBlock != 0 {
		return nil, fmt.Errorf("%w: granularity %d is not a positive multiple of %d bytes", ErrInvalidSize, granularity, minBlock)
	}
	return newLedger("accounting", capacity, granularity, &accountingBackend{next: 1 << 40, gran: granularity}), nil
}

func (m *ledger) String() string {
	return fmt.Sprintf("%s memory (capacity %d)", m.name, m.capacity)
}

func (m *ledger) Capacity() int64 { return m.capacity }

func (m *ledger) Granularity() int64 { return m.gran }

func (m *ledger) Used() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.used
}

func (m *ledger) charge(size int64) error {
	if size > m.capacity-m.used {
		return fmt.Errorf("alloc: %w: %s: %d bytes wanted, %d of %d in use",
			ErrOutOfMemory, m, size, m.used, m.capacity)
	}
	return nil
}

func (m *ledger) handle() uint64 {
	m.next++
	return m.next
}

func (m *ledger) AllocSegment(size int64) (Segment, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return Segment{}, ErrClosed
	}
	if size <= 0 {
		return Segment{}, fmt.Errorf("%w: segment of %d bytes", ErrInvalidSize, size)
	}
	if err := m.charge(size); err != nil {
		return Segment{}, err
	}
	addr, data, err := m.be.allocSegment(size)
	if err != nil {
		return Segment{}, err
	}
	s := Segment{Addr: addr, Size: size, Data: data, Handle: m.handle()}
	m.segments[s.Handle] = s
	m.used += size
	return s, nil
}

func (m *ledger) FreeSegment(s Segment) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	held, ok := m.segments[s.Handle]
	if !ok || held.Addr != s.Addr {
		return fmt.Errorf("alloc: %s: segment %d at %#x is not held", m, s.Handle, s.Addr)
	}
	delete(m.segments, s.Handle)
	m.used -= held.Size
	return m.be.freeSegment(held)
}

func (m *ledger) checkGranular(what string, size int64) error {
	if size <= 0 || size%m.gran != 0 {
		return fmt.Errorf("%w: %s of %d bytes is not a positive multiple of the %d-byte granularity",
			ErrInvalidSize, what, size, m.gran)
	}
	return nil
}

func (m *ledger) CreateChunk(size int64) (Chunk, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return Chunk{}, ErrClosed
	}
	if err := m.checkGranular("chunk", size); err != nil {
		return Chunk{}, err
	}
	if err := m.charge(size); err != nil {
		return Chunk{}, err
	}
	token, err := m.be.createChunk(size)
	if err != nil {
		return Chunk{}, err
	}
	c := &chunkState{Chunk: Chunk{Size: size, Handle: m.handle()}, token: token}
	m.chunks[c.Handle] = c
	m.used += size
	return c.Chunk, nil
}

func (m *ledger) chunk(c Chunk) (*chunkState, error) {
	cs, ok := m.chunks[c.Handle]
	if !ok {
		return nil, fmt.Errorf("alloc: %s: chunk %d is not held", m, c.Handle)
	}
	return cs, nil
}

func (m *ledger) ReleaseChunk(c Chunk) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	cs, err := m.chunk(c)
	if err != nil {
		return err
	}
	if cs.mapped > 0 {
		return fmt.Errorf("alloc: %s: chunk %d released while mapped", m, c.Handle)
	}
	delete(m.chunks, c.Handle)
	m.used -= cs.Size
	return m.be.releaseChunk(cs.token, cs.Size)
}

func (m *ledger) ReserveRange(size int64) (Range, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return Range{}, ErrClosed
	}
	if err := m.checkGranular("range", size); err != nil {
		return Range{}, err
	}
	addr, data, err := m.be.reserve(size)
	if err != nil {
		return Range{}, err
	}
	r := &rangeState{Range: Range{Addr: addr, Size: size, Data: data, Handle: m.handle()}}
	m.ranges[r.Handle] = r
	return r.Range, nil
}

func (m *ledger) rangeOf(r Range) (*rangeState, error) {
	rs, ok := m.ranges[r.Handle]
	if !ok || rs.Addr != r.Addr {
		return nil, fmt.Errorf("alloc: %s: range %d at %#x is not held", m, r.Handle, r.Addr)
	}
	return rs, nil
}

func (m *ledger) ReleaseRange(r Range) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	rs, err := m.rangeOf(r)
	if err != nil {
		return err
	}
	if len(rs.maps) > 0 {
		return fmt.Errorf("alloc: %s: range %d released with %d chunks mapped", m, r.Handle, len(rs.maps))
	}
	delete(m.ranges, r.Handle)
	return m.be.release(rs.Range)
}

func (m *ledger) Map(r Range, offset int64, chunks []Chunk) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	rs, err := m.rangeOf(r)
	if err != nil {
		return err
	}
	states := make([]*chunkState, len(chunks))
	end := offset
	for i, c := range chunks {
		if states[i], err = m.chunk(c); err != nil {
			return err
		}
		end += states[i].Size
	}
	if offset < 0 || offset%m.gran != 0 || end > rs.Size {
		return fmt.Errorf("alloc: %s: cannot map [%d, %d) into a range of %d bytes", m, offset, end, rs.Size)
	}
	for _, mp := range rs.maps {
		if mp.offset < end && offset < mp.offset+mp.chunk.Size {
			return fmt.Errorf("alloc: %s: [%d, %d) of range %d is mapped already", m, offset, end, r.Handle)
		}
	}
	if err := m.be.mapChunks(rs.Range, offset, states); err != nil {
		return err
	}
	off := offset
	for _, cs := range states {
		rs.maps = append(rs.maps, mapping{off, cs})
		cs.mapped++
		off += cs.Size
	}
	return nil
}

func (m *ledger) Unmap(r Range, offset, size int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	rs, err := m.rangeOf(r)
	if err != nil {
		return err
	}
	end := offset + size
	if offset < 0 || size <= 0 || end > rs.Size {
		return fmt.Errorf("alloc: %s: cannot unmap [%d, %d) of a range of %d bytes", m, offset, end, rs.Size)
	}
	for _, mp := range rs.maps {
		inside := offset <= mp.offset && mp.offset+mp.chunk.Size <= end
		overlaps := mp.offset < end && offset < mp.offset+mp.chunk.Size
		if overlaps && !inside {
			return fmt.Errorf("alloc: %s: unmapping [%d, %d) would cut a chunk", m, offset, end)
		}
	}
	if err := m.be.unmap(rs.Range, offset, size); err != nil {
		return err
	}
	kept := rs.maps[:0]
	for _, mp := range rs.maps {
		if offset <= mp.offset && mp.offset < end {
			mp.chunk.mapped--
			continue
		}
		kept = append(kept, mp)
	}
	rs.maps = kept
	return nil
}

// Close returns everything still held, in the order CUDA requires: unmap, then release.
func (m *ledger) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	var errs []error
	for _, rs := range m.ranges {
		if len(rs.maps) > 0 {
			errs = append(errs, m.be.unmap(rs.Range, 0, rs.Size))
		}
		errs = append(errs, m.be.release(rs.Range))
	}
	for _, cs := range m.chunks {
		errs = append(errs, m.be.releaseChunk(cs.token, cs.Size))
	}
	for _, s := range m.segments {
		errs = append(errs, m.be.freeSegment(s))
	}
	errs = append(errs, m.be.close())
	m.ranges, m.chunks, m.segments = nil, nil, nil
	m.used = 0
	return errors.Join(errs...)
}

// accountingBackend makes up addresses from a counter that never goes back, so addresses of
// live blocks stay distinct without any search.
type accountingBackend struct {
	next uintptr
	gran int64
}

func (a *accountingBackend) addr(size int64) uintptr {
	p := a.next
	a.next += uintptr(roundUp(size, max(a.gran, Granularity)))
	return p
}

func (a *accountingBackend) allocSegment(size int64) (uintptr, []byte, error) {
	return a.addr(size), nil, nil
}
func (a *accountingBackend) freeSegment(Segment) error        { return nil }
func (a *accountingBackend) createChunk(int64) (int64, error) { return 0, nil }
func (a *accountingBackend) releaseChunk(int64, int64) error  { return nil }
func (a *accountingBackend) reserve(size int64) (uintptr, []byte, error) {
	return a.addr(size), nil, nil
}
func (a *accountingBackend) release(Range) error                         { return nil }
func (a *accountingBackend) mapChunks(Range, int64, []*chunkState) error { return nil }
func (a *accountingBackend) unmap(Range, int64, int64) error             { return nil }
func (a *accountingBackend) close() error                                { return nil }
