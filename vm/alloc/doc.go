// Package alloc carves device memory for the out-of-core VM. Under heavy swapping tensors of
// many sizes come and go out of order, and how the allocator copes decides how much of the
// budget is really usable: this package makes that measurable with two interchangeable
// allocators behind one interface.
//
// # Allocators
//
// NewBestFit is the baseline: PyTorch's CUDA caching allocator with its default settings
// (its doc says what was simplified). It asks the device for segments, keeps freed blocks
// cached, hands out the smallest cached block that fits and splits it. It is fast and returns
// memory to the device only when an allocation would otherwise fail, but under swapping its
// cache breaks into pieces no request fits, and it runs out of memory with plenty free.
//
// NewVA is the virtual-addressing allocator of the paper: physical memory comes in chunks of
// a fixed size C, and a request of s bytes gets a contiguous virtual range of ceil(s/C)*C bytes
// with any free chunks mapped into it. Since chunks need not be adjacent physically, any free
// chunk serves any request: there is no external fragmentation, and the internal
// fragmentation of a block is below C. Requests up to C/4 share pool chunks instead of taking
// one each.
//
// # Memory
//
// Both run over a Memory, the device's physical memory, modelled on the CUDA driver:
// segments (cudaMalloc), chunks (cuMemCreate), reserved ranges (cuMemAddressReserve) and maps
// (cuMemMap). NewHostMemory is real host memory as a GPU's behaves: segments are anonymous
// mmaps, chunks are pieces of a memfd mapped with MAP_FIXED into PROT_NONE reservations, so a
// VA block is a []byte whose pages come from scattered chunks and a chunk carries its bytes
// from one range to the next. NewRecycledHostMemory, used by the CPU device, drops that last
// promise, which no allocator here needs: chunks are only charged to the capacity, and ranges
// are carved out of one read-write arena mapped once, so mapping and unmapping change no page
// table. Under swapping the VA allocator maps and unmaps ranges every step, and on the CPU
// device each unmap of touched pages costs a TLB flush on every core the process runs on and
// each page of a new mapping a fault; those were most of a swapping step's system time.
// NewAccountingMemory has no bytes at all, only bookkeeping and made-up addresses, so the
// simulated device can model a 16 or 64 GiB GPU at no cost. All three enforce a hard capacity.
//
// Each Memory has its own granularity, the unit in which chunks, ranges and map offsets come
// (Memory.Granularity): the page (HostGranularity, 4 KiB) for host memory, since mmap maps
// pages; 2 MiB (Granularity) for accounting memory, as cuMemGetAllocationGranularity reports on
// today's GPUs, unless NewGranularAccountingMemory gives another; the driver's own on a CUDA
// device. A VA chunk is any positive multiple of it, so on the CPU device a small model's
// chunks can be a few pages rather than CUDA's 2 MiB.
//
// # Steady state
//
// A training step frees and allocates the same tensors every step. Neither allocator takes Go
// heap for that once warm: the pieces a merge frees are kept for the next split (and VA's whole
// pool chunks with their regions), and a caller that holds no reference to its freed blocks any
// more hands their Block structs back with Recycle (Recycler), for Alloc to return again. The
// out-of-core VM does so at the end of each step.
//
// # Fragmentation
//
// Stats give, for live blocks, the bytes Requested and the bytes Mapped for them after
// rounding, and the bytes Reserved from the Memory in all, cache included:
//
//	internal fragmentation = Mapped - Requested   (rounding: given to a block, not asked for)
//	external fragmentation = Reserved - Mapped    (held by the allocator, backing no block)
//
// Cached memory is external fragmentation by this definition even when it will be reused. The
// telling number is the part of it that cannot serve a request, which an out-of-memory error
// reports: every allocation failure wraps ErrOutOfMemory and says how many bytes were asked
// for, how many were free (capacity minus mapped) and how many of those were unusable.
package alloc
