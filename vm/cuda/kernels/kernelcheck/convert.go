package kernelcheck

import (
	"math"
	"math/rand"
	"runtime"
	"unsafe"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

// TestConvert: float to Int and back, against Go's conversions on this
// machine, bit for bit: truncation, values that round, and (on amd64) NaN,
// ±Inf and out-of-range values, which Go converts to the minimum int64.
func testConvert[T float32 | float64](t TB, m *Mem) {
	rng := rand.New(rand.NewSource(27))
	sfx := suffix[T]()
	x := append(randn[T](rng, 300, 1e3), 0, -0.5, 0.5, -1.5, 2.9999, 1e17, -1e17)
	if runtime.GOARCH == "amd64" { // other CPUs convert these differently
		x = append(x, T(math.NaN()), T(math.Inf(1)), T(math.Inf(-1)), 1e19, -1e19, -0x1p63)
	}
	ints := m.alloc(8 * len(x))
	m.launch("convert_"+sfx+"_i64", p(ints), p(put(m, x)), kernels.Int(int64(len(x))))
	got := asInts(ints.Data())
	for i, v := range x {
		if w := int(v); got[i] != w {
			t.Fatalf("convert_%s_i64: %v gives %d, Go %d", sfx, v, got[i], w)
		}
	}
	m.exactly()
	back := []int{0, 1, -1, 1 << 53, 1<<53 + 1, 1<<24 + 1, math.MaxInt64, math.MinInt64, 123456789012345}
	for i := 0; i < 100; i++ {
		back = append(back, int(rng.Int63())-int(rng.Int63()))
	}
	src := m.alloc(8 * len(back))
	copy(src.Data(), fromInts(back))
	y := newOut[T](m, len(back))
	m.launch("convert_i64_"+sfx, p(y), p(src), kernels.Int(int64(len(back))))
	want := make([]T, len(back))
	for i, v := range back {
		want[i] = T(v)
	}
	sameBits(t, m, "convert_i64_"+sfx, get[T](y), want)
}

func asInts(b []byte) []int {
	return append([]int(nil), unsafe.Slice((*int)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/8)...)
}

func fromInts(v []int) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 8*len(v))
}
