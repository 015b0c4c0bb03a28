package blas

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

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

// BenchmarkGemmEdgeTiles compares partial tiles through the edge kernels with the padded copy
// through the full kernel, on one goroutine, for smallcnn's products (16 output channels: 16 rows
// are slivers of 6, 6 and 4): the forward product (weights 16 x 144 times the column matrix,
// 784 or 196 pixels), the filter gradient (dy times the column matrix transposed) and the data
// gradient at 14x14 (144 x 196 from 16 channels: partial columns). Each iteration runs both,
// alternating which goes first, so that they share the machine's load; it reports each one's
// median time per product and the median of the pairs' ratios.
func BenchmarkGemmEdgeTiles(b *testing.B) {
	defer SetWorkers(SetWorkers(1))
	defer func() { edgeKernels = true }()
	for _, c := range []struct {
		name    string
		tA, tB  bool
		m, n, k int
	}{
		{"forward-16x784x144", false, false, 16, 784, 144},
		{"forward-16x196x144", false, false, 16, 196, 144},
		{"filter-16x144x784", false, true, 16, 144, 784},
		{"data-144x196x16", true, false, 144, 196, 16},
	} {
		r := rand.New(rand.NewPCG(1, 2))
		x, y, z := randSlice[float32](r, c.m*c.k), randSlice[float32](r, c.k*c.n), make([]float32, c.m*c.n)
		lda, ldb := c.k, c.n
		if c.tA {
			lda = c.m
		}
		if c.tB {
			ldb = c.k
		}
		b.Run(c.name, func(b *testing.B) {
			// Medians of each pair's times and of their ratios: a load spike hits one pair,
			// not the statistic.
			var copyNs, edgeNs, ratio []float64
			var ns [2]float64
			i := 0
			for b.Loop() {
				for _, e := range [2]int{i % 2, 1 - i%2} {
					edgeKernels = e == 1
					t0 := time.Now()
					Gemm(c.tA, c.tB, c.m, c.n, c.k, 1, x, lda, y, ldb, 0, z, c.n)
					ns[e] = float64(time.Since(t0))
				}
				copyNs, edgeNs, ratio = append(copyNs, ns[0]), append(edgeNs, ns[1]), append(ratio, ns[1]/ns[0])
				i++
			}
			b.ReportMetric(median(copyNs), "copy-ns")
			b.ReportMetric(median(edgeNs), "edge-ns")
			b.ReportMetric(median(ratio), "edge/copy")
		})
	}
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}
