package alloc

import (
	"errors"
	"fmt"
	"sync"
)

// smallDivisor sets the small-block limit of the VA allocator: requests of at most C/4 bytes
// are carved out of pool chunks, so a pool chunk holds at least four blocks. A tensor above
// the limit wastes under 3/4 of a chunk, as a whole-chunk block, and a pool chunk pinned by
// one live block wastes under a chunk: so the bound of less than one chunk wasted per live
// block holds for both kinds. Over the 24 swap-like traces of TestSwapTraceSweep, with 40 MiB
// chunks, a limit of C/4 needed about 100 MiB less capacity on average than C/8. C/2 packed
// tighter still, but then a pool chunk may hold just two blocks and is carved like a best-fit
// segment, with best-fit's fragmentation inside it.
const smallDivisor = 4

// vaRange is a reserved virtual range with chunks mapped into it: a large block, a cached
// range waiting for reuse, or a pool chunk.
type vaRange struct {
	r      Range
	chunks []Chunk
	seq    uint64 // when it was cached: eviction takes the least recently cached first
}

// va is the virtual-addressing allocator of the paper, with a small-block pool added.
type va struct {
	mu       sync.Mutex
	mem      Memory
	c        int64
	smallMax int64
	// free holds chunks created but mapped nowhere.
	free []Chunk
	// cache holds mapped ranges not in use, by chunk count, least recently cached first.
	cache        map[int][]*vaRange
	cachedChunks int
	seq          uint64
	small        pool
	ranges       map[*vaRange]struct{} // every range held, for Close
	stats        Stats
	closed       bool
	blocks       spareBlocks
}

// NewVA returns the virtual-addressing allocator over mem with physical chunks of chunkSize
// bytes, a positive multiple of mem.Granularity() (DefaultChunkSize is the paper's choice).
//
// A request of s bytes above the small-block limit (chunkSize/4) gets a virtual range of
// ceil(s/C)*C bytes with free chunks mapped into it, in whatever order they come, by one
// batched Map call. On free the range stays mapped in a cache keyed by chunk count and is
// reused as it is by the next request of the same count. Chunks come, in this order, from the
// chunks no range holds, from new chunks while the Memory has room, and from cached ranges,
// least recently cached first, which are unmapped and released for them. So an allocation
// fails only when live blocks hold too many chunks: there is no external fragmentation apart
// from free space inside pool chunks that also hold live small blocks.
//
// Requests up to the limit are carved, best-fit with 512-byte rounding, out of pool chunks:
// one-chunk ranges taken from the same cache. A pool chunk whose blocks are all freed goes back
// to the cache, where any one-chunk request or a chunk hunt can take it.
func NewVA(mem Memory, chunkSize int64) (Allocator, error) {
	if mem == nil {
		return nil, errors.New("alloc: va needs a Memory")
	}
	if g := mem.Granularity(); chunkSize <= 0 || chunkSize%g != 0 {
		return nil, fmt.Errorf("alloc: va chunk size %d is not a positive multiple of the memory's %d-byte granularity",
			chunkSize, g)
	}
	return &va{
		mem:      mem,
		c:        chunkSize,
		smallMax: chunkSize / smallDivisor,
		cache:    map[int][]*vaRange{},
		small:    pool{splitMin: minBlock},
		ranges:   map[*vaRange]struct{}{},
		stats:    Stats{Capacity: mem.Capacity()},
	}, nil
}

func (a *va) Name() string { return "va" }

func (a *va) Stats() Stats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stats
}

func (a *va) Alloc(size int64) (*Block, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.closed:
		return nil, ErrClosed
	case size <= 0:
		return nil, fmt.Errorf("%w: %d bytes", ErrInvalidSize, size)
	case size > a.stats.Capacity:
		return nil, a.fail(size)
	case size <= a.smallMax:
		return a.allocSmall(size)
	}
	n := int((size + a.c - 1) / a.c)
	r, err := a.getRange(n)
	if err != nil {
		return nil, a.failWith(size, err)
	}
	b := a.blocks.newBlock(Block{owner: a, addr: r.r.Addr, size: size, mapped: int64(n) * a.c, rng: r})
	if r.r.Data != nil {
		b.data = r.r.Data[:size]
	}
	a.stats.noteAlloc(size, b.mapped)
	return b, nil
}

func (a *va) allocSmall(size int64) (*Block, error) {
	rounded := roundUp(size, minBlock)
	x := a.small.bestFit(rounded)
	if x == nil {
		r, err := a.getRange(1)
		if err != nil {
			return nil, a.failWith(size, err)
		}
		x = a.small.newRegion(r.r.Addr, r.r.Data, r.r.Size)
		x.reg.rng = r
	}
	a.small.split(x, rounded)
	a.stats.noteAlloc(size, x.size)
	return x.block(&a.blocks, a, size), nil
}

// getRange returns a mapped range of n chunks: a cached one if there is one of that size,
// else a new one.
func (a *va) getRange(n int) (*vaRange, error) {
	if l := a.cache[n]; len(l) > 0 {
		r := l[len(l)-1] // the most recently cached: the likeliest still warm
		a.cache[n] = l[:len(l)-1]
		a.cachedChunks -= n
		return r, nil
	}
	chunks, err := a.gather(n)
	if err != nil {
		return nil, err
	}
	a.stats.MapCalls++
	rg, err := a.mem.ReserveRange(int64(n) * a.c)
	if err != nil {
		a.free = append(a.free, chunks...)
		return nil, err
	}
	a.stats.MapCalls++
	if err := a.mem.Map(rg, 0, chunks); err != nil {
		a.free = append(a.free, chunks...)
		a.stats.MapCalls++
		return nil, errors.Join(err, a.mem.ReleaseRange(rg))
	}
	r := &vaRange{r: rg, chunks: chunks}
	a.ranges[r] = struct{}{}
	return r, nil
}

