package cuda

import (
	"fmt"

	"github.com/gorgonia-ooc/outofcore/vm/alloc"
)

// ChunkSize rounds a VA chunk size up to what the device maps: a multiple of both its
// granularity and alloc.Granularity. (Today's GPUs report 2 MiB, which changes nothing.)
func (d *Device) ChunkSize(want int64) int64 {
	unit := int64(alloc.Granularity)
	if g := d.info.Granularity; g > 0 {
		unit = lcm(unit, g)
	}
	if want <= 0 {
		want = alloc.DefaultChunkSize
	}
	return (want + unit - 1) / unit * unit
}

func lcm(a, b int64) int64 {
	x, y := a, b
	for y != 0 {
		x, y = y, x%y
	}
	return a / x * b
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
