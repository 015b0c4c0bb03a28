package train

import (
	"testing"

	"github.com/gorgonia-ooc/outofcore/models"
	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm/alloc"
)

// ooc.LeastBudget is the least -budget ooc train accepts, to within the CPU
// device's granularity: a device of that many bytes serves a step
// (fitMemory), and the least device fitMemory serves, found by bisection
// over fitMemory itself (which may also lower the scheduling budget below
// the device), is no more than one page smaller.
func TestLeastBudgetIsTrainsLeast(t *testing.T) {
	img := models.Config{Batch: 4, Channels: 3, Height: 32, Width: 32, Classes: 10}
	for _, tc := range []struct {
		name string
		cfg  models.Config
		div  int
	}{
		{"smallcnn", img, 1},
		{"resnet18", img, 8},
		{"vgg16", img, 16},
		{"unet", img, 8},
		{"lstm", models.Config{Batch: 3, SeqLen: 5, Vocab: 11, Hidden: 6}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := models.BuildNarrow(tc.name, tc.cfg, tc.div)
			if err != nil {
				t.Fatal(err)
			}
			cfg := &Config{Scheduler: "window", Allocator: "va"}
			least, err := ooc.LeastBudget(m.Graph, cfg.leastOptions(m)...)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fitMemory(cfg, m, least); err != nil {
				t.Fatalf("least budget %d: ooc train refuses it: %v", least, err)
			}
			gran := alloc.HostGranularity()
			lo, hi := least/2, least
			if _, err := fitMemory(cfg, m, lo); err == nil {
				t.Fatalf("ooc train serves half the least budget, %d bytes", lo)
			}
			for hi-lo > gran {
				mid := lo + (hi-lo)/2
				if _, err := fitMemory(cfg, m, mid); err == nil {
					hi = mid
				} else {
					lo = mid
				}
			}
			t.Logf("%s: ooc.LeastBudget %d bytes, ooc train's least %d", tc.name, least, hi)
			if least-hi > gran {
				t.Errorf("ooc.LeastBudget %d bytes, but ooc train serves a step in %d", least, hi)
			}
		})
	}
}
