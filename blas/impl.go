package blas

import (
	"fmt"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
	G "gorgonia.org/gorgonia"
)

// Implementation is gonum's pure-Go BLAS with Sgemm and Dgemm replaced by this package's GEMM.
// It satisfies gorgonia.BLAS (and so tensor.BLAS). As gonum's methods do, its GEMMs panic on
// invalid arguments; Gemm returns an error instead.
type Implementation struct{ gonum.Implementation }

func isTrans(t blas.Transpose) bool {
	switch t {
	case blas.NoTrans:
		return false
	case blas.Trans, blas.ConjTrans:
		return true
	}
	panic(fmt.Sprintf("blas: bad transpose %d", t))
}

// Sgemm computes C = alpha*op(A)*op(B) + beta*C in float32 (row-major, as gonum).
func (Implementation) Sgemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if err := Gemm(isTrans(tA), isTrans(tB), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc); err != nil {
		panic(err)
	}
}

// Dgemm computes C = alpha*op(A)*op(B) + beta*C in float64 (row-major, as gonum).
func (Implementation) Dgemm(tA, tB blas.Transpose, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	if err := Gemm(isTrans(tA), isTrans(tB), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc); err != nil {
		panic(err)
	}
}

// Importing this package makes it gorgonia's (and tensor's) BLAS, so gorgonia's own matmuls and
// the ops of models/layers run the same GEMM: a TapeMachine and the project's VM then agree bit
// for bit by construction. gorgonia.Use(gonum.Implementation{}) undoes it.
func init() { G.Use(Implementation{}) }
