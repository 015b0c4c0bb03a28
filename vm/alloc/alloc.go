package alloc

import (
	"errors"
	"fmt"
	"os"

	"github.com/gorgonia-ooc/outofcore/internal/freelist"
)

// Granularity is the unit of physical mapping of current NVIDIA GPUs, as
// cuMemGetAllocationGranularity reports it, and of the simulated devices' accounting memory.
// Each Memory has its own unit (Memory.Granularity): the CPU device's is the host page
// (HostGranularity), a CUDA device's what its driver reports.
const Granularity = 2 << 20

// HostGranularity is the unit of physical mapping of host memory (NewHostMemory): the page
// size, 4 KiB on amd64 Linux. A VA chunk on the CPU device may be as small as one page, so a
// small model's budget is not rounded up to 2 MiB chunks that the hardware never required.
func HostGranularity() int64 { return int64(os.Getpagesize()) }

// DefaultChunkSize is the VA chunk size of the paper.
const DefaultChunkSize = 40 << 20

// minBlock is the rounding of both allocators (PyTorch's kMinBlockSize). It is also why every
// block address is 512-byte aligned: segments, chunks and ranges start at least page-aligned
// and every piece carved out of them is a multiple of 512 bytes.
const minBlock = 512

var (
	// ErrOutOfMemory is wrapped by every allocation failure caused by lack of memory.
	ErrOutOfMemory = errors.New("out of memory")
	// ErrInvalidSize is returned for allocations of zero or negative size.
	ErrInvalidSize = errors.New("alloc: invalid size")
	// ErrInvalidFree is wrapped by Free errors: nil, foreign or already freed blocks.
	ErrInvalidFree = errors.New("alloc: invalid free")
	// ErrClosed is returned by an allocator or a Memory used after Close.
	ErrClosed = errors.New("alloc: closed")
)

// Block is one live allocation.
type Block struct {
	owner  any // the allocator that made it, so a foreign block is refused
	addr   uintptr
	size   int64
	mapped int64 // physical bytes charged to the block, for Stats.Mapped
	data   []byte
	piece  *piece   // best-fit blocks and VA small blocks
	rng    *vaRange // VA large blocks
	freed  bool
}

// Bytes returns the block's memory: len(Bytes()) == Size(). It is nil when the Memory is
// accounting-only. The slice must not be used after the block is freed.
func (b *Block) Bytes() []byte { return b.data }

// Size returns the bytes requested.
func (b *Block) Size() int64 { return b.size }

// Addr returns the device (virtual) address of the first byte. It is unique among live blocks
// of one Memory and aligned to at least 256 bytes (in practice 512).
func (b *Block) Addr() uintptr { return b.addr }

// Recycler is implemented by the allocators here: Recycle takes back the *Block structs of
// blocks the caller has freed and keeps no reference to, and a later Alloc may return one of
// them for new memory. A training step frees and allocates the same tensors every step, and a
// new Block for each was a heap allocation per tensor per step. A Block that is not freed, or
// is another allocator's, is left alone. Once recycled, a Block must not be used at all: Free
// cannot tell a stale pointer to it from the block it now stands for.
type Recycler interface {
	Recycle(blocks []*Block)
}

// spares are structs of type T made unused, to be taken again instead of new ones from the heap:
// a training step allocates and frees as often as it makes tensors.
type spares[T any] struct{ freelist.List[T] }

// take returns a spare set to v, or a new one.
func (s *spares[T]) take(v T) *T {
	x := s.Get()
	*x = v
	return x
}

// keep clears x and keeps it for take.
func (s *spares[T]) keep(x *T) {
	var zero T
	*x = zero
	s.Put(x)
}

// spareBlocks are recycled Block structs (see Recycler), guarded by their allocator's lock.
type spareBlocks struct{ spares[Block] }

// newBlock is a Block with the given fields, a recycled one when there is one.
func (s *spareBlocks) newBlock(v Block) *Block { return s.take(v) }

func (s *spareBlocks) recycle(owner any, blocks []*Block) {
	for _, b := range blocks {
		if b != nil && b.owner == owner && b.freed {
			s.keep(b)
		}
	}
}

