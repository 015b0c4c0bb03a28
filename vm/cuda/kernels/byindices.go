package kernels

import "fmt"

// ByIndicesArgs are g_byindices' and g_byindices_grad's arguments after
// idx, for gorgonia's ByIndices of x along axis into out (for the
// gradient, x is the operand's shape and out the incoming gradient's: the
// same pair). They reproduce tensor v0.9.24's loops (selectByIdx,
// selectByIndicesB), whose steps between outer blocks the kernels take as
// they are, so that every shape gives the CPU device's result.
func ByIndicesArgs(x, out []int, axis int, grad bool) ([]Arg, error) {
	if len(x) == 0 || len(x) != len(out) || axis < 0 || axis >= len(x) {
		return nil, fmt.Errorf("by indices of %v into %v along axis %d", x, out, axis)
	}
	st := func(s []int) []int64 {
		r := make([]int64, len(s))
		acc := int64(1)
		for d := len(s) - 1; d >= 0; d-- {
			r[d] = acc
			acc *= int64(s[d])
		}
		return r
	}
	total := func(s []int) int64 {
		n := int64(1)
		for _, v := range s {
			n *= int64(v)
		}
		return n
	}
	xs, os := st(x), st(out)
	outer := int64(1)
	for _, v := range x[:axis] {
		outer *= int64(v)
	}
	nidx := int64(out[axis])
	prev := max(axis-1, 0)
	outerStride := func(s []int64) int64 { // tensor's outerRetStride
		if axis == 0 {
			return 2 * s[0]
		}
		return s[axis-1]
	}
	var L, idxStride, idxLimit, idxStep, iStride, iLimit, iStep int64
	inner := axis == len(x)-1
	switch {
	case !grad && !inner: // x[idx] -> out[i]
		L, idxStride, idxLimit, idxStep = xs[axis], xs[axis], int64(x[axis]), 2*xs[axis]
		iStride, iLimit, iStep = os[axis], int64(out[axis]), outerStride(os)
	case !grad:
		L, idxStride, idxLimit, idxStep = xs[axis], xs[axis], int64(x[axis]), xs[prev]
		iStride, iLimit, iStep = os[axis], int64(out[axis]), os[prev]
	case !inner: // dx[idx] += g[i]; dx has x's shape, g out's
		L, idxStride, idxLimit, idxStep = os[axis], xs[axis], int64(x[axis]), 2*os[axis]
		iStride, iLimit, iStep = os[axis], int64(out[axis]), outerStride(xs)
	default: // selectByIndicesB's innermost loop locates dx's slice in g's shape, g's in dx's
		L, idxStride, idxLimit, idxStep = os[axis], os[axis], int64(out[axis]), xs[prev]
		iStride, iLimit, iStep = xs[axis], int64(x[axis]), os[prev]
	}
	nIdxSide, nISide := total(x), total(out)
	args := []Arg{Int(nidx), Int(outer), Int(L), Int(idxStride), Int(idxLimit), Int(idxStep), Int(iStride), Int(iLimit), Int(iStep), Int(nIdxSide), Int(nISide)}
	return args, nil
}
