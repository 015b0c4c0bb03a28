package blas

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestAddIsTheLoop: Add gives the plain loop's bits for every length and offset the vector loops
// and their tails meet, on values that include zeros of both signs, infinities, NaN and subnormals.
func TestAddIsTheLoop(t *testing.T) {
	addCase[float32](t)
	addCase[float64](t)
}

func addCase[T Float](t *testing.T) {
	r := rand.New(rand.NewPCG(4, 5))
	special := []float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.NaN(), 1e-310, -1e-40, 3.5, -7}
	val := func() T {
		if r.IntN(4) == 0 {
			return T(special[r.IntN(len(special))])
		}
		return T(r.NormFloat64() * 1e3)
	}
	for n := 0; n < 80; n++ {
		for _, off := range []int{0, 1, 3} {
			src, dst := make([]T, n+off), make([]T, n+off+2)
			for i := range src {
				src[i] = val()
			}
			for i := range dst {
				dst[i] = val()
			}
			want := append([]T(nil), dst...)
			addGo(want[off:off+n], src[off:])
			Add(dst[off:off+n], src[off:])
			for i := range dst {
				if math.Float64bits(float64(dst[i])) != math.Float64bits(float64(want[i])) && !(dst[i] != dst[i] && want[i] != want[i]) {
					t.Fatalf("%T n=%d off=%d: element %d is %v, the loop gives %v", dst[0], n, off, i, dst[i], want[i])
				}
			}
		}
	}
}

func ExampleAdd() {
	dst := []float32{1, 2, 3}
	Add(dst, []float32{10, 20, 30, 40}) // the shorter length counts
	fmt.Println(dst)
	// Output: [11 22 33]
}
