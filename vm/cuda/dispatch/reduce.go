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
	groups := reduceGroups(s, axes)
	var reduced []int // indices of the reduced groups
	for i, g := range groups {
		if g.reduced {
			reduced = append(reduced, i)
		}
	}
	if len(reduced) <= 1 {
		outer, k, inner := int64(1), int64(1), int64(1)
		for i, g := range groups {
			switch {
			case g.reduced:
				k = g.n
			case len(reduced) == 0 || i < reduced[0]:
				outer *= g.n
			default:
				inner *= g.n
			}
		}
		return plan{run: func(r *Runner, a addrs) error {
			return r.launch("reduce_"+c.sfx, i64(int64(op)), ptr(a.out), ptr(a.in[0]), i64(outer), i64(k), i64(inner))
		}}, nil
	}
	if len(groups) > kernels.MaxDims {
		return plan{}, c.unsupported(fmt.Sprintf("reduction over axes %v of %v: more than %d runs of kept and reduced axes", along, s, kernels.MaxDims))
	}
	l, rows, k, kept := axesLayout(groups)
	return plan{run: func(r *Runner, a addrs) error {
		return r.launch("reduce_axes_"+c.sfx, i64(int64(op)), ptr(a.out), ptr(a.in[0]), i64(rows), i64(k), i64(kept), kernels.LayoutArg(l))
	}}, nil
}

// group is a run of neighbouring axes of one kind (kept or reduced), walked
// as one axis of n elements at stride stride.
type group struct {
	n, stride int64
	reduced   bool
}

// reduceGroups views s as runs of kept and reduced axes (axes of length 1
// dropped): the same walk, in row-major order, over fewer axes.
func reduceGroups(s []int, axes []int) []group {
	st := strides(s)
	var gs []group
	for d, n := range s {
		if n == 1 {
			continue
		}
		red := slices.Contains(axes, d)
		if k := len(gs) - 1; k >= 0 && gs[k].reduced == red {
			gs[k].n *= int64(n)
			gs[k].stride = st[d]
			continue
		}
		gs = append(gs, group{n: int64(n), stride: st[d], reduced: red})
	}
	return gs
}

// axesLayout is reduce_axes' walk: the kept groups first, then the reduced
// ones, each with its input stride.
func axesLayout(gs []group) (l kernels.Layout, rows, k, kept int64) {
	rows, k = 1, 1
	for _, red := range []bool{false, true} {
		for _, g := range gs {
			if g.reduced != red {
				continue
			}
			l.Dim[l.Rank], l.A[l.Rank], l.Rep[l.Rank] = g.n, g.stride, 1
			l.Rank++
			if red {
				k *= g.n
			} else {
				rows *= g.n
				kept++
			}
		}
	}
	return l, rows, k, kept
}
