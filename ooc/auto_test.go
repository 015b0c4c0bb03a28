package ooc_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gorgonia-ooc/outofcore/models"
	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm"
)

// simulatedStep compiles m's step on a new simulated device of profile
// prof under the budget with the options, and times one step there.
func simulatedStep(t *testing.T, m *models.Model, prof string, budget int64, opts ...ooc.Option) (time.Duration, *vm.Program) {
	t.Helper()
	p, err := vm.LookupProfile(prof)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := vm.NewSim(p)
	if err != nil {
		t.Fatal(err)
	}
	mc, err := ooc.Compile(m.Graph, append(opts, ooc.WithDevice(dev), ooc.WithBudget(budget), ooc.BindDualValues(m.Learnables...))...)
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	if err := mc.RunAll(); err != nil {
		t.Fatal(err)
	}
	return mc.Stats().StepTime, mc.Program()
}

// The default planner is Auto, and its step is the faster of Window's and
// Hybrid's (simulated), on two profiles at 50% and 65% of the in-core peak
// (two of the four; OOC_AUTO_GRID=1 runs all four, about twice as long);
// its program says which it picked and the two times.
// WithScheduler(Window{}) is Window.
func TestAutoIsTheFasterOfWindowAndHybrid(t *testing.T) {
	m, err := models.Build("smallcnn", models.Config{Batch: 64, Channels: 3, Height: 32, Width: 32, Classes: 10, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	peak, err := ooc.InCorePeak(m.Graph)
	if err != nil {
		t.Fatal(err)
	}
	grid := []struct {
		prof string
		pct  int64
	}{{"v100-pcie", 50}, {"gtx1080ti", 65}}
	if os.Getenv("OOC_AUTO_GRID") != "" {
		grid = append(grid, struct {
			prof string
			pct  int64
		}{"v100-pcie", 65}, struct {
			prof string
			pct  int64
		}{"gtx1080ti", 50})
	}
	for _, g := range grid {
		prof, pct := g.prof, g.pct
		{
			t.Run(fmt.Sprintf("%s/%d%%", prof, pct), func(t *testing.T) {
				budget := peak * pct / 100
				auto, prog := simulatedStep(t, m, prof, budget)
				window, wprog := simulatedStep(t, m, prof, budget, ooc.WithScheduler(ooc.Window{}))
				hybrid, _ := simulatedStep(t, m, prof, budget, ooc.WithScheduler(ooc.Hybrid{}))
				t.Logf("%s: auto %v, window %v, hybrid %v; %s", prog.Scheduler, auto, window, hybrid, prog.Timing)
				if auto != min(window, hybrid) {
					t.Errorf("auto's step %v, window's %v, hybrid's %v: want the faster", auto, window, hybrid)
				}
				picked := strings.TrimPrefix(prog.Scheduler, "auto: ")
				if picked != "window" && picked != "hybrid" {
					t.Errorf("the program's scheduler is %q, want auto: window or auto: hybrid", prog.Scheduler)
				}
				if want := "auto: " + picked + ", simulated "; !strings.HasPrefix(prog.Timing, want) || !strings.Contains(prog.Timing, "sim:"+prof) {
					t.Errorf("timing %q: want it to start %q and name sim:%s", prog.Timing, want, prof)
				}
				if wprog.Scheduler != "window" {
					t.Errorf("WithScheduler(Window{}) planned with %q", wprog.Scheduler)
				}
			})
		}
	}
}

// Where the in-core peak fits, Auto is Window without planning Hybrid.
func TestAutoInCoreIsWindow(t *testing.T) {
	m, err := models.Build("smallcnn", models.Config{Batch: 4, Channels: 3, Height: 16, Width: 16, Classes: 4, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	p, err := ooc.Plan(m.Graph)
	if err != nil {
		t.Fatal(err)
	}
	if p.Scheduler != "auto: window" || !strings.Contains(p.Timing, "in-core peak fits") {
		t.Errorf("scheduler %q, timing %q", p.Scheduler, p.Timing)
	}
}
