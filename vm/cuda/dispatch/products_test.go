package dispatch_test

import (
	"fmt"
	"math/rand"
	"testing"
	"unsafe"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/blas"
	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/dispatch"
)

// TestBatchedProductFollowsItsOperands: a batched product's plan keeps the
// matrices' addresses cublasSgemmBatched reads in device memory between runs
// and writes them again when the operands move (a swapped-out tensor comes
// back elsewhere): the same function run on one set of buffers, another,
// then the first again gives each set's own product, package blas's bits.
func TestBatchedProductFollowsItsOperands(t *testing.T) {
	d := openFake(t)
	const batch, m, k, n = 3, 2, 5, 4
	g := G.NewGraph()
	a := G.NewTensor(g, tensor.Float32, 3, G.WithShape(batch, m, k), G.WithName("a"), G.WithInit(G.Zeroes()))
	b := G.NewTensor(g, tensor.Float32, 3, G.WithShape(batch, k, n), G.WithName("b"), G.WithInit(G.Zeroes()))
	G.Must(G.BatchedMatMul(a, b))
	mach, err := ooc.Compile(g, ooc.Inference(), ooc.WithDevice(d))
	if err != nil {
		t.Fatal(err)
	}
	defer mach.Close()
	p := mach.Program()
	fi := -1
	for i := range p.Funcs {
		if fmt.Sprintf("%T", p.Funcs[i].Op) == "gorgonia.linAlgBinOp" {
			fi = i
		}
	}
	if fi < 0 {
		t.Fatal("no linAlgBinOp in the program")
	}
	r, err := dispatch.For(d).Bind(p)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	va, err := d.NewVA(0)
	if err != nil {
		t.Fatal(err)
	}
	defer va.Close()
	rng := rand.New(rand.NewSource(1))
	type set struct {
		a, b, c []float32
		pa, pb  uintptr
		pc      uintptr
	}
	mk := func() *set {
		s := &set{a: make([]float32, batch*m*k), b: make([]float32, batch*k*n), c: make([]float32, batch*m*n)}
		for i := range s.a {
			s.a[i] = float32(rng.NormFloat64())
		}
		for i := range s.b {
			s.b[i] = float32(rng.NormFloat64())
		}
		for i := 0; i < batch; i++ {
			if err := blas.Gemm(false, false, m, n, k, 1, s.a[i*m*k:], k, s.b[i*k*n:], n, 0, s.c[i*m*n:], n); err != nil {
				t.Fatal(err)
			}
		}
		for _, x := range []struct {
			v []float32
			p *uintptr
		}{{s.a, &s.pa}, {s.b, &s.pb}, {make([]float32, batch*m*n), &s.pc}} {
			blk, err := va.Alloc(int64(4 * len(x.v)))
			if err != nil {
				t.Fatal(err)
			}
			*x.p = blk.Addr()
			if w, err := r.CopyIn(blk.Addr(), f32bytes(x.v)); err != nil || w.Wait() != nil {
				t.Fatalf("upload: %v", err)
			}
		}
		return s
	}
	one, two := mk(), mk()
	for i, s := range []*set{one, two, one} {
		if err := r.Run(fi, s.pc, []uintptr{s.pa, s.pb}, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := r.EndStep(); err != nil {
			t.Fatal(err)
		}
		got := make([]float32, batch*m*n)
		if w, err := r.CopyOut(f32bytes(got), s.pc); err != nil || w.Wait() != nil {
			t.Fatalf("download: %v", err)
		}
		for j := range got {
			if got[j] != s.c[j] {
				t.Fatalf("run %d: element %d is %v, the product of its operands %v", i, j, got[j], s.c[j])
			}
		}
	}
}

func f32bytes(v []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
}
