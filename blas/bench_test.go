package blas

import (
	"fmt"
	"math/rand/v2"
	"testing"

	gblas "gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

func benchSizes() []int { return []int{256, 1024} }

// BenchmarkSgemm reports GFLOP/s of a square float32 GEMM for this package and for gonum.
// Run with -cpu 1,2 to see the scaling.
func BenchmarkSgemm(b *testing.B) {
	for _, n := range benchSizes() {
		r := rand.New(rand.NewPCG(1, 1))
		x, y, z := randSlice[float32](r, n*n), randSlice[float32](r, n*n), make([]float32, n*n)
		flops := 2 * float64(n) * float64(n) * float64(n)
		b.Run(fmt.Sprintf("%s/%d", Kernel(), n), func(b *testing.B) {
			for b.Loop() {
				Gemm(false, false, n, n, n, 1, x, n, y, n, 0, z, n)
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
		b.Run(fmt.Sprintf("gonum/%d", n), func(b *testing.B) {
			for b.Loop() {
				gonum.Implementation{}.Sgemm(gblas.NoTrans, gblas.NoTrans, n, n, n, 1, x, n, y, n, 0, z, n)
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// BenchmarkDgemm is BenchmarkSgemm in float64.
func BenchmarkDgemm(b *testing.B) {
	for _, n := range benchSizes() {
		r := rand.New(rand.NewPCG(1, 1))
		x, y, z := randSlice[float64](r, n*n), randSlice[float64](r, n*n), make([]float64, n*n)
		flops := 2 * float64(n) * float64(n) * float64(n)
		b.Run(fmt.Sprintf("%s/%d", Kernel(), n), func(b *testing.B) {
			for b.Loop() {
				Gemm(false, false, n, n, n, 1, x, n, y, n, 0, z, n)
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
		b.Run(fmt.Sprintf("gonum/%d", n), func(b *testing.B) {
			for b.Loop() {
				gonum.Implementation{}.Dgemm(gblas.NoTrans, gblas.NoTrans, n, n, n, 1, x, n, y, n, 0, z, n)
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
