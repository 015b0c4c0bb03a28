package cuda

import (
	"errors"
	"fmt"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gorgonia-ooc/outofcore/vm/alloc"
)

// PinnedPool hands out host buffers for swapped-out data. Its memory is page-locked
// (pinned) host memory from cuMemHostAlloc with CU_MEMHOSTALLOC_PORTABLE, which the copy
// engines reach by DMA: only copies to and from pinned memory are asynchronous and overlap
// compute. Buffers are carved by package alloc's best-fit allocator from host segments it
// asks for as requests need them (2 MiB, 20 MiB, or a large request's own size) and keeps
// for reuse: a steady training loop pins nothing after its first steps. Where pinning
// fails (the pool's pinned limit is reached, or the driver refuses), a segment is pageable
// memory instead, with one warning on the device's log: copies from it are staged by the
// driver and do not overlap compute.
type PinnedPool struct {
	d   *Device
	mem *hostMemory
	a   alloc.Allocator
}

// HostBuffer is a buffer from a PinnedPool. Bytes is its memory; it must not be used after
// Put.
type HostBuffer struct {
	Bytes  []byte
	block  *alloc.Block
	pinned bool
}

// Pinned reports whether the buffer is pinned (else pageable: the fallback).
func (b *HostBuffer) Pinned() bool { return b.pinned }

// PinnedStats describe a pool.
type PinnedStats struct {
	// Allocator is the best-fit allocator's stats: Requested is the bytes of live buffers,
	// Reserved the host memory the pool holds, cached segments included.
	Allocator alloc.Stats
	// PinnedBytes and PageableBytes split Reserved by kind; the peak is of pinned bytes.
	PinnedBytes, PageableBytes, PeakPinnedBytes int64
	// PinFailures counts segments that fell back to pageable memory.
	PinFailures int64
}

func newPinnedPool(d *Device, limit int64) *PinnedPool {
	ram := hostRAM()
	if limit <= 0 {
		limit = ram / 2
	}
	mem := &hostMemory{d: d, capacity: max(ram, limit), pinnedLimit: limit, segs: map[uint64]*hostSegment{}}
	return &PinnedPool{d: d, mem: mem, a: alloc.NewBestFit(mem)}
}

func hostRAM() int64 {
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err == nil && si.Totalram > 0 {
		return int64(si.Totalram) * int64(si.Unit)
	}
	return 16 << 30
}

// Get returns a host buffer of n bytes.
func (p *PinnedPool) Get(n int64) (*HostBuffer, error) {
	b, err := p.a.Alloc(n)
	if err != nil {
		return nil, fmt.Errorf("cuda: %s: host buffer of %d bytes: %w", p.d.name, n, err)
	}
	return &HostBuffer{Bytes: b.Bytes(), block: b, pinned: p.mem.isPinned(b.Addr())}, nil
}

// Put gives a buffer back to the pool for reuse.
func (p *PinnedPool) Put(b *HostBuffer) error {
	if b == nil {
		return fmt.Errorf("%w: nil host buffer", alloc.ErrInvalidFree)
	}
	b.Bytes = nil
	return p.a.Free(b.block)
}

// Stats returns the pool's counters.
func (p *PinnedPool) Stats() PinnedStats {
	s := p.mem.stats()
	s.Allocator = p.a.Stats()
	return s
}

// close returns every buffer's memory, pinned or not.
func (p *PinnedPool) close() error {
	if p == nil {
		return nil
	}
	return errors.Join(p.a.Close(), p.mem.Close())
}

// hostMemory is the pool's alloc.Memory: segments only, pinned while they may be.
type hostMemory struct {
	d                     *Device
	capacity, pinnedLimit int64

	mu                 sync.Mutex
	closed             bool
	next               uint64
	used, pinned, peak int64
	failures           int64
	warned             bool
	segs               map[uint64]*hostSegment
}

type hostSegment struct {
	alloc.Segment
	pinned bool
}

var errNoChunks = errors.New("cuda: pinned host memory has segments only, no chunks or ranges")

func (m *hostMemory) Capacity() int64 { return m.capacity }

// Granularity is the host page: the pool maps no chunks, but its segments are page-backed.
func (m *hostMemory) Granularity() int64 { return alloc.HostGranularity() }

func (m *hostMemory) Used() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.used
}

