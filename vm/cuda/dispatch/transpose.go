package dispatch

import (
	"fmt"
	"slices"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

// planTranspose plans gorgonia's transposeOp (any rank up to
// kernels.MaxDims, any permutation) as one strided copy: the walk is over
// the output in row-major order, reading the input along the permuted axes.
func planTranspose(c fn) (plan, error) {
	pattern, err := intsField(c.f.Op, "pattern")
	if err != nil {
		return plan{}, c.unsupported(err.Error())
	}
	x := c.in(0)
	l, err := permuteLayout(x, pattern)
	if err != nil {
		return plan{}, c.unsupported(err.Error())
	}
	n := total(x)
	if n != total(c.out.Shape) {
		return plan{}, c.unsupported(fmt.Sprintf("transpose of %v gives %v", x, c.out.Shape))
	}
	return plan{run: func(r *Runner, a addrs) error { return copyLaunch(r, c.sfx, a.out, a.in[0], n, l) }}, nil
}

// permuteLayout is the copy layout that writes x transposed by pattern
// (output axis d is input axis pattern[d]) densely. Axes of length 1 are
// dropped and input axes that stay neighbours are merged first, so a
// transpose of more than kernels.MaxDims axes runs when it moves at most
// that many blocks.
func permuteLayout(x []int, pattern []int) (kernels.Layout, error) {
	if len(pattern) != len(x) {
		return kernels.Layout{}, fmt.Errorf("permutation %v of a %v operand", pattern, x)
	}
	seen := make([]bool, len(x))
	for _, p := range pattern {
		if p < 0 || p >= len(x) || seen[p] {
			return kernels.Layout{}, fmt.Errorf("%v is not a permutation of %d axes", pattern, len(x))
		}
		seen[p] = true
	}
	x, pattern = collapsePermutation(x, pattern)
	if len(x) > kernels.MaxDims {
		return kernels.Layout{}, fmt.Errorf("permutation %v of a %v operand moves more than %d blocks (at most %d axes)", pattern, x, kernels.MaxDims, kernels.MaxDims)
	}
	out := make([]int, len(x))
	for d, p := range pattern {
		out[d] = x[p]
	}
	xs, os := strides(x), strides(out)
	l := kernels.Layout{Rank: len(x)}
	for d, p := range pattern {
		l.Dim[d], l.Out[d], l.A[d], l.Rep[d] = int64(out[d]), os[d], xs[p], 1
	}
	return l, nil
}

// collapsePermutation drops the axes of length 1 of x and merges each run of
// output axes that reads neighbouring input axes in order into one axis: the
// same copy over fewer axes.
func collapsePermutation(x, pattern []int) ([]int, []int) {
	var keep []int // output axes, in order, that are not of length 1
	for _, p := range pattern {
		if x[p] != 1 {
			keep = append(keep, p)
		}
	}
	// groups of input axes that stay together, in output order
	var groups [][]int
	for i, p := range keep {
		if i > 0 {
			g := groups[len(groups)-1]
			if last := g[len(g)-1]; p == last+1 || allOnesBetween(x, last, p) {
				groups[len(groups)-1] = append(g, p)
				continue
			}
		}
		groups = append(groups, []int{p})
	}
	// the new input axes are the groups in input order
	order := make([]int, len(groups))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return groups[a][0] - groups[b][0] })
	nx := make([]int, len(groups))
	rank := make([]int, len(groups)) // group -> new input axis
	for newAxis, gi := range order {
		n := 1
		for _, p := range groups[gi] {
			n *= x[p]
		}
		nx[newAxis] = n
		rank[gi] = newAxis
	}
	np := make([]int, len(groups))
	for gi := range groups {
		np[gi] = rank[gi]
	}
	return nx, np
}

// allOnesBetween reports whether every axis of x strictly between a and b
// (a < b) has length 1.
func allOnesBetween(x []int, a, b int) bool {
	if b <= a {
		return false
	}
	for d := a + 1; d < b; d++ {
		if x[d] != 1 {
			return false
		}
	}
	return true
}
