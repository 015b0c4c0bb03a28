package dispatch_test

import (
	"testing"

	G "gorgonia.org/gorgonia"

	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm/cuda"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/dispatch"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/dispatch/dispatchtest"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/internal/fakecuda"
)

// TestSwapHeavyEviction trains smallcnn (float32, VA, half its in-core peak) on a fake
// device whose memory is the budget and a few chunks of 64 KiB, so that the VA allocator
// evicts cached ranges inside Alloc step after step, with the fake's kernels and copies
// slowed so that work is still queued on a range when it is evicted. The fake's cuMemUnmap
// does not wait for that work, as the driver need not: a range unmapped before the
// kernels reading it ran fails the context with CUDA_ERROR_ILLEGAL_ADDRESS. The device's
// allocators wait for the free's fence before unmapping, so the steps run, and train to
// the bits of a run without delays.
func TestSwapHeavyEviction(t *testing.T) {
	c := stagingCase
	peak, err := ooc.InCorePeak(c.Build(t).Graph)
	if err != nil {
		t.Fatal(err)
	}
	run := func(delays bool) ([]byte, cuda.MemoryStats) {
		lib := dispatchtest.Setenv(t)
		f := fakecuda.Open(t, lib)
		f.Set(t, "granularity", 64<<10)
		probe, err := cuda.Open(0, cuda.WithLibrary(lib))
		if err != nil {
			t.Fatal(err)
		}
		reserve := dispatch.For(probe).Reserve()
		if err := probe.Close(); err != nil {
			t.Fatal(err)
		}
		budget := peak/2 + reserve
		d, err := cuda.Open(0, cuda.WithLibrary(lib), cuda.WithCapacity(budget+2*64<<10))
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := d.Close(); err != nil {
				t.Errorf("closing the fake device: %v", err)
			}
		}()
		if delays {
			f.Set(t, "kernel_delay_us", 300)
			f.Set(t, "copy_delay_us", 300)
		}
		m := c.Build(t)
		var loss G.Value
		G.Read(m.Loss, &loss)
		mach, err := ooc.Compile(m.Graph, ooc.BindDualValues(m.Learnables...), ooc.WithDevice(d),
			ooc.WithAllocator(ooc.VA), ooc.WithChunkSize(64<<10), ooc.WithBudget(budget))
		if err != nil {
			t.Fatal(err)
		}
		tr := &trainee{m: m, mach: mach, s: G.NewAdamSolver(G.WithLearnRate(1e-3))}
		defer func() { _ = mach.Close() }()
		var bits []byte
		for _, b := range batches(t, m, 2) {
			tr.run(t, b[0], b[1], nil)
			tr.loss = loss
			bits = append(bits, tr.bits(t)...)
		}
		return bits, d.MemoryStats()
	}
	want, _ := run(false)
	got, stats := run(true)
	if stats.Unmaps == 0 {
		t.Fatalf("no range was evicted (%+v): the test did not test", stats)
	}
	if string(got) != string(want) {
		t.Errorf("the slowed run trained to other bits than the plain one")
	}
	t.Logf("fake driver: %d unmaps, %d maps over 2 steps", stats.Unmaps, stats.Maps)
}
