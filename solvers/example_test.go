package solvers_test

import (
	"fmt"

	"github.com/gorgonia-ooc/outofcore/solvers"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func ExampleNewAdam() {
	g := G.NewGraph()
	w := G.NewVector(g, tensor.Float64, G.WithShape(2), G.WithName("w"), G.WithValue(tensor.New(tensor.WithBacking([]float64{1, -1}))))
	loss := G.Must(G.Sum(G.Must(G.Square(w)))) // gradient 2w
	if _, err := G.Grad(loss, w); err != nil {
		fmt.Println(err)
		return
	}
	vm := G.NewTapeMachine(g, G.BindDualValues(w))
	defer vm.Close()
	s := solvers.NewAdam(G.WithLearnRate(0.1))
	for i := 0; i < 3; i++ {
		if err := vm.RunAll(); err != nil {
			fmt.Println(err)
			return
		}
		if err := s.Step(G.NodesToValueGrads(G.Nodes{w})); err != nil {
			fmt.Println(err)
			return
		}
		vm.Reset()
	}
	fmt.Printf("%.4f\n", w.Value().Data())
	// Output: [0.7016 -0.7016]
}

// A checkpoint saves a solver's State and a new solver continues from it.
func ExampleSolver_SetState() {
	w := tensor.New(tensor.WithBacking([]float32{1, -1}))
	g := tensor.New(tensor.WithBacking([]float32{0, 0}))
	step := func(s *solvers.Solver) {
		copy(g.Float32s(), []float32{0.5, 0.5})
		if err := s.Step([]G.ValueGrad{param{w, g}}); err != nil {
			fmt.Println(err)
		}
	}
	a := solvers.NewAdam(G.WithLearnRate(0.1))
	step(a)
	saved := a.State()
	fmt.Printf("steps %d, mean %.4g, variance %.4g\n", saved.Iter, saved.Slots[0][0], saved.Slots[0][1])

	b := solvers.NewAdam(G.WithLearnRate(0.1))
	if err := b.SetState(saved); err != nil {
		fmt.Println(err)
		return
	}
	step(b)
	fmt.Printf("%.4f\n", w.Data())
	// Output:
	// steps 1, mean [0.05 0.05], variance [0.00025 0.00025]
	// [0.8000 -1.2000]
}

// param is a parameter outside any graph.
type param struct{ w, g *tensor.Dense }

func (p param) Value() G.Value         { return p.w }
func (p param) Grad() (G.Value, error) { return p.g, nil }
