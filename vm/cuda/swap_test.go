package cuda

import (
	"errors"
	"testing"

	"github.com/gorgonia-ooc/outofcore/vm/alloc"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/internal/fakecuda"
)

// replay runs a trace on an allocator without touching the bytes, and reports whether
// every allocation succeeded.
func replay(trace []traceOp, a alloc.Allocator) (alloc.Stats, error) {
	defer a.Close()
	live := map[int]*alloc.Block{}
	for _, o := range trace {
		if !o.alloc {
			if err := a.Free(live[o.id]); err != nil {
				return a.Stats(), err
			}
			delete(live, o.id)
			continue
		}
		b, err := a.Alloc(o.size)
		if err != nil {
			return a.Stats(), err
		}
		live[o.id] = b
	}
	return a.Stats(), nil
}

// leastCapacity finds, in 8 MiB steps from lo, the least capacity at which the trace runs
// on allocators over the memory newMem makes.
func leastCapacity(t *testing.T, trace []traceOp, lo int64, k allocKind, newMem func(capacity int64) (alloc.Memory, func())) int64 {
	t.Helper()
	for c := lo; c < 4*gib; c += 8 * mib {
		mem, done := newMem(c)
		_, err := replay(trace, k.new(t, mem))
		done()
		if err == nil {
			return c
		}
		if !errors.Is(err, alloc.ErrOutOfMemory) {
			t.Fatalf("%s at %d MiB: %v", k.name, c/mib, err)
		}
	}
	t.Fatalf("%s: the trace does not fit in 4 GiB", k.name)
	return 0
}

// TestSwapTrace is the target. vm/alloc's swap-heavy trace (BenchmarkSwapTrace's
// headline trace) runs through the real binding code on the fake driver, on VA and
// best-fit: every block's bytes survive the remaps, and VA needs no more device memory
// than on the host memory provider of the CPU device, by the least capacity at which the
// trace runs and by the peak reserved at a capacity that fits all.
func TestSwapTrace(t *testing.T) {
	trace := swapTrace()
	lib := fakecuda.Build(t)
	cudaMem := func(capacity int64) (alloc.Memory, func()) {
		d, err := Open(0, WithLibrary(lib), WithCapacity(capacity))
		must(t, err)
		return d.Memory(), func() { must(t, d.Close()) }
	}
	hostMem := func(capacity int64) (alloc.Memory, func()) {
		m, err := alloc.NewHostMemory(capacity)
		must(t, err)
		return m, func() { must(t, m.Close()) }
	}
	const roomy = 1 * gib
	d := openFake(t, nil, WithCapacity(roomy))
	for _, k := range []allocKind{{"va-2MiB", 2 * mib}, {"va-40MiB", 40 * mib}, {"bestfit", 0}} {
		c := newTraceCheck(d.Device, k.new(t, d.Memory()))
		must(t, c.run(trace))
		onCUDA, err := c.finish()
		must(t, err)
		if c.ooms > 0 {
			t.Fatalf("%s: %d allocations failed at %d MiB", k.name, c.ooms, roomy/mib)
		}
		mem, done := hostMem(roomy)
		onHost, err := replay(trace, k.new(t, mem))
		done()
		must(t, err)
		peak := onCUDA.PeakRequested // no allocator needs less
		lo := peak / (8 * mib) * (8 * mib)
		leastCUDA := leastCapacity(t, trace, lo, k, cudaMem)
		leastHost := leastCapacity(t, trace, lo, k, hostMem)
		t.Logf("%-8s %d ops, peak requested %d MiB: at %d MiB peak reserved %d MiB on fake CUDA, %d MiB on host memory; "+
			"least capacity %d MiB on fake CUDA, %d MiB on host memory; bytes intact",
			k.name, len(trace), peak/mib, roomy/mib, onCUDA.PeakReserved/mib, onHost.PeakReserved/mib, leastCUDA/mib, leastHost/mib)
		if k.chunk > 0 && (onCUDA.PeakReserved > onHost.PeakReserved || leastCUDA > leastHost) {
			t.Errorf("%s needs more memory on CUDA than on host memory", k.name)
		}
	}
	t.Logf("driver calls of the three checked replays: %+v", d.mem.Stats())
}
