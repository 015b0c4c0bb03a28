package dispatch

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// planInt plans the ops that run on Int (and Int64) tensors, Go's int, 8
// bytes per element on the device as on the host: elemBinOp's + - ⊙ ÷ and
// comparisons (binary_i64, compare_i64; ÷ as the CPU device computes it,
// tensor's DivRecv, which writes 0 for a zero divisor; gorgonia's Do has no
// Int form of ^ and no unary op builds on Int), MaxBetween and MinBetween,
// Sum and Max over any axes (reduce(_axes)_i64), SizeOf (fill_i64), and the
// ops that only move elements (the 8-byte copy and fill kernels: the bits
// are moved, not read as floats).
func planInt(c fn) (plan, error) {
	name := opName(c.f.Op)
	switch name {
	case "gorgonia.elemBinOp":
		sym := strings.Fields(fmt.Sprint(c.f.Op))
		if len(sym) == 0 || !strings.Contains(" + - ⊙ ÷ < > <= >= == != ", " "+sym[0]+" ") {
			return plan{}, c.unsupported("on Int tensors the device runs + - ⊙ ÷ and the comparisons (tensor has no Int ^)")
		}
		c.sfx = "i64"
		p, err := planBinary(c)
		if err != nil || sym[0] != "÷" || len(c.ins) != 2 || !c.in(0).IsScalar() || !c.in(1).IsScalar() {
			return p, err
		}
		return scalarIntDiv(c, p), nil
	case "gorgonia.maxBetween", "gorgonia.minBetween":
		c.sfx = "i64"
		return planBetween(c)
	case "gorgonia.sumOp", "gorgonia.maxOp":
		c.sfx = "i64"
		return planReduce(c, name == "gorgonia.maxOp")
	case "gorgonia.sizeOp":
		v, err := sizeOf(c)
		if err != nil {
			return plan{}, err
		}
		return plan{run: func(r *Runner, a addrs) error { return r.launch("fill_i64", ptr(a.out), i64(v), i64(1)) }}, nil
	case "gorgonia.byIndicesOp":
		c.sfx = "f64" // a gather of 8-byte elements, and zero fills
		return planByIndices(nil, c)
	case "gorgonia.transposeOp", "gorgonia.sliceOp", "gorgonia.sliceIncrOp", "gorgonia.concatOp", "gorgonia.repeatOp", "gorgonia.diagFlatOp":
		c.sfx = "f64" // 8-byte copies and zero fills
		if p, ok, err := planMore(c, name); ok {
			return p, err
		}
		return planGorgonia(c)
	}
	return plan{}, c.unsupported("on Int tensors the device runs + - ⊙ ÷, comparisons, Max/MinBetween, Sum, Max, SizeOf and the ops that move elements")
}

// scalarIntDiv wraps the plan of a ÷ of two Int scalars: gorgonia computes
// it with Go's /, which panics on a zero divisor, and the CPU device reports
// that panic as the run's error. The divisor is read back first (a host stall
// of 8 bytes) so that a zero gives that error here too, not a value.
func scalarIntDiv(c fn, p plan) plan {
	var b [8]byte
	return plan{scratch: p.scratch, run: func(r *Runner, a addrs) error {
		w, err := r.CopyOut(b[:], a.in[1])
		if err != nil {
			return err
		}
		if err := r.WaitFor(w); err != nil {
			return err
		}
		if binary.LittleEndian.Uint64(b[:]) == 0 {
			return fmt.Errorf("dispatch: %v at node %s: integer divide by zero (gorgonia's Int scalar ÷ panics there on the CPU device)", c.f.Op, c.out.Name)
		}
		return p.run(r, a)
	}}
}
