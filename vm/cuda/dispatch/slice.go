package dispatch

import (
	"fmt"
	"reflect"

	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

// sliceView is where gorgonia's sliceOp (or the sliceOp in a sliceIncrOp)
// reads in an operand of shape x: a byte offset, and a layout whose A strides
// walk the view (Out: the view written densely) over n elements.
func sliceView(c fn, x tensor.Shape) (off uintptr, l kernels.Layout, n int64, err error) {
	along, err := intField(c.f.Op, "along")
	if err != nil {
		return 0, l, 0, err
	}
	if len(x) > kernels.MaxDims || along < 0 || along >= len(x) {
		return 0, l, 0, fmt.Errorf("slice along %d of %v", along, x)
	}
	start, end, step := 0, x[along], 1
	if sv := reflect.Indirect(reflect.ValueOf(c.f.Op)).FieldByName("Slice"); sv.IsValid() && !sv.IsNil() {
		s := sv.Interface().(tensor.Slice)
		start, end, step = s.Start(), s.End(), max(s.Step(), 1)
	}
	if start < 0 || end > x[along] || start >= end {
		return 0, l, 0, fmt.Errorf("slice %d:%d of axis %d of %v", start, end, along, x)
	}
	view := x.Clone()
	view[along] = (end - start + step - 1) / step
	xs, vs := strides(x), strides(view)
	l = kernels.Layout{Rank: len(x)}
	for d := range x {
		l.Dim[d], l.Out[d], l.A[d], l.Rep[d] = int64(view[d]), vs[d], xs[d], 1
	}
	l.A[along] *= int64(step)
	return uintptr(int64(start) * xs[along] * c.es), l, total(view), nil
}

// planSlice plans gorgonia's sliceOp: one strided copy of the view.
func planSlice(c fn) (plan, error) {
	off, l, n, err := sliceView(c, c.in(0))
	if err != nil {
		return plan{}, c.unsupported(err.Error())
	}
	if n != total(c.out.Shape) {
		return plan{}, c.unsupported(fmt.Sprintf("slice of %v has %d elements, the graph says %v", c.in(0), n, c.out.Shape))
	}
	return plan{run: func(r *Runner, a addrs) error { return copyLaunch(r, c.sfx, a.out, a.in[0]+off, n, l) }}, nil
}

// planSliceIncr plans gorgonia's sliceIncrOp (Slice's gradient): zeros of
// the sliced operand's shape, then the increment copied into the view (the
// CPU op adds it to those zeros, which changes no bit).
func planSliceIncr(c fn) (plan, error) {
	if len(c.ins) != 2 {
		return plan{}, c.unsupported("sliceIncrOp without (x, increment)")
	}
	off, l, n, err := sliceView(c, c.out.Shape)
	if err != nil {
		return plan{}, c.unsupported(err.Error())
	}
	if n != total(c.in(1)) {
		return plan{}, c.unsupported(fmt.Sprintf("an increment of %v into a view of %d elements", c.in(1), n))
	}
	// Scatter: walk the view, write at its strides in out, read densely.
	for d := 0; d < l.Rank; d++ {
		l.Out[d], l.A[d] = l.A[d], l.Out[d]
	}
	all := total(c.out.Shape)
	return plan{run: func(r *Runner, a addrs) error {
		if err := r.launch("fill_"+c.sfx, ptr(a.out), flt(0), i64(all)); err != nil {
			return err
		}
		return copyLaunch(r, c.sfx, a.out+off, a.in[1], n, l)
	}}, nil
}

// planDiagFlat plans gorgonia's diagFlatOp: an n x n zero matrix with the
// operand's n elements on its diagonal (a fill, then a copy at stride n+1).
func planDiagFlat(c fn) (plan, error) {
	n := total(c.in(0))
	if s := c.out.Shape; len(s) != 2 || int64(s[0]) != n || int64(s[1]) != n {
		return plan{}, c.unsupported(fmt.Sprintf("diagonal of %v into %v", c.in(0), c.out.Shape))
	}
	l := kernels.Layout{Rank: 1}
	l.Dim[0], l.Out[0], l.A[0], l.Rep[0] = n, n+1, 1, 1
	return plan{run: func(r *Runner, a addrs) error {
		if err := r.launch("fill_"+c.sfx, ptr(a.out), flt(0), i64(n*n)); err != nil {
			return err
		}
		return copyLaunch(r, c.sfx, a.out, a.in[0], n, l)
	}}, nil
}
