package alloc

import (
	"bytes"
	"testing"
)

// TestBestFitRules checks PyTorch's sizing rules on one request each, in a fresh allocator.
func TestBestFitRules(t *testing.T) {
	for _, tc := range []struct {
		name             string
		size             int64
		mapped, reserved int64
	}{
		{"scalar rounds to 512 B in a 2 MiB small segment", 4, 512, 2 * mib},
		{"1 MiB is still small", mib, mib, 2 * mib},
		{"above 1 MiB takes a 20 MiB large segment", mib + 1, mib + 512, 20 * mib},
		{"just under 10 MiB still shares a 20 MiB segment", 10*mib - 512, 10*mib - 512, 20 * mib},
		{"rounding comes first: 10 MiB - 1 is 10 MiB", 10*mib - 1, 10 * mib, 10 * mib},
		{"10 MiB gets its own segment", 10 * mib, 10 * mib, 10 * mib},
		{"own segments round up to 2 MiB; a 1 MiB rest is not split off", 11 * mib, 12 * mib, 12 * mib},
		{"a rest above 1 MiB is split off", 10*mib + 1, 10*mib + 512, 12 * mib},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := NewBestFit(NewAccountingMemory(gib))
			if _, err := a.Alloc(tc.size); err != nil {
				t.Fatal(err)
			}
			if s := a.Stats(); s.Mapped != tc.mapped || s.Reserved != tc.reserved || s.Requested != tc.size {
				t.Errorf("Alloc(%d): requested %d, mapped %d, reserved %d; want %d, %d, %d",
					tc.size, s.Requested, s.Mapped, s.Reserved, tc.size, tc.mapped, tc.reserved)
			}
		})
	}
}

// TestBestFitCachesSplitsAndMerges follows blocks through a segment.
func TestBestFitCachesSplitsAndMerges(t *testing.T) {
	a := NewBestFit(NewAccountingMemory(gib))
	x, _ := a.Alloc(4 * mib)
	y, _ := a.Alloc(6 * mib)
	z, _ := a.Alloc(3 * mib)
	if y.Addr() != x.Addr()+uintptr(4*mib) || z.Addr() != y.Addr()+uintptr(6*mib) {
		t.Fatalf("blocks were not carved one after another from one segment")
	}
	must(t, a.Free(y))
	// The smallest fitting free block is the 6 MiB hole, not the 7 MiB tail.
	w, _ := a.Alloc(5 * mib)
	if w.Addr() != y.Addr() {
		t.Errorf("5 MiB went to %#x, want the 6 MiB hole at %#x", w.Addr(), y.Addr())
	}
	// The 1 MiB rest of the hole was not split off (PyTorch splits large blocks only for > 1 MiB).
	if s := a.Stats(); s.Mapped != 4*mib+6*mib+3*mib {
		t.Errorf("Mapped = %d", s.Mapped)
	}
	must(t, a.Free(x))
	must(t, a.Free(z))
	must(t, a.Free(w))
	// All merged back: one whole 20 MiB segment, reused for a 19 MiB request with no new segment.
	calls := a.Stats().MapCalls
	v, _ := a.Alloc(19 * mib)
	if v.Addr() != x.Addr() || a.Stats().MapCalls != calls || a.Stats().Reserved != 20*mib {
		t.Errorf("a merged segment was not reused whole: %v", a.Stats())
	}
}

// TestBestFitReleasesCacheOnOOM: an allocation that fails returns cached unsplit segments to
// the Memory and tries once more; a split segment stays.
func TestBestFitReleasesCacheOnOOM(t *testing.T) {
	a := NewBestFit(NewAccountingMemory(64 * mib))
	x, _ := a.Alloc(30 * mib)
	must(t, a.Free(x)) // cached whole: 30 MiB reserved
	y, err := a.Alloc(36 * mib)
	if err != nil {
		t.Fatalf("the cached segment was not released to make room: %v", err)
	}
	// segment, failed segment, free of the cached one, segment
	if s := a.Stats(); s.Reserved != 36*mib || s.MapCalls != 4 || s.Failures != 0 {
		t.Errorf("%v", s)
	}
	must(t, a.Free(y))
}

