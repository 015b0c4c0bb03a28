package dispatch_test

import (
	"fmt"
	"math"
	"math/rand"
	"testing"
	"unsafe"

	gblas "gonum.org/v1/gonum/blas"

	"github.com/gorgonia-ooc/outofcore/blas"
	"github.com/gorgonia-ooc/outofcore/vm/alloc"
	"github.com/gorgonia-ooc/outofcore/vm/cuda"
)

// TestFakeCuBLASIsPackageBLAS: the fake cuBLAS the zoo tests run gives, for
// every element, the bits of package blas's GEMM (the CPU device's), with
// each of the CPU's kernels, across the k block (blas.KBlock), with
// transposes, alpha and beta. The dispatch calls cuBLAS column-major on
// row-major data (C = A·B as Cᵀ = Bᵀ·Aᵀ), and so does this test. Without
// this, every product of a model differs between the devices in its last
// bits (FMA against a rounded multiply, and where the k sum is cut), and a
// deep model's float32 gradients amplify that to 1e-2 (resnet18 before:
// loss 5.8e-7, gradients 7.7e-3 apart).
func TestFakeCuBLASIsPackageBLAS(t *testing.T) {
	defer func(k string) { _ = blas.SetKernel(k) }(blas.Kernel())
	type shape struct {
		m, n, k int
		tA, tB  bool
		alpha   float64
		beta    float64
	}
	shapes := []shape{
		{1, 1, 1, false, false, 1, 0},
		{7, 5, 255, false, false, 1, 0},
		{6, 17, 256, true, false, 1, 1},
		{13, 3, 257, false, true, -0.75, 0.5},
		{5, 9, 700, true, true, 1, 1},
		{4, 4, 0, false, false, 1, 0.5},
		{3, 8, 513, false, false, 0, 2},
	}
	for _, kernel := range blas.Kernels() {
		if err := blas.SetKernel(kernel); err != nil {
			t.Fatal(err)
		}
		d := openFake(t) // after SetKernel: the fake reads the kernel's arithmetic at Open
		b, err := d.OpenBLAS()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range shapes {
			t.Run(fmt.Sprintf("%s/f32/%+v", kernel, s), func(t *testing.T) { gemmSameBits[float32](t, d, b, s.m, s.n, s.k, s.tA, s.tB, s.alpha, s.beta) })
			t.Run(fmt.Sprintf("%s/f64/%+v", kernel, s), func(t *testing.T) { gemmSameBits[float64](t, d, b, s.m, s.n, s.k, s.tA, s.tB, s.alpha, s.beta) })
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func gemmSameBits[T float32 | float64](t *testing.T, d *cuda.Device, b *cuda.BLAS, m, n, k int, tA, tB bool, alpha, beta float64) {
	rng := rand.New(rand.NewSource(int64(m*1000 + n*10 + k)))
	fill := func(n int) []T {
		v := make([]T, n)
		for i := range v {
			v[i] = T(rng.NormFloat64())
		}
		return v
	}
	lda, ldb := k, n // row-major op(A) m x k, op(B) k x n
	if tA {
		lda = m
	}
	if tB {
		ldb = k
	}
	a, bm, c := fill(max(m*k, 1)), fill(max(k*n, 1)), fill(m*n)
	want := append([]T(nil), c...)
	if err := blas.Gemm(tA, tB, m, n, k, T(alpha), a, max(lda, 1), bm, max(ldb, 1), T(beta), want, n); err != nil {
		t.Fatal(err)
	}
	va, err := d.NewVA(0)
	if err != nil {
		t.Fatal(err)
	}
	defer va.Close()
	up := func(v []T) uintptr {
		bytes := unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)*int(unsafe.Sizeof(v[0])))
		blk, err := va.Alloc(int64(len(bytes)))
		if err != nil {
			t.Fatal(err)
		}
		ev, err := d.CopyIn(blk.Addr(), bytes)
		if err == nil {
			err = ev.Wait()
		}
		if err != nil {
			t.Fatal(err)
		}
		return blk.Addr()
	}
	pa, pb, pc := up(a), up(bm), up(c)
	var zero T
	if err := b.Gemm(unsafe.Sizeof(zero) == 8, tB, tA, n, m, k, alpha, pb, max(ldb, 1), pa, max(lda, 1), beta, pc, n); err != nil {
		t.Fatal(err)
	}
	got := make([]T, m*n)
	ev, err := d.CopyOut(unsafe.Slice((*byte)(unsafe.Pointer(&got[0])), len(got)*int(unsafe.Sizeof(zero))), pc)
	if err == nil {
		err = ev.Wait()
	}
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("element %d: fake cuBLAS %v, package blas %v (kernel %s)", i, got[i], want[i], blas.Kernel())
		}
	}
}

