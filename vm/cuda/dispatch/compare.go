package dispatch

import (
	"fmt"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

// Comparisons are planned with the other elemBinOps (planBinary): a
// same-type result (retSame, as Rectify's >= makes) runs the binary kernel,
// a bool result the compare kernel, which writes one byte per element (0 or
// 1, Go's bool), so a bool tensor on the device is laid out as on the host.

// planBetween plans gorgonia's maxBetween and minBetween (two operands of
// one shape) as the binary kernel's tensor MaxBetween/MinBetween operators.
func planBetween(c fn) (plan, error) {
	op, ok := kernels.BinaryOpFor(fmt.Sprint(c.f.Op), false)
	if !ok || len(c.ins) != 2 {
		return plan{}, c.unsupported("unexpected max/min between op")
	}
	if !c.in(0).Eq(c.in(1)) || total(c.in(0)) != total(c.out.Shape) {
		return plan{}, c.unsupported(fmt.Sprintf("operands %v and %v are not of the result's shape %v", c.in(0), c.in(1), c.out.Shape))
	}
	n := total(c.out.Shape)
	return plan{run: func(r *Runner, a addrs) error {
		return r.launch("binary_"+c.sfx, i64(int64(op)), ptr(a.out), ptr(a.in[0]), ptr(a.in[1]), i64(n), kernels.LayoutArg(kernels.Contiguous()))
	}}, nil
}
