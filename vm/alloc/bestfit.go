package alloc

import (
	"errors"
	"fmt"
	"sync"
)

// The constants of PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp).
const (
	smallSize     = 1 << 20  // kSmallSize: requests up to this go to the small pool
	smallBuffer   = 2 << 20  // kSmallBuffer: segment size of the small pool
	largeBuffer   = 20 << 20 // kLargeBuffer: segment size for mid-sized large requests
	minLargeAlloc = 10 << 20 // kMinLargeAlloc: from here on a request gets a segment of its own size
	roundLarge    = 2 << 20  // kRoundLarge: rounding of those own-size segments
)

// bestFit is the caching allocator of NewBestFit.
type bestFit struct {
	mu      sync.Mutex
	mem     Memory
	small   pool
	large   pool
	regions map[*region]struct{}
	stats   Stats
	closed  bool
	blocks  spareBlocks
}

// NewBestFit returns the best-fit caching allocator over mem: PyTorch's CUDA caching
// allocator for one device and one stream, with its default settings.
//
// Kept from PyTorch: 512-byte rounding; a small pool (requests up to 1 MiB) of 2 MiB segments
// and a large pool of 20 MiB segments; requests of 10 MiB and more get a segment of their own
// size rounded up to 2 MiB when no cached block fits; the smallest fitting cached block of the
// request's pool (ties to the lowest address), split when the remainder is at least 512 bytes
// (small pool) or more than 1 MiB (large pool), else handed out whole; merging with free
// neighbours on free; and segments kept cached until an allocation fails, when every cached
// unsplit segment is returned to the Memory and the allocation tried once more
// (release_cached_blocks).
//
// Simplified away, because the VM has one device and one compute stream and runs PyTorch's
// defaults: streams and events, max_split_size_mb with the oversize-block rules and
// release_available_cached_blocks that only apply with it, garbage_collection_threshold,
// roundup_power2_divisions, expandable segments, and CUDA-graph private pools.
func NewBestFit(mem Memory) Allocator {
	a := &bestFit{
		mem:     mem,
		small:   pool{splitMin: minBlock},
		large:   pool{splitMin: smallSize + 1},
		regions: map[*region]struct{}{},
	}
	if mem != nil {
		a.stats.Capacity = mem.Capacity()
	}
	return a
}

func (a *bestFit) Name() string { return "bestfit" }

func (a *bestFit) Stats() Stats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stats
}

// allocationSize is PyTorch's get_allocation_size: the segment to ask the device for.
func allocationSize(size int64) int64 {
	switch {
	case size <= smallSize:
		return smallBuffer
	case size < minLargeAlloc:
		return largeBuffer
	default:
		return roundUp(size, roundLarge)
	}
}

func (a *bestFit) poolFor(size int64) *pool {
	if size <= smallSize {
		return &a.small
	}
	return &a.large
}

func (a *bestFit) Alloc(size int64) (*Block, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.closed:
		return nil, ErrClosed
	case a.mem == nil:
		return nil, errors.New("alloc: bestfit has no Memory")
	case size <= 0:
		return nil, fmt.Errorf("%w: %d bytes", ErrInvalidSize, size)
	case size > a.stats.Capacity:
		return nil, a.fail(size)
	}
	rounded := roundUp(size, minBlock)
	p := a.poolFor(rounded)
	x := p.bestFit(rounded)
	if x == nil {
		var err error
		if x, err = a.newSegment(p, allocationSize(rounded)); err != nil {
			if !errors.Is(err, ErrOutOfMemory) {
				return nil, err
			}
			return nil, a.fail(size)
		}
	}
	p.split(x, rounded)
	a.stats.noteAlloc(size, x.size)
	return x.block(&a.blocks, a, size), nil
}

// newSegment gets a segment from the Memory, and when that runs out returns every cached
// unsplit segment and tries once more, as PyTorch does before reporting out of memory.
func (a *bestFit) newSegment(p *pool, size int64) (*piece, error) {
	seg, err := a.allocSegment(size)
	if errors.Is(err, ErrOutOfMemory) {
		if rerr := a.releaseCached(); rerr != nil {
			return nil, rerr
		}
		seg, err = a.allocSegment(size)
	}
	if err != nil {
		return nil, err
	}
	x := p.newRegion(seg.Addr, seg.Data, seg.Size)
	x.reg.seg = seg
	a.regions[x.reg] = struct{}{}
	a.stats.noteReserve(seg.Size)
	return x, nil
}

func (a *bestFit) allocSegment(size int64) (Segment, error) {
	a.stats.MapCalls++
	return a.mem.AllocSegment(size)
}

// releaseCached returns every free piece that is a whole segment to the Memory.
func (a *bestFit) releaseCached() error {
	var errs []error
	for _, p := range []*pool{&a.small, &a.large} {
		var whole []*piece
		for _, x := range p.free {
			if x.whole() {
				whole = append(whole, x)
			}
		}
		for _, x := range whole {
			p.remove(x)
			errs = append(errs, a.freeSegment(x.reg))
		}
	}
	return errors.Join(errs...)
}

func (a *bestFit) freeSegment(reg *region) error {
	delete(a.regions, reg)
	a.stats.Reserved -= reg.size
	a.stats.MapCalls++
	return a.mem.FreeSegment(reg.seg)
}

// fail counts a failure and describes it. The cached bytes could not serve the request (else
// it would not fail), so they are what is free but unusable; memory never reserved is
// free and would have been usable had there been enough of it.
func (a *bestFit) fail(size int64) error {
	a.stats.Failures++
	return oomError(a.Name(), size, a.stats, a.stats.Reserved-a.stats.Mapped)
}

// Recycle implements Recycler.
func (a *bestFit) Recycle(blocks []*Block) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.blocks.recycle(a, blocks)
}

func (a *bestFit) Free(b *Block) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := checkFree(a, b, a.closed); err != nil {
		return err
	}
	b.freed = true
	b.piece.reg.pool.release(b.piece)
	b.piece = nil // the piece may be merged away and reused
	a.stats.noteFree(b.size, b.mapped)
	return nil
}

// Close returns every segment, in use or cached, to the Memory.
func (a *bestFit) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil
	}
	a.closed = true
	var errs []error
	for reg := range a.regions {
		errs = append(errs, a.freeSegment(reg))
	}
	a.small.free, a.large.free = nil, nil
	a.stats.Requested, a.stats.Mapped = 0, 0
	return errors.Join(errs...)
}
