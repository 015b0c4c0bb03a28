package dispatch

import (
	"fmt"
	"strings"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/vm"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

// gorgonia's Upsample2D (nearest: each pixel copied (s+1)² times, a copy
// with a layout; its gradient g_upsample_grad) and ByIndices (a gather
// along an axis by an Int index vector that stays on the device, and its
// gradient, a scatter-add in the CPU's order: g_byindices(_grad), with
// tensor's index arithmetic as it is, kernels.ByIndicesArgs).

func opName(op gorgonia.Op) string { return strings.TrimPrefix(fmt.Sprintf("%T", op), "*") }

// isIndexOperand reports ByIndices' Int index vector, the one operand whose
// type is not the result's.
func isIndexOperand(op gorgonia.Op, v *vm.Var) bool {
	n := opName(op)
	return (n == "gorgonia.byIndicesOp" || n == "gorgonia.byIndicesOpDiffOp") && v.Dtype == tensor.Int
}

func planUpsample(_ *Runner, c fn) (plan, error) {
	s, err := intField(c.f.Op, "stride")
	if err != nil {
		return plan{}, c.unsupported(err.Error())
	}
	f := s + 1
	diff := opName(c.f.Op) == "gorgonia.upsampleDiffOp"
	x, y := c.in(0), c.out.Shape
	if diff {
		if len(c.ins) != 3 {
			return plan{}, c.unsupported("an upsample gradient without (x, y, dy)")
		}
		x, y = c.out.Shape, c.in(2)
	}
	if s < 0 || len(x) != 4 || len(y) != 4 || y[0] != x[0] || y[1] != x[1] || y[2] != x[2]*f || y[3] != x[3]*f {
		return plan{}, c.unsupported(fmt.Sprintf("upsampling %v into %v by %d", x, y, f))
	}
	sfx := c.sfx
	if diff {
		planes, H, W := int64(x[0]*x[1]), int64(x[2]), int64(x[3])
		return plan{run: func(r *Runner, a addrs) error {
			return r.launch("g_upsample_grad_"+sfx, ptr(a.out), ptr(a.in[2]), i64(planes), i64(H), i64(W), i64(int64(s)))
		}}, nil
	}
	l := kernels.Layout{Rank: 4}
	ys, xs := strides(y), strides(x)
	for d := range y {
		l.Dim[d], l.Out[d], l.A[d], l.Rep[d] = int64(y[d]), ys[d], xs[d], 1
	}
	l.Rep[2], l.Rep[3] = int64(f), int64(f)
	n := total(y)
	return plan{run: func(r *Runner, a addrs) error { return copyLaunch(r, sfx, a.out, a.in[0], n, l) }}, nil
}

func planByIndices(_ *Runner, c fn) (plan, error) {
	axis, err := intField(c.f.Op, "axis")
	if err != nil {
		return plan{}, c.unsupported(err.Error())
	}
	diff := opName(c.f.Op) == "gorgonia.byIndicesOpDiffOp"
	want := 2
	if diff {
		want = 3
	}
	if len(c.ins) != want || c.ins[want-1].Dtype != tensor.Int {
		return plan{}, c.unsupported(fmt.Sprintf("want %d operands, the last an Int index vector", want))
	}
	x, other := c.in(0), c.out.Shape // the operand's shape and the gathered one
	if diff {
		other = c.in(1)
	}
	idx := c.in(want - 1)
	if !idx.IsVectorLike() || x.IsScalarEquiv() || axis < 0 || axis >= len(x) || len(other) != len(x) || other[axis] != idx.TotalSize() {
		return plan{}, c.unsupported(fmt.Sprintf("by indices %v of %v along axis %d into %v", idx, x, axis, other))
	}
	args, err := kernels.ByIndicesArgs(x, other, axis, diff)
	if err != nil {
		return plan{}, c.unsupported(err.Error())
	}
	sfx, n := c.sfx, total(c.out.Shape)
	name := "g_byindices_"
	if diff {
		name = "g_byindices_grad_"
	}
	return plan{run: func(r *Runner, a addrs) error {
		if err := r.launch("fill_"+sfx, ptr(a.out), flt(0), i64(n)); err != nil {
			return err
		}
		src := a.in[0] // the forward gathers from x; the gradient scatters g
		if diff {
			src = a.in[1]
		}
		return r.launch(name+sfx, append([]kernels.Arg{ptr(a.out), ptr(src), ptr(a.in[want-1])}, args...)...)
	}}, nil
}