// Allocator hands out device memory from a Memory. Implementations are safe for concurrent use.
type Allocator interface {
	// Alloc returns a block of size > 0 bytes. A failure for lack of memory wraps
	// ErrOutOfMemory, and its text gives the bytes requested, free, and free but unusable.
	Alloc(size int64) (*Block, error)
	// Free returns a block. Freeing a block twice, or one from another allocator, is an error.
	Free(b *Block) error
	Stats() Stats
	// Name is "bestfit" or "va".
	Name() string
	// Close returns every physical byte to the Memory; blocks still live become invalid.
	Close() error
}

// Stats are an allocator's counters. Current values describe live blocks; peaks are the
// largest current values seen.
type Stats struct {
	// Capacity is the physical bytes the Memory may hand out.
	Capacity int64
	// Requested is the bytes asked for by live blocks.
	Requested int64
	// Mapped is the physical bytes backing live blocks, after rounding
	// (best-fit: block sizes; VA: whole chunks for large blocks, rounded sizes for small ones).
	Mapped int64
	// Reserved is the physical bytes the allocator holds from the Memory, cached ones included.
	Reserved int64

	PeakRequested, PeakMapped, PeakReserved int64

	Allocs, Frees, Failures int64
	// MapCalls counts calls that change the Memory's state: segment allocs and frees, chunk
	// creates and releases, range reserves and releases, maps and unmaps. A batched map of
	// many chunks is one call.
	MapCalls int64
}

// InternalFragmentation is memory given to live blocks beyond what they asked for.
func (s Stats) InternalFragmentation() int64 { return s.Mapped - s.Requested }

// ExternalFragmentation is memory held by the allocator but backing no live block.
func (s Stats) ExternalFragmentation() int64 { return s.Reserved - s.Mapped }

func (s Stats) String() string {
	return fmt.Sprintf("capacity %d: requested %d, mapped %d, reserved %d (peaks %d, %d, %d); "+
		"fragmentation internal %d, external %d; allocs %d, frees %d, failures %d, memory calls %d",
		s.Capacity, s.Requested, s.Mapped, s.Reserved, s.PeakRequested, s.PeakMapped, s.PeakReserved,
		s.InternalFragmentation(), s.ExternalFragmentation(), s.Allocs, s.Frees, s.Failures, s.MapCalls)
}

// noteAlloc and noteFree keep the peaks right: every change of the current values goes through them.
func (s *Stats) noteAlloc(requested, mapped int64) {
	s.Requested += requested
	s.Mapped += mapped
	s.Allocs++
	s.PeakRequested = max(s.PeakRequested, s.Requested)
	s.PeakMapped = max(s.PeakMapped, s.Mapped)
}

func (s *Stats) noteFree(requested, mapped int64) {
	s.Requested -= requested
	s.Mapped -= mapped
	s.Frees++
}

func (s *Stats) noteReserve(bytes int64) {
	s.Reserved += bytes
	s.PeakReserved = max(s.PeakReserved, s.Reserved)
}

// oomError builds the error of a failed allocation. free is what no live block uses;
// unusable is the part of it the allocator could not serve the request from.
func oomError(name string, size int64, s Stats, unusable int64) error {
	free := s.Capacity - s.Mapped
	unusable = min(max(unusable, 0), max(free, 0))
	return fmt.Errorf("alloc: %w: %s cannot allocate %d bytes: capacity %d, %d free, of which %d unusable (fragmented)",
		ErrOutOfMemory, name, size, s.Capacity, free, unusable)
}

// checkFree validates a Free call common to both allocators.
func checkFree(owner any, b *Block, closed bool) error {
	switch {
	case b == nil:
		return fmt.Errorf("%w: nil block", ErrInvalidFree)
	case b.owner != owner:
		return fmt.Errorf("%w: block at %#x was not allocated here", ErrInvalidFree, b.addr)
	case closed:
		return ErrClosed
	case b.freed:
		return fmt.Errorf("%w: block at %#x (%d bytes) already freed", ErrInvalidFree, b.addr, b.size)
	}
	return nil
}

func roundUp(n, to int64) int64 { return (n + to - 1) / to * to }
