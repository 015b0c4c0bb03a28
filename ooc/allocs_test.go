package ooc_test

import (
	"testing"

	G "gorgonia.org/gorgonia"

	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/solvers"
)

// maxStepAllocs bounds the Go heap allocations of one steady-state training
// step of smallcnn (run, Adam, reset), whatever the batch: what is left is
// gorgonia's own (its softmax, shape clones in its ops), the device
// allocator's bookkeeping and the layers' shape lists, about 250 on the CPU
// device. Before the VM kept its tensor headers across steps (and layers
// read tensors without reflect) a step made about 2,500.
const maxStepAllocs = 800

// TestTrainStepAllocs holds the training step's hot path to few
// allocations, in core and at the least budget the planner serves (where
// blocks move and ops recompute), as BenchmarkTrainStep's -benchmem reports
// for the full-size model.
func TestTrainStepAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles and plans smallcnn twice (a few seconds under load)")
	}
	const batch = 2
	probe := fashionModel(t, batch)
	inCore, err := ooc.Plan(probe.Graph, ooc.Baseline())
	if err != nil {
		t.Fatal(err)
	}
	least := leastPlanned(probe.Graph, inCore.Peak)
	for _, c := range []struct {
		name   string
		budget int64
	}{{"in-core", 0}, {"least", least}} {
		t.Run(c.name, func(t *testing.T) {
			m := fashionModel(t, batch)
			opts := []ooc.Option{ooc.BindDualValues(m.Learnables...)}
			if c.budget == 0 {
				opts = append(opts, ooc.Baseline())
			} else {
				opts = append(opts, ooc.WithBudget(c.budget))
			}
			vm, err := ooc.Compile(m.Graph, opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer vm.Close()
			solver := solvers.NewAdam(G.WithLearnRate(1e-3))
			vgs := G.NodesToValueGrads(m.Learnables)
			var stepErr error
			step := func() {
				if stepErr != nil {
					return
				}
				if stepErr = vm.RunAll(); stepErr != nil {
					return
				}
				if stepErr = solver.Step(vgs); stepErr != nil {
					return
				}
				vm.Reset()
			}
			// Two steps first, as benchSteps: memory mapped, solver state
			// made, any replan from the measured times done.
			step()
			step()
			allocs := testing.AllocsPerRun(5, step)
			if stepErr != nil {
				t.Fatal(stepErr)
			}
			t.Logf("%s (budget %d bytes): %.0f allocations per step", c.name, c.budget, allocs)
			if allocs > maxStepAllocs {
				t.Errorf("%s: a steady-state step makes %.0f heap allocations, want at most %d", c.name, allocs, maxStepAllocs)
			}
		})
	}
}
