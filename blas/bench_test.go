package blas

import (
	"fmt"
	"math/rand/v2"
	"testing"

	gblas "gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// benchGemm reports GFLOP/s of a square n x n x n GEMM for each kernel this CPU runs and for
// gonum's Sgemm/Dgemm, the sub-benchmarks interleaved so they share the machine's load.
func benchGemm[T Float](b *testing.B, gonumGemm func(n int, x, y, z []T)) {
	for _, n := range []int{256, 1024} {
		r := rand.New(rand.NewPCG(1, 1))
		x, y, z := randSlice[T](r, n*n), randSlice[T](r, n*n), make([]T, n*n)
		flops := 2 * float64(n) * float64(n) * float64(n)
		report := func(b *testing.B) {
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		}
		for _, kn := range Kernels() {
			b.Run(fmt.Sprintf("%s/%d", kn, n), func(b *testing.B) {
				old := Kernel()
				defer SetKernel(old)
				if err := SetKernel(kn); err != nil {
					b.Fatal(err)
				}
				for b.Loop() {
					Gemm(false, false, n, n, n, 1, x, n, y, n, 0, z, n)
				}
				report(b)
			})
		}
		b.Run(fmt.Sprintf("gonum/%d", n), func(b *testing.B) {
			for b.Loop() {
				gonumGemm(n, x, y, z)
			}
			report(b)
		})
	}
}

// BenchmarkSgemm: go test -bench Sgemm ./blas (add -cpu 1,2 for the scaling).
func BenchmarkSgemm(b *testing.B) {
	benchGemm(b, func(n int, x, y, z []float32) {
		gonum.Implementation{}.Sgemm(gblas.NoTrans, gblas.NoTrans, n, n, n, 1, x, n, y, n, 0, z, n)
	})
}

// BenchmarkDgemm is BenchmarkSgemm in float64.
func BenchmarkDgemm(b *testing.B) {
	benchGemm(b, func(n int, x, y, z []float64) {
		gonum.Implementation{}.Dgemm(gblas.NoTrans, gblas.NoTrans, n, n, n, 1, x, n, y, n, 0, z, n)
	})
}
