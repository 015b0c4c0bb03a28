package ooc_test

import (
	"errors"
	"fmt"
	"log"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/models"
	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm"
	"github.com/gorgonia-ooc/outofcore/vm/alloc"
)

// LeastBudget is a budget that works: Compile plans under it and a CPU
// device of that many bytes runs a step (at FitDevice's scheduling budget);
// a device one page smaller serves none; and a budget so small that
// nothing plans (64 bytes) is refused by Compile with an error carrying
// the same least budget.
func TestLeastBudget(t *testing.T) {
	img := models.Config{Batch: 4, Channels: 3, Height: 16, Width: 16, Classes: 4, Seed: 1}
	for _, tc := range []struct {
		name string
		cfg  models.Config
		div  int
	}{
		{"smallcnn", img, 1},
		{"resnet18", img, 8},
		{"unet", img, 8},
		{"lstm", models.Config{Batch: 3, SeqLen: 5, Vocab: 11, Hidden: 6, Seed: 1}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := models.BuildNarrow(tc.name, tc.cfg, tc.div)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range []*G.Node{m.Input, m.Labels} { // zeros: the step's values do not matter here
				if err := G.Let(n, tensor.New(tensor.Of(n.Dtype()), tensor.WithShape(n.Shape()...))); err != nil {
					t.Fatal(err)
				}
			}
			bind := ooc.BindDualValues(m.Learnables...)
			least, err := ooc.LeastBudget(m.Graph, bind)
			if err != nil {
				t.Fatal(err)
			}
			peak, err := ooc.InCorePeak(m.Graph)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("least %d bytes, in-core peak %d", least, peak)

			f, err := ooc.FitDevice(m.Graph, least, bind)
			if err != nil {
				t.Fatalf("FitDevice(LeastBudget): %v", err)
			}
			dev, err := vm.NewCPU(f.Device)
			if err != nil {
				t.Fatal(err)
			}
			mc, err := ooc.Compile(m.Graph, bind, ooc.WithDevice(dev), ooc.WithBudget(f.Planned), ooc.WithChunkSize(f.Chunk), ooc.WithScheduler(ooc.Window{}))
			if err != nil {
				t.Fatalf("Compile at the least budget's plan: %v", err)
			}
			if err := mc.RunAll(); err != nil {
				t.Errorf("a CPU device of the least budget, %d bytes: %v", f.Device, err)
			}
			mc.Close()
			dev.Close()
			if _, err := ooc.Compile(m.Graph, bind, ooc.WithBudget(least)); err != nil {
				t.Errorf("Compile at the least budget: %v", err)
			}

			below := least - alloc.HostGranularity()
			if _, err := ooc.FitDevice(m.Graph, below, bind); err == nil {
				t.Errorf("a device of %d bytes, a page under the least budget, serves a step", below)
			}

			_, err = ooc.Compile(m.Graph, bind, ooc.WithBudget(64))
			var be *ooc.BudgetError
			if !errors.As(err, &be) {
				t.Fatalf("Compile at 64 bytes: %v", err)
			}
			if be.Least != least || be.Peak != peak {
				t.Errorf("the refusal carries least %d and peak %d, want %d and %d", be.Least, be.Peak, least, peak)
			}
			if want := fmt.Sprintf("least that works: %d bytes", least); !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		})
	}
}

// Bad input is refused with an error naming it.
func TestLeastBudgetBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  func() error
		want string
	}{
		{"nil graph", func() error { _, err := ooc.LeastBudget(nil); return err }, "nil graph"},
		{"nil option", func() error { _, err := ooc.LeastBudget(G.NewGraph(), nil); return err }, "nil Option"},
		{"no bytes", func() error { _, err := ooc.FitDevice(G.NewGraph(), 0); return err }, "must have some bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.err(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

// A script that asks for a budget the graph cannot take learns the least
// one that works from the error, and compiles with it.
func ExampleLeastBudget() {
	m, err := models.Build("smallcnn", models.Config{Batch: 8, Channels: 3, Height: 16, Width: 16, Classes: 4, Seed: 7})
	if err != nil {
		log.Fatal(err)
	}
	peak, err := ooc.InCorePeak(m.Graph)
	if err != nil {
		log.Fatal(err)
	}
	_, err = ooc.Compile(m.Graph, ooc.BindDualValues(m.Learnables...), ooc.WithBudget(peak/10))
	var be *ooc.BudgetError
	if !errors.As(err, &be) {
		log.Fatal(err)
	}
	least, err := ooc.LeastBudget(m.Graph, ooc.BindDualValues(m.Learnables...))
	if err != nil {
		log.Fatal(err)
	}
	machine, err := ooc.Compile(m.Graph, ooc.BindDualValues(m.Learnables...), ooc.WithBudget(be.Least))
	if err != nil {
		log.Fatal(err)
	}
	defer machine.Close()
	fmt.Println("10% of the peak refused:", be.Budget == peak/10)
	fmt.Println("the error's least is LeastBudget's:", be.Least == least)
	fmt.Println("least below the peak:", least < peak)
	// Output:
	// 10% of the peak refused: true
	// the error's least is LeastBudget's: true
	// least below the peak: true
}
