package blas

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestGemmSliversIsGemm: a product whose operands come from SliverSources gives Gemm's bits, for
// every kernel and gemm case, whole or as k blocks added in order (C = the first block's product
// with beta 0, then C + each next block's, the way a caller adds blocks computed apart).
func TestGemmSliversIsGemm(t *testing.T) {
	forEachKernel(t, func(t *testing.T) {
		for _, g := range gemmCases {
			sliversCase[float32](t, g)
			sliversCase[float64](t, g)
		}
	})
}

func sliversCase[T Float](t *testing.T, g gemmCase) {
	r := rand.New(rand.NewPCG(uint64(g.m)+11, uint64(g.n*1000+g.k)))
	ar, ac, br, bc := g.stored()
	lda, ldb, ldc := max(1, ac+g.pad), max(1, bc+g.pad), g.n+g.pad
	a := randSlice[T](r, max(0, ar*lda))
	b := randSlice[T](r, max(0, br*ldb))
	c0 := randSlice[T](r, g.m*ldc)
	want := append([]T(nil), c0...)
	if err := Gemm(g.tA, g.tB, g.m, g.n, g.k, T(g.alpha), a, lda, b, ldb, T(g.beta), want, ldc); err != nil {
		t.Fatal(err)
	}
	sa := &Stored[T]{Data: a, Ld: lda, KMajor: g.tA}
	sb := &Stored[T]{Data: b, Ld: ldb, KMajor: !g.tB}
	got := append([]T(nil), c0...)
	if err := GemmSlivers(g.m, g.n, g.k, T(g.alpha), sa, sb, T(g.beta), got, ldc); err != nil {
		t.Fatal(err)
	}
	sameBits(t, got, want, g.String()+", whole")
	if g.alpha != 1 || g.beta != 0 || g.k <= KBlock {
		return
	}
	// Blocks computed on their own (from k = p0, with beta 0) and added in order.
	got = append([]T(nil), c0...)
	part := make([]T, len(got))
	for p0 := 0; p0 < g.k; p0 += KBlock {
		kc := min(KBlock, g.k-p0)
		oa, ob := &Stored[T]{Ld: lda, KMajor: g.tA}, &Stored[T]{Ld: ldb, KMajor: !g.tB}
		if oa.Data = a[p0:]; g.tA {
			oa.Data = a[p0*lda:]
		}
		if ob.Data = b[p0:]; !g.tB {
			ob.Data = b[p0*ldb:]
		}
		if err := GemmSlivers(g.m, g.n, kc, 1, oa, ob, 0, part, ldc); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < g.m; i++ {
			for j := 0; j < g.n; j++ {
				if p0 == 0 {
					got[i*ldc+j] = part[i*ldc+j]
				} else {
					got[i*ldc+j] += part[i*ldc+j]
				}
			}
		}
	}
	sameBits(t, got, want, g.String()+", blocks")
}

func sameBits[T Float](t *testing.T, got, want []T, what string) {
	t.Helper()
	for i := range got {
		if math.Float64bits(float64(got[i])) != math.Float64bits(float64(want[i])) {
			t.Fatalf("%s: element %d is %v, Gemm gives %v", what, i, got[i], want[i])
		}
	}
}

func TestGemmSliversErrors(t *testing.T) {
	s := &Stored[float32]{Data: make([]float32, 4), Ld: 2}
	for _, c := range []struct {
		m, n, k, ldc int
		c            []float32
	}{
		{-1, 2, 2, 2, make([]float32, 4)},
		{2, 2, 2, 1, make([]float32, 4)},
		{2, 2, 2, 2, make([]float32, 3)},
	} {
		if err := GemmSlivers(c.m, c.n, c.k, 1, s, s, 0, c.c, c.ldc); err == nil {
			t.Errorf("GemmSlivers(%d, %d, %d, ldc %d, len(c) %d) gave no error", c.m, c.n, c.k, c.ldc, len(c.c))
		}
	}
}

// iota2 is a SliverSource computed, not stored: element (i, p) is i+p.
type iota2 struct{}

func (iota2) PackSliver(dst []float32, i0, rows, p0, kc, g int) {
	for p := 0; p < kc; p++ {
		for r := 0; r < rows; r++ {
			dst[p*g+r] = float32(i0 + r + p0 + p)
		}
	}
}

func ExampleGemmSlivers() {
	// A 2x3 with A[i][p] = i+p, never stored; B 3x2 stored row-major (k-major for Bᵀ's slivers).
	b := &Stored[float32]{Data: []float32{1, 0, 0, 1, 1, 1}, Ld: 2, KMajor: true}
	c := make([]float32, 4)
	if err := GemmSlivers(2, 2, 3, 1, iota2{}, b, 0, c, 2); err != nil {
		fmt.Println(err)
	}
	fmt.Println(c)
	// Output:
	// [2 3 4 5]
}
