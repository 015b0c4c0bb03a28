package sweep

import (
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// The default planner, auto, keeps the faster of the window scheduler's
// plan and Hybrid's by the same simulator, so on the compare grid it is
// never slower than window, and plans wherever window does. The default run
// checks a small LSTM at two budgets on sim:v100-pcie (a few seconds); OOC_AUTO_COMPARE=1 runs the issue's
// grid (ResNet-50 224 batch 32, DenseNet-121 224 batch 32, U-Net 256 batch
// 8 and the LSTM language model, on sim:v100-pcie and sim:gtx1080ti, at 0,
// 10, ..., 100% of the compare range: tens of minutes on 2 cores; `-run
// TestAutoNeverSlowerThanWindow/lstm` for the LSTM's cells alone), the grid
// docs/regen.sh's compare-auto-* jobs tabulate.
func TestAutoNeverSlowerThanWindow(t *testing.T) {
	all := []int{0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100}
	grid := []struct {
		name string
		cfg  CompareConfig
	}{
		{"small-lstm", CompareConfig{Model: "lstm", Image: 3, Classes: 50, Batch: 2, Percents: []int{0, 60}}},
	}
	devices := []string{"sim:v100-pcie"}
	if os.Getenv("OOC_AUTO_COMPARE") != "" {
		grid = []struct {
			name string
			cfg  CompareConfig
		}{
			{"resnet50", CompareConfig{Model: "resnet50", Image: 224, Classes: 1000, Batch: 32, Percents: all}},
			{"densenet121", CompareConfig{Model: "densenet121", Image: 224, Classes: 1000, Batch: 32, Percents: all}},
			{"unet", CompareConfig{Model: "unet", Image: 256, Classes: 2, Batch: 8, Percents: all}},
			{"lstm", CompareConfig{Model: "lstm", Image: 35, Classes: 10000, Batch: 20, Percents: all}},
		}
		devices = append(devices, "sim:gtx1080ti")
	}
	for _, g := range grid {
		for _, dev := range devices {
			t.Run(g.name+"/"+dev, func(t *testing.T) {
				cfg := g.cfg
				cfg.Device, cfg.Schedulers = dev, []string{"window", "auto"}
				rs, err := Compare(cfg)
				require.NoError(t, err)
				cells := map[string]CompareResult{}
				for _, r := range rs {
					cells[fmt.Sprintf("%s/%d", r.Scheduler, r.Percent)] = r
				}
				for _, pct := range cfg.Percents {
					w, a := cells[fmt.Sprintf("window/%d", pct)], cells[fmt.Sprintf("auto/%d", pct)]
					t.Logf("%d%%: window %.4g s (%.3f x LB), auto %.4g s (%.3f x LB)", pct, w.Makespan, w.Ratio, a.Makespan, a.Ratio)
					if !w.OK {
						continue
					}
					require.True(t, a.OK, "%d%%: window plans, auto does not: %s", pct, a.Error)
					require.LessOrEqual(t, a.Makespan, w.Makespan, "%d%%: auto is slower than window", pct)
				}
			})
		}
	}
}
