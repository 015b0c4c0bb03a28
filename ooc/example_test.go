package ooc_test

import (
	"fmt"
	"log"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/models"
	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm"
)

// A training script swaps gorgonia.NewTapeMachine for ooc.Compile and gets
// the same numbers within a smaller device-memory budget.
func ExampleCompile() {
	lossUnder := func(budgetPercent int64) (float32, vm.Stats) {
		m, err := models.Build("smallcnn", models.Config{Batch: 8, Channels: 3, Height: 16, Width: 16, Classes: 4, Seed: 7})
		if err != nil {
			log.Fatal(err)
		}
		pixels := make([]float32, 8*3*16*16)
		for i := range pixels {
			pixels[i] = float32(i%97) / 97
		}
		x := tensor.New(tensor.WithShape(8, 3, 16, 16), tensor.WithBacking(pixels))
		y := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(8, 4))
		for i := 0; i < 8; i++ {
			y.Data().([]float32)[i*4+i%4] = 1
		}
		G.Let(m.Input, x)
		G.Let(m.Labels, y)

		inCore, err := ooc.Plan(m.Graph, ooc.Baseline())
		if err != nil {
			log.Fatal(err)
		}
		machine, err := ooc.Compile(m.Graph,
			ooc.BindDualValues(m.Learnables...),
			ooc.WithBudget(inCore.Peak*budgetPercent/100))
		if err != nil {
			log.Fatal(err)
		}
		defer machine.Close()
		solver := G.NewAdamSolver(G.WithLearnRate(1e-3))
		for step := 0; step < 2; step++ {
			if err := machine.RunAll(); err != nil {
				log.Fatal(err)
			}
			solver.Step(G.NodesToValueGrads(m.Learnables))
			machine.Reset()
		}
		return m.Loss.Value().Data().(float32), machine.Stats()
	}
	full, fullStats := lossUnder(100)
	tight, tightStats := lossUnder(60)
	fmt.Println("same loss:", full == tight)
	fmt.Println("swapped at 100%:", fullStats.SwapInBytes > 0)
	fmt.Println("swapped at 60%:", tightStats.SwapInBytes > 0)
	fmt.Println("peak within 60%:", tightStats.PeakDeviceBytes <= fullStats.PeakDeviceBytes*60/100)
	// Output:
	// same loss: true
	// swapped at 100%: false
	// swapped at 60%: true
	// peak within 60%: true
}

// The offloading paper's planners score against its lower bound on a
// simulated device: makespan / LowerBound is at least 1, and DynProg comes
// close to it.
func ExampleDynProg() {
	m, err := models.Build("resnet18", models.Config{Batch: 32, Channels: 3, Height: 64, Width: 64, Classes: 10, Seed: 1})
	if err != nil {
		log.Fatal(err)
	}
	prof, err := vm.LookupProfile("v100-pcie")
	if err != nil {
		log.Fatal(err)
	}
	dev, err := vm.NewSim(prof)
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	tr, err := ooc.NewTrace(m.Graph)
	if err != nil {
		log.Fatal(err)
	}
	peak, err := ooc.InCorePeak(m.Graph)
	if err != nil {
		log.Fatal(err)
	}
	budget := peak * 6 / 10
	lb, err := ooc.LowerBound(tr, dev, budget)
	if err != nil {
		log.Fatal(err)
	}
	machine, err := ooc.Compile(m.Graph, ooc.WithDevice(dev), ooc.WithBudget(budget), ooc.WithScheduler(ooc.DynProg{}))
	if err != nil {
		log.Fatal(err)
	}
	defer machine.Close()
	if err := machine.RunAll(); err != nil {
		log.Fatal(err)
	}
	ratio := float64(machine.Stats().StepTime) / float64(lb)
	fmt.Println("at least the bound:", ratio >= 1)
	fmt.Println("within 20% of it:", ratio <= 1.2)
	// Output:
	// at least the bound: true
	// within 20% of it: true
}

// Checkpoint trades compute for memory alone: below the in-core peak it
// drops activations in the forward and recomputes them in the backward,
// and moves nothing over the host link.
func ExampleCheckpoint() {
	m, err := models.Build("resnet18", models.Config{Batch: 16, Channels: 3, Height: 64, Width: 64, Classes: 10, Seed: 1})
	if err != nil {
		log.Fatal(err)
	}
	dev, err := vm.NewDevice("sim:gtx1080ti", 0)
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	peak, err := ooc.InCorePeak(m.Graph)
	if err != nil {
		log.Fatal(err)
	}
	budget := peak * 6 / 10
	machine, err := ooc.Compile(m.Graph, ooc.WithDevice(dev), ooc.WithBudget(budget), ooc.WithScheduler(ooc.Checkpoint{}))
	if err != nil {
		log.Fatal(err)
	}
	defer machine.Close()
	if err := machine.RunAll(); err != nil {
		log.Fatal(err)
	}
	st := machine.Stats()
	fmt.Println("recomputed:", st.Recomputes > 0)
	fmt.Println("swapped:", st.SwapInBytes > 0)
	fmt.Println("within the budget:", st.PeakDeviceBytes <= budget)
	// Output:
	// recomputed: true
	// swapped: false
	// within the budget: true
}

