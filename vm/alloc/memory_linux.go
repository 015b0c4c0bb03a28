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
	return newLedger("host", capacity, page, &hostBackend{fd: fd, page: page, freeTokens: map[int64][]int64{}}), nil
}

type hostBackend struct {
	fd       int
	page     int64
	fileSize int64
	// freeTokens holds memfd offsets of released chunks by size, to reuse before growing the file.
	freeTokens map[int64][]int64
}

const reserveFlags = unix.MAP_PRIVATE | unix.MAP_ANONYMOUS | unix.MAP_NORESERVE

func base(data []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(data)) }

func (h *hostBackend) mmap(fd int, off int64, at unsafe.Pointer, size int64, prot, flags int) (unsafe.Pointer, error) {
	p, err := unix.MmapPtr(fd, off, at, uintptr(size), prot, flags)
	if err != nil {
		return nil, fmt.Errorf("alloc: mmap of %d bytes: %w", size, err)
	}
	return p, nil
}

func (h *hostBackend) allocSegment(size int64) (uintptr, []byte, error) {
	p, err := h.mmap(-1, 0, nil, roundUp(size, h.page), unix.PROT_READ|unix.PROT_WRITE, reserveFlags)
	if err != nil {
		return 0, nil, err
	}
	return uintptr(p), unsafe.Slice((*byte)(p), size), nil
}

func (h *hostBackend) freeSegment(s Segment) error {
	if err := unix.MunmapPtr(base(s.Data), uintptr(roundUp(s.Size, h.page))); err != nil {
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
	p, err := h.mmap(-1, 0, nil, size, unix.PROT_NONE, reserveFlags)
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
		if _, err := h.mmap(h.fd, chunks[i].token, at, run, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_FIXED); err != nil {
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
	_, err := h.mmap(-1, 0, unsafe.Add(base(r.Data), offset), size, unix.PROT_NONE, reserveFlags|unix.MAP_FIXED)
	return err
}

func (h *hostBackend) close() error {
	if err := unix.Close(h.fd); err != nil {
		return fmt.Errorf("alloc: closing the chunk file: %w", err)
	}
	return nil
}
