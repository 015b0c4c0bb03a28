package blas

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	gblas "gonum.org/v1/gonum/blas"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestGorgoniaUsesThisGEMM checks that importing the package made gorgonia's matmul run this GEMM:
// a TapeMachine's product equals Gemm's bit for bit.
func TestGorgoniaUsesThisGEMM(t *testing.T) {
	if _, ok := G.WhichBLAS().(Implementation); !ok {
		t.Fatalf("gorgonia's BLAS is %T", G.WhichBLAS())
	}
	if _, ok := tensor.WhichBLAS().(Implementation); !ok {
		t.Fatalf("tensor's BLAS is %T", tensor.WhichBLAS())
	}
	const m, n, k = 37, 45, 300
	r := rand.New(rand.NewPCG(3, 4))
	av, bv := randSlice[float32](r, m*k), randSlice[float32](r, k*n)
	g := G.NewGraph()
	a := G.NewMatrix(g, tensor.Float32, G.WithShape(m, k), G.WithValue(tensor.New(tensor.WithShape(m, k), tensor.WithBacking(av))))
	b := G.NewMatrix(g, tensor.Float32, G.WithShape(k, n), G.WithValue(tensor.New(tensor.WithShape(k, n), tensor.WithBacking(bv))))
	p := G.Must(G.Mul(a, b))
	vm := G.NewTapeMachine(g)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	got := p.Value().Data().([]float32)
	want := make([]float32, m*n)
	if err := Gemm(false, false, m, n, k, 1, av, k, bv, n, 0, want, n); err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("element %d: gorgonia %v, Gemm %v", i, got[i], want[i])
		}
	}
}

func TestImplementationPanicsOnBadInput(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic for a short C")
		}
	}()
	Implementation{}.Dgemm(gblas.NoTrans, gblas.NoTrans, 2, 2, 2, 1, make([]float64, 4), 2, make([]float64, 4), 2, 0, make([]float64, 3), 2)
}

func ExampleGemm() {
	// C = A·Bᵀ for A 2x3 and B 2x3 (so op(B) is 3x2).
	a := []float32{1, 2, 3, 4, 5, 6}
	b := []float32{1, 0, 1, 0, 1, 0}
	c := make([]float32, 4)
	if err := Gemm(false, true, 2, 2, 3, 1, a, 3, b, 3, 0, c, 2); err != nil {
		fmt.Println(err)
	}
	fmt.Println(c)
	// Output: [4 2 10 5]
}