func (m *hostMemory) stats() PinnedStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return PinnedStats{PinnedBytes: m.pinned, PageableBytes: m.used - m.pinned, PeakPinnedBytes: m.peak, PinFailures: m.failures}
}

func (m *hostMemory) isPinned(addr uintptr) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.segs {
		if addr >= s.Addr && addr < s.Addr+uintptr(s.Size) {
			return s.pinned
		}
	}
	return false
}

func (m *hostMemory) AllocSegment(size int64) (alloc.Segment, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return alloc.Segment{}, alloc.ErrClosed
	}
	if size <= 0 {
		return alloc.Segment{}, fmt.Errorf("%w: host segment of %d bytes", alloc.ErrInvalidSize, size)
	}
	if size > m.capacity-m.used {
		return alloc.Segment{}, fmt.Errorf("cuda: %w: %s host buffers: %d bytes wanted, %d of %d in use", alloc.ErrOutOfMemory, m.d.name, size, m.used, m.capacity)
	}
	s := &hostSegment{Segment: alloc.Segment{Size: size}}
	why := fmt.Sprintf("the pool's pinned limit of %d bytes is reached", m.pinnedLimit)
	if m.pinned+size <= m.pinnedLimit {
		var p unsafe.Pointer // C memory: the collector leaves it alone
		err := m.d.do(func(drv *driver) error {
			return drv.check(fnMemHostAlloc, drv.call(fnMemHostAlloc, uintptr(unsafe.Pointer(&p)), uintptr(size), memHostAllocPortable))
		})
		if err == nil {
			s.Addr, s.Data, s.pinned = uintptr(p), unsafe.Slice((*byte)(p), size), true
		} else if errors.Is(err, ErrClosed) || errors.Is(err, ErrContextLost) {
			return alloc.Segment{}, err
		} else {
			why = err.Error()
		}
	}
	if !s.pinned {
		data, err := unix.Mmap(-1, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			return alloc.Segment{}, fmt.Errorf("cuda: %s: pageable host buffer of %d bytes: %w", m.d.name, size, err)
		}
		s.Addr, s.Data = uintptr(unsafe.Pointer(&data[0])), data
		m.failures++
		if !m.warned {
			m.warned = true
			fmt.Fprintf(m.d.log, "cuda: %s: pinning %d bytes of host memory failed (%s); using pageable memory, "+
				"whose copies do not overlap compute (further fallbacks are counted in the pool's stats)\n", m.d.name, size, why)
		}
	}
	m.next++
	s.Handle = m.next
	m.segs[s.Handle] = s
	m.used += size
	if s.pinned {
		m.pinned += size
		m.peak = max(m.peak, m.pinned)
	}
	return s.Segment, nil
}

func (m *hostMemory) FreeSegment(seg alloc.Segment) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return alloc.ErrClosed
	}
	s, ok := m.segs[seg.Handle]
	if !ok || s.Addr != seg.Addr {
		return fmt.Errorf("cuda: %s: host segment %d at %#x is not held", m.d.name, seg.Handle, seg.Addr)
	}
	delete(m.segs, seg.Handle)
	return m.free(s)
}

func (m *hostMemory) free(s *hostSegment) error {
	m.used -= s.Size
	if !s.pinned {
		return unix.Munmap(s.Data)
	}
	m.pinned -= s.Size
	return m.d.do(func(drv *driver) error { return drv.check(fnMemFreeHost, drv.call(fnMemFreeHost, s.Addr)) })
}

func (m *hostMemory) CreateChunk(int64) (alloc.Chunk, error)      { return alloc.Chunk{}, errNoChunks }
func (m *hostMemory) ReleaseChunk(alloc.Chunk) error              { return errNoChunks }
func (m *hostMemory) ReserveRange(int64) (alloc.Range, error)     { return alloc.Range{}, errNoChunks }
func (m *hostMemory) ReleaseRange(alloc.Range) error              { return errNoChunks }
func (m *hostMemory) Map(alloc.Range, int64, []alloc.Chunk) error { return errNoChunks }
func (m *hostMemory) Unmap(alloc.Range, int64, int64) error       { return errNoChunks }

// Close frees every segment still held. Pinned memory of a lost context goes with the
// context.
func (m *hostMemory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	segs := m.segs
	m.segs, m.closed = map[uint64]*hostSegment{}, true
	errs := make([]error, 0, len(segs))
	for _, s := range segs {
		errs = append(errs, closeError(m.free(s)))
	}
	return errors.Join(errs...)
}
