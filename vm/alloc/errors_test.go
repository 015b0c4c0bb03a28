package alloc

import (
	"errors"
	"strings"
	"testing"
)

func TestNewVAChunkSize(t *testing.T) {
	mem := NewAccountingMemory(gib)
	for _, tc := range []struct {
		chunk int64
		ok    bool
	}{
		{Granularity, true},
		{DefaultChunkSize, true},
		{20 * mib, true},
		{0, false},
		{-Granularity, false},
		{mib, false},
		{3 * mib, false},
		{Granularity + 512, false},
	} {
		a, err := NewVA(mem, tc.chunk)
		if tc.ok != (err == nil) {
			t.Errorf("NewVA(chunk %d): err = %v, want ok = %v", tc.chunk, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "multiple of") {
			t.Errorf("NewVA(chunk %d): error %q does not say what is wrong", tc.chunk, err)
		}
		if err == nil {
			_ = a.Close()
		}
	}
	if _, err := NewVA(nil, DefaultChunkSize); err == nil {
		t.Errorf("NewVA(nil memory) succeeded")
	}
}

func TestErrors(t *testing.T) {
	for _, mk := range memKinds {
		for _, ak := range []allocKind{bestFitKind, vaKind(DefaultChunkSize)} {
			t.Run(mk.name+"/"+ak.name, func(t *testing.T) {
				const capacity = 64 * mib
				mem := mk.new(t, capacity)
				a := ak.new(t, mem)
				other := ak.new(t, mem)

				for _, size := range []int64{0, -1, -capacity} {
					if _, err := a.Alloc(size); !errors.Is(err, ErrInvalidSize) {
						t.Errorf("Alloc(%d): err = %v, want ErrInvalidSize", size, err)
					}
				}

				b, err := a.Alloc(1000)
				if err != nil {
					t.Fatalf("Alloc: %v", err)
				}
				if err := other.Free(b); !errors.Is(err, ErrInvalidFree) {
					t.Errorf("Free of a foreign block: err = %v, want ErrInvalidFree", err)
				}
				if err := a.Free(nil); !errors.Is(err, ErrInvalidFree) {
					t.Errorf("Free(nil): err = %v, want ErrInvalidFree", err)
				}
				if err := a.Free(&Block{}); !errors.Is(err, ErrInvalidFree) {
					t.Errorf("Free of a zero Block: err = %v, want ErrInvalidFree", err)
				}
				if err := a.Free(b); err != nil {
					t.Fatalf("Free: %v", err)
				}
				if err := a.Free(b); !errors.Is(err, ErrInvalidFree) || !strings.Contains(err.Error(), "already freed") {
					t.Errorf("double Free: err = %v, want ErrInvalidFree saying already freed", err)
				}

				// Out of memory: more than the capacity, and more than what is left.
				for _, size := range []int64{capacity + 1, 1 << 62} {
					_, err := a.Alloc(size)
					if !errors.Is(err, ErrOutOfMemory) {
						t.Fatalf("Alloc(%d): err = %v, want ErrOutOfMemory", size, err)
					}
				}
				held, err := a.Alloc(40 * mib)
				if err != nil {
					t.Fatalf("Alloc: %v", err)
				}
				_, err = a.Alloc(40 * mib)
				if !errors.Is(err, ErrOutOfMemory) {
					t.Fatalf("second Alloc(40 MiB) in 64 MiB: err = %v, want ErrOutOfMemory", err)
				}
				for _, want := range []string{ak.name[:2], "41943040 bytes", "capacity 67108864", "free", "unusable (fragmented)"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not mention %q", err, want)
					}
				}
				if s := a.Stats(); s.Failures != 3 || s.Allocs != 2 || s.Frees != 1 {
					t.Errorf("Failures, Allocs, Frees = %d, %d, %d; want 3, 2, 1", s.Failures, s.Allocs, s.Frees)
				}
				if err := a.Free(held); err != nil {
					t.Fatalf("Free: %v", err)
				}

				// After Close: every byte is back, and the allocator refuses work.
				live, err := a.Alloc(3 * mib)
				if err != nil {
					t.Fatalf("Alloc: %v", err)
				}
				if err := a.Close(); err != nil {
					t.Fatalf("Close: %v", err)
				}
				if err := other.Close(); err != nil {
					t.Fatalf("Close: %v", err)
				}
				if used := mem.Used(); used != 0 {
					t.Errorf("after Close the Memory has %d bytes in use", used)
				}
				if _, err := a.Alloc(1); !errors.Is(err, ErrClosed) {
					t.Errorf("Alloc after Close: err = %v, want ErrClosed", err)
				}
				if err := a.Free(live); !errors.Is(err, ErrClosed) {
					t.Errorf("Free after Close: err = %v, want ErrClosed", err)
				}
				if err := a.Close(); err != nil {
					t.Errorf("second Close: %v", err)
				}
			})
		}
	}
}

// TestOutOfMemoryText checks the numbers in the error on a case worked out by hand: best-fit
// holds three 26 MiB segments, each a free 24 MiB block pinned by a live 2 MiB one, so 40 MiB
// does not fit in 100 MiB with 94 MiB free.
func TestOutOfMemoryText(t *testing.T) {
	a := NewBestFit(NewAccountingMemory(100 * mib))
	allocs := func(size int64) (bs []*Block) {
		for range 3 {
			b, err := a.Alloc(size)
			if err != nil {
				t.Fatal(err)
			}
			bs = append(bs, b)
		}
		return bs
	}
	frees := func(bs []*Block) {
		for _, b := range bs {
			if err := a.Free(b); err != nil {
				t.Fatal(err)
			}
		}
	}
	frees(allocs(26 * mib)) // three cached 26 MiB segments
	big := allocs(24 * mib) // each splits one: 24 MiB + 2 MiB cached
	allocs(2 * mib)         // takes the three 2 MiB pieces
	frees(big)
	_, err := a.Alloc(40 * mib)
	const want = "alloc: out of memory: bestfit cannot allocate 41943040 bytes: capacity 104857600, " +
		"98566144 free, of which 75497472 unusable (fragmented)"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant  %s", err, want)
	}
	if s := a.Stats(); s.Reserved != 78*mib || s.Mapped != 6*mib || s.ExternalFragmentation() != 72*mib {
		t.Errorf("stats: %v", s)
	}
}

func TestAccountingMemoryModelsLargeDevices(t *testing.T) {
	for _, capacity := range []int64{16 * gib, 64 * gib, 1 << 40} {
		mem := NewAccountingMemory(capacity)
		a, err := NewVA(mem, DefaultChunkSize)
		if err != nil {
			t.Fatal(err)
		}
		var blocks []*Block
		for mem.Used()+gib <= capacity && len(blocks) < 64 {
			b, err := a.Alloc(gib - 12345)
			if err != nil {
				t.Fatalf("capacity %d GiB: Alloc: %v", capacity/gib, err)
			}
			blocks = append(blocks, b)
		}
		s := a.Stats()
		if s.Capacity != capacity || s.Mapped != int64(len(blocks))*26*DefaultChunkSize {
			t.Errorf("capacity %d GiB: %v", capacity/gib, s)
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		if err := mem.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
