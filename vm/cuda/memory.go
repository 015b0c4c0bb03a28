package cuda

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/gorgonia-ooc/outofcore/vm/alloc"
)

// memory is a device's memory as package alloc's allocators see it (alloc.Memory):
//
//   - segments are cuMemAlloc_v2 / cuMemFree_v2 allocations, for the best-fit allocator;
//   - chunks are cuMemCreate / cuMemRelease handles, ranges cuMemAddressReserve /
//     cuMemAddressFree reservations, and a Map of n chunks is n cuMemMap calls and one
//     cuMemSetAccess over the whole span; Unmap is one cuMemUnmap per run of adjacent
//     mappings. This is the VA allocator's memory; a device without VMM refuses it with
//     ErrNoVMM.
//
// Device memory is not host-addressable: Segment.Data and Range.Data are nil, as on
// accounting memory, and Addr is the device pointer. Handles are this memory's own
// counters, never reused, so a stale Chunk or Range is refused even when the driver has
// reused its handle or address for something new.
type memory struct {
	d        *Device
	capacity int64
	gran     int64 // 0: no VMM

	mu       sync.Mutex
	used     int64
	closed   bool
	next     uint64
	segments map[uint64]alloc.Segment
	chunks   map[uint64]*chunk
	ranges   map[uint64]*vrange
	stats    MemoryStats

	// fences are events recorded on the compute stream after a block was freed, by the
	// base address of the range or segment that held it (see fenced); spare are fence
	// events not in use.
	fences map[uintptr]uintptr
	spare  []uintptr
}

// MemoryStats counts a device memory's driver calls, by kind: the allocators count
// their Memory calls, and a batched Map of n chunks is one of those but n+1 of these.
type MemoryStats struct {
	Allocs, Frees                     int64 // cuMemAlloc_v2, cuMemFree_v2
	Creates, Releases                 int64 // cuMemCreate, cuMemRelease
	Reserves, AddressFrees            int64 // cuMemAddressReserve, cuMemAddressFree
	Maps, SetAccesses, Unmaps         int64 // cuMemMap, cuMemSetAccess, cuMemUnmap
	Segments, Chunks, Ranges, Mapping int64 // held now (Mapping: mapped chunks)
}

type chunk struct {
	alloc.Chunk
	h    uint64 // CUmemGenericAllocationHandle
	maps int
}

type vrange struct {
	alloc.Range
	maps []mapping // by offset
}

type mapping struct {
	off int64
	c   *chunk
}

func newMemory(d *Device, capacity, gran int64) *memory {
	return &memory{d: d, capacity: capacity, gran: gran,
		segments: map[uint64]alloc.Segment{}, chunks: map[uint64]*chunk{}, ranges: map[uint64]*vrange{},
		fences: map[uintptr]uintptr{}}
}

func (m *memory) String() string { return fmt.Sprintf("%s memory (capacity %d)", m.d.name, m.capacity) }

func (m *memory) Capacity() int64 { return m.capacity }

// Granularity is the device's cuMemGetAllocationGranularity minimum, or alloc.Granularity
// on a device without VMM (which maps no chunks anyway).
func (m *memory) Granularity() int64 {
	if m.gran <= 0 {
		return alloc.Granularity
	}
	return m.gran
}

func (m *memory) Used() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.used
}

// Stats returns the driver-call counts.
func (m *memory) Stats() MemoryStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.stats
	s.Segments, s.Chunks, s.Ranges = int64(len(m.segments)), int64(len(m.chunks)), int64(len(m.ranges))
	for _, r := range m.ranges {
		s.Mapping += int64(len(r.maps))
	}
	return s
}

func (m *memory) handle() uint64 {
	m.next++
	return m.next
}

// charge refuses what the capacity cannot hold.
func (m *memory) charge(what string, size int64) error {
	if size > m.capacity-m.used {
		return fmt.Errorf("cuda: %w: %s: %s of %d bytes: %d of %d in use, %d free", alloc.ErrOutOfMemory, m, what, size,
			m.used, m.capacity, m.capacity-m.used)
	}
	return nil
}

// driverOOM explains an allocation the driver refused although the capacity had room:
// that room was free by this memory's count but unusable (other contexts took it, or the
// driver could not place the request).
func (m *memory) driverOOM(err error, what string, size int64) error {
	if !isOOM(err) {
		return err
	}
	free, total, _ := m.d.FreeMemory()
	return fmt.Errorf("cuda: %w: %s: the driver refused a %s of %d bytes with %d of the capacity free by this memory's count "+
		"(unusable: the driver reports %d of %d bytes free): %w", alloc.ErrOutOfMemory, m, what, size, m.capacity-m.used, free, total, err)
}

