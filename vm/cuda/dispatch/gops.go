package dispatch

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

// planGorgonia plans gorgonia's own ops: elementwise arithmetic, matrix
// products, reductions, softmax and the ops that only move elements.
func planGorgonia(c fn) (plan, error) {
	name := strings.TrimPrefix(fmt.Sprintf("%T", c.f.Op), "*")
	switch name {
	case "gorgonia.elemBinOp":
		return planBinary(c)
	case "gorgonia.elemUnaryOp":
		u, ok := kernels.UnaryOpNamed(fmt.Sprint(c.f.Op))
		if !ok {
			return plan{}, c.unsupported("no unary kernel for this operator")
		}
		if total(c.in(0)) != total(c.out.Shape) {
			return plan{}, c.unsupported("operand and result sizes differ")
		}
		n := total(c.out.Shape)
		return plan{run: func(r *Runner, a addrs) error {
			return r.launch("unary_"+c.sfx, i64(int64(u)), ptr(a.out), ptr(a.in[0]), i64(n))
		}}, nil
	case "gorgonia.linAlgBinOp":
		return planMatMul(c)
	case "gorgonia.sizeOp":
		axis, err := intField(c.f.Op, "axis")
		if err != nil {
			return plan{}, c.unsupported(err.Error())
		}
		v := 1.0
		if s := c.in(0); len(s) > 0 {
			if axis < 0 || axis >= len(s) {
				return plan{}, c.unsupported(fmt.Sprintf("axis %d of a %v operand", axis, s))
			}
			v = float64(s[axis])
		}
		return plan{run: func(r *Runner, a addrs) error { return r.launch("fill_"+c.sfx, ptr(a.out), flt(v), i64(1)) }}, nil
	case "gorgonia.sumOp":
		return planSum(c)
	case "gorgonia.repeatOp":
		return planRepeat(c)
	case "gorgonia.sliceOp":
		return planSlice(c)
	case "gorgonia.concatOp":
		return planConcat(c)
	case "gorgonia.softmaxOp", "gorgonia.softmaxDiffOp":
		return planSoftmax(c, name == "gorgonia.softmaxDiffOp")
	}
	return plan{}, c.unsupported("no kernel plan for this op type")
}

func planBinary(c fn) (plan, error) {
	f := strings.Fields(fmt.Sprint(c.f.Op))
	if len(f) != 2 || len(c.ins) != 2 {
		return plan{}, c.unsupported("unexpected elementwise op")
	}
	a, b := c.in(0), c.in(1)
	n := total(c.out.Shape)
	aScalar, bScalar := total(a) == 1 && total(a) != n, total(b) == 1 && total(b) != n
	if a.IsScalar() && b.IsScalar() {
		bScalar = true
	}
	op, ok := kernels.BinaryOpFor(f[0], bScalar)
	if !ok || op >= kernels.BinaryLt {
		return plan{}, c.unsupported("only arithmetic (+ - ⊙ ÷ ^) runs on the device")
	}
	l := kernels.Contiguous()
	switch {
	case total(a) == n && total(b) == n:
	case aScalar || bScalar:
		l = kernels.Layout{Rank: 1}
		l.Dim[0], l.Out[0], l.A[0], l.B[0] = n, 1, 1, 1
		if aScalar {
			l.A[0] = 0
		}
		if bScalar {
			l.B[0] = 0
		}
	default:
		return plan{}, c.unsupported(fmt.Sprintf("operands %v and %v do not broadcast elementwise", a, b))
	}
	return plan{run: func(r *Runner, ad addrs) error {
		return r.launch("binary_"+c.sfx, i64(int64(op)), ptr(ad.out), ptr(ad.in[0]), ptr(ad.in[1]), i64(n), kernels.LayoutArg(l))
	}}, nil
}

func boolField(op any, name string) (bool, error) {
	v := reflect.ValueOf(op)
	for v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	f := v.FieldByName(name)
	if v.Kind() != reflect.Struct || !f.IsValid() || f.Kind() != reflect.Bool {
		return false, fmt.Errorf("%T has no bool field %s (another gorgonia version?)", op, name)
	}
	return f.Bool(), nil
}

func planMatMul(c fn) (plan, error) {
	A, B, C := c.in(0), c.in(1), c.out.Shape
	if len(A) != 2 || len(B) != 2 || len(C) != 2 {
		return plan{}, c.unsupported("only matrix-matrix products (2-D operands) run in cuBLAS here")
	}
	tA, err := boolField(c.f.Op, "transA")
	if err != nil {
		return plan{}, c.unsupported(err.Error())
	}
	tB, err := boolField(c.f.Op, "transB")
	if err != nil {
		return plan{}, c.unsupported(err.Error())
	}
	m, n := C[0], C[1]
	k := A[1]
	if tA {
		k = A[0]
	}
	return plan{run: func(r *Runner, a addrs) error {
		return r.gemm(c.es, tA, tB, m, n, k, a.in[0], A[1], a.in[1], B[1], 0, a.out, n)
	}}, nil
}

// around returns (outer, k, inner) for the axes lo..hi of s.
func around(s tensor.Shape, lo, hi int) (outer, k, inner int64) {
	outer, k, inner = 1, 1, 1
	for d, v := range s {
		switch {
		case d < lo:
			outer *= int64(v)
		case d <= hi:
			k *= int64(v)
		default:
			inner *= int64(v)
		}
	}
	return
}

