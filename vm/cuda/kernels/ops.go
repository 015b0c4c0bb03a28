package kernels

import (
	"bytes"
	"fmt"
)

// UnaryOp selects the function of the unary kernels. The values are
// gorgonia's own ʘUnaryOperatorType order (v0.9.18), so an elemUnaryOp's
// operator maps by name (UnaryOpNamed) or by position.
type UnaryOp int32

// The unary operators, in gorgonia's order and with its names (String).
const (
	UnaryAbs UnaryOp = iota
	UnarySign
	UnaryCeil
	UnaryFloor
	UnarySin
	UnaryCos
	UnaryExp
	UnaryLn
	UnaryLog2
	UnaryNeg
	UnarySquare
	UnarySqrt
	UnaryInv
	UnaryInvSqrt
	UnaryCube
	UnaryTanh
	UnarySigmoid
	UnaryLog1p
	UnaryExpm1
	UnarySoftplus
	numUnary
)

var unaryNames = [numUnary]string{"abs", "sign", "ceil", "floor", "sin", "cos", "exp", "ln", "log2", "neg",
	"square", "sqrt", "inv", "invSqrt", "cube", "tanh", "sigmoid", "log1p", "expm1", "softplus"}

func (u UnaryOp) String() string {
	if u < 0 || u >= numUnary {
		return fmt.Sprintf("UnaryOp(%d)", int32(u))
	}
	return unaryNames[u]
}

// UnaryOpNamed returns the operator of a gorgonia elemUnaryOp from its String ("exp", "neg", …).
func UnaryOpNamed(name string) (UnaryOp, bool) {
	for i, n := range unaryNames {
		if n == name {
			return UnaryOp(i), true
		}
	}
	return 0, false
}

// BinaryOp selects the operator of the binary and compare kernels.
type BinaryOp int32

// The binary operators. gorgonia's ÷ and ^ run two different kernels
// depending on the operands (see BinaryOpFor): IEEE division and math.Pow, or
// vecf32/vecf64's Div (+Inf for every zero divisor) and Pow (powers 0 to 3 by
// products).
const (
	BinaryAdd BinaryOp = iota
	BinarySub
	BinaryMul
	BinaryDiv
	BinaryPow
	BinaryVecDiv
	BinaryVecPow
	BinaryLt
	BinaryGt
	BinaryLte
	BinaryGte
	BinaryEq
	BinaryNe
	BinaryMaxBetween // tensor's MaxBetween: b > a ? b : a (a NaN in a is kept, in b not taken)
	BinaryMinBetween // tensor's MinBetween: b < a ? b : a
	numBinary
)

var binaryNames = [numBinary]string{"add", "sub", "mul", "div", "pow", "vec_div", "vec_pow", "lt", "gt", "lte", "gte", "eq", "ne", "max_between", "min_between"}

func (b BinaryOp) String() string {
	if b < 0 || b >= numBinary {
		return fmt.Sprintf("BinaryOp(%d)", int32(b))
	}
	return binaryNames[b]
}

// BinaryOpFor maps a gorgonia elemBinOp symbol (its String's first field: +
// - ⊙ ÷ ^ < > <= >= == !=), or the String of gorgonia's maxBetween and
// minBetween ops (MaxBetween, MinBetween), to the kernel operator that reproduces what its Do
// computes for these operands: with a tensor right operand, ÷ and ^ use
// tensor's Vec kernels (vecf32/vecf64) whatever the left one is; with a scalar
// right operand they are IEEE division and math.Pow.
func BinaryOpFor(sym string, rightIsScalar bool) (BinaryOp, bool) {
	switch sym {
	case "+":
		return BinaryAdd, true
	case "-":
		return BinarySub, true
	case "⊙", "*":
		return BinaryMul, true
	case "÷", "/":
		if rightIsScalar {
			return BinaryDiv, true
		}
		return BinaryVecDiv, true
	case "^":
		if rightIsScalar {
			return BinaryPow, true
		}
		return BinaryVecPow, true
	case "<":
		return BinaryLt, true
	case ">":
		return BinaryGt, true
	case "<=":
		return BinaryLte, true
	case ">=":
		return BinaryGte, true
	case "==":
		return BinaryEq, true
	case "!=":
		return BinaryNe, true
	case "MaxBetween":
		return BinaryMaxBetween, true
	case "MinBetween":
		return BinaryMinBetween, true
	}
	return 0, false
}

// ReduceOp selects the reduction of the reduce kernels.
type ReduceOp int32

// Reductions over one axis.
const (
	ReduceSum ReduceOp = iota
	ReduceMean
	ReduceMax
	numReduce
)

var reduceNames = [numReduce]string{"sum", "mean", "max"}

func (r ReduceOp) String() string {
	if r < 0 || r >= numReduce {
		return fmt.Sprintf("ReduceOp(%d)", int32(r))
	}
	return reduceNames[r]
}

// OptFlags says which optional steps a solver's Step takes; the optimizer
// kernels take them as an int.
type OptFlags int32

// Solver flags, as gorgonia's Step decides them: L1 and L2 when the solver was
// made WithL1Reg/WithL2Reg, Batch when its batch size is > 1, Clip when it
// clips (VanillaSolver, Momentum and Adam also require clip > 0; RMSProp does not).
const (
	OptL1 OptFlags = 1 << iota
	OptL2
	OptBatch
	OptClip
)

// OpsHeader is src/ops.h: the C names of the operator codes above, which the
// kernel sources switch on. go generate writes it; a test checks the
// committed file is this.
func OpsHeader() []byte {
	var b bytes.Buffer
	b.WriteString("/* ops.h: generated from ops.go by go generate. DO NOT EDIT. */\n#ifndef OOC_OPS_H\n#define OOC_OPS_H\n")
	for i, n := range unaryNames {
		fmt.Fprintf(&b, "#define OOC_UNARY_%s %d\n", cName(n), i)
	}
	for i, n := range binaryNames {
		fmt.Fprintf(&b, "#define OOC_BINARY_%s %d\n", cName(n), i)
	}
	for i, n := range reduceNames {
		fmt.Fprintf(&b, "#define OOC_REDUCE_%s %d\n", cName(n), i)
	}
	for _, f := range []struct {
		n string
		v OptFlags
	}{{"L1", OptL1}, {"L2", OptL2}, {"BATCH", OptBatch}, {"CLIP", OptClip}} {
		fmt.Fprintf(&b, "#define OOC_OPT_%s %d\n", f.n, f.v)
	}
	b.WriteString("#endif\n")
	return b.Bytes()
}

// cName turns "invSqrt" or "vec_div" into "INV_SQRT" / "VEC_DIV".
func cName(s string) string {
	var b bytes.Buffer
	for i, r := range s {
		if r >= 'A' && r <= 'Z' && i > 0 {
			b.WriteByte('_')
		}
		if r >= 'a' && r <= 'z' {
			r -= 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}