func isOOM(err error) bool {
	e, ok := err.(*Error)
	return ok && e.Result == resultOutOfMemory
}

func (m *memory) open() error {
	if m.closed {
		return alloc.ErrClosed
	}
	return nil
}

func (m *memory) vmm(what string) error {
	if err := m.open(); err != nil {
		return err
	}
	if m.gran == 0 {
		return fmt.Errorf("cuda: %s: %w: no %s (%s); use the best-fit allocator", m, ErrNoVMM, what, m.d.info.NoVMMReason)
	}
	return nil
}

// granular checks a chunk or range size, on a device with VMM.
func (m *memory) granular(what string, size int64) error {
	if err := m.vmm(what + "s"); err != nil {
		return err
	}
	if size <= 0 || size%m.gran != 0 {
		return fmt.Errorf("%w: %s: %s of %d bytes is not a positive multiple of the device's %d-byte granularity",
			alloc.ErrInvalidSize, m, what, size, m.gran)
	}
	return nil
}

func (m *memory) AllocSegment(size int64) (alloc.Segment, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.open(); err != nil {
		return alloc.Segment{}, err
	}
	if size <= 0 {
		return alloc.Segment{}, fmt.Errorf("%w: segment of %d bytes", alloc.ErrInvalidSize, size)
	}
	if err := m.charge("segment", size); err != nil {
		return alloc.Segment{}, err
	}
	var p uint64
	err := m.d.do(func(drv *driver) error {
		m.stats.Allocs++
		return drv.check(fnMemAlloc, drv.call(fnMemAlloc, uintptr(unsafe.Pointer(&p)), uintptr(size)))
	})
	if err != nil {
		return alloc.Segment{}, m.driverOOM(err, "cuMemAlloc_v2", size)
	}
	s := alloc.Segment{Addr: uintptr(p), Size: size, Handle: m.handle()}
	m.segments[s.Handle] = s
	m.used += size
	return s, nil
}

func (m *memory) FreeSegment(s alloc.Segment) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.open(); err != nil {
		return err
	}
	held, ok := m.segments[s.Handle]
	if !ok || held.Addr != s.Addr {
		return fmt.Errorf("cuda: %s: segment %d at %#x is not held", m, s.Handle, s.Addr)
	}
	return m.d.do(func(drv *driver) error {
		if err := m.waitFence(drv, held.Addr); err != nil {
			return err
		}
		delete(m.segments, s.Handle)
		m.used -= held.Size
		m.stats.Frees++
		return drv.check(fnMemFree, drv.call(fnMemFree, held.Addr))
	})
}

func (m *memory) CreateChunk(size int64) (alloc.Chunk, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.granular("chunk", size); err != nil {
		return alloc.Chunk{}, err
	}
	if err := m.charge("chunk", size); err != nil {
		return alloc.Chunk{}, err
	}
	c := &chunk{Chunk: alloc.Chunk{Size: size}}
	err := m.d.do(func(drv *driver) error {
		prop := allocationProp(m.d.dev)
		m.stats.Creates++
		return drv.check(fnMemCreate, drv.call(fnMemCreate, uintptr(unsafe.Pointer(&c.h)), uintptr(size), uintptr(unsafe.Pointer(&prop)), 0))
	})
	if err != nil {
		return alloc.Chunk{}, m.driverOOM(err, "cuMemCreate", size)
	}
	c.Handle = m.handle()
	m.chunks[c.Handle] = c
	m.used += size
	return c.Chunk, nil
}

// chunk and rangeOf look up what a caller hands back: a device without VMM has none.
func (m *memory) chunk(c alloc.Chunk) (*chunk, error) {
	if err := m.vmm("chunks"); err != nil {
		return nil, err
	}
	held, ok := m.chunks[c.Handle]
	if !ok {
		return nil, fmt.Errorf("cuda: %s: chunk %d is not held", m, c.Handle)
	}
	return held, nil
}

// ReleaseChunk refuses a mapped chunk, as alloc.Memory requires, although the driver
// would take it and free the memory at its last unmap.
func (m *memory) ReleaseChunk(c alloc.Chunk) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	held, err := m.chunk(c)
	if err != nil {
		return err
	}
	if held.maps > 0 {
		return fmt.Errorf("cuda: %s: chunk %d released while mapped", m, c.Handle)
	}
	delete(m.chunks, c.Handle)
	m.used -= held.Size
	return m.call(&m.stats.Releases, fnMemRelease, uintptr(held.h))
}

