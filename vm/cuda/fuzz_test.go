package cuda

import (
	"sync"
	"testing"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/internal/fakecuda"
)

// fuzzTrace reads a fuzz input as a trace, four bytes a step: a first byte divisible by 3
// frees the tensor that byte's quotient picks among those allocated so far (so double
// frees come up); any other allocates (n+1) << shift bytes, n from the next two bytes and
// shift from the fourth (mod 12): 1 byte to 128 MiB.
func fuzzTrace(data []byte) []traceOp {
	var t []traceOp
	n := 0
	for i := 0; i+3 < len(data) && len(t) < 200; i += 4 {
		if data[i]%3 == 0 {
			if n > 0 {
				t = append(t, traceOp{id: int(data[i]/3) % n})
			}
			continue
		}
		size := (int64(data[i+1])<<8 | int64(data[i+2]) + 1) << (data[i+3] % 12)
		t = append(t, traceOp{alloc: true, id: n, size: size})
		n++
	}
	return t
}

// fuzzDevice is one fake device for a whole fuzzing process, 64 MiB of capacity so that
// inputs run out of memory and make VA evict and remap.
var fuzzDevice = sync.OnceValues(func() (*Device, error) {
	return Open(0, WithLibrary(fuzzLib), WithCapacity(64*mib))
})

var fuzzLib string

// fuzz replays an input on a fresh allocator over the shared device, with every check of
// TestRandomTraces; the allocator must leave the device's memory empty.
func fuzz(f *testing.F, k func(data []byte) allocKind) {
	fuzzLib = fakecuda.Build(f)
	f.Add([]byte{1, 1, 0, 10, 5, 2, 1, 0, 0, 0, 0, 4, 0, 1, 255, 255, 11})
	f.Add([]byte{2, 2, 255, 255, 7, 5, 255, 255, 7, 0, 0, 0, 0, 4, 200, 0, 9, 3, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		d, err := fuzzDevice()
		if err != nil {
			t.Fatal(err)
		}
		c := newTraceCheck(d, k(data).new(t, d.Memory()))
		must(t, c.run(fuzzTrace(data[1:])))
		_, err = c.finish()
		must(t, err)
	})
}

func FuzzCUDABestFit(f *testing.F) {
	fuzz(f, func([]byte) allocKind { return allocKind{"bestfit", 0} })
}

// FuzzCUDAVA takes the chunk size from the first byte: 2, 4, 8 or 40 MiB.
func FuzzCUDAVA(f *testing.F) {
	fuzz(f, func(data []byte) allocKind {
		return allocKind{"va", []int64{2 * mib, 4 * mib, 8 * mib, 40 * mib}[data[0]%4]}
	})
}
