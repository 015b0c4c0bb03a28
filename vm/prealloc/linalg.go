package prealloc

import (
	"fmt"
	"reflect"

	"gonum.org/v1/gonum/blas"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// matMulOperator is gorgonia v0.9.18's āBinaryOperator for a matrix product (the first of
// its iota list).
const matMulOperator = 0

// buildLinAlg: a matrix product is the GEMM call tensor's StdEng.MatMul makes, made here
// with the same arguments on the same BLAS (tensor.WhichBLAS), so the bits are Do's. Do gets
// there through transposing its operands' headers in place (T, then T again to undo it),
// tensor's reuse handling and reflection, a dozen heap allocations a call. The other
// products (matrix-vector, outer, batched; a dot product is a scalar) run the op's own
// UsePreallocDo, as do operands this does not take: views, other engines, tensors already
// transposed.
func buildLinAlg(op gorgonia.Op) (Func, error) {
	own, err := usePrealloc(nil)(op)
	if err != nil {
		return nil, err
	}
	kind, err := field(op, "āBinaryOperator", reflect.Uint8)
	if err != nil {
		return nil, err
	}
	transA, err := boolField(op, "transA")
	if err != nil {
		return nil, err
	}
	transB, err := boolField(op, "transB")
	if err != nil {
		return nil, err
	}
	if kind.Uint() != matMulOperator {
		return own, nil
	}
	return func(out *tensor.Dense, inputs ...gorgonia.Value) error {
		g, ok := matMulArgs(out, inputs, transA, transB)
		if !ok {
			return own(out, inputs...)
		}
		return g.run()
	}, nil
}

// gemmCall is one call of BLAS's GEMM on row-major operands.
type gemmCall struct {
	tA, tB        blas.Transpose
	m, n, k       int
	lda, ldb, ldc int
	dt            tensor.Dtype
	a, b, c       []byte
}

// matMulArgs is the GEMM call StdEng.MatMul makes for a (transposed if transA) times b
// (transposed if transB) into out, or false where this path does not apply (the op's own
// code then runs, errors included).
func matMulArgs(out *tensor.Dense, inputs []gorgonia.Value, transA, transB bool) (g gemmCall, ok bool) {
	if len(inputs) != 2 {
		return g, false
	}
	a, errA := denseArg(inputs, 0)
	b, errB := denseArg(inputs, 1)
	if errA != nil || errB != nil || !plainStd(a) || !plainStd(b) || !plainStd(out) {
		return g, false
	}
	as, bs := a.Shape(), b.Shape()
	g.dt = a.Dtype()
	if as.Dims() != 2 || bs.Dims() != 2 || b.Dtype() != g.dt || out.Dtype() != g.dt ||
		(g.dt != tensor.Float32 && g.dt != tensor.Float64) {
		return g, false
	}
	// T() of a matrix whose every dimension is 1 does nothing, so MatMul sees no transpose
	// there; otherwise it passes Trans with the stored matrix's row length as the leading
	// dimension, which is also the untransposed case's.
	g.tA, g.tB = blas.NoTrans, blas.NoTrans
	g.m, g.k, g.lda = as[0], as[1], as[1]
	if transA {
		g.m, g.k = as[1], as[0]
		if !as.IsScalarEquiv() {
			g.tA = blas.Trans
		}
	}
	kb := bs[0]
	g.n, g.ldb = bs[1], bs[1]
	if transB {
		kb, g.n = bs[1], bs[0]
		if !bs.IsScalarEquiv() {
			g.tB = blas.Trans
		}
	}
	if kb != g.k || out.Shape().TotalSize() != g.m*g.n {
		return g, false // MatMul's own shape errors
	}
	g.ldc = g.n
	var err error
	if g.a, err = contiguousBytes(a); err != nil {
		return g, false
	}
	if g.b, err = contiguousBytes(b); err != nil {
		return g, false
	}
	if g.c, err = contiguousBytes(out); err != nil {
		return g, false
	}
	if overlap(g.c, g.a) || overlap(g.c, g.b) {
		return g, false
	}
	return g, true
}

// plainStd: a row-major tensor on tensor's StdEng whose header is not transposed.
func plainStd(t *tensor.Dense) bool {
	o := t.DataOrder()
	return onStdEng(t) && o.IsRowMajor() && !o.IsTransposed()
}

func (g gemmCall) run() error {
	bl := tensor.WhichBLAS()
	if bl == nil {
		return fmt.Errorf("tensor has no BLAS")
	}
	switch g.dt {
	case tensor.Float32:
		bl.Sgemm(g.tA, g.tB, g.m, g.n, g.k, 1, asSlice[float32](g.a), g.lda, asSlice[float32](g.b), g.ldb, 0, asSlice[float32](g.c), g.ldc)
	default:
		bl.Dgemm(g.tA, g.tB, g.m, g.n, g.k, 1, asSlice[float64](g.a), g.lda, asSlice[float64](g.b), g.ldb, 0, asSlice[float64](g.c), g.ldc)
	}
	return nil
}
