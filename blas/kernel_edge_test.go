package blas

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestEdgeKernelIsFullKernel: an edge kernel writes, in place, the bits the full kernel gives the
// same rows and columns of a zero-padded tile, and touches nothing else of C: every row and
// column count, k of 0 to two vector loops' worth and a whole KBlock, beta 0 (C holding NaN, not
// read), -0 (counts as 0), 1 and another, alpha 1 and another, both dtypes.
func TestEdgeKernelIsFullKernel(t *testing.T) {
	ran := false
	for _, ks := range kernels {
		if ks.s.edge != nil {
			edgeCase(t, ks.name, &ks.s)
			ran = true
		}
		if ks.d.edge != nil {
			edgeCase(t, ks.name, &ks.d)
			ran = true
		}
	}
	if !ran {
		t.Skipf("no edge kernels on this build or CPU (kernels %v): partial tiles go through the padded copy", Kernels())
	}
}

func edgeCase[T Float](t *testing.T, name string, cfg *config[T]) {
	mr, nr := cfg.mr, cfg.nr
	r := rand.New(rand.NewPCG(uint64(mr), uint64(nr)))
	nan := T(math.NaN())
	for _, kc := range []int{0, 1, 2, 7, 33, KBlock} {
		for rows := 1; rows <= mr; rows++ {
			for cols := 1; cols <= nr; cols++ {
				for _, ab := range [][2]float64{{1, 0}, {-0.75, 0}, {1, math.Copysign(0, -1)}, {1, 1}, {0.5, 1}, {1, -1.25}, {-3, 0.3}} {
					alpha, beta := T(ab[0]), T(ab[1])
					what := fmt.Sprintf("%s %T kc=%d %dx%d alpha=%g beta=%g", name, alpha, kc, rows, cols, ab[0], ab[1])
					// Packed slivers zero past rows and cols, as the packing leaves them.
					a, b := make([]T, max(1, kc*mr)), make([]T, max(1, kc*nr))
					for p := 0; p < kc; p++ {
						for i := 0; i < rows; i++ {
							a[p*mr+i] = T(r.NormFloat64())
						}
						for j := 0; j < cols; j++ {
							b[p*nr+j] = T(r.NormFloat64() * 4)
						}
					}
					// C: the tile at row 1, column 2 of a larger matrix, all of it random
					// (NaN inside the tile when beta is ±0: it must not be read).
					ldc := nr + 5
					c0 := randSlice[T](r, (mr+2)*ldc)
					off0 := ldc + 2
					tile := make([]T, mr*nr)
					for i := 0; i < rows; i++ {
						for j := 0; j < cols; j++ {
							if beta == 0 {
								c0[off0+i*ldc+j] = nan
							}
							tile[i*nr+j] = c0[off0+i*ldc+j]
						}
					}
					cfg.kern(kc, &a[0], &b[0], &tile[0], nr, alpha, beta)
					want := append([]T(nil), c0...)
					for i := 0; i < rows; i++ {
						copy(want[off0+i*ldc:off0+i*ldc+cols], tile[i*nr:i*nr+cols])
					}
					got := append([]T(nil), c0...)
					cfg.edge(kc, &a[0], &b[0], &got[off0], ldc, alpha, beta, rows, cols)
					for i := range got {
						if !sameValueBits(got[i], want[i]) {
							t.Fatalf("%s: C[%d,%d] is %v, the full kernel gives %v", what, i/ldc-1, i%ldc-2, got[i], want[i])
						}
					}
				}
			}
		}
	}
}

// TestGemmSameBitsWithoutEdgeKernels: whole products through Gemm, GemmPacked and GemmSlivers
// are the same bits with the edge kernels as with the padded copy through the full kernel: the
// gemm cases, every row remainder (m of 1 to 6 and 13 to 18 ...) and column remainder, and
// smallcnn's products (16 output channels: its forward, data gradient and filter gradient).
func TestGemmSameBitsWithoutEdgeKernels(t *testing.T) {
	if !hasEdgeKernel() {
		t.Skipf("no edge kernels on this build or CPU (kernels %v): partial tiles go through the padded copy", Kernels())
	}
	defer func() { edgeKernels = true }()
	cases := append([]gemmCase(nil), gemmCases...)
	for m := 1; m <= 18; m++ {
		cases = append(cases, gemmCase{false, false, m, 2*m + 1, 40, 1, 0, 0}, gemmCase{true, true, m, 40 - m, 300, -0.5, 1.5, 2})
	}
	for _, s := range [][3]int{{16, 784, 144}, {16, 196, 144}, {144, 784, 16}, {9, 196, 16}, {16, 9, 784}, {16, 144, 196}, {29, 37, 513}} {
		cases = append(cases, gemmCase{false, false, s[0], s[1], s[2], 1, 0, 0}, gemmCase{false, true, s[0], s[1], s[2], 1, 1, 0})
	}
	for _, ks := range kernels {
		if ks.s.edge == nil && ks.d.edge == nil {
			continue // nothing to compare: its partial tiles always take the copy
		}
		t.Run(ks.name, func(t *testing.T) {
			defer SetKernel(Kernel())
			if err := SetKernel(ks.name); err != nil {
				t.Fatal(err)
			}
			for _, g := range cases {
				sameBitsEdge[float32](t, g)
				sameBitsEdge[float64](t, g)
			}
		})
	}
}

