package cuda

import (
	"errors"
	"fmt"

	"github.com/gorgonia-ooc/outofcore/vm/alloc"
)

// ChunkSize rounds a VA chunk size up to what the device maps: a multiple of its
// granularity (cuMemGetAllocationGranularity's minimum; alloc.Granularity, 2 MiB, on a
// device that reports none). Today's GPUs report 2 MiB.
func (d *Device) ChunkSize(want int64) int64 {
	unit := d.info.Granularity
	if unit <= 0 {
		unit = alloc.Granularity
	}
	if want <= 0 {
		want = alloc.DefaultChunkSize
	}
	return (want + unit - 1) / unit * unit
}

// NewVA returns the VA allocator over the device's memory with chunks of
// ChunkSize(chunkSize) bytes (0: alloc.DefaultChunkSize). On a device without virtual
// memory management (none reported, or the round trip at Open failed: Info.NoVMMReason)
// it returns the best-fit allocator instead and says so once on the device's log: the VA
// allocator needs cuMemCreate and cuMemMap. It implements vm.AllocatorMaker, through which
// package ooc makes its allocators.
//
// The allocator orders the unmapping and freeing of device memory after the work queued
// on it: see fenced.
func (d *Device) NewVA(chunkSize int64) (alloc.Allocator, error) {
	if !d.info.VMM {
		d.noVMMNote.Do(func() {
			fmt.Fprintf(d.log, "cuda: %s: no virtual memory management (%s): using the best-fit allocator instead of VA\n",
				d.name, d.info.NoVMMReason)
		})
		return d.NewBestFit(), nil
	}
	a, err := alloc.NewVA(d.mem, d.ChunkSize(chunkSize))
	if err != nil {
		return nil, err
	}
	return &fenced{Allocator: a, m: d.mem}, nil
}

// NewBestFit returns the best-fit allocator over the device's memory (cuMemAlloc
// segments), ordering frees after queued work as NewVA's does. It implements
// vm.AllocatorMaker.
func (d *Device) NewBestFit() alloc.Allocator {
	return &fenced{Allocator: alloc.NewBestFit(d.mem), m: d.mem}
}

// fenced is an allocator of the device's whose frees leave a fence: an event recorded on
// the compute stream right after the free, at the range or segment that held the block.
// When the allocator later unmaps that range (VA eviction inside Alloc) or frees that
// segment (best-fit giving cached segments back), the memory waits for the fence first
// (memory.waitFence): cuMemUnmap and cuMemFree need not wait for work still queued on the
// memory, and a kernel reading an unmapped range faults with CUDA_ERROR_ILLEGAL_ADDRESS,
// which loses the context.
//
// One event on the compute stream is enough because of the VM's swap protocol: a block is
// freed only after its swap-out's copy (device-to-host stream) has been waited for, and
// a swap-in into it (host-to-device stream) is waited for by compute before anything reads
// it, or by the host before the free; so at a free, only compute work can still touch the
// block. A fence is usually complete long before the eviction that waits for it, so the
// wait costs nothing, where a stream or context synchronize before every unmap (PyTorch's
// expandable segments) would wait for everything queued since, stalling the swaps it overlaps.
type fenced struct {
	alloc.Allocator
	m *memory
}

// Free frees b and fences where it was.
func (a *fenced) Free(b *alloc.Block) error {
	if b == nil {
		return a.Allocator.Free(b)
	}
	addr := b.Addr()
	if err := a.Allocator.Free(b); err != nil {
		return err
	}
	// A device closed or lost has nothing left to order: every later call says so.
	return closeError(a.m.fence(addr))
}

// Close waits for the compute stream before the allocator returns everything: blocks
// still in use have no fence, and work queued on them must run first.
func (a *fenced) Close() error {
	err := closeError(a.m.d.streams[Compute].Synchronize())
	return errors.Join(err, a.Allocator.Close())
}
