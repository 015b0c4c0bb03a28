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
