package dispatch

import (
	"math/rand"
	"slices"
	"testing"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

// TestReduceGroups: sums over random sets of axes of tensors of up to 9
// axes, walked as planReduce launches them (reduce's (outer, k, inner) for
// one run of reduced axes, reduce_axes' layout otherwise), equal a direct
// sum (integers: the order does not matter, the indexing does).
func TestReduceGroups(t *testing.T) {
	rng := rand.New(rand.NewSource(26))
	planned := 0
	for trial := 0; trial < 3000; trial++ {
		rank := 1 + rng.Intn(9)
		s := make([]int, rank)
		for d := range s {
			s[d] = 1 + rng.Intn(3)
		}
		var axes []int
		for d := range s {
			if rng.Intn(2) == 0 {
				axes = append(axes, d)
			}
		}
		if len(axes) == 0 {
			axes = []int{rng.Intn(rank)}
		}
		x := make([]int64, total(s))
		for i := range x {
			x[i] = rng.Int63n(1000)
		}
		want := sumRef(x, s, axes)
		gs := reduceGroups(s, axes)
		var got []int64
		var red int
		for _, g := range gs {
			if g.reduced {
				red++
			}
		}
		switch {
		case red <= 1:
			outer, k, inner := int64(1), int64(1), int64(1)
			seen := false
			for _, g := range gs {
				switch {
				case g.reduced:
					k, seen = g.n, true
				case !seen:
					outer *= g.n
				default:
					inner *= g.n
				}
			}
			for o := int64(0); o < outer; o++ {
				for in := int64(0); in < inner; in++ {
					var acc int64
					for j := int64(0); j < k; j++ {
						acc += x[(o*k+j)*inner+in]
					}
					got = append(got, acc)
				}
			}
		case len(gs) > kernels.MaxDims:
			continue
		default:
			l, rows, k, kept := axesLayout(gs)
			for i := int64(0); i < rows; i++ {
				base := offsetOver(l, 0, int(kept), i)
				var acc int64
				for j := int64(0); j < k; j++ {
					acc += x[base+offsetOver(l, int(kept), l.Rank, j)]
				}
				got = append(got, acc)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("sum of %v over %v (groups %+v): got %v, want %v", s, axes, gs, got, want)
		}
		planned++
	}
	if planned < 2000 {
		t.Fatalf("only %d of 3000 reductions planned", planned)
	}
}

// offsetOver is reduce_axes' ooc_axes_offset: index i over axes [lo, hi) of l.
func offsetOver(l kernels.Layout, lo, hi int, i int64) int64 {
	var off int64
	for d := hi - 1; d >= lo; d-- {
		off += (i % l.Dim[d]) * l.A[d]
		i /= l.Dim[d]
	}
	return off
}

// sumRef sums x (shape s) over axes, the result in row-major order of the kept axes.
func sumRef(x []int64, s []int, axes []int) []int64 {
	var outShape []int
	for d, n := range s {
		if !slices.Contains(axes, d) {
			outShape = append(outShape, n)
		}
	}
	out := make([]int64, total(outShape))
	idx := make([]int, len(s))
	for i := range x {
		k := i
		for d := len(s) - 1; d >= 0; d-- {
			idx[d] = k % s[d]
			k /= s[d]
		}
		o := 0
		for d, n := range s {
			if !slices.Contains(axes, d) {
				o = o*n + idx[d]
			}
		}
		out[o] += x[i]
	}
	return out
}
