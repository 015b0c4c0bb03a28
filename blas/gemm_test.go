package blas

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
)

// refGemm is the textbook triple loop in float64.
func refGemm[T Float](tA, tB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for p := 0; p < k; p++ {
				var av, bv T
				if tA {
					av = a[p*lda+i]
				} else {
					av = a[i*lda+p]
				}
				if tB {
					bv = b[j*ldb+p]
				} else {
					bv = b[p*ldb+j]
				}
				s += float64(av) * float64(bv)
			}
			v := float64(alpha) * s
			if beta != 0 {
				v += float64(beta) * float64(c[i*ldc+j])
			}
			c[i*ldc+j] = T(v)
		}
	}
}

func randSlice[T Float](r *rand.Rand, n int) []T {
	s := make([]T, n)
	for i := range s {
		s[i] = T(r.Float64()*2 - 1)
	}
	return s
}

type gemmCase struct {
	tA, tB      bool
	m, n, k     int
	alpha, beta float64
	pad         int // extra leading-dimension elements
}

func (g gemmCase) String() string {
	return fmt.Sprintf("tA=%v,tB=%v,%dx%dx%d,a=%g,b=%g,pad=%d", g.tA, g.tB, g.m, g.n, g.k, g.alpha, g.beta, g.pad)
}

var gemmCases = func() []gemmCase {
	var cs []gemmCase
	for _, sz := range [][3]int{{1, 1, 1}, {7, 5, 3}, {6, 16, 256}, {13, 17, 300}, {97, 65, 513}, {50, 1, 70}, {1, 40, 600}, {130, 260, 31}, {rowPanel + 70, 20, 30}} {
		for _, t := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
			cs = append(cs, gemmCase{t[0], t[1], sz[0], sz[1], sz[2], 1, 0, 0})
		}
		cs = append(cs, gemmCase{false, false, sz[0], sz[1], sz[2], -0.5, 2, 3})
		cs = append(cs, gemmCase{true, true, sz[0], sz[1], sz[2], 1.5, 1, 5})
	}
	return append(cs, gemmCase{false, false, 9, 9, 0, 1, 0.5, 0}, gemmCase{false, true, 9, 9, 9, 0, -1, 1})
}()

// stored is the rows and columns of A and B as stored (before op).
func (g gemmCase) stored() (ar, ac, br, bc int) {
	ar, ac, br, bc = g.m, g.k, g.k, g.n
	if g.tA {
		ar, ac = g.k, g.m
	}
	if g.tB {
		br, bc = g.n, g.k
	}
	return
}

func runCase[T Float](t *testing.T, g gemmCase, tol float64) {
	r := rand.New(rand.NewPCG(uint64(g.m), uint64(g.n*1000+g.k)))
	ar, ac, br, bc := g.stored()
	lda, ldb, ldc := max(1, ac+g.pad), max(1, bc+g.pad), g.n+g.pad
	a := randSlice[T](r, max(0, ar*lda))
	b := randSlice[T](r, max(0, br*ldb))
	c := randSlice[T](r, g.m*ldc)
	if g.beta == 0 {
		for i := range c {
			c[i] = T(math.NaN()) // beta == 0 must not read C
		}
	}
	want := append([]T(nil), c...)
	refGemm(g.tA, g.tB, g.m, g.n, g.k, T(g.alpha), a, lda, b, ldb, T(g.beta), want, ldc)
	if err := Gemm(g.tA, g.tB, g.m, g.n, g.k, T(g.alpha), a, lda, b, ldb, T(g.beta), c, ldc); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < g.m; i++ {
		for j := 0; j < ldc; j++ {
			got, w := float64(c[i*ldc+j]), float64(want[i*ldc+j])
			if j >= g.n {
				if math.Float64bits(got) != math.Float64bits(w) && !(math.IsNaN(got) && math.IsNaN(w)) {
					t.Fatalf("%v: padding C[%d,%d] changed: %v -> %v", g, i, j, w, got)
				}
				continue
			}
			if d := math.Abs(got - w); !(d <= tol*(1+math.Abs(w))*math.Sqrt(float64(g.k+1))) {
				t.Fatalf("%v: C[%d,%d] = %v, want %v", g, i, j, got, w)
			}
		}
	}
}

