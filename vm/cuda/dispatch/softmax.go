package dispatch

import (
	"fmt"
	"strings"
)

// planSoftmax plans gorgonia's softmaxOp and softmaxDiffOp (log or not)
// along any axis; a negative axis counts from the last (gorgonia's default
// is -1).
func planSoftmax(c fn, diff bool) (plan, error) {
	s := fmt.Sprint(c.f.Op)
	var axis int
	var lg bool
	_, open, ok := strings.Cut(s, "{")
	if !ok {
		return plan{}, c.unsupported("unexpected softmax op")
	}
	if _, err := fmt.Sscanf(open, "%d, %t", &axis, &lg); err != nil {
		return plan{}, c.unsupported("unexpected softmax op: " + err.Error())
	}
	x := c.out.Shape
	ax, err := normAxis(axis, len(x))
	if err != nil {
		return plan{}, c.unsupported("softmax: " + err.Error())
	}
	outer, k, inner := around(x, ax, ax)
	l := int64(0)
	if lg {
		l = 1
	}
	if diff {
		if len(c.ins) != 3 {
			return plan{}, c.unsupported("softmax gradient without (x, y, dy)")
		}
		return plan{run: func(r *Runner, a addrs) error {
			return r.launch("softmax_grad_"+c.sfx, i64(l), ptr(a.out), ptr(a.in[1]), ptr(a.in[2]), i64(outer), i64(k), i64(inner))
		}}, nil
	}
	if ax == len(x)-1 {
		l |= 2 // tensor's last-axis code takes another maximum (package kernels' softmax.cu)
	}
	return plan{run: func(r *Runner, a addrs) error {
		return r.launch("softmax_"+c.sfx, i64(l), ptr(a.out), ptr(a.in[0]), i64(outer), i64(k), i64(inner))
	}}, nil
}

// normAxis turns a gorgonia axis (negative: from the last) into 0..rank-1.
func normAxis(axis, rank int) (int, error) {
	a := axis
	if a < 0 {
		a += rank
	}
	if a < 0 || a >= rank {
		return 0, fmt.Errorf("axis %d of a rank-%d tensor", axis, rank)
	}
	return a, nil
}
