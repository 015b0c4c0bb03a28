package main

import (
	"context"
	"fmt"
	"image/color"
	"io"
	"strings"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/internal/figure"
	"github.com/gorgonia-ooc/outofcore/models"
	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/sweep"
	"github.com/gorgonia-ooc/outofcore/train"
	"github.com/gorgonia-ooc/outofcore/vm"
)

// runPlan is "ooc plan": it plans one training step, prints the tape and a
// summary, and with -plot draws device memory over the step against the budget.
func runPlan(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("plan", "[flags]", "Plans one training step under a budget and prints a summary (with -tape, every instruction of the tape);\n"+
		"-plot draws device memory over the step against the budget.", stderr)
	model := fs.String("model", "resnet50", "model: "+strings.Join(models.Names(), ", "))
	image := fs.Int("image", 224, "input height and width")
	classes := fs.Int("classes", 1000, "number of classes")
	batch := fs.Int("batch", 256, "batch size")
	budgetFlag := fs.String("budget", "50%", "scheduling budget: bytes (e.g. 8GiB) or a percentage of the in-core peak")
	window := fs.String("window", "0", "schedule-window in bytes (0: automatic)")
	schedName := fs.String("scheduler", "auto", "auto (the default: the faster of window and hybrid, simulated), window, lms, greedy, dynprog, vdnn, checkpoint, hybrid, dqn (the Q-network shipped in package ooc) or baseline")
	device := fs.String("device", "sim:v100-nvlink", "cpu, sim:PROFILE, or cuda / cuda:N (the device's capacity bounds the budget)")
	tape := fs.Bool("tape", false, "print every instruction of the tape")
	plotFile := fs.String("plot", "", "draw memory in use over the step to this file (.svg, .png)")
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	if err := checkModel(*model, map[string]int{"image": *image, "batch": *batch, "classes": *classes}); err != nil {
		return err
	}
	bspec, err := train.ParseBudget(*budgetFlag)
	if err != nil {
		return fmt.Errorf("%w: -budget: %v", errUsage, err)
	}
	win, err := train.ParseBytes(*window)
	if err != nil {
		return fmt.Errorf("%w: -window: %v", errUsage, err)
	}
	var sched ooc.Scheduler
	if *schedName != "baseline" {
		if sched, err = sweep.SchedulerNamed(*schedName); err != nil {
			return fmt.Errorf("%w: unknown scheduler %q (want baseline or one of %s)", errUsage, *schedName, strings.Join(sweep.AllSchedulerNames(), ", "))
		}
	}
	if err := checkOutputs(nil, map[string]string{"plot": *plotFile}); err != nil {
		return err
	}
	dev, err := openDevice(*device, 0)
	if err != nil {
		return err
	}
	defer dev.Close()
	m, peak, err := stepModel(*model, *batch, *image, *classes)
	if err != nil {
		return err
	}
	budget := bspec.Resolve(peak)
	opts := []ooc.Option{ooc.WithDevice(dev), ooc.WithBudget(budget), ooc.WithWindow(win)}
	if sched == nil {
		opts = append(opts, ooc.Baseline())
	} else {
		opts = append(opts, ooc.WithScheduler(sched))
	}
	var p *vm.Program
	if sched != nil && ooc.TimesOps(sched) && !dev.Simulated() {
		if _, computes := vm.BackendFor(dev); dev.Name() != "cpu" && !computes {
			return fmt.Errorf("-scheduler %s times the ops with a step on the device, and no backend runs steps on %s: use a scheduler that does not (window, lms) or a sim:PROFILE", *schedName, dev.Name())
		}
		// The planner times the ops: on a real device, with times measured
		// in a first step, as a compiled machine does (Compile plans, so
		// planning first as well would do the work twice).
		fmt.Fprintf(stdout, "measuring op times: one step on %s with a random batch\n", dev.Name())
		p, err = measuredPlan(m, opts)
	} else {
		p, err = ooc.Plan(m.Graph, opts...)
	}
	if err != nil {
		return err
	}
	if *tape {
		fmt.Fprint(stdout, p.String())
	}
	swapIns, inBytes := p.Count(vm.SwapIn)
	swapOuts, outBytes := p.Count(vm.SwapOut)
	fmt.Fprintf(stdout, "%s batch %d, %dx%d on %s: %d functions, %d instructions, scheduler %s\n",
		*model, *batch, *image, *image, dev.Name(), len(p.Funcs), len(p.Instrs), p.Scheduler)
	fmt.Fprintf(stdout, "in-core peak %s (device %s); budget %s (%.0f%% of the in-core peak); planned peak %s\n",
		train.FormatBytes(peak), train.FormatBytes(dev.Capacity()), train.FormatBytes(budget), 100*float64(budget)/float64(peak), train.FormatBytes(p.Peak))
	fmt.Fprintf(stdout, "swap-ins %d (%s), swap-outs %d (%s)\n", swapIns, train.FormatBytes(inBytes), swapOuts, train.FormatBytes(outBytes))
	if n, bytes := p.Count(vm.Recompute); n > 0 {
		fmt.Fprintf(stdout, "recomputes %d (%s rebuilt)\n", n, train.FormatBytes(bytes))
	}
	if p.Window > 0 {
		fmt.Fprintf(stdout, "schedule-window %s (%.2f x the budget)\n", train.FormatBytes(p.Window), float64(p.Window)/float64(budget))
	}
	timing := p.Timing
	if timing == "" {
		timing = "none used by this scheduler"
	}
	fmt.Fprintf(stdout, "op and copy times: %s\n", timing)
	if *plotFile != "" {
		if err := plotTimeline(p, *model, *batch, dev.Name(), *plotFile); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "memory plot written to %s\n", *plotFile)
	}
	return ctx.Err()
}