// TestVAReusesCachedRanges: a freed range stays mapped and comes back as it is for the same
// chunk count, with no call into the Memory.
func TestVAReusesCachedRanges(t *testing.T) {
	for _, mk := range memKinds {
		t.Run(mk.name, func(t *testing.T) {
			mem := &countingMemory{Memory: mk.new(t, 64*mib)}
			a, err := NewVA(mem, 4*mib)
			must(t, err)
			x, err := a.Alloc(9 * mib) // 3 chunks
			must(t, err)
			if s := a.Stats(); s.Mapped != 12*mib || s.Reserved != 12*mib || mem.maps != 1 {
				t.Fatalf("9 MiB in 4 MiB chunks: %v, %d map calls", s, mem.maps)
			}
			must(t, a.Free(x))
			calls := mem.calls
			y, err := a.Alloc(11 * mib) // 3 chunks again
			must(t, err)
			if y.Addr() != x.Addr() || mem.calls != calls {
				t.Errorf("the cached range was not reused as it is")
			}
			z, err := a.Alloc(5 * mib) // 2 chunks: a new range
			must(t, err)
			if z.Addr() == y.Addr() || mem.maps != 2 {
				t.Errorf("a 2-chunk request reused a 3-chunk range")
			}
		})
	}
}

// TestVANoExternalFragmentation: with every other block freed, the free memory is scattered,
// yet one request needing most of it succeeds on VA. Best-fit, same trace, fails: its segments
// are all pinned by a live block.
func TestVANoExternalFragmentation(t *testing.T) {
	for _, mk := range memKinds {
		for _, ak := range []allocKind{vaKind(2 * mib), vaKind(8 * mib), bestFitKind} {
			t.Run(mk.name+"/"+ak.name, func(t *testing.T) {
				const capacity = 160 * mib
				c := newChecker(t, ak, mk, capacity)
				// 16 blocks of 8 MiB: best-fit puts two in each 20 MiB segment (8 + 8 + 4 free).
				for id := range 16 {
					if !c.do(op{alloc: true, id: id, size: 8 * mib}) {
						t.Fatalf("filling: out of memory at block %d", id)
					}
				}
				for id := 0; id < 16; id += 2 {
					c.do(op{id: id})
				}
				// 96 MiB free; 64 MiB asked.
				ok := c.do(op{alloc: true, id: 100, size: 64 * mib})
				if want := ak.chunk > 0; ok != want {
					t.Fatalf("64 MiB with 96 MiB free in scattered holes: ok = %v, want %v (%v)", ok, want, c.a.Stats())
				}
				// The new block's pattern is written over the holes: the odd blocks must be intact.
				c.verifyAll()
				c.finish()
			})
		}
	}
}

// TestVARemapsScatteredChunks: when memory runs short, a cached range is unmapped and its
// chunks, mapped in another order into a new range, carry their old bytes with them; the
// contiguous block really is made of scattered pieces of the chunk file.
func TestVARemapsScatteredChunks(t *testing.T) {
	mem := &countingMemory{Memory: memKinds[0].new(t, 8*mib)}
	a, err := NewVA(mem, Granularity)
	must(t, err)
	x, err := a.Alloc(3 * Granularity)
	must(t, err)
	for i := range 3 {
		copy(x.Bytes()[i*Granularity:(i+1)*Granularity], bytes.Repeat([]byte{byte(i + 1)}, Granularity))
	}
	must(t, a.Free(x)) // cached, still mapped
	y, err := a.Alloc(4 * Granularity)
	must(t, err)
	if mem.unmaps != 1 {
		t.Fatalf("%d unmaps, want the cached range unmapped once", mem.unmaps)
	}
	seen := map[byte]int{}
	for i := range 4 {
		chunk := y.Bytes()[i*Granularity : (i+1)*Granularity]
		if !bytes.Equal(chunk, bytes.Repeat(chunk[:1], Granularity)) {
			t.Fatalf("chunk %d of the new block is not one old chunk's bytes", i)
		}
		seen[chunk[0]]++
	}
	if seen[0] != 1 || seen[1] != 1 || seen[2] != 1 || seen[3] != 1 {
		t.Fatalf("the new block holds chunks %v, want the three old ones and a fresh one", seen)
	}
}

