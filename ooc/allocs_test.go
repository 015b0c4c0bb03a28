package ooc_test

import (
	"testing"

	G "gorgonia.org/gorgonia"

	"github.com/gorgonia-ooc/outofcore/models"
	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/solvers"
)

// maxStepAllocs bounds the Go heap allocations of one steady-state training
// step (run, Adam, reset) at batch 2, in core and at the least budget. A
// steady step allocates nothing: smallcnn made 50 over 640 steps (0.08 a
// step), 10 of them the slab the scalar values are carved from, one per 64
// runs (vm's scalarSlab). A new value per scalar node per run is
// TapeMachine's behaviour, which a script keeping each step's cost.Value()
// relies on (vm's publish); the machine binds each without gorgonia's
// UnsafeLet, whose shape check cloned the node's shape every call (vm's
// letScalar).
//
// The bound is headroom for sync.Pool refills after a garbage collection
// (the work pool's and tensor's pools are emptied by each). Before (issue
// 28) a smallcnn step made about 533 in core and 594 at the least budget,
// before the VM kept its tensor headers 2,330 and 2,400, before the loss
// head's ops went through prealloc's own kernels 48, and before letScalar
// and the 64-run slab 11.
const maxStepAllocs = 3

// TestTrainStepAllocs holds the training step's hot path to few
// allocations, in core and at LeastBudget (the tape then frees, swaps or
// recomputes), as BenchmarkTrainStep's -benchmem reports for the full-size
// model, and checks the count does not grow with the model: resnet18 has
// three times smallcnn's nodes and the same bound.
func TestTrainStepAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("plans and compiles smallcnn twice, searches its least budget, and compiles resnet18")
	}
	const batch = 2
	least, err := ooc.LeastBudget(fashionModel(t, batch).Graph)
	if err != nil {
		t.Fatal(err)
	}
	resnet := func(t testing.TB, batch int) *models.Model {
		return boundModel(t, "resnet18", batch, 3, 32, func(x []float32) {
			for i := range x {
				x[i] = float32(i%7) / 7
			}
		})
	}
	for _, c := range []struct {
		name   string
		model  func(testing.TB, int) *models.Model
		budget int64
	}{{"in-core", fashionModel, 0}, {"least", fashionModel, least}, {"resnet18-in-core", resnet, 0}} {
		t.Run(c.name, func(t *testing.T) {
			m := c.model(t, batch)
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
