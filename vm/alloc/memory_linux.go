package alloc

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// NewHostMemory returns a Memory of real host bytes, capped at capacity. Its granularity is
// the page size (HostGranularity).
//
// Segments are anonymous mmaps. Chunks are stretches of one memfd; a range is address space
// reserved with mmap(PROT_NONE), and mapping a chunk is mmap(MAP_FIXED|MAP_SHARED) of its
// stretch of the memfd over part of the range. So a VA block is one contiguous []byte whose
// pages live in chunks scattered through the file, exactly as device memory under
// cuMemMap. Pages are only backed once touched, so the capacity is a ceiling, not a commitment.
// Close unmaps everything and closes the memfd.
func NewHostMemory(capacity int64) (Memory, error) {
	if capacity <= 0 {
		return nil, fmt.Errorf("%w: host memory capacity %d", ErrInvalidSize, capacity)
	}
	fd, err := unix.MemfdCreate("ooc-device-chunks", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("alloc: memfd_create: %w", err)
	}
	page := HostGranularity()
	return newLedger("host", capacity, page, &hostBackend{segments: segments{page}, fd: fd, freeTokens: map[int64][]int64{}}), nil
}

type hostBackend struct {
	segments
	fd       int
	fileSize int64
	// freeTokens holds memfd offsets of released chunks by size, to reuse before growing the file.
	freeTokens map[int64][]int64
}

const reserveFlags = unix.MAP_PRIVATE | unix.MAP_ANONYMOUS | unix.MAP_NORESERVE

func base(data []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(data)) }

func mmap(fd int, off int64, at unsafe.Pointer, size int64, prot, flags int) (unsafe.Pointer, error) {
	p, err := unix.MmapPtr(fd, off, at, uintptr(size), prot, flags)
	if err != nil {
		return nil, fmt.Errorf("alloc: mmap of %d bytes: %w", size, err)
	}
	return p, nil
}

// segments are anonymous mmaps of whole pages, on both kinds of host memory.
type segments struct{ page int64 }

func (g segments) allocSegment(size int64) (uintptr, []byte, error) {
	p, err := mmap(-1, 0, nil, roundUp(size, g.page), unix.PROT_READ|unix.PROT_WRITE, reserveFlags)
	if err != nil {
		return 0, nil, err
	}
	return uintptr(p), unsafe.Slice((*byte)(p), size), nil
}

func (g segments) freeSegment(s Segment) error {
	if err := unix.MunmapPtr(base(s.Data), uintptr(roundUp(s.Size, g.page))); err != nil {
		return fmt.Errorf("alloc: munmap segment: %w", err)
	}
	return nil
}

func (h *hostBackend) createChunk(size int64) (int64, error) {
	if free := h.freeTokens[size]; len(free) > 0 {
		h.freeTokens[size] = free[:len(free)-1]
		return free[len(free)-1], nil
	}
	off := h.fileSize
	if err := unix.Ftruncate(h.fd, off+size); err != nil {
		return 0, fmt.Errorf("alloc: growing the chunk file: %w", err)
	}
	h.fileSize += size
	return off, nil
}

// releaseChunk punches the chunk out of the file, so its pages go back to the system even
// though the file keeps its size and the offset is reused later.
func (h *hostBackend) releaseChunk(token, size int64) error {
	if err := unix.Fallocate(h.fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, token, size); err != nil {
		return fmt.Errorf("alloc: releasing chunk pages: %w", err)
	}
	h.freeTokens[size] = append(h.freeTokens[size], token)
	return nil
}

func (h *hostBackend) reserve(size int64) (uintptr, []byte, error) {
	p, err := mmap(-1, 0, nil, size, unix.PROT_NONE, reserveFlags)
	if err != nil {
		return 0, nil, err
	}
	return uintptr(p), unsafe.Slice((*byte)(p), size), nil
}

func (h *hostBackend) release(r Range) error {
	if err := unix.MunmapPtr(base(r.Data), uintptr(r.Size)); err != nil {
		return fmt.Errorf("alloc: munmap range: %w", err)
	}
	return nil
}

// mapChunks issues one mmap per run of chunks that are adjacent in the file as well, so the
// cost of a batch is the number of discontinuities, not the number of chunks.
func (h *hostBackend) mapChunks(r Range, offset int64, chunks []*chunkState) error {
	start := offset
	for i := 0; i < len(chunks); {
		j, run := i+1, chunks[i].Size
		for j < len(chunks) && chunks[j].token == chunks[i].token+run {
			run += chunks[j].Size
			j++
		}
		at := unsafe.Add(base(r.Data), offset)
		if _, err := mmap(h.fd, chunks[i].token, at, run, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_FIXED); err != nil {
			// Put back what this call mapped so far, so the range is as before the call.
			_ = h.unmap(r, start, offset-start)
			return err
		}
		offset += run
		i = j
	}
	return nil
}

// unmap puts fresh PROT_NONE address space over the span: the chunks' pages stay in the
// file, and the address space stays reserved, as after cuMemUnmap.
func (h *hostBackend) unmap(r Range, offset, size int64) error {
	if size == 0 {
		return nil
	}
	_, err := mmap(-1, 0, unsafe.Add(base(r.Data), offset), size, unix.PROT_NONE, reserveFlags|unix.MAP_FIXED)
	return err
}

