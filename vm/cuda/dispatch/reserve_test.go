package dispatch_test

import (
	"math/rand"
	"strings"
	"testing"

	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/models"
	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/dispatch"
)

// TestBLASWorkspaceInsideTheBudget: on a CUDA device the plan counts
// cuBLAS's workspace inside the budget given: the tape is planned and
// verified for the budget less the workspace (Program.Budget), the program
// says so (Program.Reserve, its String), a budget no larger than the
// workspace is refused, and a step trains at the tightest such budget.
func TestBLASWorkspaceInsideTheBudget(t *testing.T) {
	d := openFake(t)
	ws := d.BLASWorkspaceBytes()
	if r := dispatch.For(d).Reserve(); r != ws {
		t.Fatalf("the backend reserves %d bytes, cuBLAS's workspace is %d", r, ws)
	}
	c := zooCase{Name: "smallcnn", Cfg: models.Config{Batch: 2, Channels: 3, Height: 8, Width: 8, Classes: 10, Dtype: tensor.Float32, Seed: 3}}
	m := c.Build(t)
	full, err := ooc.Plan(m.Graph, ooc.WithDevice(d), ooc.BindDualValues(m.Learnables...))
	if err != nil {
		t.Fatal(err)
	}
	if full.Reserve != ws || full.Budget != d.Capacity()-ws {
		t.Fatalf("at the device's capacity %d: Reserve %d, Budget %d; want %d and the capacity less it", d.Capacity(), full.Reserve, full.Budget, ws)
	}
	given := full.Peak + ws // the least budget the in-core tape fits beside the workspace
	p, err := ooc.Plan(m.Graph, ooc.WithDevice(d), ooc.WithBudget(given), ooc.BindDualValues(m.Learnables...))
	if err != nil {
		t.Fatal(err)
	}
	if p.Reserve != ws || p.Budget != given-ws || p.Peak > p.Budget {
		t.Fatalf("budget %d: Reserve %d, Budget %d, Peak %d; want Reserve %d, Budget %d and Peak within it", given, p.Reserve, p.Budget, p.Peak, ws, given-ws)
	}
	if !strings.Contains(p.String(), "backend reserve") {
		t.Errorf("the program does not show the reserve: %.200s", p.String())
	}
	if _, err := ooc.Plan(m.Graph, ooc.WithDevice(d), ooc.WithBudget(ws), ooc.BindDualValues(m.Learnables...)); err == nil || !strings.Contains(err.Error(), "cuBLAS workspace") {
		t.Errorf("a budget of the workspace alone: %v", err)
	}
	pr := newPairAt(t, d, c, full.Peak)
	pr.Step(t, rand.New(rand.NewSource(1)))
	pr.Check(t, "smallcnn float32 at the budget of its peak plus the cuBLAS workspace", 1e-5)
}
