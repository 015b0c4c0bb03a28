package blas

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestGemmPackedIsGemm: a PackedA product gives Gemm's bits, for every kernel, every gemm case,
// and whether C's rows come in one range or several (as a caller splitting rows over goroutines).
func TestGemmPackedIsGemm(t *testing.T) {
	forEachKernel(t, func(t *testing.T) {
		for _, g := range gemmCases {
			packedCase[float32](t, g)
			packedCase[float64](t, g)
		}
	})
}

func packedCase[T Float](t *testing.T, g gemmCase) {
	r := rand.New(rand.NewPCG(uint64(g.m)+7, uint64(g.n*1000+g.k)))
	ar, ac, br, bc := g.stored()
	lda, ldb, ldc := max(1, ac+g.pad), max(1, bc+g.pad), g.n+g.pad
	a := randSlice[T](r, max(0, ar*lda))
	b := randSlice[T](r, max(0, br*ldb))
	c0 := randSlice[T](r, g.m*ldc)
	want := append([]T(nil), c0...)
	if err := Gemm(g.tA, g.tB, g.m, g.n, g.k, T(g.alpha), a, lda, b, ldb, T(g.beta), want, ldc); err != nil {
		t.Fatal(err)
	}
	var p PackedA[T]
	if err := p.Pack(g.tA, g.m, g.k, a, lda); err != nil {
		t.Fatal(err)
	}
	al := p.RowAlign()
	for _, step := range []int{g.m, al, 3 * al} {
		got := append([]T(nil), c0...)
		for i0 := 0; i0 < g.m; i0 += max(step, 1) {
			if err := GemmPacked(&p, i0, min(g.m, i0+max(step, 1)), g.tB, g.n, T(g.alpha), b, ldb, T(g.beta), got[i0*ldc:], ldc); err != nil {
				t.Fatal(err)
			}
		}
		for i := range got {
			if math.Float64bits(float64(got[i])) != math.Float64bits(float64(want[i])) {
				t.Fatalf("%v, rows in ranges of %d: element %d is %v, Gemm gives %v", g, step, i, got[i], want[i])
			}
		}
	}
}

// TestPackNoAllocs: repacking a PackedA of the same size allocates nothing (on one goroutine:
// workpool may start a helper when none is idle).
func TestPackNoAllocs(t *testing.T) {
	a := make([]float32, 16*144)
	var p PackedA[float32]
	if err := p.PackSerial(false, 16, 144, a, 144); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(10, func() { _ = p.PackSerial(false, 16, 144, a, 144) }); n != 0 {
		t.Errorf("PackSerial allocates %v times per call once warm", n)
	}
}

func TestGemmPackedErrors(t *testing.T) {
	var empty PackedA[float32]
	if err := GemmPacked(&empty, 0, 0, false, 1, 1, nil, 1, 0, nil, 1); err == nil {
		t.Error("an empty PackedA gave no error")
	}
	a := make([]float32, 12*5)
	var p PackedA[float32]
	if err := p.Pack(false, 12, 5, a, 4); err == nil {
		t.Error("Pack accepted lda 4 for 5 columns")
	}
	if err := p.Pack(false, 12, 5, a, 5); err != nil {
		t.Fatal(err)
	}
	b, c := make([]float32, 5*3), make([]float32, 12*3)
	for _, tc := range []struct {
		name   string
		i0, i1 int
		c      []float32
	}{
		{"unaligned start", 1, 12, c},
		{"past the end", 0, 13, c},
		{"reversed", 6, 0, c},
		{"short C", 0, 12, c[:30]},
		{"C short for the range", 6, 12, c[:15]},
	} {
		if err := GemmPacked(&p, tc.i0, tc.i1, false, 3, 1, b, 3, 0, tc.c, 3); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
}

func ExampleGemmPacked() {
	// One A times two B's, packed once: C1 = A·B1 and C2 = A·B2 for A 2x3.
	a := []float32{1, 2, 3, 4, 5, 6}
	var p PackedA[float32]
	if err := p.Pack(false, 2, 3, a, 3); err != nil {
		fmt.Println(err)
	}
	for _, b := range [][]float32{{1, 0, 0}, {0, 1, 1}} { // 3x1 each
		c := make([]float32, 2)
		if err := GemmPacked(&p, 0, 2, false, 1, 1, b, 1, 0, c, 1); err != nil {
			fmt.Println(err)
		}
		fmt.Println(c)
	}
	// Output:
	// [1 4]
	// [5 11]
}
