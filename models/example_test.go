package models_test

import (
	"fmt"
	"log"
	"math"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/models"
	"github.com/gorgonia-ooc/outofcore/ooc"
)

// Build a ResNet-18 for 32x32 images, bind a batch, and train it for a step under three quarters
// of its in-core memory; an impossible size is an error, not a panic.
func ExampleBuild() {
	cfg := models.Config{Batch: 16, Channels: 3, Height: 32, Width: 32, Classes: 10, Seed: 1}
	m, err := models.Build("resnet18", cfg)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("parameters:", m.NumParams())
	fmt.Println("input", m.Input.Shape(), "labels", m.Labels.Shape(), "logits", m.Logits.Shape())

	pixels := make([]float32, 16*3*32*32)
	for i := range pixels {
		pixels[i] = float32(i%251)/251 - 0.5
	}
	onehot := make([]float32, 16*10)
	for i := 0; i < 16; i++ {
		onehot[i*10+i%10] = 1
	}
	if err := G.Let(m.Input, tensor.New(tensor.WithShape(16, 3, 32, 32), tensor.WithBacking(pixels))); err != nil {
		log.Fatal(err)
	}
	if err := G.Let(m.Labels, tensor.New(tensor.WithShape(16, 10), tensor.WithBacking(onehot))); err != nil {
		log.Fatal(err)
	}
	inCore, err := ooc.Plan(m.Graph, ooc.Baseline())
	if err != nil {
		log.Fatal(err)
	}
	machine, err := ooc.Compile(m.Graph, ooc.BindDualValues(m.Learnables...), ooc.WithBudget(inCore.Peak*3/4))
	if err != nil {
		log.Fatal(err)
	}
	defer machine.Close()
	if err := machine.RunAll(); err != nil {
		log.Fatal(err)
	}
	loss := float64(m.Loss.Value().Data().(float32))
	fmt.Println("finite loss:", !math.IsNaN(loss) && !math.IsInf(loss, 0))
	fmt.Println("swapped:", machine.Stats().SwapInBytes > 0)
	solver := G.NewAdamSolver(G.WithLearnRate(1e-3))
	if err := solver.Step(G.NodesToValueGrads(m.Learnables)); err != nil {
		log.Fatal(err)
	}
	machine.Reset()

	_, err = models.Build("unet", models.Config{Batch: 1, Channels: 1, Height: 24, Width: 24, Classes: 2})
	fmt.Println(err)
	// Output:
	// parameters: 11181642
	// input (16, 3, 32, 32) labels (16, 10) logits (16, 10)
	// finite loss: true
	// swapped: true
	// models: unet cannot take a 24x24 input: four 2x2 max-pools and up-convolutions need height and width divisible by 16
}

// The real VGG-16 topology at an eighth of its widths, for a quick test.
func ExampleBuildNarrow() {
	full, err := models.Build("vgg16", models.Config{Batch: 1, Channels: 3, Height: 32, Width: 32, Classes: 10})
	if err != nil {
		log.Fatal(err)
	}
	narrow, err := models.BuildNarrow("vgg16", models.Config{Batch: 1, Channels: 3, Height: 32, Width: 32, Classes: 10}, 8)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(full.Learnables) == len(narrow.Learnables), full.NumParams() > 30*narrow.NumParams())
	// Output: true true
}
