package alloc

import (
	"fmt"
	"math/rand"
	"testing"
)

// BenchmarkAlloc measures allocation throughput in a steady state: 32 tensors live, each
// iteration frees a random one and allocates a new one of a random size (scalars to 64 MiB).
// The capacity is ample, so this is the allocators' bookkeeping and the Memory's calls, not
// out-of-memory handling. Nothing is written, so host memory costs mmap calls, not page faults.
func BenchmarkAlloc(b *testing.B) {
	const live, capacity = 32, 8 * gib
	rng := rand.New(rand.NewSource(1))
	sizes := make([]int64, 4096)
	slots := make([]int, len(sizes))
	for i := range sizes {
		sizes[i] = randomSize(rng, 64*mib)
		slots[i] = rng.Intn(live)
	}
	for _, mk := range memKinds {
		for _, ak := range []allocKind{bestFitKind, vaKind(DefaultChunkSize), vaKind(2 * mib)} {
			b.Run(ak.name+"/"+mk.name, func(b *testing.B) {
				a := ak.new(b, mk.new(b, capacity))
				defer a.Close()
				blocks := make([]*Block, live)
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					j := i % len(sizes)
					if x := blocks[slots[j]]; x != nil {
						if err := a.Free(x); err != nil {
							b.Fatal(err)
						}
					}
					x, err := a.Alloc(sizes[j])
					if err != nil {
						b.Fatal(err)
					}
					blocks[slots[j]] = x
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "allocs/s")
				b.ReportMetric(float64(a.Stats().MapCalls)/float64(b.N), "memcalls/op")
			})
		}
	}
}

// BenchmarkSwapTrace replays the headline swap-like trace (1056 steps, tensors of 1 to 200 MiB)
// with a fresh allocator per iteration, so each replay pays for building its cache: VA's cost
// against chunk size, with best-fit for reference. The capacity, 768 MiB, fits every
// allocator, with VA evicting and remapping cached ranges to do so.
func BenchmarkSwapTrace(b *testing.B) {
	const capacity = 768 * mib
	trace := headlineTrace()
	allocs := 0
	for _, o := range trace {
		if o.alloc {
			allocs++
		}
	}
	kinds := []allocKind{vaKind(2 * mib), vaKind(8 * mib), vaKind(20 * mib), vaKind(40 * mib), bestFitKind}
	for _, mk := range memKinds {
		for _, ak := range kinds {
			b.Run(fmt.Sprintf("%s/%s", mk.name, ak.name), func(b *testing.B) {
				mem := mk.new(b, capacity)
				blocks := map[int]*Block{}
				var calls int64
				b.ReportAllocs()
				for range b.N {
					a := ak.new(b, mem)
					for _, o := range trace {
						if !o.alloc {
							if err := a.Free(blocks[o.id]); err != nil {
								b.Fatal(err)
							}
							continue
						}
						x, err := a.Alloc(o.size)
						if err != nil {
							b.Fatal(err)
						}
						blocks[o.id] = x
					}
					calls += a.Stats().MapCalls
					if err := a.Close(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*allocs), "ns/alloc")
				b.ReportMetric(float64(calls)/float64(b.N), "memcalls/op")
			})
		}
	}
}
