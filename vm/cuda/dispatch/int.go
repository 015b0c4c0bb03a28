package dispatch

import (
	"encoding/binary"
	"fmt"
	"strings"

	"gorgonia.org/tensor"
)

// planInt plans the ops that run on Int, Int64, Int32 and Byte tensors
// (Go's int is int64 on the platforms the device runs on: 8 bytes per
// element on the device as on the host, Int32 4, Byte 1): elemBinOp's + - ⊙
// ÷ and comparisons (binary_ and compare_ of the type: i64, i32, byte; ÷ as
// the CPU device computes it, tensor's DivRecv, which writes 0 for a zero
// divisor; gorgonia's Do has no integer form of ^ and no unary op builds on
// integers), MaxBetween and MinBetween, Sum and Max over any axes
// (reduce(_axes)_ of the type), SizeOf of an Int operand (fill_i64;
// tensor's SizeOf has no other integer form), and the ops that only move
// elements (the copy and fill kernels of the same width, f64, f32 or u8: the
// bits are moved, not read as floats).
func planInt(c fn) (plan, error) {
	name := opName(c.f.Op)
	ints, moves := "i64", "f64"
	switch c.es {
	case 4:
		ints, moves = "i32", "f32"
	case 1:
		ints, moves = "byte", "u8" // Byte: the Bool kernels move bytes too
	}
	switch name {
	case "gorgonia.elemBinOp":
		sym := strings.Fields(fmt.Sprint(c.f.Op))
		if len(sym) == 0 || !strings.Contains(" + - ⊙ ÷ < > <= >= == != ", " "+sym[0]+" ") {
			return plan{}, c.unsupported("on Int tensors the device runs + - ⊙ ÷ and the comparisons (tensor has no Int ^)")
		}
		if len(c.ins) == 2 && c.in(0).IsScalar() != c.in(1).IsScalar() {
			return plan{}, c.unsupported("an integer tensor with an integer scalar: gorgonia's Do has no such form (the CPU device fails at Run)")
		}
		c.sfx = ints
		p, err := planBinary(c)
		if err != nil || sym[0] != "÷" || len(c.ins) != 2 || !c.in(0).IsScalar() || !c.in(1).IsScalar() {
			return p, err
		}
		return scalarIntDiv(c, p), nil
	case "gorgonia.maxBetween", "gorgonia.minBetween":
		if c.in(0).IsScalar() {
			return plan{}, c.unsupported("MaxBetween/MinBetween of integer scalars: gorgonia's Do has none (the CPU device fails at Run)")
		}
		c.sfx = ints
		return planBetween(c)
	case "gorgonia.sumOp", "gorgonia.maxOp":
		c.sfx = ints
		return planReduce(c, name == "gorgonia.maxOp")
	case "gorgonia.sizeOp":
		if c.ins[0].Dtype != tensor.Int || c.out.Dtype != tensor.Int {
			return plan{}, c.unsupported(fmt.Sprintf("SizeOf of a %v operand: tensor's has none (the CPU device fails at Run)", c.ins[0].Dtype))
		}
		v, err := sizeOf(c)
		if err != nil {
			return plan{}, err
		}
		return plan{run: func(r *Runner, a addrs) error { return r.launch("fill_i64", ptr(a.out), i64(v), i64(1)) }}, nil
	case "gorgonia.byIndicesOp":
		c.sfx = moves // a gather of elements of the width, and zero fills
		return planByIndices(nil, c)
	case "gorgonia.transposeOp", "gorgonia.sliceOp", "gorgonia.sliceIncrOp", "gorgonia.concatOp", "gorgonia.repeatOp", "gorgonia.diagFlatOp":
		c.sfx = moves // copies and zero fills of elements of the width
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
// of one element) so that a zero gives that error here too, not a value.
func scalarIntDiv(c fn, p plan) plan {
	b := make([]byte, 8)
	return plan{scratch: p.scratch, run: func(r *Runner, a addrs) error {
		w, err := r.CopyOut(b[:c.es], a.in[1])
		if err != nil {
			return err
		}
		if err := r.WaitFor(w); err != nil {
			return err
		}
		if binary.LittleEndian.Uint64(b) == 0 { // (b[c.es:] stays 0)
			return fmt.Errorf("dispatch: %v at node %s: integer divide by zero (gorgonia's Int scalar ÷ panics there on the CPU device)", c.f.Op, c.out.Name)
		}
		return p.run(r, a)
	}}
}
