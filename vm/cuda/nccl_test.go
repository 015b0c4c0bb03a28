package cuda

import (
	"errors"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/internal/fakecuda"
)

// fakeNCCL opens n devices of one fresh fake driver and points $OOC_NCCL_LIBRARY at a
// fresh fake NCCL of the given version (ncclGetVersion's code). At cleanup it checks the
// NCCL left no communicator and no device memory behind.
func fakeNCCL(t *testing.T, n int, version int64, opts ...Option) ([]*Device, *fakecuda.Fake) {
	t.Helper()
	lib := fakecuda.Build(t)
	f := fakecuda.Open(t, lib)
	f.Set(t, "devices", int64(n))
	nlib := fakecuda.BuildNCCL(t)
	t.Setenv(NCCLLibraryEnv, nlib)
	t.Setenv("OOC_FAKENCCL_DRIVER", lib)
	nf := fakecuda.OpenNCCL(t, nlib)
	nf.Set(t, "version", version)
	var ds []*Device
	for i := range n {
		d, err := Open(i, append([]Option{WithLibrary(lib), WithLog(&logBuffer{})}, opts...)...)
		if err != nil {
			t.Fatalf("Open(%d): %v", i, err)
		}
		ds = append(ds, d)
	}
	used := f.Get(t, "used")
	t.Cleanup(func() {
		if c := nf.Get(t, "comms"); c != 0 {
			t.Errorf("%d NCCL communicators left", c)
		}
		if u := f.Get(t, "used"); u != used {
			t.Errorf("%d device bytes in use after the NCCL closed, %d before it opened", u, used)
		}
		for _, d := range ds {
			must(t, d.Close())
		}
	})
	return ds, nf
}

// hostMean is the elementwise mean the fake computes: a sum in rank order, then a division.
func hostMean[T float32 | float64](xs [][]T) []T {
	out := append([]T(nil), xs[0]...)
	for _, x := range xs[1:] {
		for i, v := range x {
			out[i] += v
		}
	}
	for i := range out {
		out[i] /= T(len(xs))
	}
	return out
}

func raw[T float32 | float64](x []T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), len(x)*int(unsafe.Sizeof(x[0])))
}

func randoms[T float32 | float64](r *rand.Rand, ranks, n int) [][]T {
	xs := make([][]T, ranks)
	for i := range xs {
		for range n {
			xs[i] = append(xs[i], T(r.NormFloat64()))
		}
	}
	return xs
}

func checkMean[T float32 | float64](t *testing.T, c *NCCL, dt tensor.Dtype, ranks, n int) {
	t.Helper()
	xs := randoms[T](rand.New(rand.NewPCG(uint64(ranks), uint64(n))), ranks, n)
	want := hostMean(xs)
	bufs := make([][]byte, ranks)
	for i, x := range xs {
		bufs[i] = raw(x)
	}
	must(t, c.AllReduceMean(dt, bufs))
	for r, x := range xs {
		for i := range x {
			if x[i] != want[i] {
				t.Fatalf("rank %d element %d: %v, want %v", r, i, x[i], want[i])
			}
		}
	}
}

// TestNCCLAllReduceMean averages on 1 to 3 devices of one process (NewNCCL), with ncclAvg
// and, as NCCL before 2.10 must, with a sum scaled on the host; both give the host mean's
// bits on the fake, which sums in rank order.
func TestNCCLAllReduceMean(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ranks   int
		version int64
	}{
		{"one rank", 1, 22304},
		{"two ranks, ncclAvg", 2, 22304},
		{"three ranks, ncclAvg", 3, 22304},
		{"two ranks, NCCL 2.9: sum and scale", 2, 20903},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds, nf := fakeNCCL(t, tc.ranks, tc.version)
			c, err := NewNCCL(ds)
			must(t, err)
			defer func() { must(t, c.Close()) }()
			if c.Ranks() != tc.ranks || c.Name() != "nccl" {
				t.Errorf("Ranks %d, Name %q", c.Ranks(), c.Name())
			}
			checkMean[float32](t, c, tensor.Float32, tc.ranks, 1000)
			checkMean[float64](t, c, tensor.Float64, tc.ranks, 77)
			// A larger buffer after a smaller one grows the staging buffers.
			checkMean[float64](t, c, tensor.Float64, tc.ranks, 5000)
			if got := nf.Get(t, "allreduces"); got != 3 {
				t.Errorf("%d all-reduce rounds, want 3", got)
			}
		})
	}
}