// forEachKernel runs f as a subtest under each kernel this CPU has, restoring the active one.
func forEachKernel(t *testing.T, f func(t *testing.T)) {
	for _, kn := range Kernels() {
		t.Run(kn, func(t *testing.T) {
			defer SetKernel(Kernel())
			if err := SetKernel(kn); err != nil {
				t.Fatal(err)
			}
			f(t)
		})
	}
}

func TestGemmAgainstReference(t *testing.T) {
	forEachKernel(t, func(t *testing.T) {
		for _, g := range gemmCases {
			runCase[float32](t, g, 1e-6)
			runCase[float64](t, g, 1e-14)
		}
	})
}

// TestGemmSameBitsAnyThreads checks the promise that makes the VM's results reproducible: the
// thread count changes nothing, since the k blocking and the kernel do not depend on it.
func TestGemmSameBitsAnyThreads(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, kn := range Kernels() {
		old := Kernel()
		SetKernel(kn)
		for _, sz := range [][3]int{{200, 300, 700}, {64, 3136, 576}, {64, 576, 3000}, {577, 64, 64}} {
			m, n, k := sz[0], sz[1], sz[2]
			r := rand.New(rand.NewPCG(1, 2))
			a, b := randSlice[float32](r, m*k), randSlice[float32](r, k*n)
			c0 := randSlice[float32](r, m*n)
			var first []float32
			for _, p := range []int{1, 2, 3, 8} {
				runtime.GOMAXPROCS(p)
				c := append([]float32(nil), c0...)
				if err := Gemm(false, true, m, n, k, 0.7, a, k, b, k, 0.3, c, n); err != nil {
					t.Fatal(err)
				}
				if first == nil {
					first = c
					continue
				}
				for i := range c {
					if math.Float32bits(c[i]) != math.Float32bits(first[i]) {
						t.Fatalf("%s %v: GOMAXPROCS=%d differs from 1 at %d: %v vs %v", kn, sz, p, i, c[i], first[i])
					}
				}
			}
		}
		SetKernel(old)
	}
}

