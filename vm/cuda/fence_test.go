package cuda

import (
	"testing"

	"github.com/gorgonia-ooc/outofcore/vm/alloc"
)

// TestFreeWaitsForQueuedWork: a block a slow kernel still reads is freed, and the next
// allocation makes the allocator give its memory back to the driver (the VA allocator
// unmaps the cached range; best-fit frees the cached segment). The fake driver's unmap and
// free do not wait for queued work, and the kernel would fault (ILLEGAL_ADDRESS, the
// context lost) had the allocator not waited for the free's fence.
func TestFreeWaitsForQueuedWork(t *testing.T) {
	withKernels(t)
	for _, c := range []struct {
		name         string
		make         func(d *Device) (alloc.Allocator, error)
		capacity     int64
		first, again int64
	}{
		{"va evicts a cached range", func(d *Device) (alloc.Allocator, error) { return d.NewVA(2 * mib) }, 4 * mib, 4 * mib, 2 * mib},
		{"bestfit frees a cached segment", func(d *Device) (alloc.Allocator, error) { return d.NewBestFit(), nil }, 32 * mib, 20 * mib, 30 * mib},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := openFake(t, map[string]int64{"kernel_delay_us": 100_000}, WithCapacity(c.capacity))
			a, err := c.make(d.Device)
			must(t, err)
			f, err := d.checkKernel()
			must(t, err)
			blk, err := a.Alloc(c.first)
			must(t, err)
			for range 3 {
				must(t, d.Launch(f, Dim3{X: 1}, Dim3{X: 256}, 0, blk.Addr(), uint32(256)))
			}
			must(t, a.Free(blk))
			b, err := a.Alloc(c.again)
			must(t, err)
			if _, err := d.EndStep(); err != nil {
				t.Fatalf("EndStep: %v (the kernels ran on memory given back under them)", err)
			}
			must(t, a.Free(b))
			must(t, a.Close())
			if s := d.MemoryStats(); s.Unmaps+s.Frees == 0 {
				t.Errorf("nothing was given back to the driver (%+v): the test did not test", s)
			}
		})
	}
}