// TestFakeCuBLASLevel2IsGonum: the fake cuBLAS's gemv, ger and dot give,
// for every element, the bits of the BLAS call the CPU device makes for
// gorgonia's MatVecMul, Outer and Inner (gonum's, through package blas's
// Implementation), in both dtypes: row and column counts that leave every
// tail of gonum's kernels (odd rows, columns past a multiple of 4 or 16),
// padded leading dimensions, alpha and beta, and float32 vectors at each
// 4-byte offset from 16-byte alignment (gonum's float32 dot sums the
// unaligned head apart). cuBLAS is column-major: gonum's row-major A (rows x
// cols, A·x) is cuBLAS's Aᵀ, so the calls swap transposes and operands as
// the dispatch does.
func TestFakeCuBLASLevel2IsGonum(t *testing.T) {
	d := openFake(t)
	b, err := d.OpenBLAS()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	}()
	va, err := d.NewVA(0)
	if err != nil {
		t.Fatal(err)
	}
	defer va.Close()
	f := &level2Fixture{t: t, d: d, b: b, va: va}
	type shape struct {
		rows, cols, pad int
		alpha, beta     float64
	}
	shapes := []shape{
		{1, 1, 0, 1, 0}, {3, 4, 0, 1, 0}, {4, 3, 0, 1, 0}, {5, 7, 0, 1, 0}, {6, 2, 1, 1, 0},
		{7, 37, 3, 1, 0}, {8, 33, 0, -0.5, 0}, {9, 18, 2, 1.5, 0.25}, {2, 70, 0, 1, 1}, {13, 1, 0, 1, 0},
	}
	t.Run("dot", func(t *testing.T) {
		for n := 1; n <= 70; n++ {
			for _, off := range []int{0, 4, 8, 12} {
				dotSameBits[float32](f.with(t), n, off)
				if off%8 == 0 {
					dotSameBits[float64](f.with(t), n, off)
				}
			}
		}
	})
	for _, s := range shapes {
		for _, off := range []int{0, 4, 8, 12} {
			name := fmt.Sprintf("%+v/offset %d", s, off)
			t.Run("f64/"+name, func(t *testing.T) { level2SameBits[float64](f.with(t), s.rows, s.cols, s.pad, s.alpha, s.beta, off) })
			t.Run("f32/"+name, func(t *testing.T) { level2SameBits[float32](f.with(t), s.rows, s.cols, s.pad, s.alpha, s.beta, off) })
		}
	}
}

// level2Fixture uploads and downloads a test's vectors.
type level2Fixture struct {
	t  *testing.T
	d  *cuda.Device
	b  *cuda.BLAS
	va alloc.Allocator
}

func (f *level2Fixture) with(t *testing.T) *level2Fixture { g := *f; g.t = t; return &g }

// up copies v into a new device block, off bytes past its (512-byte aligned)
// start, and returns its address.
func up[T float32 | float64](f *level2Fixture, v []T, off int) uintptr {
	f.t.Helper()
	bytes := unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)*int(unsafe.Sizeof(v[0])))
	blk, err := f.va.Alloc(int64(len(bytes) + off))
	if err != nil {
		f.t.Fatal(err)
	}
	ev, err := f.d.CopyIn(blk.Addr()+uintptr(off), bytes)
	if err == nil {
		err = ev.Wait()
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return blk.Addr() + uintptr(off)
}

func down[T float32 | float64](f *level2Fixture, p uintptr, n int) []T {
	f.t.Helper()
	v := make([]T, n)
	ev, err := f.d.CopyOut(unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), n*int(unsafe.Sizeof(v[0]))), p)
	if err == nil {
		err = ev.Wait()
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return v
}

// alignedAt returns a copy of v in host memory at off bytes past a 16-byte
// boundary, as the device copy is: gonum's float32 dot depends on it.
func alignedAt[T float32 | float64](v []T, off int) []T {
	var zero T
	es := int(unsafe.Sizeof(zero))
	buf := make([]T, len(v)+16/es+1)
	for i := range buf {
		if int(uintptr(unsafe.Pointer(&buf[i]))%16) == off%16 {
			w := buf[i : i+len(v)]
			copy(w, v)
			return w
		}
	}
	panic("no such alignment")
}

