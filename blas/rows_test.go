package blas

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestGemmPackedRowsIsGemmPacked: a product whose B rows are runs of one slice gives the bits
// GemmPacked gives with those rows copied into a matrix, for every kernel, both dtypes, sizes
// that leave partial slivers and tiles, k over several k blocks, alpha and beta, rows of C in
// one range or several, and offsets in any order (repeated, overlapping, a convolution's).
func TestGemmPackedRowsIsGemmPacked(t *testing.T) {
	cases := []struct {
		m, n, k     int
		alpha, beta float64
	}{
		{1, 1, 1, 1, 0},
		{7, 5, 3, 1, 0},
		{16, 838, 144, 1, 0},   // smallcnn's block on its wide grid
		{16, 33, 9, 1, 0},      // one input channel
		{13, 17, 300, -0.5, 2}, // two k blocks
		{20, 100, 513, 1, 1},   // three
		{6, 64, 256, 1.5, 0},
		{50, 31, 70, 1, 0.5},
		{9, 9, 9, 0, -1}, // alpha 0: C scaled only
	}
	forEachKernel(t, func(t *testing.T) {
		for _, g := range cases {
			name := fmt.Sprintf("%dx%dx%d,a=%g,b=%g", g.m, g.n, g.k, g.alpha, g.beta)
			rowsCase[float32](t, name, g.m, g.n, g.k, g.alpha, g.beta)
			rowsCase[float64](t, name, g.m, g.n, g.k, g.alpha, g.beta)
		}
	})
}

func rowsCase[T Float](t *testing.T, name string, m, n, k int, alpha, beta float64) {
	r := rand.New(rand.NewPCG(uint64(m)+11, uint64(n*1000+k)))
	src := randSlice[T](r, n+3*k+5)
	off := make([]int, k)
	for i := range off {
		switch i % 3 {
		case 0: // a convolution's: increasing
			off[i] = min(i, len(src)-n)
		case 1: // anywhere, in any order
			off[i] = r.IntN(len(src) - n + 1)
		default: // the last possible row
			off[i] = len(src) - n
		}
	}
	b := make([]T, k*n)
	for i, o := range off {
		copy(b[i*n:(i+1)*n], src[o:o+n])
	}
	a := randSlice[T](r, m*k)
	ldc := n + 2
	c0 := randSlice[T](r, m*ldc)
	var p PackedA[T]
	if err := p.Pack(false, m, k, a, k); err != nil {
		t.Fatal(err)
	}
	al := p.RowAlign()
	for _, step := range []int{m, al} {
		want := append([]T(nil), c0...)
		got := append([]T(nil), c0...)
		for i0 := 0; i0 < m; i0 += step {
			i1 := min(m, i0+step)
			if err := GemmPacked(&p, i0, i1, false, n, T(alpha), b, n, T(beta), want[i0*ldc:], ldc); err != nil {
				t.Fatal(err)
			}
			if err := GemmPackedRows(&p, i0, i1, n, T(alpha), src, off, T(beta), got[i0*ldc:], ldc); err != nil {
				t.Fatal(err)
			}
		}
		for i := range got {
			if math.Float64bits(float64(got[i])) != math.Float64bits(float64(want[i])) {
				t.Fatalf("%s %T, rows in ranges of %d: element %d is %v, GemmPacked gives %v", name, got[i], step, i, got[i], want[i])
			}
		}
	}
}

// TestCopyRows: the vector packer copies every group width it is given (32, 64 and 128 bytes,
// the AVX2 and AVX-512 kernels' slivers in both dtypes) as the plain loop does, whichever
// kernel this CPU runs.
func TestCopyRows(t *testing.T) {
	if !hasAVX {
		t.Skip("no AVX here (or the purego build): packRows copies with the plain loop, which TestGemmPackedRowsIsGemmPacked covers")
	}
	copyRowsCase[float32](t)
	copyRowsCase[float64](t)
}

func copyRowsCase[T Float](t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	src := randSlice[T](r, 500)
	for _, nr := range []int{4, 8, 16, 32} {
		for _, kc := range []int{1, 3, 17} {
			offs := make([]int, kc)
			for i := range offs {
				offs[i] = r.IntN(len(src) - nr + 1)
			}
			want := make([]T, kc*nr)
			for p, o := range offs {
				copy(want[p*nr:(p+1)*nr], src[o:o+nr])
			}
			got := make([]T, kc*nr)
			if !copyRows(got, src, offs, nr) {
				continue // a width the vector packer does not take: packRows loops
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("%T nr=%d kc=%d: element %d is %v, want %v", got[0], nr, kc, i, got[i], want[i])
				}
			}
		}
	}
}

func TestGemmPackedRowsErrors(t *testing.T) {
	var empty PackedA[float32]
	if err := GemmPackedRows(&empty, 0, 0, 1, 1, nil, nil, 0, nil, 1); err == nil {
		t.Error("an empty PackedA gave no error")
	}
	var p PackedA[float32]
	if err := p.Pack(false, 12, 3, make([]float32, 36), 3); err != nil {
		t.Fatal(err)
	}
	src, c := make([]float32, 20), make([]float32, 12*4)
	off := []int{0, 8, 16}
	for _, tc := range []struct {
		name     string
		i0, i1   int
		n, ldc   int
		off      []int
		c        []float32
		contains string
	}{
		{"unaligned start", 1, 12, 4, 4, off, c, "multiple"},
		{"past the end", 0, 13, 4, 4, off, c, "within"},
		{"too few offsets", 0, 12, 4, 4, off[:2], c, "2 row offsets"},
		{"negative n", 0, 12, -1, 4, off, c, "negative"},
		{"ldc below n", 0, 12, 4, 3, off, c, "leading dimension"},
		{"short C", 0, 12, 4, 4, off, c[:40], "C has 40"},
		{"row past src", 0, 12, 5, 5, off, make([]float32, 60), "row 2 of B is src[16:21]"},
		{"negative offset", 0, 12, 4, 4, []int{0, -1, 0}, c, "row 1 of B is src[-1:3]"},
	} {
		err := GemmPackedRows(&p, tc.i0, tc.i1, tc.n, 1, src, tc.off, 0, tc.c, tc.ldc)
		if err == nil || !strings.Contains(err.Error(), tc.contains) {
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.contains)
		}
	}
}

func ExampleGemmPackedRows() {
	// A 1-D convolution without its column matrix: y[q] = w0*x[q] + w1*x[q+1] + w2*x[q+2].
	// Row k of B is x shifted by k, so its offsets are 0, 1, 2.
	w := []float32{1, 10, 100} // one output channel, three taps: A is 1x3
	var p PackedA[float32]
	if err := p.Pack(false, 1, 3, w, 3); err != nil {
		fmt.Println(err)
	}
	x := []float32{1, 2, 3, 4, 5}
	y := make([]float32, 3)
	if err := GemmPackedRows(&p, 0, 1, 3, 1, x, []int{0, 1, 2}, 0, y, 3); err != nil {
		fmt.Println(err)
	}
	fmt.Println(y)
	// Output:
	// [321 432 543]
}
