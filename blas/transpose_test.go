package blas

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// transposeCase is one call of transposeInto: a sliver of rows x kc read from src at offset off
// with rows lds apart, packed in groups of ld; extra is how far dst reaches past the kc groups
// (negative: dst ends right after the last group's rows, the least transposeInto may be given).
type transposeCase struct {
	rows, kc, ld, lds, off, extra int
}

func (c transposeCase) String() string {
	return fmt.Sprintf("rows=%d,kc=%d,ld=%d,lds=%d,off=%d,extra=%d", c.rows, c.kc, c.ld, c.lds, c.off, c.extra)
}

// transposeCases covers the packing's shapes (packB's slivers of nr = 16 float32 or 8 float64
// rows, packA's of mr = 6, both with fewer rows at an edge, kc a k block, its remainder or odd)
// and others around the block sizes.
var transposeCases = func() []transposeCase {
	var cs []transposeCase
	for _, ld := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 17, 32} {
		for rows := 1; rows <= ld; rows++ {
			if ld > 9 && rows > 3 && rows < ld-2 && rows != 8 && rows != 9 && rows != 16 {
				continue
			}
			for _, kc := range []int{1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 256} {
				cs = append(cs, transposeCase{rows, kc, ld, kc + rows%3, rows % 2, 0})
			}
		}
	}
	return append(cs,
		transposeCase{16, 256, 16, 784, 768, 0}, // smallcnn's filter gradient, packB
		transposeCase{16, 16, 16, 784, 768, 0},  // and its last k block
		transposeCase{6, 256, 6, 784, 0, 0},     // packA of dy
		transposeCase{4, 256, 6, 784, 0, 0},     // its last sliver of 16 rows
		transposeCase{9, 256, 16, 784, 0, 0},    // one input channel: 9 columns
		transposeCase{6, 255, 6, 300, 3, -1},
		transposeCase{3, 9, 6, 9, 0, -1},
		transposeCase{2, 11, 3, 20, 1, -1},
		transposeCase{5, 13, 16, 13, 0, -1},
		transposeCase{6, 10, 6, 10, 0, 40},
		transposeCase{1, 8, 1, 8, 0, 0},
	)
}()

// TestTransposeIntoIsGo: transposeInto (AVX where the CPU has it) writes the values the Go loop
// writes, bit for bit, leaves everything past the kc groups alone and writes nothing but zeros
// into a group's padding, in both precisions; the vector path does every column where a whole
// column's store fits.
func TestTransposeIntoIsGo(t *testing.T) {
	for _, c := range transposeCases {
		transposeCheck[float32](t, c)
		transposeCheck[float64](t, c)
	}
}

func transposeCheck[T Float](t *testing.T, c transposeCase) {
	var zero T
	w := 32 / int(unsafe.Sizeof(zero))
	name := fmt.Sprintf("%T %v", zero, c)
	r := rand.New(rand.NewPCG(uint64(c.rows*1000+c.kc), uint64(c.ld*1000+c.lds)))
	// Nonzero values all around the sliver, so a value read from outside it would show.
	all := randSlice[T](r, c.off+(c.rows-1)*c.lds+c.kc+64)
	for i := range all {
		if all[i] == 0 {
			all[i] = 1
		}
	}
	src := all[c.off : c.off+(c.rows-1)*c.lds+c.kc]
	n := c.kc*c.ld + c.extra
	if c.extra < 0 {
		n = (c.kc-1)*c.ld + c.rows
	}
	sentinel := T(-7.25)
	want, got := make([]T, n), make([]T, n+16)
	for i := range got {
		got[i] = sentinel
	}
	for i := range want {
		want[i] = sentinel
	}
	transposeGo(want, src, c.lds, c.rows, c.kc, c.ld)
	transposeInto(got[:n], src, c.lds, c.rows, c.kc, c.ld)
	for i, v := range got {
		p, row := i/c.ld, i%c.ld
		switch {
		case i < n && p < c.kc && row < c.rows:
			if !sameValueBits(v, want[i]) {
				t.Fatalf("%s: dst[%d] (column %d row %d) = %v, want %v", name, i, p, row, v, want[i])
			}
		case i < n && p < c.kc:
			if v != sentinel && !sameValueBits(v, 0) {
				t.Fatalf("%s: padding dst[%d] (column %d row %d) = %v, want it untouched or +0", name, i, p, row, v)
			}
		default:
			if v != sentinel {
				t.Fatalf("%s: dst[%d], past the %d groups or the slice, = %v: written", name, i, c.kc, v)
			}
		}
	}
	if !vecTranspose {
		return
	}
	// Whole blocks of rows, or groups as wide as a block, let it do every column; narrower
	// groups all but the last few, whose w-value stores would pass the kc groups.
	least := 0
	switch {
	case c.kc >= w && (c.rows >= w || c.ld >= w && n >= c.kc*c.ld):
		least = c.kc
	case c.kc >= 2*w && n >= c.kc*c.ld:
		least = c.kc - w
	}
	if done := transposeVec(got[:n], src, c.lds, c.rows, c.kc, c.ld); done < least {
		t.Fatalf("%s: the vector transpose did %d of %d columns, want at least %d", name, done, c.kc, least)
	}
}

func sameValueBits[T Float](a, b T) bool {
	switch x := any(a).(type) {
	case float32:
		return math.Float32bits(x) == math.Float32bits(any(b).(float32))
	default:
		return math.Float64bits(any(a).(float64)) == math.Float64bits(any(b).(float64))
	}
}