// TestVASmallPool: scalars share pool chunks instead of taking a chunk each, and a pool chunk
// left empty goes back to the range cache for any one-chunk use.
func TestVASmallPool(t *testing.T) {
	a, err := NewVA(NewAccountingMemory(gib), DefaultChunkSize)
	must(t, err)
	var blocks []*Block
	for range 1000 {
		b, err := a.Alloc(4)
		must(t, err)
		blocks = append(blocks, b)
	}
	if s := a.Stats(); s.Reserved != DefaultChunkSize || s.Mapped != 1000*minBlock {
		t.Errorf("1000 scalars: %v; want one chunk reserved, 512 B mapped each", s)
	}
	for _, b := range blocks {
		must(t, a.Free(b))
	}
	calls := a.Stats().MapCalls
	big, err := a.Alloc(DefaultChunkSize - 1)
	must(t, err)
	if big.Addr() != blocks[0].Addr() || a.Stats().MapCalls != calls {
		t.Errorf("the emptied pool chunk was not reused for a one-chunk block")
	}
	if limit := int64(DefaultChunkSize / smallDivisor); limit != 10*mib {
		t.Fatalf("small-block limit %d", limit)
	}
	small, err := a.Alloc(10 * mib)
	must(t, err)
	large, err := a.Alloc(10*mib + 1)
	must(t, err)
	if small.mapped != 10*mib || large.mapped != DefaultChunkSize {
		t.Errorf("10 MiB maps %d, 10 MiB + 1 maps %d; want the limit at C/4", small.mapped, large.mapped)
	}
}

// TestSteadyAllocsReuseSplitPieces: a step that allocates and frees the same sizes splits
// and merges pieces every time; the pieces a merge frees are reused by the next split, so
// the step's only heap allocations are the Blocks it is handed, and none when it recycles
// them (Recycler).
func TestSteadyAllocsReuseSplitPieces(t *testing.T) {
	sizes := []int64{4 << 10, 100 << 10, 3 << 10, 700, 64 << 10, 12 << 10}
	for _, ak := range allocKinds {
		t.Run(ak.name, func(t *testing.T) {
			a := ak.new(t, memKinds[1].new(t, 256*mib))
			defer a.Close()
			blocks := make([]*Block, len(sizes))
			step := func() {
				for i, s := range sizes {
					b, err := a.Alloc(s)
					if err != nil {
						t.Fatal(err)
					}
					blocks[i] = b
				}
				// Freed in another order than made, so merges run both ways.
				for _, i := range []int{1, 3, 5, 0, 2, 4} {
					if err := a.Free(blocks[i]); err != nil {
						t.Fatal(err)
					}
				}
			}
			step()
			allocs := testing.AllocsPerRun(20, step)
			if want := float64(len(sizes)); allocs != want {
				t.Errorf("a step of %d allocations makes %.1f heap allocations, want %.0f (its Blocks)", len(sizes), allocs, want)
			}
			recycling := func() {
				step()
				a.(Recycler).Recycle(blocks)
			}
			recycling()
			if allocs := testing.AllocsPerRun(20, recycling); allocs != 0 {
				t.Errorf("a step that recycles its Blocks makes %.1f heap allocations, want 0", allocs)
			}
		})
	}
}

// TestRecycle: only freed blocks of the allocator itself are taken back, and a recycled Block
// comes back from Alloc standing for its new memory.
func TestRecycle(t *testing.T) {
	for _, ak := range allocKinds {
		t.Run(ak.name, func(t *testing.T) {
			mem := memKinds[0].new(t, 64*mib)
			a := ak.new(t, mem)
			defer a.Close()
			other := ak.new(t, memKinds[1].new(t, 64*mib))
			defer other.Close()
			r := a.(Recycler)
			live, err := a.Alloc(3000)
			if err != nil {
				t.Fatal(err)
			}
			foreign, err := other.Alloc(3000)
			if err != nil {
				t.Fatal(err)
			}
			if err := other.Free(foreign); err != nil {
				t.Fatal(err)
			}
			r.Recycle([]*Block{live, foreign, nil})
			if live.Size() != 3000 || len(live.Bytes()) != 3000 {
				t.Fatalf("a live block was recycled: size %d, %d bytes", live.Size(), len(live.Bytes()))
			}
			if foreign.Size() != 3000 {
				t.Fatalf("another allocator's block was recycled")
			}
			if err := a.Free(live); err != nil {
				t.Fatal(err)
			}
			r.Recycle([]*Block{live})
			for _, size := range []int64{5 << 20, 700} {
				b, err := a.Alloc(size)
				if err != nil {
					t.Fatal(err)
				}
				if b != live {
					t.Fatalf("Alloc(%d) made a new Block with one recycled", size)
				}
				if b.Size() != size || int64(len(b.Bytes())) != size || b.Addr() == 0 {
					t.Fatalf("recycled block of %d bytes: size %d, %d bytes at %#x", size, b.Size(), len(b.Bytes()), b.Addr())
				}
				b.Bytes()[size-1] = 7
				if err := a.Free(b); err != nil {
					t.Fatal(err)
				}
				if err := a.Free(b); err == nil {
					t.Fatal("a recycled block freed twice")
				}
				r.Recycle([]*Block{b})
			}
		})
	}
}
