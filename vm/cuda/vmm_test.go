package cuda

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gorgonia-ooc/outofcore/vm/alloc"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/internal/fakecuda"
)

// TestVMMTriedAtOpen: a device that reports VMM support but whose driver refuses one of
// the round trip's calls (as a virtual machine's GPU proxy may) opens with VMM off, the
// call and result in NoVMMReason, nothing of the trial left behind, and NewVA gives
// best-fit, saying so once.
func TestVMMTriedAtOpen(t *testing.T) {
	for _, c := range []struct {
		call   string
		result int
		name   string
	}{
		{"cuMemAddressReserve", 801, "CUDA_ERROR_NOT_SUPPORTED"},
		{"cuMemCreate", 801, "CUDA_ERROR_NOT_SUPPORTED"},
		{"cuMemMap", 1, "CUDA_ERROR_INVALID_VALUE"},
		{"cuMemSetAccess", 1, "CUDA_ERROR_INVALID_VALUE"},
		{"cuMemUnmap", 801, "CUDA_ERROR_NOT_SUPPORTED"},
		{"cuMemRelease", 801, "CUDA_ERROR_NOT_SUPPORTED"},
		{"cuMemAddressFree", 1, "CUDA_ERROR_INVALID_VALUE"},
	} {
		t.Run(c.call, func(t *testing.T) {
			lib := fakecuda.Build(t)
			f := fakecuda.Open(t, lib)
			f.FailAt(t, c.call, c.result, 0, 1)
			log := &logBuffer{}
			d, err := Open(0, WithLibrary(lib), WithLog(log))
			must(t, err)
			defer func() { must(t, d.Close()) }()
			in := d.Info()
			if in.VMM || in.Granularity != 0 || !strings.Contains(in.NoVMMReason, c.call+": "+c.name) {
				t.Fatalf("Info: VMM %v, granularity %d, reason %q; want VMM off naming %s: %s", in.VMM, in.Granularity, in.NoVMMReason, c.call, c.name)
			}
			// A failed unmap, release or address free leaves what it did not return (a failed
			// unmap: the mapping, so its handle and reservation too) to the context's end.
			if c.call == "cuMemAddressReserve" || c.call == "cuMemCreate" || c.call == "cuMemMap" || c.call == "cuMemSetAccess" {
				for _, k := range []string{"mappings", "handles_held", "reservations"} {
					if n := f.Get(t, k); n != 0 {
						t.Errorf("%d %s left by the trial", n, k)
					}
				}
			}
			for range 2 {
				a, err := d.NewVA(2 * mib)
				must(t, err)
				if a.Name() != "bestfit" {
					t.Errorf("NewVA gave %s, want bestfit", a.Name())
				}
				b, err := a.Alloc(3 * mib)
				must(t, err)
				must(t, a.Free(b))
				must(t, a.Close())
			}
			if n := strings.Count(log.String(), "using the best-fit allocator instead of VA"); n != 1 {
				t.Errorf("the fallback was logged %d times, want once: %q", n, log.String())
			}
		})
	}
}

// TestVMMFailsMidRun: a chunk call that fails mid-run with a result other than
// out-of-memory comes back from Alloc naming the call and the result, with nothing mapped,
// created or charged by the failed attempt, and the allocator works again once the
// driver does.
func TestVMMFailsMidRun(t *testing.T) {
	for _, call := range []string{"cuMemCreate", "cuMemMap", "cuMemSetAccess", "cuMemAddressReserve"} {
		for _, r := range []struct {
			result int
			name   string
		}{{801, "CUDA_ERROR_NOT_SUPPORTED"}, {1, "CUDA_ERROR_INVALID_VALUE"}} {
			t.Run(fmt.Sprintf("%s/%s", call, r.name), func(t *testing.T) {
				d := openFake(t, nil)
				a, err := d.NewVA(2 * mib)
				must(t, err)
				keep, err := a.Alloc(5 * mib) // three chunks mapped before the failures
				must(t, err)
				before, maps := a.Stats(), d.fake.Get(t, "mappings")
				d.fake.FailAt(t, call, r.result, 0, fakecuda.Always)
				for range 3 {
					_, err := a.Alloc(7 * mib)
					if err == nil || errors.Is(err, alloc.ErrOutOfMemory) || !strings.Contains(err.Error(), call+": "+r.name) {
						t.Fatalf("Alloc with %s failing: %v, want an error naming %s and %s", call, err, call, r.name)
					}
				}
				after := a.Stats()
				if after.Requested != before.Requested || after.Mapped != before.Mapped {
					t.Errorf("the allocator's stats moved: %+v, then %+v", before, after)
				}
				if n := d.fake.Get(t, "mappings"); n != maps {
					t.Errorf("%d mappings after the failures, %d before", n, maps)
				}
				if s := d.MemoryStats(); s.Mapping != maps {
					t.Errorf("the memory counts %d mappings, the driver %d", s.Mapping, maps)
				}
				d.fake.FailAt(t, call, 0, 0, 0)
				b, err := a.Alloc(7 * mib)
				must(t, err)
				must(t, a.Free(b))
				must(t, a.Free(keep))
				must(t, a.Close())
				for _, k := range []string{"mappings", "handles_held", "reservations"} {
					if n := d.fake.Get(t, k); n != 0 {
						t.Errorf("%d %s left after Close", n, k)
					}
				}
			})
		}
	}
}

// TestUnmapFailsMidRun: an eviction whose cuMemUnmap fails (with a result other than
// out-of-memory) fails the Alloc naming the call, keeps the cached range mapped and
// cached, returns the chunks the Alloc gathered, and the next Alloc evicts it once the
// driver unmaps again; Close leaves the driver nothing.
func TestUnmapFailsMidRun(t *testing.T) {
	withKernels(t)
	d := openFake(t, nil, WithCapacity(8*mib))
	a, err := d.NewVA(2 * mib)
	must(t, err)
	old, err := a.Alloc(4 * mib)
	must(t, err)
	must(t, a.Free(old)) // cached: two chunks
	d.fake.FailAt(t, "cuMemUnmap", 801, 0, fakecuda.Always)
	before := d.MemoryStats()
	if _, err := a.Alloc(5 * mib); err == nil || !strings.Contains(err.Error(), "cuMemUnmap: CUDA_ERROR_NOT_SUPPORTED") {
		t.Fatalf("Alloc needing an eviction that fails: %v, want an error naming cuMemUnmap", err)
	}
	after := d.MemoryStats()
	if after.Mapping != before.Mapping || after.Ranges != before.Ranges {
		t.Errorf("the failed eviction changed the mappings: %+v, then %+v", before, after)
	}
	if s := a.Stats(); s.Requested != 0 || s.Mapped != 0 {
		t.Errorf("allocator stats after the failure: %+v", s)
	}
	d.fake.FailAt(t, "cuMemUnmap", 0, 0, 0)
	b, err := a.Alloc(5 * mib)
	must(t, err)
	f, err := d.checkKernel()
	must(t, err)
	must(t, d.Launch(f, Dim3{X: 1}, Dim3{X: 256}, 0, b.Addr(), uint32(256)))
	_, err = d.EndStep()
	must(t, err)
	must(t, a.Free(b))
	must(t, a.Close())
	for _, k := range []string{"mappings", "handles_held", "reservations"} {
		if n := d.fake.Get(t, k); n != 0 {
			t.Errorf("%d %s left after Close", n, k)
		}
	}
}
