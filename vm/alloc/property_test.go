package alloc

import (
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"testing"
)

// edgeSizes sit on the thresholds of both allocators.
var edgeSizes = []int64{1, 255, 256, 511, 512, 513, mib - 1, mib, mib + 1, 2 * mib, 2*mib + 1,
	10*mib - 1, 10 * mib, 10*mib + 1, 20 * mib, 256 * kib, 256*kib + 1, 8 * mib, 8*mib + 1}

// randomSize draws from a mix of scalars, small tensors, mid-sized and large ones.
func randomSize(rng *rand.Rand, largest int64) int64 {
	switch r := rng.Intn(20); {
	case r < 2:
		return edgeSizes[rng.Intn(len(edgeSizes))]
	case r < 7:
		return 1 + rng.Int63n(64*kib)
	case r < 12:
		return 64*kib + rng.Int63n(4*mib)
	default:
		return 1 + rng.Int63n(largest)
	}
}

// randomTrace allocates and frees in random order, keeping the live bytes around target so
// that a tight capacity forces reuse, eviction and remapping.
func randomTrace(seed int64, n int, target, largest int64) []op {
	rng := rand.New(rand.NewSource(seed))
	var trace []op
	var live []op
	var liveBytes int64
	for id := 0; len(trace) < n; {
		if len(live) > 0 && (liveBytes > target || rng.Intn(3) == 0) {
			i := rng.Intn(len(live))
			trace = append(trace, op{id: live[i].id})
			liveBytes -= live[i].size
			live[i] = live[len(live)-1]
			live = live[:len(live)-1]
			continue
		}
		o := op{alloc: true, id: id, size: randomSize(rng, largest)}
		id++
		trace = append(trace, o)
		live = append(live, o)
		liveBytes += o.size
	}
	return trace
}

// TestRandomTraces replays random traces on every allocator over every memory and checks,
// after every step: no two live blocks overlap, addresses are aligned, the counters add up
// (Requested is the sum of live sizes; mapped, reserved and peaks are ordered; Reserved is
// what the Memory has in use; MapCalls is what the Memory saw); VA wastes less than a chunk
// per block and fails only when live blocks pin too many chunks. On host memory every block
// holds its own pattern, checked when it is freed and at the end, so chunks remapped under a
// live block, or shared by two, show up as corrupt data.
func TestRandomTraces(t *testing.T) {
	seeds, steps := 2, 1500
	if testing.Short() {
		seeds, steps = 1, 500
	}
	const capacity = 192 * mib
	for _, mk := range memKinds {
		for _, ak := range allocKinds {
			for seed := int64(1); seed <= int64(seeds); seed++ {
				if mk.name == "recycled" && (ak.chunk == 0 || seed > 1) {
					continue // best-fit takes only segments, the same as on host memory; one seed covers its ranges
				}
				t.Run(fmt.Sprintf("%s/%s/seed=%d", mk.name, ak.name, seed), func(t *testing.T) {
					t.Parallel()
					c := newChecker(t, ak, mk, capacity)
					for i, o := range randomTrace(seed, steps, capacity*3/4, 48*mib) {
						c.do(o)
						if i%100 == 0 {
							c.verifyAll()
						}
					}
					if ak.chunk > 0 && c.mem.unmaps == 0 {
						t.Errorf("the trace never made va unmap a cached range: it tests no remapping")
					}
					t.Logf("%d out-of-memory failures; %v", c.ooms, c.a.Stats())
					c.finish()
				})
			}
		}
	}
}

// TestConcurrent has goroutines allocate, write, check and free on one allocator at once:
// the allocators are meant to be race-free (run with -race), and blocks must stay disjoint.
func TestConcurrent(t *testing.T) {
	for _, ak := range allocKinds {
		t.Run(ak.name, func(t *testing.T) {
			mem := memKinds[0].new(t, 256*mib)
			a := ak.new(t, mem)
			var wg sync.WaitGroup
			errs := make(chan error, 4)
			for g := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewSource(int64(g)))
					var live []*Block
					for i := range 300 {
						if len(live) > 8 || (len(live) > 0 && rng.Intn(2) == 0) {
							b := live[0]
							live = live[1:]
							if b.Bytes()[0] != byte(g) || b.Bytes()[b.Size()-1] != byte(g) {
								errs <- fmt.Errorf("goroutine %d: block overwritten", g)
								return
							}
							if err := a.Free(b); err != nil {
								errs <- err
								return
							}
							continue
						}
						b, err := a.Alloc(randomSize(rng, 4*mib) + int64(i%7))
						if errors.Is(err, ErrOutOfMemory) {
							continue
						}
						if err != nil {
							errs <- err
							return
						}
						b.Bytes()[0], b.Bytes()[b.Size()-1] = byte(g), byte(g)
						live = append(live, b)
						_ = a.Stats()
					}
					for _, b := range live {
						if err := a.Free(b); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			if s := a.Stats(); s.Requested != 0 || s.Mapped != 0 {
				t.Errorf("after all goroutines freed everything: %v", s)
			}
			must(t, a.Close())
			if mem.Used() != 0 {
				t.Errorf("Used = %d after Close", mem.Used())
			}
		})
	}
}