func level2SameBits[T float32 | float64](f *level2Fixture, rows, cols, pad int, alpha, beta float64, off int) {
	t := f.t
	var zero T
	f64 := unsafe.Sizeof(zero) == 8
	if f64 && off%8 != 0 {
		t.Skip("a float64 vector is 8-byte aligned")
	}
	rng := rand.New(rand.NewSource(int64(rows*1000 + cols*10 + pad)))
	fill := func(n int) []T {
		v := make([]T, n)
		for i := range v {
			v[i] = T(rng.NormFloat64())
		}
		return v
	}
	lda := cols + pad
	a, xr, xc := fill(rows*lda), fill(rows), fill(cols)
	yr, yc := fill(rows), fill(cols)
	impl := blas.Implementation{}
	same := func(what string, got, want []T) {
		t.Helper()
		for i := range want {
			if math.Float64bits(float64(got[i])) != math.Float64bits(float64(want[i])) {
				t.Fatalf("%s: element %d: fake cuBLAS %v, gonum %v", what, i, got[i], want[i])
			}
		}
	}
	// gemv, A·x (gonum NoTrans; cuBLAS's T of the column-major Aᵀ) and Aᵀ·x.
	for _, tA := range []bool{false, true} {
		x, y := xc, yr
		if tA {
			x, y = xr, yc
		}
		want := alignedAt(y, off)
		hx := alignedAt(x, off)
		tr := gblas.NoTrans
		if tA {
			tr = gblas.Trans
		}
		switch w := any(want).(type) {
		case []float64:
			impl.Dgemv(tr, rows, cols, alpha, any(a).([]float64), lda, any(hx).([]float64), 1, beta, w, 1)
		case []float32:
			impl.Sgemv(tr, rows, cols, float32(alpha), any(a).([]float32), lda, any(hx).([]float32), 1, float32(beta), w, 1)
		}
		pa, px, py := up(f, a, 0), up(f, x, off), up(f, y, off)
		if err := f.b.Gemv(f64, !tA, cols, rows, alpha, pa, lda, px, 1, beta, py, 1); err != nil {
			t.Fatal(err)
		}
		same(fmt.Sprintf("gemv (transA %t)", tA), down[T](f, py, len(y)), want)
	}
	// ger: A += alpha x yᵀ (gonum, x the rows); cuBLAS's column-major Aᵀ += alpha y xᵀ.
	want := append([]T(nil), a...)
	switch w := any(want).(type) {
	case []float64:
		impl.Dger(rows, cols, alpha, any(xr).([]float64), 1, any(xc).([]float64), 1, w, lda)
	case []float32:
		impl.Sger(rows, cols, float32(alpha), any(xr).([]float32), 1, any(xc).([]float32), 1, w, lda)
	}
	pa, px, py := up(f, a, 0), up(f, xr, off), up(f, xc, off)
	if err := f.b.Ger(f64, cols, rows, alpha, py, 1, px, 1, pa, lda); err != nil {
		t.Fatal(err)
	}
	same("ger", down[T](f, pa, len(a)), want)
}

// dotSameBits checks the dot product of two n-vectors off bytes past 16-byte
// alignment, its result in device memory.
func dotSameBits[T float32 | float64](f *level2Fixture, n, off int) {
	t := f.t
	var zero T
	rng := rand.New(rand.NewSource(int64(n*16 + off)))
	x, y := make([]T, n), make([]T, n)
	for i := range x {
		x[i], y[i] = T(rng.NormFloat64()), T(rng.NormFloat64())
	}
	hx, hy := alignedAt(x, off), alignedAt(y, off)
	var want T
	switch any(zero).(type) {
	case float64:
		want = T(blas.Implementation{}.Ddot(n, any(hx).([]float64), 1, any(hy).([]float64), 1))
	case float32:
		want = T(blas.Implementation{}.Sdot(n, any(hx).([]float32), 1, any(hy).([]float32), 1))
	}
	pr := up(f, []T{42}, 0)
	if err := f.b.Dot(unsafe.Sizeof(zero) == 8, n, up(f, x, off), 1, up(f, y, off), 1, pr); err != nil {
		t.Fatal(err)
	}
	if got := down[T](f, pr, 1)[0]; math.Float64bits(float64(got)) != math.Float64bits(float64(want)) {
		t.Errorf("dot of %d at offset %d: fake cuBLAS %v, gonum %v", n, off, got, want)
	}
}
