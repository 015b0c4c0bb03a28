package ooc_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm"
)

// A DQN is trained on a small chain, saved, reloaded, and plans the chain
// within a budget on a simulated 1080 Ti.
func ExampleDQN() {
	g := G.NewGraph()
	h := G.NewTensor(g, tensor.Float32, 2, G.WithShape(256, 256), G.WithName("x"))
	var params G.Nodes
	for i := range 4 {
		w := G.NewTensor(g, tensor.Float32, 2, G.WithShape(256, 256), G.WithName(fmt.Sprint("w", i)))
		params = append(params, w)
		h = G.Must(G.Tanh(G.Must(G.HadamardProd(h, w))))
	}
	if _, err := G.Grad(G.Must(G.Mean(G.Must(G.Square(h)))), params...); err != nil {
		log.Fatal(err)
	}
	dev, err := vm.NewDevice("sim:gtx1080ti", 0)
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	peak, err := ooc.InCorePeak(g)
	if err != nil {
		log.Fatal(err)
	}
	tr, err := ooc.NewTrace(g)
	if err != nil {
		log.Fatal(err)
	}
	budget := peak * 3 / 4
	w, err := ooc.TrainDQN(&ooc.Problem{Trace: tr, Budget: budget, Device: dev}, nil, 10, 1)
	if err != nil {
		log.Fatal(err)
	}
	path := filepath.Join(os.TempDir(), "example.dqn")
	defer os.Remove(path)
	if err := ooc.SaveDQNWeights(path, w); err != nil {
		log.Fatal(err)
	}
	back, err := ooc.LoadDQNWeights(path)
	if err != nil {
		log.Fatal(err)
	}
	prog, err := ooc.Plan(g, ooc.WithDevice(dev), ooc.WithBudget(budget), ooc.WithScheduler(ooc.DQN{Weights: back, Episodes: 5}))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("within the budget:", prog.Peak <= budget)
	// Output:
	// within the budget: true
}