func (h *hostBackend) close() error {
	if err := unix.Close(h.fd); err != nil {
		return fmt.Errorf("alloc: closing the chunk file: %w", err)
	}
	return nil
}

// NewRecycledHostMemory returns a Memory of real host bytes, capped at capacity, for the
// allocators of a device whose ranges need not carry a chunk's bytes from one mapping to the
// next: the VA allocator maps a chunk into a new range only once every block in it is freed,
// so what the chunk held is dead. Its granularity is the page (HostGranularity). The CPU
// device uses it.
//
// Chunks are bookkeeping, charged to the capacity as on NewHostMemory; the bytes belong to the
// ranges. Ranges are carved best-fit out of one arena of read-write memory twice the capacity,
// mapped once, whose pages stay once touched; a released range goes back to the arena. So
// ReserveRange, Map, Unmap and ReleaseRange make no system call, and a training step that
// repeats touches the pages it touched before. On NewHostMemory each of them changes page
// tables: unmapping a range's pages costs a TLB flush on every core the process runs on, and
// every page of a new mapping faults when first touched, which made up most of the system
// time of a swapping step.
//
// The price: a range shows whatever its stretch of the arena last held rather than its
// chunks' bytes (TestHostMemoryRemap's promise does not hold), parts of a range with no chunk
// mapped do not fault, and the pages of the arena the device ever touched, up to twice its
// capacity, stay resident until Close. A range the arena cannot fit (its free space in
// pieces) is mapped by itself and unmapped on release. Close unmaps everything.
func NewRecycledHostMemory(capacity int64) (Memory, error) {
	if capacity <= 0 {
		return nil, fmt.Errorf("%w: host memory capacity %d", ErrInvalidSize, capacity)
	}
	page := HostGranularity()
	size := roundUp(arenaFactor*min(capacity, maxCapacity/arenaFactor), page)
	return newLedger("recycled host", capacity, page, &recycledBackend{
		segments: segments{page}, arenaSize: size, arena: pool{splitMin: page}, pieces: map[uintptr]*piece{}}), nil
}

// arenaFactor sizes a recycled host memory's arena: twice the capacity, so ranges in use,
// which hold at most the capacity in chunks, fill at most half of it and best-fit finds room.
const arenaFactor = 2

type recycledBackend struct {
	segments
	next      int64 // chunk tokens, unique but backing nothing
	arenaSize int64
	arenaData []byte // mapped at the first ReserveRange
	arena     pool
	pieces    map[uintptr]*piece // ranges in use, by address; nil piece: mapped outside the arena
	outside   int64              // ranges mapped outside the arena, for tests
}

func (h *recycledBackend) createChunk(size int64) (int64, error) {
	t := h.next
	h.next += size
	return t, nil
}

func (h *recycledBackend) releaseChunk(int64, int64) error { return nil }

func (h *recycledBackend) reserve(size int64) (uintptr, []byte, error) {
	if h.arenaData == nil && h.arenaSize > 0 {
		// Where the system refuses it (strict overcommit), every range is mapped by itself.
		if p, err := mmap(-1, 0, nil, h.arenaSize, unix.PROT_READ|unix.PROT_WRITE, reserveFlags); err != nil {
			h.arenaSize = 0
		} else {
			h.arenaData = unsafe.Slice((*byte)(p), h.arenaSize)
			h.arena.insert(h.arena.newRegion(uintptr(p), h.arenaData, h.arenaSize))
		}
	}
	if x := h.arena.bestFit(size); x != nil {
		h.arena.split(x, size)
		h.pieces[x.addr()] = x
		return x.addr(), x.reg.data[x.off : x.off+size : x.off+size], nil
	}
	p, err := mmap(-1, 0, nil, size, unix.PROT_READ|unix.PROT_WRITE, reserveFlags)
	if err != nil {
		return 0, nil, err
	}
	h.outside++
	h.pieces[uintptr(p)] = nil
	return uintptr(p), unsafe.Slice((*byte)(p), size), nil
}

func (h *recycledBackend) release(r Range) error {
	x, ok := h.pieces[r.Addr]
	delete(h.pieces, r.Addr)
	if !ok || x == nil {
		if err := unix.MunmapPtr(base(r.Data), uintptr(r.Size)); err != nil {
			return fmt.Errorf("alloc: munmap range: %w", err)
		}
		return nil
	}
	h.arena.release(x)
	return nil
}

// mapChunks and unmap change nothing: the range's own pages serve whatever chunks it holds.
func (h *recycledBackend) mapChunks(Range, int64, []*chunkState) error { return nil }
func (h *recycledBackend) unmap(Range, int64, int64) error             { return nil }

// close unmaps the arena; the ledger has released every range before.
func (h *recycledBackend) close() error {
	if h.arenaData == nil {
		return nil
	}
	err := unix.MunmapPtr(base(h.arenaData), uintptr(h.arenaSize))
	h.arenaData, h.arena.free = nil, nil
	if err != nil {
		return fmt.Errorf("alloc: munmap arena: %w", err)
	}
	return nil
}
