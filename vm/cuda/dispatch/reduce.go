package dispatch

import (
	"fmt"
	"slices"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

// planSum plans gorgonia's sumOp (Sum, and Mean's sum).
func planSum(c fn) (plan, error) { return planReduce(c, false) }

// planReduce plans sumOp or maxOp over any set of axes (negative axes count
// from the last). Adjacent axes run as the reduce kernel over an (outer, k,
// inner) view, whose sums over a first or last axis are tensor's bits; any
// other set runs as reduce_axes, one thread per output element walking the
// reduced axes in row-major order.
func planReduce(c fn, isMax bool) (plan, error) {
	along, err := intsField(c.f.Op, "along")
	if err != nil {
		return plan{}, c.unsupported(err.Error())
	}
	s := c.in(0)
	if len(along) == 0 {
		return plan{}, c.unsupported("a reduction over no axis")
	}
	axes := make([]int, 0, len(along))
	for _, ax := range along {
		a, err := normAxis(ax, len(s))
		if err != nil {
			return plan{}, c.unsupported(fmt.Sprintf("reduction of %v: %v", s, err))
		}
		axes = append(axes, a)
	}
	slices.Sort(axes)
	axes = slices.Compact(axes)
	op := kernels.ReduceSum
	if isMax {
		op = kernels.ReduceMax
	}
	if axes[len(axes)-1]-axes[0] == len(axes)-1 {
		outer, k, inner := around(s, axes[0], axes[len(axes)-1])
		return plan{run: func(r *Runner, a addrs) error {
			return r.launch("reduce_"+c.sfx, i64(int64(op)), ptr(a.out), ptr(a.in[0]), i64(outer), i64(k), i64(inner))
		}}, nil
	}
	if len(s) > kernels.MaxDims {
		return plan{}, c.unsupported(fmt.Sprintf("reduction over axes %v of %v: at most %d axes", along, s, kernels.MaxDims))
	}
	l, rows, k, kept := axesLayout(s, axes)
	return plan{run: func(r *Runner, a addrs) error {
		return r.launch("reduce_axes_"+c.sfx, i64(int64(op)), ptr(a.out), ptr(a.in[0]), i64(rows), i64(k), i64(kept), kernels.LayoutArg(l))
	}}, nil
}

// axesLayout is reduce_axes' walk of s: the kept axes first, then the
// reduced ones (sorted), each with its input stride.
func axesLayout(s []int, axes []int) (l kernels.Layout, rows, k, kept int64) {
	st := strides(s)
	order := make([]int, 0, len(s))
	rows, k = 1, 1
	for d := range s {
		if !slices.Contains(axes, d) {
			order = append(order, d)
			rows *= int64(s[d])
		}
	}
	kept = int64(len(order))
	for _, d := range axes {
		order = append(order, d)
		k *= int64(s[d])
	}
	l.Rank = len(s)
	for i, d := range order {
		l.Dim[i], l.A[i], l.Rep[i] = int64(s[d]), st[d], 1
	}
	return l, rows, k, kept
}

// planGlobalAvgPool plans gorgonia's globalAveragePoolOp (N, C, H, W) -> (N,
// C, 1, 1) as the reduce kernel's mean over each plane: a sum in the tensor's
// type from 0 in index order, then a division by H·W, as the CPU op.
func planGlobalAvgPool(c fn) (plan, error) {
	x := c.in(0)
	if len(x) != 4 {
		return plan{}, c.unsupported(fmt.Sprintf("global average pooling of %v (NCHW expected)", x))
	}
	planes, plane := int64(x[0]*x[1]), int64(x[2]*x[3])
	return plan{run: func(r *Runner, a addrs) error {
		return r.launch("reduce_"+c.sfx, i64(int64(kernels.ReduceMean)), ptr(a.out), ptr(a.in[0]), i64(planes), i64(plane), i64(1))
	}}, nil
}
