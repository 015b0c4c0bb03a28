package ooc_test

import (
	"testing"

	G "gorgonia.org/gorgonia"

	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/solvers"
)

// maxStepAllocs bounds the Go heap allocations of one steady-state training
// step of smallcnn at batch 2 (run, Adam, reset): what is left is gorgonia's
// own (shape clones in its ops, its softmax: a few per row), the device
// allocator's blocks and pieces (one or two per allocation) and the layers'
// shape lists, about 560 in core and 620 at the least budget. Before the VM
// kept its tensor headers across steps (and layers read tensors without
// reflect) a step made about 2,330 and 2,400.
const maxStepAllocs = 800

// TestTrainStepAllocs holds the training step's hot path to few
// allocations, in core and at LeastBudget (the tape then frees, swaps or
// recomputes), as BenchmarkTrainStep's -benchmem reports for the full-size
// model.
func TestTrainStepAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("plans and compiles smallcnn twice and searches its least budget")
	}
	const batch = 2
	least, err := ooc.LeastBudget(fashionModel(t, batch).Graph)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		budget int64
	}{{"in-core", 0}, {"least", least}} {
		t.Run(c.name, func(t *testing.T) {
			m := fashionModel(t, batch)
			vm := compileAt(t, m, c.budget)
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