func (m *memory) ReserveRange(size int64) (alloc.Range, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.granular("range", size); err != nil {
		return alloc.Range{}, err
	}
	var p uint64
	err := m.d.do(func(drv *driver) error {
		m.stats.Reserves++
		return drv.check(fnMemAddressReserve, drv.call(fnMemAddressReserve, uintptr(unsafe.Pointer(&p)), uintptr(size), uintptr(m.gran), 0, 0))
	})
	if err != nil {
		return alloc.Range{}, err
	}
	r := &vrange{Range: alloc.Range{Addr: uintptr(p), Size: size, Handle: m.handle()}}
	m.ranges[r.Handle] = r
	return r.Range, nil
}

func (m *memory) rangeOf(r alloc.Range) (*vrange, error) {
	if err := m.vmm("ranges"); err != nil {
		return nil, err
	}
	held, ok := m.ranges[r.Handle]
	if !ok || held.Addr != r.Addr {
		return nil, fmt.Errorf("cuda: %s: range %d at %#x is not held", m, r.Handle, r.Addr)
	}
	return held, nil
}

func (m *memory) ReleaseRange(r alloc.Range) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	held, err := m.rangeOf(r)
	if err != nil {
		return err
	}
	if len(held.maps) > 0 {
		return fmt.Errorf("cuda: %s: range %d released with %d chunks mapped", m, r.Handle, len(held.maps))
	}
	delete(m.ranges, r.Handle)
	return m.call(&m.stats.AddressFrees, fnMemAddressFree, held.Addr, uintptr(held.Size))
}

// call makes one driver call, counted in *count. Its arguments are integers, never
// pointers to Go memory (see driver.call).
func (m *memory) call(count *int64, f fn, args ...uintptr) error {
	return m.d.do(func(drv *driver) error {
		*count++
		return drv.check(f, drv.call(f, args...))
	})
}

// fence records, on the compute stream, that the block at addr was freed: the range or
// segment holding it is not unmapped or freed before the work queued so far has run.
func (m *memory) fence(addr uintptr) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	base, ok := m.baseOf(addr)
	if !ok {
		return nil // the allocator gave the memory back already (a best-fit segment, say)
	}
	return m.d.do(func(drv *driver) error {
		ev, ok := m.fences[base]
		if !ok {
			if n := len(m.spare); n > 0 {
				ev, m.spare = m.spare[n-1], m.spare[:n-1]
			} else if err := drv.check(fnEventCreate, drv.call(fnEventCreate, uintptr(unsafe.Pointer(&ev)), eventDisableTiming)); err != nil {
				return err
			}
			m.fences[base] = ev
		}
		return drv.check(fnEventRecord, drv.call(fnEventRecord, ev, m.d.streams[Compute].h))
	})
}

// baseOf finds the range or segment holding addr.
func (m *memory) baseOf(addr uintptr) (uintptr, bool) {
	for _, r := range m.ranges {
		if addr >= r.Addr && addr < r.Addr+uintptr(r.Size) {
			return r.Addr, true
		}
	}
	for _, s := range m.segments {
		if addr >= s.Addr && addr < s.Addr+uintptr(s.Size) {
			return s.Addr, true
		}
	}
	return 0, false
}

// waitFence makes the host wait, before the range or segment at base is unmapped or freed,
// for the work that may still read it: its fence, or, when no block of it was freed
// through one of the device's allocators (an allocator made around Memory() directly, or
// blocks still in use at an allocator's Close), everything queued on the compute stream.
// With m.mu held and the context current.
func (m *memory) waitFence(drv *driver, base uintptr) error {
	ev, ok := m.fences[base]
	if !ok {
		return drv.check(fnStreamSynchronize, drv.call(fnStreamSynchronize, m.d.streams[Compute].h))
	}
	delete(m.fences, base)
	m.spare = append(m.spare, ev)
	return drv.check(fnEventSynchronize, drv.call(fnEventSynchronize, ev))
}

// destroyFences destroys every fence event, with m.mu held and the context current.
func (m *memory) destroyFences(drv *driver) error {
	var errs []error
	for _, ev := range m.fences {
		m.spare = append(m.spare, ev)
	}
	for _, ev := range m.spare {
		errs = append(errs, drv.check(fnEventDestroy, drv.call(fnEventDestroy, ev)))
	}
	m.fences, m.spare = map[uintptr]uintptr{}, nil
	return errors.Join(errs...)
}
