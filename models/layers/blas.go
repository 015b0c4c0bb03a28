package layers

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// impl is gonum's pure-Go BLAS, called directly rather than through blas32/blas64's swappable
// globals so a program that installs another BLAS for gorgonia cannot change our summation order.
// Its Gemm splits C into 64x64 blocks and sums each block's k range serially, so results do not
// depend on scheduling even though it runs on GOMAXPROCS goroutines.
var impl gonum.Implementation

func trans(t bool) blas.Transpose {
	if t {
		return blas.Trans
	}
	return blas.NoTrans
}

// gemm computes C = alpha*op(A)*op(B) + beta*C on row-major matrices. With beta == 0 gonum
// clears C first, so C may hold garbage (even NaN) on entry.
func gemm[T float](tA, tB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	switch a := any(a).(type) {
	case []float32:
		impl.Sgemm(trans(tA), trans(tB), m, n, k, float32(alpha), a, lda, any(b).([]float32), ldb, float32(beta), any(c).([]float32), ldc)
	case []float64:
		impl.Dgemm(trans(tA), trans(tB), m, n, k, float64(alpha), a, lda, any(b).([]float64), ldb, float64(beta), any(c).([]float64), ldc)
	}
}