func planSum(c fn) (plan, error) {
	along, err := intsField(c.f.Op, "along")
	if err != nil {
		return plan{}, c.unsupported(err.Error())
	}
	along = slices.Clone(along)
	slices.Sort(along)
	s := c.in(0)
	if len(along) == 0 {
		return plan{}, c.unsupported("a sum over no axis")
	}
	for i, ax := range along {
		if ax < 0 || ax >= len(s) || (i > 0 && ax != along[i-1]+1) {
			return plan{}, c.unsupported(fmt.Sprintf("sum over axes %v of %v: only adjacent axes run as one reduction", along, s))
		}
	}
	outer, k, inner := around(s, along[0], along[len(along)-1])
	return plan{run: func(r *Runner, a addrs) error {
		return r.launch("reduce_"+c.sfx, i64(int64(kernels.ReduceSum)), ptr(a.out), ptr(a.in[0]), i64(outer), i64(k), i64(inner))
	}}, nil
}

// copyLaunch copies one operand through a layout to dst.
func copyLaunch(r *Runner, sfx string, dst, src uintptr, n int64, l kernels.Layout) error {
	return r.launch("copy_"+sfx, ptr(dst), ptr(src), i64(n), kernels.LayoutArg(l))
}

func planRepeat(c fn) (plan, error) {
	x, out := c.in(0), c.out.Shape
	if len(out) > kernels.MaxDims || (len(x) != len(out) && !x.IsScalar()) {
		return plan{}, c.unsupported(fmt.Sprintf("repeat of %v into %v", x, out))
	}
	l := kernels.Layout{Rank: len(out)}
	os := strides(out)
	var xs []int64
	if !x.IsScalar() {
		xs = strides(x)
	}
	for d := range out {
		l.Dim[d], l.Out[d], l.Rep[d] = int64(out[d]), os[d], 1
		if xs != nil {
			l.A[d] = xs[d]
			if x[d] != out[d] {
				if x[d] == 0 || out[d]%x[d] != 0 {
					return plan{}, c.unsupported(fmt.Sprintf("repeat of %v into %v", x, out))
				}
				l.Rep[d] = int64(out[d] / x[d])
			}
		}
	}
	n := total(out)
	return plan{run: func(r *Runner, a addrs) error { return copyLaunch(r, c.sfx, a.out, a.in[0], n, l) }}, nil
}

func planSlice(c fn) (plan, error) {
	along, err := intField(c.f.Op, "along")
	if err != nil {
		return plan{}, c.unsupported(err.Error())
	}
	x := c.in(0)
	if len(x) > kernels.MaxDims || along < 0 || along >= len(x) {
		return plan{}, c.unsupported(fmt.Sprintf("slice along %d of %v", along, x))
	}
	start, end, step := 0, x[along], 1
	if sv := reflect.Indirect(reflect.ValueOf(c.f.Op)).FieldByName("Slice"); sv.IsValid() && !sv.IsNil() {
		s := sv.Interface().(tensor.Slice)
		start, end, step = s.Start(), s.End(), max(s.Step(), 1)
	}
	if start < 0 || end > x[along] || start >= end {
		return plan{}, c.unsupported(fmt.Sprintf("slice %d:%d of axis %d of %v", start, end, along, x))
	}
	view := x.Clone()
	view[along] = (end - start + step - 1) / step
	if total(view) != total(c.out.Shape) {
		return plan{}, c.unsupported(fmt.Sprintf("slice of %v gives %v, the graph says %v", x, view, c.out.Shape))
	}
	xs, vs := strides(x), strides(view)
	l := kernels.Layout{Rank: len(x)}
	for d := range x {
		l.Dim[d], l.Out[d], l.A[d], l.Rep[d] = int64(view[d]), vs[d], xs[d], 1
	}
	l.A[along] *= int64(step)
	off := uintptr(int64(start) * xs[along] * c.es)
	n := total(view)
	return plan{run: func(r *Runner, a addrs) error { return copyLaunch(r, c.sfx, a.out, a.in[0]+off, n, l) }}, nil
}

func planConcat(c fn) (plan, error) {
	axis, err := intField(c.f.Op, "axis")
	if err != nil {
		return plan{}, c.unsupported(err.Error())
	}
	out := c.out.Shape
	if axis < 0 || axis >= len(out) || len(out) > kernels.MaxDims {
		return plan{}, c.unsupported(fmt.Sprintf("concat along %d into %v", axis, out))
	}
	ost := strides(out)
	type part struct {
		off uintptr
		n   int64
		l   kernels.Layout
	}
	var parts []part
	at := 0
	for _, v := range c.ins {
		s := v.Shape
		if len(s) != len(out) {
			return plan{}, c.unsupported(fmt.Sprintf("concat of %v into %v", s, out))
		}
		l := kernels.Layout{Rank: len(s)}
		is := strides(s)
		for d := range s {
			l.Dim[d], l.Out[d], l.A[d], l.Rep[d] = int64(s[d]), ost[d], is[d], 1
		}
		parts = append(parts, part{off: uintptr(int64(at) * ost[axis] * c.es), n: total(s), l: l})
		at += s[axis]
	}
	if at != out[axis] {
		return plan{}, c.unsupported(fmt.Sprintf("operands fill %d of %d along axis %d", at, out[axis], axis))
	}
	return plan{run: func(r *Runner, a addrs) error {
		for i, p := range parts {
			if err := copyLaunch(r, c.sfx, a.out+p.off, a.in[i], p.n, p.l); err != nil {
				return err
			}
		}
		return nil
	}}, nil
}

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
	if axis < 0 || axis >= len(x) {
		return plan{}, c.unsupported(fmt.Sprintf("softmax along %d of %v", axis, x))
	}
	outer, k, inner := around(x, axis, axis)
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
	if axis == len(x)-1 {
		l |= 2 // tensor's last-axis code takes another maximum (package kernels' softmax.cu)
	}
	return plan{run: func(r *Runner, a addrs) error {
		return r.launch("softmax_"+c.sfx, i64(l), ptr(a.out), ptr(a.in[0]), i64(outer), i64(k), i64(inner))
	}}, nil
}