// TestTransposeIntoNoAlloc: the packing's transposes allocate nothing.
func TestTransposeIntoNoAlloc(t *testing.T) {
	src32, dst32 := make([]float32, 16*784), make([]float32, 16*256)
	src64, dst64 := make([]float64, 6*784), make([]float64, 6*256)
	if a := testing.AllocsPerRun(10, func() {
		transposeInto(dst32, src32, 784, 16, 256, 16)
		transposeInto(dst64, src64, 784, 6, 256, 6)
	}); a != 0 {
		t.Fatalf("%v allocations per call", a)
	}
}

// BenchmarkTranspose times the packing's transposes, the Go loop against transposeInto (AVX
// where the CPU has it), interleaved so they share the machine's load: smallcnn's filter
// gradient packs 16-row slivers of the column matrix (packB) and 6-row slivers of dy (packA),
// k blocks of 256 out of 784 pixels.
func BenchmarkTranspose(b *testing.B) {
	for _, c := range []struct {
		name          string
		rows, kc, ld  int
		lds, elemSize int
	}{
		{"f32/packB16", 16, 256, 16, 784, 4},
		{"f32/packA6", 6, 256, 6, 784, 4},
		{"f64/packB8", 8, 256, 8, 784, 8},
		{"f64/packA6", 6, 256, 6, 784, 8},
	} {
		for _, impl := range []string{"go", "vec"} {
			b.Run(c.name+"/"+impl, func(b *testing.B) {
				if c.elemSize == 4 {
					benchTranspose[float32](b, impl, c.rows, c.kc, c.ld, c.lds)
				} else {
					benchTranspose[float64](b, impl, c.rows, c.kc, c.ld, c.lds)
				}
			})
		}
	}
}

func benchTranspose[T Float](b *testing.B, impl string, rows, kc, ld, lds int) {
	r := rand.New(rand.NewPCG(1, 2))
	src, dst := randSlice[T](r, rows*lds), make([]T, kc*ld)
	b.SetBytes(int64(rows * kc * int(unsafe.Sizeof(src[0]))))
	for b.Loop() {
		if impl == "go" {
			transposeGo(dst, src, lds, rows, kc, ld)
		} else {
			transposeInto(dst, src, lds, rows, kc, ld)
		}
	}
}

// TestGemmSameBitsWithoutVectorTranspose: whole products, through Gemm and through a PackedA,
// are the same bits with the AVX transposes as with the Go loop, for every kernel: the gemm
// cases and the filter gradients of smallcnn (dy times the column matrix transposed: 16 x 9 or
// 16 x 144 over 784 or 196 pixels) and the forward product with its weights as packed A.
func TestGemmSameBitsWithoutVectorTranspose(t *testing.T) {
	if !vecTranspose {
		t.Skip("no AVX transposes on this build or CPU: transposeInto is the Go loop only")
	}
	defer func() { vecTranspose = true }()
	cases := append([]gemmCase(nil), gemmCases...)
	for _, s := range [][3]int{{16, 9, 784}, {16, 144, 784}, {16, 144, 196}, {20, 63, 81}} {
		cases = append(cases, gemmCase{false, true, s[0], s[1], s[2], 1, 0, 0}, gemmCase{false, true, s[0], s[1], s[2], 1, 1, 0})
	}
	cases = append(cases, gemmCase{false, false, 16, 784, 144, 1, 0, 0}, gemmCase{false, false, 16, 196, 144, 1, 0, 0})
	forEachKernel(t, func(t *testing.T) {
		for _, g := range cases {
			sameBitsVecTranspose[float32](t, g)
			sameBitsVecTranspose[float64](t, g)
		}
	})
}

func sameBitsVecTranspose[T Float](t *testing.T, g gemmCase) {
	r := rand.New(rand.NewPCG(uint64(g.m)+3, uint64(g.n*1000+g.k)))
	ar, ac, br, bc := g.stored()
	lda, ldb, ldc := max(1, ac+g.pad), max(1, bc+g.pad), g.n+g.pad
	a, b := randSlice[T](r, max(0, ar*lda)), randSlice[T](r, max(0, br*ldb))
	c0 := randSlice[T](r, g.m*ldc)
	var out [2][2][]T // [Go loop, AVX][Gemm, GemmPacked]
	for i, vec := range []bool{false, true} {
		vecTranspose = vec
		out[i][0] = append([]T(nil), c0...)
		if err := Gemm(g.tA, g.tB, g.m, g.n, g.k, T(g.alpha), a, lda, b, ldb, T(g.beta), out[i][0], ldc); err != nil {
			t.Fatal(err)
		}
		var p PackedA[T]
		out[i][1] = append([]T(nil), c0...)
		if err := p.Pack(g.tA, g.m, g.k, a, lda); err != nil {
			t.Fatal(err)
		}
		if err := GemmPacked(&p, 0, g.m, g.tB, g.n, T(g.alpha), b, ldb, T(g.beta), out[i][1], ldc); err != nil {
			t.Fatal(err)
		}
	}
	for j, name := range []string{"Gemm", "GemmPacked"} {
		for i := range c0 {
			if !sameValueBits(out[0][j][i], out[1][j][i]) {
				t.Fatalf("%T %v %s: element %d is %v with the AVX transposes, %v with the Go loop", c0[0], g, name, i, out[1][j][i], out[0][j][i])
			}
		}
	}
}
