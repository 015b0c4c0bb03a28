package dispatch

import (
	"fmt"
	"strings"
)

// planInt plans the ops that run on Int tensors (Go's int, 8 bytes per
// element on the device as on the host): elemBinOp's + - ⊙ and comparisons
// (binary_i64, compare_i64; gorgonia's Do has no Int form of ÷ and ^ that
// the device reproduces, and no Int tensor-scalar form at all), MaxBetween
// and MinBetween, and the ops that only move elements (the 8-byte copy and
// fill kernels: the bits are moved, not read as floats).
func planInt(c fn) (plan, error) {
	name := strings.TrimPrefix(fmt.Sprintf("%T", c.f.Op), "*")
	switch name {
	case "gorgonia.elemBinOp":
		sym := strings.Fields(fmt.Sprint(c.f.Op))
		if len(sym) == 0 || !strings.Contains(" + - ⊙ < > <= >= == != ", " "+sym[0]+" ") {
			return plan{}, c.unsupported("on Int tensors the device runs + - ⊙ and the comparisons")
		}
		c.sfx = "i64"
		return planBinary(c)
	case "gorgonia.maxBetween", "gorgonia.minBetween":
		c.sfx = "i64"
		return planBetween(c)
	case "gorgonia.transposeOp", "gorgonia.sliceOp", "gorgonia.sliceIncrOp", "gorgonia.concatOp", "gorgonia.repeatOp":
		c.sfx = "f64" // 8-byte copies and zero fills
		if name == "gorgonia.transposeOp" || name == "gorgonia.sliceIncrOp" {
			p, _, err := planMore(c, name)
			return p, err
		}
		return planGorgonia(c)
	}
	return plan{}, c.unsupported("on Int tensors the device runs + - ⊙, comparisons, Max/MinBetween and the ops that move elements")
}
