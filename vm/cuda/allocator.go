package cuda

import (
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
// memory management it returns the best-fit allocator instead and says so on the
// device's log: the VA allocator needs cuMemCreate and cuMemMap.
func (d *Device) NewVA(chunkSize int64) (alloc.Allocator, error) {
	if !d.info.VMM {
		fmt.Fprintf(d.log, "cuda: %s: no virtual memory management (%s): using the best-fit allocator instead of VA\n",
			d.name, d.info.NoVMMReason)
		return alloc.NewBestFit(d.mem), nil
	}
	return alloc.NewVA(d.mem, d.ChunkSize(chunkSize))
}
