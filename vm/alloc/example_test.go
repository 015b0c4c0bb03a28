package alloc_test

import (
	"errors"
	"fmt"

	"github.com/gorgonia-ooc/outofcore/vm/alloc"
)

const mib = 1 << 20

func ExampleNewVA() {
	mem, err := alloc.NewHostMemory(256 * mib)
	if err != nil {
		panic(err)
	}
	defer mem.Close()
	va, err := alloc.NewVA(mem, alloc.DefaultChunkSize)
	if err != nil {
		panic(err)
	}
	defer va.Close()

	// 100 MiB + 1 byte takes three 40 MiB chunks, mapped into one contiguous range.
	b, err := va.Alloc(100*mib + 1)
	if err != nil {
		panic(err)
	}
	data := b.Bytes()
	data[0], data[len(data)-1] = 1, 2
	// A scalar is carved out of a pool chunk instead of taking a chunk of its own.
	scalar, err := va.Alloc(4)
	if err != nil {
		panic(err)
	}
	s := va.Stats()
	fmt.Printf("%s: requested %d, mapped %d MiB (%d MiB of chunks + 512 B), reserved %d MiB\n",
		va.Name(), s.Requested, s.Mapped/mib, 3*alloc.DefaultChunkSize/mib, s.Reserved/mib)
	fmt.Println("internal fragmentation:", s.InternalFragmentation())

	_ = va.Free(scalar)
	_ = va.Free(b)
	fmt.Println("double free refused:", errors.Is(va.Free(b), alloc.ErrInvalidFree))
	// The simulated devices' accounting memory maps 2 MiB at a time, as CUDA does; host memory
	// maps pages.
	_, err = alloc.NewVA(alloc.NewAccountingMemory(64*mib), 3*mib)
	fmt.Println(err)
	// Output:
	// va: requested 104857605, mapped 120 MiB (120 MiB of chunks + 512 B), reserved 160 MiB
	// internal fragmentation: 20972027
	// double free refused: true
	// alloc: va chunk size 3145728 is not a positive multiple of the memory's 2097152-byte granularity
}

// ExampleNewBestFit shows the fragmentation a caching allocator suffers and VA does not: after
// small blocks pin every cached segment, a large request fails with most of the memory free.
func ExampleNewBestFit() {
	run := func(a alloc.Allocator) error {
		var big, small []*alloc.Block
		for range 3 {
			b, _ := a.Alloc(24 * mib) // on best-fit: its own 24 MiB segment
			big = append(big, b)
		}
		for _, b := range big {
			_ = a.Free(b)
		}
		for range 3 {
			b, _ := a.Alloc(22 * mib) // on best-fit: splits a cached segment, 2 MiB left over
			small = append(small, b)
		}
		for range 3 {
			_, _ = a.Alloc(2 * mib) // on best-fit: takes a leftover, pinning its segment
		}
		for _, b := range small {
			_ = a.Free(b)
		}
		_, err := a.Alloc(40 * mib)
		return err
	}

	bf := alloc.NewBestFit(alloc.NewAccountingMemory(100 * mib))
	err := run(bf)
	fmt.Println(errors.Is(err, alloc.ErrOutOfMemory))
	fmt.Println(err)
	s := bf.Stats()
	fmt.Printf("bestfit: mapped %d MiB, reserved %d MiB, external fragmentation %d MiB\n",
		s.Mapped/mib, s.Reserved/mib, s.ExternalFragmentation()/mib)

	va, _ := alloc.NewVA(alloc.NewAccountingMemory(100*mib), alloc.Granularity)
	fmt.Println("va:", run(va))
	// Output:
	// true
	// alloc: out of memory: bestfit cannot allocate 41943040 bytes: capacity 104857600, 98566144 free, of which 69206016 unusable (fragmented)
	// bestfit: mapped 6 MiB, reserved 72 MiB, external fragmentation 66 MiB
	// va: <nil>
}