// gather finds n unmapped chunks, unmapping cached ranges only when the Memory has no room
// for new ones, so cached ranges survive as long as possible.
func (a *va) gather(n int) ([]Chunk, error) {
	if int64(len(a.free)+a.cachedChunks)+a.creatable() < int64(n) {
		return nil, ErrOutOfMemory // fail before evicting anything: the cache stays warm
	}
	got := make([]Chunk, 0, n)
	for len(got) < n {
		switch {
		case len(a.free) > 0:
			take := min(n-len(got), len(a.free))
			got = append(got, a.free[len(a.free)-take:]...)
			a.free = a.free[:len(a.free)-take]
		case a.creatable() > 0:
			a.stats.MapCalls++
			c, err := a.mem.CreateChunk(a.c)
			if err != nil {
				a.free = append(a.free, got...)
				return nil, err
			}
			a.stats.noteReserve(a.c)
			got = append(got, c)
		case a.cachedChunks > 0:
			if err := a.evictOldest(); err != nil {
				a.free = append(a.free, got...)
				return nil, err
			}
		default: // another user of the Memory took the room counted above
			a.free = append(a.free, got...)
			return nil, ErrOutOfMemory
		}
	}
	return got, nil
}

// creatable is how many more chunks the Memory has room for. It asks the Memory rather than
// counting, because other allocators may share it.
func (a *va) creatable() int64 {
	return (a.mem.Capacity() - a.mem.Used()) / a.c
}

// evictOldest unmaps and releases the least recently cached range, freeing its chunks.
func (a *va) evictOldest() error {
	oldest := -1
	for n, l := range a.cache {
		if len(l) > 0 && (oldest < 0 || l[0].seq < a.cache[oldest][0].seq) {
			oldest = n
		}
	}
	r := a.cache[oldest][0]
	a.cache[oldest] = a.cache[oldest][1:]
	a.cachedChunks -= oldest
	if err := a.dropRange(r); err != nil {
		if _, mapped := a.ranges[r]; mapped {
			a.cache[oldest] = append([]*vaRange{r}, a.cache[oldest]...) // still the oldest
			a.cachedChunks += oldest
		}
		return err
	}
	return nil
}

// dropRange unmaps a range, frees its chunks and releases its address space. A range the
// Memory failed to unmap stays held, and mapped, so that nothing leaks: a later eviction
// or Close tries again.
func (a *va) dropRange(r *vaRange) error {
	a.stats.MapCalls += 2
	if err := a.mem.Unmap(r.r, 0, r.r.Size); err != nil {
		return err
	}
	delete(a.ranges, r)
	a.free = append(a.free, r.chunks...)
	return a.mem.ReleaseRange(r.r)
}

func (a *va) putCache(r *vaRange) {
	a.seq++
	r.seq = a.seq
	n := len(r.chunks)
	a.cache[n] = append(a.cache[n], r)
	a.cachedChunks += n
}

// failWith turns an error from the chunk hunt into the allocator's error: lack of memory
// becomes the out-of-memory report, anything else (a failing mmap, say) goes up as it is.
func (a *va) failWith(size int64, err error) error {
	if errors.Is(err, ErrOutOfMemory) {
		return a.fail(size)
	}
	return err
}

// fail counts a failure and describes it. Usable were the chunks the allocator could have
// gathered; the rest of the free bytes (free space in pool chunks that hold live blocks,
// and capacity short of a whole chunk) could not serve the request.
func (a *va) fail(size int64) error {
	a.stats.Failures++
	usable := (int64(len(a.free)+a.cachedChunks) + a.creatable()) * a.c
	return oomError(a.Name(), size, a.stats, a.stats.Capacity-a.stats.Mapped-usable)
}

// Recycle implements Recycler.
func (a *va) Recycle(blocks []*Block) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.blocks.recycle(a, blocks)
}

func (a *va) Free(b *Block) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := checkFree(a, b, a.closed); err != nil {
		return err
	}
	b.freed = true
	a.stats.noteFree(b.size, b.mapped)
	if b.rng != nil {
		a.putCache(b.rng)
		return nil
	}
	x := a.small.release(b.piece)
	b.piece = nil // the piece may be merged away and reused
	if x.whole() {
		a.small.remove(x)
		a.putCache(x.reg.rng)
		a.small.retireRegion(x)
	}
	return nil
}

// Close unmaps and releases every range, then releases every chunk.
func (a *va) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil
	}
	a.closed = true
	var errs []error
	for r := range a.ranges {
		errs = append(errs, a.dropRange(r))
	}
	for _, c := range a.free {
		a.stats.MapCalls++
		errs = append(errs, a.mem.ReleaseChunk(c))
		a.stats.Reserved -= c.Size
	}
	a.free, a.cache, a.cachedChunks, a.small.free = nil, nil, 0, nil
	a.stats.Requested, a.stats.Mapped = 0, 0
	return errors.Join(errs...)
}
