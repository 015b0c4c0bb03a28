package dispatch

import (
	"fmt"
	"reflect"
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
		return planLinAlg(c)
	case "gorgonia.sizeOp":
		v, err := sizeOf(c)
		if err != nil {
			return plan{}, err
		}
		return plan{run: func(r *Runner, a addrs) error { return r.launch("fill_"+c.sfx, ptr(a.out), flt(float64(v)), i64(1)) }}, nil
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
	if p, ok, err := planMore(c, name); ok {
		return p, err
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
	if !ok {
		return plan{}, c.unsupported("no kernel operator for " + f[0])
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
	kernel := "binary_" + c.sfx
	if c.out.Dtype == tensor.Bool {
		kernel = "compare_" + c.sfx // bool results, one byte each (compare.go)
	}
	return plan{run: func(r *Runner, ad addrs) error {
		return r.launch(kernel, i64(int64(op)), ptr(ad.out), ptr(ad.in[0]), ptr(ad.in[1]), i64(n), kernels.LayoutArg(l))
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

// planMatMul is a matrix-matrix product, with the operands' transposes as
// planLinAlg read them from the op.
func planMatMul(c fn, tA, tB bool) (plan, error) {
	A, B, C := c.in(0), c.in(1), c.out.Shape
	if len(A) != 2 || len(B) != 2 || len(C) != 2 {
		return plan{}, c.unsupported("only matrix-matrix products (2-D operands) run in cuBLAS here")
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

// copyLaunch copies one operand through a layout to dst.
func copyLaunch(r *Runner, sfx string, dst, src uintptr, n int64, l kernels.Layout) error {
	return r.launch("copy_"+sfx, ptr(dst), ptr(src), i64(n), kernels.LayoutArg(l))
}

func planRepeat(c fn) (plan, error) {
	x, out := c.in(0), c.out.Shape
	if len(x) != len(out) && !x.IsScalar() {
		return plan{}, c.unsupported(fmt.Sprintf("repeat of %v into %v", x, out))
	}
	os := strides(out)
	var xs []int64
	if !x.IsScalar() {
		xs = strides(x)
	}
	var l kernels.Layout
	for d := range out {
		if out[d] == 1 {
			continue // walked once: the axis drops out of the layout
		}
		if l.Rank == kernels.MaxDims {
			return plan{}, c.unsupported(fmt.Sprintf("repeat of %v into %v: at most %d axes longer than 1", x, out, kernels.MaxDims))
		}
		k := l.Rank
		l.Rank++
		l.Dim[k], l.Out[k], l.Rep[k] = int64(out[d]), os[d], 1
		if xs != nil {
			l.A[k] = xs[d]
			if x[d] != out[d] {
				if x[d] == 0 || out[d]%x[d] != 0 {
					return plan{}, c.unsupported(fmt.Sprintf("repeat of %v into %v", x, out))
				}
				l.Rep[k] = int64(out[d] / x[d])
			}
		}
	}
	n := total(out)
	return plan{run: func(r *Runner, a addrs) error { return copyLaunch(r, c.sfx, a.out, a.in[0], n, l) }}, nil
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

// sizeOf is what gorgonia's sizeOp computes from its operand's shape: the
// length of its axis (1 for a scalar operand).
func sizeOf(c fn) (int64, error) {
	axis, err := intField(c.f.Op, "axis")
	if err != nil {
		return 0, c.unsupported(err.Error())
	}
	s := c.in(0)
	if len(s) == 0 {
		return 1, nil
	}
	if axis < 0 || axis >= len(s) {
		return 0, c.unsupported(fmt.Sprintf("axis %d of a %v operand", axis, s))
	}
	return int64(s[axis]), nil
}
