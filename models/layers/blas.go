package layers

import "github.com/gorgonia-ooc/outofcore/blas"

// gemm computes C = alpha*op(A)*op(B) + beta*C on row-major matrices with the project's GEMM,
// which importing package blas also made gorgonia's: the ops here and gorgonia's matmuls sum the
// same way, and the result is the same bits for any GOMAXPROCS. With beta == 0, C is not read, so
// it may hold garbage (even NaN) on entry. The shapes come from the op's own checked dimensions,
// so an error here is a bug in the op.
func gemm[T float](tA, tB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	var err error
	switch a := any(a).(type) {
	case []float32:
		err = blas.Gemm(tA, tB, m, n, k, float32(alpha), a, lda, any(b).([]float32), ldb, float32(beta), any(c).([]float32), ldc)
	case []float64:
		err = blas.Gemm(tA, tB, m, n, k, float64(alpha), a, lda, any(b).([]float64), ldb, float64(beta), any(c).([]float64), ldc)
	}
	if err != nil {
		panic(err)
	}
}
