package dispatch

import (
	"fmt"
	"strings"
)

// planBool plans the ops that run on Bool tensors (Go's bool, one byte per
// element on the device as on the host): == and != between Bool tensors
// (compare_u8; tensor refuses the other comparisons and all arithmetic on
// bools, so the CPU device runs nothing else elementwise), and the ops that
// move elements: transpose, slice, concat, DiagFlat (copy_u8, fill_u8) and
// ByIndices (g_byindices_u8). Reshapes are views.
func planBool(c fn) (plan, error) {
	c.sfx = "u8"
	switch name := opName(c.f.Op); name {
	case "gorgonia.elemBinOp":
		sym := strings.Fields(fmt.Sprint(c.f.Op))
		if len(sym) == 0 || (sym[0] != "==" && sym[0] != "!=") {
			return plan{}, c.unsupported("on Bool tensors the device runs == and != (tensor refuses the rest on bools)")
		}
		if len(c.ins) == 2 && c.in(0).IsScalar() != c.in(1).IsScalar() {
			return plan{}, c.unsupported("a Bool tensor with a Bool scalar: gorgonia's Do has no such form (the CPU device fails at Run)")
		}
		return planBinary(c)
	case "gorgonia.byIndicesOp":
		return planByIndices(nil, c)
	case "gorgonia.transposeOp", "gorgonia.sliceOp", "gorgonia.concatOp", "gorgonia.diagFlatOp":
		if p, ok, err := planMore(c, name); ok {
			return p, err
		}
		return planGorgonia(c)
	}
	return plan{}, c.unsupported("on Bool tensors the device runs == and != and the ops that move elements (transpose, slice, concat, DiagFlat, ByIndices)")
}
