package dispatch_test

import (
	"fmt"
	"math/rand"
	"testing"
	"unsafe"

	"github.com/gorgonia-ooc/outofcore/blas"
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
