package solvers

import (
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// resnet18Model is ResNet-18's parameter tensors (torchvision layout, 10 classes) filled with
// random values: 11.2 million float32.
func resnet18Model() []G.ValueGrad {
	var sizes []int
	conv := func(o, c, k int) { sizes = append(sizes, o*c*k*k) }
	bn := func(c int) { sizes = append(sizes, c, c) }
	conv(64, 3, 7)
	bn(64)
	in := 64
	for _, w := range []int{64, 128, 256, 512} {
		for b := 0; b < 2; b++ {
			conv(w, in, 3)
			bn(w)
			conv(w, w, 3)
			bn(w)
			if in != w {
				conv(w, in, 1)
				bn(w)
			}
			in = w
		}
	}
	sizes = append(sizes, 512*10, 10)
	r := rand.New(rand.NewPCG(5, 5))
	var m []G.ValueGrad
	for _, n := range sizes {
		w, g := make([]float32, n), make([]float32, n)
		for i := range w {
			w[i] = float32(r.NormFloat64())
		}
		m = append(m, vg{tensor.New(tensor.WithShape(n), tensor.WithBacking(w)), tensor.New(tensor.WithShape(n), tensor.WithBacking(g))})
	}
	return m
}

// BenchmarkAdam is one Adam step over ResNet-18's parameters, ours and gorgonia's, after a first
// step that allocates the optimizer state.
func BenchmarkAdam(b *testing.B) {
	m := resnet18Model()
	for _, c := range []struct {
		name string
		s    G.Solver
	}{{"solvers", NewAdam()}, {"gorgonia", G.NewAdamSolver()}} {
		b.Run(c.name, func(b *testing.B) {
			if err := c.s.Step(m); err != nil { // the first step allocates the state
				b.Fatal(err)
			}
			for b.Loop() {
				if err := c.s.Step(m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