// TestNCCLJoinRanks runs one rank per goroutine, as one process per GPU would: rank 0 makes
// the id and passes it by file to two ranks and by environment to the third; every rank
// joins and all-reduces on its own.
func TestNCCLJoinRanks(t *testing.T) {
	const ranks, n = 4, 300
	ds, _ := fakeNCCL(t, ranks, 22304)
	id, err := NewUniqueID()
	must(t, err)
	path := filepath.Join(t.TempDir(), "nccl.id")
	must(t, id.WriteFile(path))
	t.Setenv(UniqueIDEnv, id.String())
	xs := randoms[float64](rand.New(rand.NewPCG(4, 300)), ranks, n)
	want := hostMean(xs)
	errs := make([]error, ranks)
	var wg sync.WaitGroup
	for r := range ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = func() error {
				got := id
				var err error
				switch r {
				case 1, 2:
					got, err = ReadUniqueID(path)
				case 3:
					got, _, err = UniqueIDFromEnv()
				}
				if err != nil {
					return err
				}
				c, err := JoinNCCL(ds[r], r, ranks, got)
				if err != nil {
					return err
				}
				for range 2 { // the second round checks a rank cannot run ahead of the others
					if err := c.AllReduceMean(tensor.Float64, [][]byte{raw(xs[r])}); err != nil {
						return errors.Join(err, c.Close())
					}
					copy(xs[r], want)
				}
				return c.Close()
			}()
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		for i := range xs[r] {
			if xs[r][i] != want[i] {
				t.Fatalf("rank %d element %d: %v, want %v", r, i, xs[r][i], want[i])
			}
		}
	}
}

// TestNCCLErrors: what a user meets when NCCL is missing, fails or is misused.
func TestNCCLErrors(t *testing.T) {
	t.Run("no library", func(t *testing.T) {
		t.Setenv(NCCLLibraryEnv, filepath.Join(t.TempDir(), "libnccl.so.2"))
		_, err := NewUniqueID()
		if !errors.Is(err, ErrNoNCCL) || !strings.Contains(err.Error(), "libnccl.so.2 not found") {
			t.Errorf("got %v, want ErrNoNCCL naming the library", err)
		}
	})
	t.Run("failed call", func(t *testing.T) {
		ds, nf := fakeNCCL(t, 1, 22304)
		c, err := NewNCCL(ds)
		must(t, err)
		defer func() { must(t, c.Close()) }()
		nf.Fail("ncclAllReduce", 5)
		err = c.AllReduceMean(tensor.Float32, [][]byte{make([]byte, 16)})
		if err == nil || !strings.Contains(err.Error(), "ncclAllReduce: invalid usage (run with NCCL_DEBUG=WARN for details) (ncclResult_t 5)") {
			t.Errorf("got %v, want ncclGetErrorString's text", err)
		}
		// The communicator still works.
		checkMean[float32](t, c, tensor.Float32, 1, 8)
	})
	t.Run("bad input", func(t *testing.T) {
		ds, _ := fakeNCCL(t, 2, 22304)
		c, err := NewNCCL(ds)
		must(t, err)
		defer func() { must(t, c.Close()) }()
		for _, tc := range []struct {
			dt   tensor.Dtype
			bufs [][]byte
			want string
		}{
			{tensor.Float32, [][]byte{make([]byte, 8)}, "1 buffers on 2 local ranks"},
			{tensor.Float32, [][]byte{make([]byte, 8), make([]byte, 4)}, "buffers of 8 and 4 bytes"},
			{tensor.Int, [][]byte{make([]byte, 8), make([]byte, 8)}, "int gradients is not supported"},
		} {
			if err := c.AllReduceMean(tc.dt, tc.bufs); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error saying %q", err, tc.want)
			}
		}
		if _, err := JoinNCCL(ds[0], 2, 2, UniqueID{}); err == nil || !strings.Contains(err.Error(), "rank 2 of 2") {
			t.Errorf("JoinNCCL rank 2 of 2: %v", err)
		}
	})
	t.Run("doctor's check", func(t *testing.T) {
		ds, _ := fakeNCCL(t, 1, 22304)
		note, err := ds[0].checkNCCL()
		if err != nil || !strings.Contains(note, "NCCL 2.23.4 from ") || !strings.HasSuffix(note, "libnccl.so.2, 1 MiB intact") {
			t.Errorf("checkNCCL: %q, %v", note, err)
		}
	})
	t.Run("unique id text", func(t *testing.T) {
		for _, s := range []string{"", "zz", strings.Repeat("ab", 127)} {
			if _, err := ParseUniqueID(s); err == nil || !strings.Contains(err.Error(), "256 hex digits") {
				t.Errorf("ParseUniqueID(%q): %v", s, err)
			}
		}
		var id UniqueID
		id[0], id[127] = 1, 0xff
		if got, err := ParseUniqueID(id.String() + "\n"); err != nil || got != id {
			t.Errorf("round trip: %v, %v", got, err)
		}
	})
}

