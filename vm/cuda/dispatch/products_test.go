package dispatch_test

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"unsafe"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/blas"
	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm"
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

// TestScratchInsideTheBudget: tensordot's transposed operands and CTC's
// tables are the function's workspace on a CUDA device (the backend tells
// the trace: vm.WorkspaceBackend), so the planner counts them inside the
// budget, and binding the program allocates nothing beside cuBLAS's
// workspace; on the CPU device those functions have none. A program traced
// without the backend (for the CPU device) still binds, with the bytes in
// the runner's scratch instead.
func TestScratchInsideTheBudget(t *testing.T) {
	d := openFake(t)
	for _, c := range []struct {
		name string
		c    opCase
		want int64 // float32 bytes
	}{
		// b (4, 3, 5) is transposed to (3, 4, 5): 60 float32s, in 256-byte units.
		{"Tensordot", tensorCaseNamed(t, "Tensordot"), 256},
		// The gradient: losses for 3 sequences, alpha and beta tables of 5 x 3 x (2·2+1).
		{"CTCLoss ragged, sum", ctcCases()[0], 256 + 2*512},
	} {
		t.Run(c.name, func(t *testing.T) {
			g, grad := caseGraph(t, c.c, tensor.Float32)
			opts := []ooc.Option{ooc.BindDualValues(grad...)}
			cpu, err := ooc.Plan(g, opts...)
			if err != nil {
				t.Fatal(err)
			}
			gpu, err := ooc.Plan(g, append(opts, ooc.WithDevice(d))...)
			if err != nil {
				t.Fatal(err)
			}
			var most int64
			for i := range gpu.Funcs {
				switch strings.TrimPrefix(fmt.Sprintf("%T", gpu.Funcs[i].Op), "*") {
				case "gorgonia.tensordotOp", "gorgonia.ctcLossOp", "gorgonia.ctcLossDiffOp":
					most = max(most, gpu.Funcs[i].Workspace)
				}
			}
			if most != c.want {
				t.Errorf("the largest workspace of the %s functions on the CUDA device is %d bytes, want %d", c.name, most, c.want)
			}
			for i := range cpu.Funcs {
				if cpu.Funcs[i].Workspace != 0 {
					t.Errorf("on the CPU device %T has %d bytes of workspace", cpu.Funcs[i].Op, cpu.Funcs[i].Workspace)
				}
			}
			blasWS := d.BLASWorkspaceBytes()
			for _, p := range []struct {
				name    string
				prog    *vm.Program
				segment bool
			}{{"traced for the CUDA device", gpu, false}, {"traced for the CPU device", cpu, true}} {
				before := d.Memory().Used()
				r, err := dispatch.For(d).Bind(p.prog)
				if err != nil {
					t.Fatal(err)
				}
				held := d.Memory().Used() - before
				if err := r.Close(); err != nil {
					t.Fatal(err)
				}
				if got := held > blasWS; got != p.segment || held < blasWS {
					t.Errorf("%s: binding holds %d bytes, cuBLAS's workspace is %d (a scratch segment beside it: %t, want %t)", p.name, held, blasWS, got, p.segment)
				}
			}
		})
	}
}

// tensorCaseNamed is tensorCases' case of that name.
func tensorCaseNamed(t *testing.T, name string) opCase {
	for _, c := range tensorCases() {
		if c.name == name {
			return c
		}
	}
	t.Fatalf("no case %q", name)
	return opCase{}
}

// caseGraph builds a case's graph in dt with its gradient (when it has
// one), as TestCoverage does, and returns it with the nodes to bind.
func caseGraph(t *testing.T, c opCase, dt tensor.Dtype) (*G.ExprGraph, []*G.Node) {
	rng := rand.New(rand.NewSource(1))
	g := G.NewGraph()
	xs := make([]*G.Node, len(c.ins))
	for i, s := range c.ins {
		xs[i] = leaf(g, rng, dt, s, c.kind, fmt.Sprintf("x%d", i))
	}
	y, err := c.build(xs)
	if err != nil {
		t.Fatal(err)
	}
	if !c.grad {
		return g, nil
	}
	w := leaf(g, rng, dt, y.Shape(), signed, "w")
	cost := y
	if !y.Shape().IsScalar() {
		cost = G.Must(G.Sum(G.Must(G.HadamardProd(y, w))))
	}
	if _, err := G.Grad(cost, xs...); err != nil {
		t.Fatal(err)
	}
	return g, xs
}