func hasEdgeKernel() bool {
	for _, ks := range kernels {
		if ks.s.edge != nil || ks.d.edge != nil {
			return true
		}
	}
	return false
}

func sameBitsEdge[T Float](t *testing.T, g gemmCase) {
	r := rand.New(rand.NewPCG(uint64(g.m)+5, uint64(g.n*1000+g.k)))
	ar, ac, br, bc := g.stored()
	lda, ldb, ldc := max(1, ac+g.pad), max(1, bc+g.pad), g.n+g.pad
	a, b := randSlice[T](r, max(0, ar*lda)), randSlice[T](r, max(0, br*ldb))
	c0 := randSlice[T](r, g.m*ldc)
	if g.beta == 0 {
		for i := 0; i < g.m; i++ {
			for j := 0; j < g.n; j++ {
				c0[i*ldc+j] = T(math.NaN()) // beta == 0 must not read C
			}
		}
	}
	var out [2][3][]T // [copy, edge kernel][Gemm, GemmPacked, GemmSlivers]
	for i, edge := range []bool{false, true} {
		edgeKernels = edge
		for j := range out[i] {
			out[i][j] = append([]T(nil), c0...)
		}
		if err := Gemm(g.tA, g.tB, g.m, g.n, g.k, T(g.alpha), a, lda, b, ldb, T(g.beta), out[i][0], ldc); err != nil {
			t.Fatal(err)
		}
		var p PackedA[T]
		if err := p.Pack(g.tA, g.m, g.k, a, lda); err != nil {
			t.Fatal(err)
		}
		if err := GemmPacked(&p, 0, g.m, g.tB, g.n, T(g.alpha), b, ldb, T(g.beta), out[i][1], ldc); err != nil {
			t.Fatal(err)
		}
		sa := &Stored[T]{Data: a, Ld: lda, KMajor: g.tA}
		sb := &Stored[T]{Data: b, Ld: ldb, KMajor: !g.tB}
		if err := GemmSlivers(g.m, g.n, g.k, T(g.alpha), sa, sb, T(g.beta), out[i][2], ldc); err != nil {
			t.Fatal(err)
		}
	}
	for j, name := range []string{"Gemm", "GemmPacked", "GemmSlivers"} {
		for i := range c0 {
			if !sameValueBits(out[0][j][i], out[1][j][i]) {
				t.Fatalf("%T %v %s: element %d is %v with the edge kernels, %v with the padded copy", c0[0], g, name, i, out[1][j][i], out[0][j][i])
			}
		}
	}
}

// TestEdgeTilesNoAlloc: a product with partial tiles in both directions (smallcnn's forward at
// 14x14: 16 rows, 196 columns) allocates nothing once the packing buffers exist.
func TestEdgeTilesNoAlloc(t *testing.T) {
	const m, n, k = 16, 196, 144
	r := rand.New(rand.NewPCG(2, 3))
	a, b, c := randSlice[float32](r, m*k), randSlice[float32](r, k*n), make([]float32, m*n)
	var p PackedA[float32]
	if err := p.Pack(false, m, k, a, k); err != nil {
		t.Fatal(err)
	}
	run := func() {
		if err := GemmPacked(&p, 0, m, false, n, 1, b, n, 0, c, n); err != nil {
			t.Fatal(err)
		}
	}
	run()
	if allocs := testing.AllocsPerRun(20, run); allocs != 0 {
		t.Errorf("GemmPacked with edge tiles: %v allocations per call, want 0", allocs)
	}
}

// TestGemmNoAlloc: a plain Gemm (gorgonia's matrix products, through Implementation) allocates
// nothing once its buffers and its job exist, in both dtypes, with and without transposes.
func TestGemmNoAlloc(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 5))
	for _, s := range []struct{ m, n, k int }{{64, 10, 1568}, {3, 17, 70}, {1, 1, 1}} {
		a32, b32, c32 := randSlice[float32](r, s.m*s.k), randSlice[float32](r, s.k*s.n), make([]float32, s.m*s.n)
		a64, b64, c64 := randSlice[float64](r, s.m*s.k), randSlice[float64](r, s.k*s.n), make([]float64, s.m*s.n)
		for _, tr := range []bool{false, true} {
			lda, ldb := s.k, s.n
			if tr {
				lda, ldb = s.m, s.k
			}
			run := func() {
				if err := Gemm(tr, tr, s.m, s.n, s.k, 1, a32, lda, b32, ldb, 0, c32, s.n); err != nil {
					t.Fatal(err)
				}
				if err := Gemm(tr, tr, s.m, s.n, s.k, 1, a64, lda, b64, ldb, 0, c64, s.n); err != nil {
					t.Fatal(err)
				}
			}
			run()
			if allocs := testing.AllocsPerRun(10, run); allocs != 0 {
				t.Errorf("Gemm %dx%dx%d transposed=%v: %v allocations per call pair, want 0", s.m, s.n, s.k, tr, allocs)
			}
		}
	}
}
