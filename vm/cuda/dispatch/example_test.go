package dispatch_test

import (
	"fmt"
	"log"
	"os"

	G "gorgonia.org/gorgonia"

	"github.com/gorgonia-ooc/outofcore/models"
	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/dispatch"
)

// A training loop on a GPU, with the optimizer on the device. (Not run by go
// test: it needs a GPU, or the fake device the package's tests set up.)
func Example() {
	dev, err := vm.NewDevice("cuda", 0)
	if err != nil {
		log.Fatal(err) // e.g. no NVIDIA driver
	}
	defer dev.Close()
	m, _ := models.Build("resnet18", models.Config{Batch: 64, Channels: 3, Height: 224, Width: 224, Classes: 1000})
	machine, err := ooc.Compile(m.Graph, ooc.WithDevice(dev), ooc.WithBudget(8<<30), ooc.BindDualValues(m.Learnables...))
	if err != nil {
		log.Fatal(err) // e.g. an op with no CUDA implementation, named with its node
	}
	defer machine.Close()
	solver, err := dispatch.NewSolver(machine, G.NewAdamSolver(G.WithLearnRate(1e-3)), m.Learnables...)
	if err != nil {
		log.Fatal(err)
	}
	defer solver.Close()
	for step := 0; step < 10; step++ {
		// G.Let(m.Input, images); G.Let(m.Labels, onehot)
		if err := machine.RunAll(); err != nil {
			log.Fatal(err)
		}
		if err := solver.Step(); err != nil {
			log.Fatal(err)
		}
		machine.Reset()
	}
	if err := solver.SyncToHost(); err != nil { // weights back for a checkpoint
		log.Fatal(err)
	}
	ls, _ := dispatch.LaunchesOf(machine)
	_ = dispatch.WriteLaunchTable(os.Stdout, ls)
	fmt.Println(m.Loss.Value())
}
