package dispatch

import (
	"math/rand"
	"slices"
	"testing"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

// walkCopy does what the copy kernel does with layout l over n elements.
func walkCopy(out, in []int, n int64, l kernels.Layout) {
	if l.Rank == 0 {
		copy(out[:n], in[:n])
		return
	}
	for i := int64(0); i < n; i++ {
		o, a, k := int64(0), int64(0), i
		for d := l.Rank - 1; d >= 0; d-- {
			c := k % l.Dim[d]
			k /= l.Dim[d]
			o += c * l.Out[d]
			a += (c / max(l.Rep[d], 1)) * l.A[d]
		}
		out[o] = in[a]
	}
}

// TestPermuteLayout: transposes of up to 9 axes (lengths 1 to 3, random
// permutations) copied through permuteLayout's collapsed layout equal a
// direct transposition; those it refuses move more than 6 blocks.
func TestPermuteLayout(t *testing.T) {
	rng := rand.New(rand.NewSource(26))
	done := 0
	for trial := 0; trial < 3000; trial++ {
		rank := 1 + rng.Intn(9)
		x := make([]int, rank)
		for d := range x {
			x[d] = 1 + rng.Intn(3)
		}
		pattern := rng.Perm(rank)
		if trial%3 == 0 { // keep runs of neighbours together, as real transposes do
			slices.Sort(pattern[:rank/2])
		}
		l, err := permuteLayout(x, pattern)
		nx, _ := collapsePermutation(x, pattern)
		if err != nil {
			if len(nx) <= kernels.MaxDims {
				t.Fatalf("%v by %v refused though it collapses to %v: %v", x, pattern, nx, err)
			}
			continue
		}
		n := total(x)
		in := make([]int, n)
		for i := range in {
			in[i] = i
		}
		got := make([]int, n)
		walkCopy(got, in, n, l)
		if want := transposeRef(in, x, pattern); !slices.Equal(got, want) {
			t.Fatalf("%v by %v (collapsed to %v): got %v, want %v", x, pattern, nx, got, want)
		}
		done++
	}
	if done < 1000 {
		t.Fatalf("only %d of 3000 transposes planned", done)
	}
	if _, err := permuteLayout([]int{2, 2}, []int{0, 0}); err == nil {
		t.Error("a pattern that is not a permutation was taken")
	}
}

// transposeRef is in (shape x, row-major) transposed by pattern.
func transposeRef(in []int, x, pattern []int) []int {
	out := make([]int, len(in))
	os := make([]int, len(x))
	for d, p := range pattern {
		os[d] = x[p]
	}
	xs := strides(x)
	idx := make([]int, len(x))
	for i := range out {
		// idx: the output index of element i, row-major over os
		k := i
		for d := len(os) - 1; d >= 0; d-- {
			idx[d] = k % os[d]
			k /= os[d]
		}
		src := int64(0)
		for d, p := range pattern {
			src += int64(idx[d]) * xs[p]
		}
		out[i] = in[src]
	}
	return out
}
