package dispatch

import "fmt"

// gorgonia's Sparsemax along the last axis (its default, -1; the op's other
// axes transpose with an axis list that is not a permutation) and its
// gradient, which gorgonia computes for 2-D tensors only: one thread per
// row (g_sparsemax, g_sparsemax_grad), the CPU op's arithmetic and order.

func planSparsemax(_ *Runner, c fn) (plan, error) {
	diff := opName(c.f.Op) == "gorgonia.sparsemaxDiffOp"
	s := c.out.Shape
	sfx := c.sfx
	if diff {
		if len(c.ins) != 2 || len(s) != 2 || !c.in(0).Eq(s) || !c.in(1).Eq(s) {
			return plan{}, c.unsupported(fmt.Sprintf("a sparsemax gradient of %v: gorgonia's takes (y, dy) of one 2-D shape", s))
		}
		rows, n := int64(s[0]), int64(s[1])
		return plan{run: func(r *Runner, a addrs) error {
			return r.launch("g_sparsemax_grad_"+sfx, ptr(a.out), ptr(a.in[0]), ptr(a.in[1]), i64(rows), i64(n))
		}}, nil
	}
	axis, err := intField(c.f.Op, "axis")
	if err != nil {
		return plan{}, c.unsupported(err.Error())
	}
	if len(s) == 0 || !(axis == -1 || (len(s) == 2 && axis == 1)) {
		return plan{}, c.unsupported(fmt.Sprintf("sparsemax along %d of %v: the CPU op transposes by an axis list that is not a permutation", axis, s))
	}
	n := int64(s[len(s)-1])
	rows := total(s) / max(n, 1)
	return plan{run: func(r *Runner, a addrs) error {
		return r.launch("g_sparsemax_"+sfx, ptr(a.out), ptr(a.in[0]), i64(rows), i64(n))
	}}, nil
}
