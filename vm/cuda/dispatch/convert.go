package dispatch

import (
	"fmt"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// isConvType reports gorgonia's dtConvOp (ConvType), whose operand and
// result types differ.
func isConvType(op gorgonia.Op) bool { return fmt.Sprintf("%T", op) == "*gorgonia.dtConvOp" }

// planConvType plans ConvType, which gorgonia does between a float type and
// Int (Go's int, 8 bytes per element on the device as on the host), as one
// convert kernel: Go's conversions on amd64 (truncation toward zero; NaN,
// ±Inf and out-of-range floats give the minimum int64).
func planConvType(c fn) (plan, error) {
	if len(c.ins) != 1 || total(c.in(0)) != total(c.out.Shape) {
		return plan{}, c.unsupported("unexpected ConvType op")
	}
	name := map[tensor.Dtype]string{tensor.Float32: "f32", tensor.Float64: "f64", tensor.Int: "i64"}
	from, to := name[c.ins[0].Dtype], name[c.out.Dtype]
	if from == "" || to == "" || (from == "i64") == (to == "i64") {
		return plan{}, c.unsupported(fmt.Sprintf("conversion from %v to %v: gorgonia converts between a float type and Int", c.ins[0].Dtype, c.out.Dtype))
	}
	kernel := "convert_" + from + "_" + to
	n := total(c.out.Shape)
	return plan{run: func(r *Runner, a addrs) error { return r.launch(kernel, ptr(a.out), ptr(a.in[0]), i64(n)) }}, nil
}