// TestNCCLAllReduceMeanDevice averages buffers already on two devices in place (as ooc train
// does with each replica's gradients before its update there): the host mean's bits on the
// fake, which sums in rank order; NCCL before 2.10 has no ncclAvg and is refused, saying so.
func TestNCCLAllReduceMeanDevice(t *testing.T) {
	for _, version := range []int64{22304, 20903} {
		ds, nf := fakeNCCL(t, 2, version)
		c, err := NewNCCL(ds)
		must(t, err)
		const n = 300
		xs := randoms[float32](rand.New(rand.NewPCG(2, n)), 2, n)
		want := hostMean(xs)
		addrs := make([]uintptr, len(ds))
		for i, d := range ds {
			seg, err := d.Memory().AllocSegment(4 * n)
			must(t, err)
			t.Cleanup(func() { must(t, d.Memory().FreeSegment(seg)) })
			addrs[i] = seg.Addr
			must(t, d.copySync(seg.Addr, raw(xs[i])))
		}
		err = c.AllReduceMeanDevice(tensor.Float32, addrs, n)
		if version < ncclAvgVersion {
			if err == nil || !strings.Contains(err.Error(), "no ncclAvg") || c.AveragesOnDevice() {
				t.Errorf("NCCL %d: %v, AveragesOnDevice %v", version, err, c.AveragesOnDevice())
			}
			must(t, c.Close())
			continue
		}
		must(t, err)
		for i, d := range ds {
			got := make([]float32, n)
			dst := raw(got)
			must(t, d.do(func(drv *driver) error {
				return drv.check(fnMemcpyDtoH, drv.call(fnMemcpyDtoH, uintptr(unsafe.Pointer(&dst[0])), addrs[i], 4*n))
			}))
			for k := range got {
				if got[k] != want[k] {
					t.Fatalf("rank %d element %d: %v, want %v", i, k, got[k], want[k])
				}
			}
		}
		if got := nf.Get(t, "allreduces"); got != 1 {
			t.Errorf("%d all-reduce rounds, want 1", got)
		}
		must(t, c.Close())
	}
}

// withOwnContext makes Open create a context of the device's own (cuCtxCreate_v2) rather
// than retain the primary one, as the package did before.
func withOwnContext() Option { return func(c *config) { c.ownContext = true } }

// TestNCCLPrimaryContext: NCCL's work runs in each device's primary context, and the fake
// NCCL refuses (ncclInvalidArgument) a stream of any other. Devices on the primary context
// (Open's) all-reduce across two ranks; devices with contexts of their own fail.
func TestNCCLPrimaryContext(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []Option
		ok   bool
	}{
		{"primary context", nil, true},
		{"created context", []Option{withOwnContext()}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ds, _ := fakeNCCL(t, 2, 22304, c.opts...)
			nc, err := NewNCCL(ds)
			must(t, err)
			defer func() { must(t, nc.Close()) }()
			err = nc.AllReduceMean(tensor.Float32, [][]byte{make([]byte, 16), make([]byte, 16)})
			switch {
			case c.ok && err != nil:
				t.Errorf("all-reduce on the primary contexts: %v", err)
			case !c.ok && (err == nil || !strings.Contains(err.Error(), "ncclAllReduce: invalid argument")):
				t.Errorf("all-reduce on streams of created contexts: %v, want ncclAllReduce refusing them", err)
			}
			for _, d := range ds {
				if d.primary != c.ok {
					t.Errorf("%s: primary = %v", d.Name(), d.primary)
				}
			}
		})
	}
}

// TestPrimaryContextShared: two devices of one ordinal share its primary context, which
// lives until the last of them closes; each frees what it made at its own Close.
func TestPrimaryContextShared(t *testing.T) {
	lib := fakecuda.Build(t)
	f := fakecuda.Open(t, lib)
	a, err := Open(0, WithLibrary(lib), WithLog(&logBuffer{}))
	must(t, err)
	b, err := Open(0, WithLibrary(lib), WithLog(&logBuffer{}))
	must(t, err)
	if a.ctx != b.ctx || f.Get(t, "contexts") != 1 {
		t.Fatalf("two devices of cuda:0 have contexts %#x and %#x (%d in the driver), want the one primary context", a.ctx, b.ctx, f.Get(t, "contexts"))
	}
	seg, err := a.Memory().AllocSegment(mib)
	must(t, err)
	must(t, a.Memory().FreeSegment(seg))
	must(t, a.Close())
	if n := f.Get(t, "contexts"); n != 1 {
		t.Errorf("%d contexts after the first Close, want the primary one still there", n)
	}
	if n := f.Get(t, "streams"); n != 3 {
		t.Errorf("%d streams after the first Close, want the second device's 3", n)
	}
	must(t, b.Close())
	if n, freed := f.Get(t, "contexts"), f.Get(t, "freed_by_destroy"); n != 0 || freed != 0 {
		t.Errorf("after both Closes: %d contexts, %d objects left to the context's end", n, freed)
	}
}
