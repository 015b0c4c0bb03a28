package dispatch

import (
	"fmt"

	"gorgonia.org/tensor"
)

// gorgonia's ConvType (dtConvOp) converts between Int (int64 on the device)
// and float32 or float64, with Go's conversions (g_to_int, g_from_int); it
// converts nothing else, and neither does this plan.

func planConvType(_ *Runner, c fn) (plan, error) {
	if len(c.ins) != 1 || total(c.in(0)) != total(c.out.Shape) {
		return plan{}, c.unsupported("a conversion of another size")
	}
	from, to := c.ins[0].Dtype, c.out.Dtype
	sfx := map[tensor.Dtype]string{tensor.Float32: "f32", tensor.Float64: "f64"}
	n := total(c.out.Shape)
	var kernel string
	switch {
	case sfx[from] != "" && to == tensor.Int:
		kernel = "g_to_int_" + sfx[from]
	case from == tensor.Int && sfx[to] != "":
		kernel = "g_from_int_" + sfx[to]
	default:
		return plan{}, c.unsupported(fmt.Sprintf("a conversion from %v to %v (gorgonia converts Int to and from the float types only)", from, to))
	}
	return plan{run: func(r *Runner, a addrs) error { return r.launch(kernel, ptr(a.out), ptr(a.in[0]), i64(n)) }}, nil
}