func TestGemmErrors(t *testing.T) {
	a := make([]float32, 6)
	for _, tc := range []struct {
		name           string
		m, n, k, lda   int
		ldb, ldc, lenC int
	}{
		{"negative", -1, 2, 3, 3, 2, 2, 6},
		{"small lda", 2, 2, 3, 2, 2, 2, 4},
		{"short C", 2, 2, 3, 3, 2, 2, 3},
	} {
		err := Gemm(false, false, tc.m, tc.n, tc.k, 1, a, tc.lda, a, tc.ldb, 0, make([]float32, tc.lenC), tc.ldc)
		if err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	if err := SetKernel("nope"); err == nil {
		t.Error("SetKernel accepted an unknown name")
	}
}

// TestGemmTilingSameBits checks the two promises callers tile on: a product over k split at
// multiples of KBlock (later parts with beta = 1), or over columns of C, gives the bits of one call.
func TestGemmTilingSameBits(t *testing.T) {
	const m, n, k = 29, 700, 3*KBlock + 77
	r := rand.New(rand.NewPCG(9, 9))
	a, b := randSlice[float32](r, m*k), randSlice[float32](r, n*k)
	whole := make([]float32, m*n)
	if err := Gemm(false, true, m, n, k, 1, a, k, b, k, 0, whole, n); err != nil {
		t.Fatal(err)
	}
	kTiled := make([]float32, m*n)
	for p0, i := 0, 0; p0 < k; p0, i = p0+2*KBlock, i+1 {
		kk := min(2*KBlock, k-p0)
		if err := Gemm(false, true, m, n, kk, 1, a[p0:], k, b[p0:], k, float32(min(i, 1)), kTiled, n); err != nil {
			t.Fatal(err)
		}
	}
	nTiled := make([]float32, m*n)
	for j0 := 0; j0 < n; j0 += 93 {
		nn := min(93, n-j0)
		if err := Gemm(false, true, m, nn, k, 1, a, k, b[j0*k:], k, 0, nTiled[j0:], n); err != nil {
			t.Fatal(err)
		}
	}
	for i := range whole {
		if math.Float32bits(whole[i]) != math.Float32bits(kTiled[i]) || math.Float32bits(whole[i]) != math.Float32bits(nTiled[i]) {
			t.Fatalf("element %d: one call %v, k tiled %v, n tiled %v", i, whole[i], kTiled[i], nTiled[i])
		}
	}
}

// TestAssemblyKernelsAgree: the AVX-512 kernels do per lane what the AVX2 ones do, so a machine
// with AVX-512 gives the bits of one with AVX2 only.
func TestAssemblyKernelsAgree(t *testing.T) {
	have := map[string]bool{}
	for _, k := range Kernels() {
		have[k] = true
	}
	if !have["avx512"] || !have["avx2"] {
		t.Skipf("needs a CPU with both AVX2 and AVX-512 kernels; this one has %v", Kernels())
	}
	defer SetKernel(Kernel())
	for _, g := range gemmCases {
		r := rand.New(rand.NewPCG(uint64(g.m), uint64(g.k)))
		ar, ac, br, bc := g.stored()
		lda, ldb := max(1, ac), max(1, bc)
		a32, b32, c32 := randSlice[float32](r, ar*lda), randSlice[float32](r, br*ldb), randSlice[float32](r, g.m*g.n)
		a64, b64, c64 := randSlice[float64](r, ar*lda), randSlice[float64](r, br*ldb), randSlice[float64](r, g.m*g.n)
		var out32 [2][]float32
		var out64 [2][]float64
		for i, kn := range []string{"avx2", "avx512"} {
			SetKernel(kn)
			out32[i] = append([]float32(nil), c32...)
			out64[i] = append([]float64(nil), c64...)
			if err := Gemm(g.tA, g.tB, g.m, g.n, g.k, float32(g.alpha), a32, lda, b32, ldb, float32(g.beta), out32[i], g.n); err != nil {
				t.Fatal(err)
			}
			if err := Gemm(g.tA, g.tB, g.m, g.n, g.k, g.alpha, a64, lda, b64, ldb, g.beta, out64[i], g.n); err != nil {
				t.Fatal(err)
			}
		}
		for i := range out32[0] {
			if math.Float32bits(out32[0][i]) != math.Float32bits(out32[1][i]) || math.Float64bits(out64[0][i]) != math.Float64bits(out64[1][i]) {
				t.Fatalf("%v: element %d differs between avx2 and avx512", g, i)
			}
		}
	}
}

// TestSetWorkers: the cap bounds Workers, never raises it above GOMAXPROCS, and changes no bit.
func TestSetWorkers(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	defer SetWorkers(SetWorkers(0))
	m, n, k := 96, 700, 300
	r := rand.New(rand.NewPCG(3, 4))
	a, b := randSlice[float32](r, m*k), randSlice[float32](r, k*n)
	var first []float32
	for _, tc := range []struct{ cap, want int }{{0, 4}, {1, 1}, {3, 3}, {9, 4}, {-2, 4}} {
		SetWorkers(tc.cap)
		if got := Workers(); got != tc.want {
			t.Errorf("SetWorkers(%d): Workers() = %d, want %d", tc.cap, got, tc.want)
		}
		c := make([]float32, m*n)
		if err := Gemm(false, false, m, n, k, 1, a, k, b, n, 0, c, n); err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = c
			continue
		}
		for i := range c {
			if math.Float32bits(c[i]) != math.Float32bits(first[i]) {
				t.Fatalf("cap %d differs from no cap at %d", tc.cap, i)
			}
		}
	}
}