// Hybrid keeps, offloads or recomputes each activation, whichever the
// simulator finds fastest; its plans include the swap planners' own, so it
// is never slower than the window scheduler.
func ExampleHybrid() {
	m, err := models.Build("resnet18", models.Config{Batch: 16, Channels: 3, Height: 64, Width: 64, Classes: 10, Seed: 1})
	if err != nil {
		log.Fatal(err)
	}
	dev, err := vm.NewDevice("sim:gtx1080ti", 0)
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	peak, err := ooc.InCorePeak(m.Graph)
	if err != nil {
		log.Fatal(err)
	}
	step := func(sc ooc.Scheduler) vm.Stats {
		machine, err := ooc.Compile(m.Graph, ooc.WithDevice(dev), ooc.WithBudget(peak/2), ooc.WithScheduler(sc))
		if err != nil {
			log.Fatal(err)
		}
		defer machine.Close()
		if err := machine.RunAll(); err != nil {
			log.Fatal(err)
		}
		return machine.Stats()
	}
	window, hybrid := step(ooc.Window{}), step(ooc.Hybrid{})
	fmt.Println("no slower than window:", hybrid.StepTime <= window.StepTime)
	fmt.Println("within the budget:", hybrid.PeakDeviceBytes <= peak/2)
	// Output:
	// no slower than window: true
	// within the budget: true
}

// WithWorkspaceLimit lets the convolutions run im2col in 256-pixel tiles: the largest scratch any
// function of a smallcnn step needs drops from a whole image's im2col to one tile's.
func ExampleWithWorkspaceLimit() {
	m, err := models.Build("smallcnn", models.Config{Batch: 2, Channels: 3, Height: 32, Width: 32, Classes: 4, Seed: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, opts := range [][]ooc.Option{nil, {ooc.WithWorkspaceLimit(1)}} {
		p, err := ooc.Plan(m.Graph, opts...)
		if err != nil {
			fmt.Println(err)
			return
		}
		var most int64
		for _, f := range p.Funcs {
			most = max(most, f.Workspace)
		}
		fmt.Println(most)
	}
	// Output:
	// 589824
	// 147456
}

// After RunAll a prediction the cost reads holds its value, as under gorgonia's TapeMachine, while
// the forward's values take at most the WithNodeValues limit (DefaultNodeValueLimit unless set);
// WithNodeValues(0) leaves it unbound, and a script names what it reads with WithOutputs.
func ExampleWithNodeValues() {
	accuracy := func(opts ...ooc.Option) {
		g := G.NewGraph()
		x := G.NewMatrix(g, tensor.Float64, G.WithShape(4, 3), G.WithName("x"),
			G.WithValue(tensor.New(tensor.WithShape(4, 3), tensor.WithBacking([]float64{1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0}))))
		y := G.NewMatrix(g, tensor.Float64, G.WithShape(4, 3), G.WithName("y"),
			G.WithValue(tensor.New(tensor.WithShape(4, 3), tensor.WithBacking([]float64{1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 1, 0}))))
		w := G.NewMatrix(g, tensor.Float64, G.WithShape(3, 3), G.WithName("w"),
			G.WithValue(tensor.New(tensor.WithShape(3, 3), tensor.WithBacking([]float64{2, 0, 0, 0, 2, 0, 0, 0, 2}))))
		pred := G.Must(G.SoftMax(G.Must(G.Mul(x, w))))
		cost := G.Must(G.Neg(G.Must(G.Mean(G.Must(G.Sum(G.Must(G.HadamardProd(G.Must(G.Log(pred)), y)), 1))))))
		if _, err := G.Grad(cost, w); err != nil {
			log.Fatal(err)
		}
		m, err := ooc.Compile(g, opts...)
		if err != nil {
			log.Fatal(err)
		}
		defer m.Close()
		if err := m.RunAll(); err != nil {
			log.Fatal(err)
		}
		if pred.Value() == nil {
			fmt.Println("prediction not bound")
			return
		}
		p, want, right := pred.Value().Data().([]float64), y.Value().Data().([]float64), 0
		for r := 0; r < 4; r++ {
			best := 0
			for c := 1; c < 3; c++ {
				if p[r*3+c] > p[r*3+best] {
					best = c
				}
			}
			if want[r*3+best] == 1 {
				right++
			}
		}
		fmt.Printf("accuracy %d/4\n", right)
	}
	accuracy()
	accuracy(ooc.WithNodeValues(0))
	// Output:
	// accuracy 3/4
	// prediction not bound
}