// measuredPlan compiles the step on the options' device, runs it once on a
// random batch and returns the program the machine replanned with the op
// times it measured.
func measuredPlan(m *models.Model, opts []ooc.Option) (*vm.Program, error) {
	if err := m.BindRandom(1); err != nil {
		return nil, err
	}
	machine, err := ooc.Compile(m.Graph, opts...)
	if err != nil {
		return nil, err
	}
	defer machine.Close()
	if err := machine.RunAll(); err != nil {
		return nil, fmt.Errorf("measuring op times: %w", err)
	}
	return machine.Program(), nil
}

// stepModel builds a planning command's model (float32, three channels, a
// square input) and returns it with its in-core peak.
func stepModel(name string, batch, image, classes int) (*models.Model, int64, error) {
	m, err := models.Build(name, models.Config{Batch: batch, Channels: 3, Height: image, Width: image, Classes: classes, Dtype: tensor.Float32})
	if err != nil {
		return nil, 0, err
	}
	peak, err := ooc.InCorePeak(m.Graph)
	if err != nil {
		return nil, 0, err
	}
	return m, peak, nil
}

// plotTimeline draws device bytes held over one step's tape against the budget.
func plotTimeline(p *vm.Program, model string, batch int, device, file string) error {
	live, err := ooc.Timeline(p)
	if err != nil {
		return err
	}
	pts := make(plotter.XYs, len(live))
	budget := make(plotter.XYs, 2)
	for i, b := range live {
		pts[i] = plotter.XY{X: float64(i), Y: float64(b) / (1 << 30)}
	}
	budget[0] = plotter.XY{X: 0, Y: float64(p.Budget) / (1 << 30)}
	budget[1] = plotter.XY{X: float64(len(live) - 1), Y: float64(p.Budget) / (1 << 30)}
	pl := figure.New()
	pl.Title.Text = fmt.Sprintf("%s batch %d, %s scheduler on %s: device memory over one step", model, batch, p.Scheduler, device)
	pl.X.Label.Text = "tape instruction"
	pl.Y.Label.Text = "GiB held (variables + workspace)"
	l, err := plotter.NewLine(pts)
	if err != nil {
		return err
	}
	l.Color = color.RGBA{B: 200, A: 255}
	bl, err := plotter.NewLine(budget)
	if err != nil {
		return err
	}
	bl.Color, bl.Width = color.RGBA{R: 220, A: 255}, vg.Points(2)
	pl.Add(l, bl)
	pl.Legend.Add("in use", l)
	pl.Legend.Add("budget", bl)
	return figure.Save(pl, 8*vg.Inch, 4*vg.Inch, file)
}
