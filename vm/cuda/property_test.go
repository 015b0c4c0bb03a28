package cuda

import (
	"errors"
	"fmt"
	"math/rand"
	"runtime"
	"sync"
	"testing"

	"github.com/gorgonia-ooc/outofcore/vm/alloc"
)

// allocKind makes one of package alloc's allocators over a device's memory.
type allocKind struct {
	name  string
	chunk int64 // 0: best-fit
}

var allocKinds = []allocKind{{"bestfit", 0}, {"va-2MiB", 2 * mib}, {"va-8MiB", 8 * mib}}

func (k allocKind) new(t testing.TB, mem alloc.Memory) alloc.Allocator {
	t.Helper()
	if k.chunk == 0 {
		return alloc.NewBestFit(mem)
	}
	a, err := alloc.NewVA(mem, k.chunk)
	must(t, err)
	return a
}

// TestRandomTraces is vm/alloc's TestRandomTraces on CUDA memory: random traces under a
// tight capacity on each allocator, checked after every step (disjoint aligned blocks,
// counters that add up and match the memory, a second free refused), with the bytes of
// every block written and read back through the driver.
func TestRandomTraces(t *testing.T) {
	seeds, steps := 2, 1500
	if testing.Short() {
		seeds, steps = 1, 500
	}
	for _, k := range allocKinds {
		for seed := int64(1); seed <= int64(seeds); seed++ {
			t.Run(fmt.Sprintf("%s/seed=%d", k.name, seed), func(t *testing.T) {
				t.Parallel()
				d := openFake(t, nil, WithCapacity(192*mib))
				c := newTraceCheck(d.Device, k.new(t, d.Memory()))
				trace := randomTrace(seed, steps, 144*mib, 48*mib)
				for i := 0; i < len(trace); i += 100 {
					must(t, c.run(trace[i:min(i+100, len(trace))]))
					must(t, c.verifyAll())
				}
				if k.chunk > 0 && d.mem.Stats().Unmaps == 0 {
					t.Errorf("the trace never made va unmap a cached range: it tests no remapping")
				}
				s, err := c.finish()
				must(t, err)
				t.Logf("%d out-of-memory failures; %v; driver calls %+v", c.ooms, s, d.mem.Stats())
			})
		}
	}
}

// TestConcurrent has goroutines allocate, copy in, copy out and free on one allocator at
// once, each on whatever OS thread Go gives it: every call path must make the context
// current itself, and the allocators and memory must be race-free (run with -race).
func TestConcurrent(t *testing.T) {
	for _, k := range allocKinds {
		t.Run(k.name, func(t *testing.T) {
			d := openFake(t, nil, WithCapacity(256*mib))
			concurrently(t, d.Device, k)
		})
	}
}

// concurrently runs four churns on one allocator of kind k, then closes it.
func concurrently(t *testing.T, d *Device, k allocKind) {
	a := k.new(t, d.Memory())
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for g := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[g] = churn(d, a, g)
		}()
	}
	wg.Wait()
	must(t, errors.Join(errs...))
	must(t, a.Close())
	if used := d.Memory().Used(); used != 0 {
		t.Errorf("Used = %d after Close", used)
	}
}

// churn is one goroutine of TestConcurrent: every block holds its goroutine and a tag.
func churn(d *Device, a alloc.Allocator, g int) error {
	type held struct {
		b   *alloc.Block
		tag byte
	}
	rng := rand.New(rand.NewSource(int64(g)))
	var live []held
	buf := make([]byte, 8)
	for i := range 200 {
		if len(live) > 6 || (len(live) > 0 && rng.Intn(2) == 0) {
			h := live[0]
			live = live[1:]
			if err := d.readSync(buf, h.b.Addr()); err != nil {
				return err
			}
			if buf[0] != byte(g) || buf[7] != h.tag {
				return fmt.Errorf("goroutine %d: block at %#x overwritten", g, h.b.Addr())
			}
			if err := a.Free(h.b); err != nil {
				return err
			}
			continue
		}
		b, err := a.Alloc(8 + rng.Int63n(6*mib))
		if errors.Is(err, alloc.ErrOutOfMemory) {
			continue
		}
		if err != nil {
			return err
		}
		tag := byte(i)
		if err := d.copySync(b.Addr(), []byte{byte(g), 0, 0, 0, 0, 0, 0, tag}); err != nil {
			return err
		}
		live = append(live, held{b, tag})
		runtime.Gosched()
	}
	for _, h := range live {
		if err := a.Free(h.b); err != nil {
			return err
		}
	}
	return nil
}
