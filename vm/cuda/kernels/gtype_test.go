package kernels_test

import (
	"math"
	"testing"
	"unsafe"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

func getInts(b *buffer) []int {
	d := unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(b.data()))), b.size/8)
	out := make([]int, len(d))
	for i, v := range d {
		out[i] = int(v)
	}
	return out
}

// TestGorgoniaConvType: g_to_int and g_from_int against gorgonia's dtConvOp
// (ConvType) between Int and float32 or float64: truncation, NaN, the
// infinities and values past int64's range (Go's 1<<63 on amd64), and ints
// that round.
func TestGorgoniaConvType(t *testing.T) {
	testGConvType[float32](t)
	testGConvType[float64](t)
}

func testGConvType[T float32 | float64](t *testing.T) {
	m := newMem(t)
	s := suffix[T]()
	fl := []T{2.7, -2.7, -0.5, 0, 1e30, -1e30, T(math.Inf(1)), T(math.Inf(-1)), T(math.NaN()), 9.2e18, -9.3e18, 12345.9}
	g := G.NewGraph()
	x := input[T](g, "x", len(fl))
	toInt := must(t)(G.ConvType(x, dtOf[T](), tensor.Int))
	want := do(t, toInt.Op(), dense(fl, len(fl))).Data().([]int)
	yb := m.alloc(8 * len(fl))
	m.launch("g_to_int_"+s, p(yb), p(put(m, fl)), kernels.Int(int64(len(fl))))
	if got := getInts(yb); !equalInts(got, want) {
		t.Fatalf("g_to_int_%s: %v, want %v", s, got, want)
	}
	ints := []int{0, -3, 1 << 53, 1<<53 + 1, 1<<24 + 1, -(1<<62 + 12345), math.MaxInt64, math.MinInt64}
	in := G.NewVector(g, tensor.Int, G.WithShape(len(ints)), G.WithName("i"))
	fromInt := must(t)(G.ConvType(in, tensor.Int, dtOf[T]()))
	wantF := data[T](t, do(t, fromInt.Op(), tensor.New(tensor.WithShape(len(ints)), tensor.WithBacking(append([]int(nil), ints...)))))
	fb := newOut[T](m, len(ints))
	m.launch("g_from_int_"+s, p(fb), p(putInts(m, ints)), kernels.Int(int64(len(ints))))
	requireBits(t, "g_from_int_"+s, get[T](fb), wantF)
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
