package dispatch

import (
	"fmt"

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
// (output axis d is input axis pattern[d]) densely.
func permuteLayout(x []int, pattern []int) (kernels.Layout, error) {
	if len(pattern) != len(x) || len(x) > kernels.MaxDims {
		return kernels.Layout{}, fmt.Errorf("permutation %v of a %v operand (at most %d axes)", pattern, x, kernels.MaxDims)
	}
	seen := make([]bool, len(x))
	out := make([]int, len(x))
	for d, p := range pattern {
		if p < 0 || p >= len(x) || seen[p] {
			return kernels.Layout{}, fmt.Errorf("%v is not a permutation of %d axes", pattern, len(x))
		}
		seen[p] = true
		out[d] = x[p]
	}
	xs, os := strides(x), strides(out)
	l := kernels.Layout{Rank: len(x)}
	for d, p := range pattern {
		l.Dim[d], l.Out[d], l.A[d], l.Rep[d] = int64(out[d]), os[d], xs[p], 1
	}
	return l, nil
}
