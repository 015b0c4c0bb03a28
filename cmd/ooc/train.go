package main

import (
	"flag"
	"fmt"
	"io"
	"math/rand"
	"time"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/models"
	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm"
)

func runTrain(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("train", flag.ContinueOnError)
	model := fs.String("model", "smallcnn", "model to train")
	batch := fs.Int("batch", 32, "batch size")
	image := fs.Int("image", 32, "input height and width")
	classes := fs.Int("classes", 10, "number of classes")
	steps := fs.Int("steps", 10, "training steps")
	budgetFlag := fs.String("budget", "60%", "device-memory budget: bytes (e.g. 64MiB) or a percentage of the in-core peak")
	window := fs.String("window", "0", "schedule-window in bytes (0: automatic)")
	schedName := fs.String("scheduler", "window", "swap scheduler: window or baseline")
	allocName := fs.String("allocator", "va", "device allocator: va or bestfit")
	lr := fs.Float64("lr", 0.001, "Adam learning rate")
	seed := fs.Int64("seed", 1, "seed for weights and data")
	if err := fs.Parse(args); err != nil {
		return err
	}
	bspec, err := parseBudget(*budgetFlag)
	if err != nil {
		return err
	}
	win, err := parseBytes(*window)
	if err != nil {
		return fmt.Errorf("-window: %w", err)
	}
	kind, err := ooc.ParseAllocator(*allocName)
	if err != nil {
		return err
	}
	cfg := models.Config{Batch: *batch, Channels: 3, Height: *image, Width: *image, Classes: *classes, Dtype: tensor.Float32, Seed: *seed}
	m, err := models.Build(*model, cfg)
	if err != nil {
		return err
	}
	inCore, err := ooc.Plan(m.Graph, ooc.Baseline())
	if err != nil {
		return err
	}
	budget := bspec.resolve(inCore.Peak)
	opts := []ooc.Option{ooc.BindDualValues(m.Learnables...), ooc.WithAllocator(kind), ooc.WithWindow(win)}
	switch *schedName {
	case "baseline":
		opts = append(opts, ooc.Baseline())
	case "window":
		opts = append(opts, ooc.WithBudget(budget))
	default:
		return fmt.Errorf("unknown scheduler %q (want window or baseline)", *schedName)
	}
	machine, err := ooc.Compile(m.Graph, opts...)
	if err != nil {
		return err
	}
	defer machine.Close()
	prog := machine.Program()
	swapIns, _ := prog.Count(vm.SwapIn)
	fmt.Fprintf(out, "model %s, batch %d, %dx%d, %d learnable parameters\n", *model, *batch, *image, *image, m.NumParams())
	fmt.Fprintf(out, "in-core peak %s; scheduler %s, budget %s, allocator %s; tape of %d instructions (%d swap-ins)\n",
		formatBytes(inCore.Peak), prog.Scheduler, formatBytes(prog.Budget), kind, len(prog.Instrs), swapIns)

	data := newSynthetic(cfg, *seed)
	solver := G.NewAdamSolver(G.WithLearnRate(*lr))
	start := time.Now()
	for step := 1; step <= *steps; step++ {
		x, y := data.next()
		if err := G.Let(m.Input, x); err != nil {
			return err
		}
		if err := G.Let(m.Labels, y); err != nil {
			return err
		}
		if err := machine.RunAll(); err != nil {
			return err
		}
		if err := solver.Step(G.NodesToValueGrads(m.Learnables)); err != nil {
			return err
		}
		st := machine.Stats()
		fmt.Fprintf(out, "step %3d  loss %.4f  peak device %s  swapped in %s, out %s\n",
			step, m.Loss.Value().Data(), formatBytes(st.PeakDeviceBytes), formatBytes(st.SwapInBytes), formatBytes(st.SwapOutBytes))
		machine.Reset()
	}
	st := machine.Stats()
	elapsed := time.Since(start)
	fmt.Fprintf(out, "\nmeasured on the CPU device (this machine): %d steps in %.2fs, %.1f images/s\n",
		st.Steps, elapsed.Seconds(), float64(st.Steps**batch)/elapsed.Seconds())
	fmt.Fprintf(out, "peak device bytes %s (budget %s, in-core peak %s), allocator reserved %s\n",
		formatBytes(st.PeakDeviceBytes), formatBytes(prog.Budget), formatBytes(inCore.Peak), formatBytes(st.ReservedBytes))
	fmt.Fprintf(out, "swap bytes: in %s, out %s; compute %.2fs, stalled on copies %.3fs\n",
		formatBytes(st.SwapInBytes), formatBytes(st.SwapOutBytes), st.ComputeTime.Seconds(), st.StallTime.Seconds())
	return nil
}

// synthetic is a learnable toy dataset: each class adds its own pattern.
type synthetic struct {
	cfg models.Config
	rng *rand.Rand
}

func newSynthetic(cfg models.Config, seed int64) *synthetic {
	return &synthetic{cfg: cfg, rng: rand.New(rand.NewSource(seed))}
}

func (s *synthetic) next() (*tensor.Dense, *tensor.Dense) {
	c := s.cfg
	per := c.Channels * c.Height * c.Width
	x := make([]float32, c.Batch*per)
	y := make([]float32, c.Batch*c.Classes)
	for i := 0; i < c.Batch; i++ {
		k := s.rng.Intn(c.Classes)
		y[i*c.Classes+k] = 1
		for j := 0; j < per; j++ {
			v := float32(s.rng.NormFloat64()) * 0.5
			if j%c.Classes == k {
				v += 1
			}
			x[i*per+j] = v
		}
	}
	return tensor.New(tensor.WithShape(c.Batch, c.Channels, c.Height, c.Width), tensor.WithBacking(x)),
		tensor.New(tensor.WithShape(c.Batch, c.Classes), tensor.WithBacking(y))
}
