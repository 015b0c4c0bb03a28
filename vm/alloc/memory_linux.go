package alloc

import (
	"errors"
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
// ranges. A range is anonymous read-write memory, and a released range is kept, mapped and
// with its pages, for the next range of the same size (the most recently released first), so
// Map, Unmap, ReleaseRange and ReserveRange make no system call once a training step repeats.
// On NewHostMemory each of them changes page tables: releasing a range's pages costs a TLB
// flush on every core the process runs on, and every page of a new mapping faults when first
// touched, which made up most of the system time of a swapping step.
//
// The price: a range shows whatever its address space last held rather than its chunks'
// bytes (TestHostMemoryRemap's promise does not hold), parts of a range with no chunk mapped
// do not fault, and the host memory held is up to the capacity in ranges in use plus at most
// twice the capacity in kept ranges; beyond that the least recently released are unmapped.
// Close unmaps everything.
func NewRecycledHostMemory(capacity int64) (Memory, error) {
	if capacity <= 0 {
		return nil, fmt.Errorf("%w: host memory capacity %d", ErrInvalidSize, capacity)
	}
	page := HostGranularity()
	m := newLedger("recycled host", capacity, page, &recycledBackend{
		segments: segments{page}, kept: map[int64][]keptRange{}, keptMax: keptFactor * min(capacity, maxCapacity/keptFactor)})
	return m, nil
}

// keptFactor bounds the released ranges a recycled host memory keeps, as a multiple of its
// capacity. A training step's ranges repeat, but the VA allocator releases ranges of other
// sizes than it reserves next: the small CNN of ooc train at 31% of its peak (64 KiB chunks)
// still unmapped and mapped 4 ranges a step with 1x, none after its first step with 1.5x.
const keptFactor = 2

type recycledBackend struct {
	segments
	next      int64 // chunk tokens, unique but backing nothing
	kept      map[int64][]keptRange
	keptBytes int64
	keptMax   int64
	seq       uint64
	fresh     int64 // ranges mapped anew, for tests: the rest came from kept
}

type keptRange struct {
	data []byte
	seq  uint64 // when it was released: the oldest goes first when keptMax is passed
}

func (h *recycledBackend) createChunk(size int64) (int64, error) {
	t := h.next
	h.next += size
	return t, nil
}

func (h *recycledBackend) releaseChunk(int64, int64) error { return nil }

func (h *recycledBackend) reserve(size int64) (uintptr, []byte, error) {
	if l := h.kept[size]; len(l) > 0 {
		k := l[len(l)-1]
		h.kept[size] = l[:len(l)-1]
		h.keptBytes -= size
		return uintptr(base(k.data)), k.data, nil
	}
	p, err := mmap(-1, 0, nil, size, unix.PROT_READ|unix.PROT_WRITE, reserveFlags)
	if err != nil {
		return 0, nil, err
	}
	h.fresh++
	return uintptr(p), unsafe.Slice((*byte)(p), size), nil
}

func (h *recycledBackend) release(r Range) error {
	h.seq++
	h.kept[r.Size] = append(h.kept[r.Size], keptRange{data: r.Data, seq: h.seq})
	h.keptBytes += r.Size
	for h.keptBytes > h.keptMax {
		if err := h.dropOldest(); err != nil {
			return err
		}
	}
	return nil
}

// dropOldest unmaps the least recently released kept range.
func (h *recycledBackend) dropOldest() error {
	size := int64(-1)
	for s, l := range h.kept {
		if len(l) > 0 && (size < 0 || l[0].seq < h.kept[size][0].seq) {
			size = s
		}
	}
	k := h.kept[size][0]
	h.kept[size] = h.kept[size][1:]
	h.keptBytes -= size
	if err := unix.MunmapPtr(base(k.data), uintptr(size)); err != nil {
		return fmt.Errorf("alloc: munmap range: %w", err)
	}
	return nil
}

// mapChunks and unmap change nothing: the range's own pages serve whatever chunks it holds.
func (h *recycledBackend) mapChunks(Range, int64, []*chunkState) error { return nil }
func (h *recycledBackend) unmap(Range, int64, int64) error             { return nil }

func (h *recycledBackend) close() error {
	var errs []error
	for len(h.kept) > 0 && h.keptBytes > 0 {
		errs = append(errs, h.dropOldest())
	}
	h.kept = nil
	return errors.Join(errs...)
}
