package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/gorgonia-ooc/outofcore/models"
	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/train"
	"github.com/gorgonia-ooc/outofcore/vm"
)

// runDQNTrain is "ooc dqn-train": it trains the DQN planner's Q-network on
// one model's step at one budget, in the simulator, and writes the
// weights file (ooc.SaveDQNWeights), which DQN{Weights: ...} plans with.
func runDQNTrain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("dqn-train", "-o FILE [flags]", "Trains the DQN planner's Q-network on one model's training step under a budget, in the simulator\n"+
		"(seeded: the same flags write the same file), and writes its weights.", stderr)
	model := fs.String("model", "smallcnn", "model: "+strings.Join(models.Names(), ", "))
	image := fs.Int("image", 32, "input height and width")
	classes := fs.Int("classes", 10, "number of classes")
	batch := fs.Int("batch", 32, "batch size")
	budgetFlag := fs.String("budget", "60%", "scheduling budget: bytes (e.g. 8GiB) or a percentage of the in-core peak")
	device := fs.String("device", "sim:gtx1080ti", "simulated device, sim:PROFILE (its op and copy times are what the network learns from)")
	episodes := fs.Int("episodes", ooc.DefaultDQNEpisodes, "training episodes")
	seed := fs.Int64("seed", 1, "seed of the initial weights and the exploration")
	from := fs.String("from", "", "weights file to fine-tune, or \"default\" for the weights shipped in package ooc (default: new weights)")
	out := fs.String("o", "", "weights file to write")
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	if err := checkModel(*model, map[string]int{"image": *image, "batch": *batch, "classes": *classes}); err != nil {
		return err
	}
	if *out == "" {
		return fmt.Errorf("%w: -o: the weights file to write is required", errUsage)
	}
	if *episodes < 1 {
		return fmt.Errorf("%w: -episodes %d: want at least 1", errUsage, *episodes)
	}
	if !strings.HasPrefix(*device, "sim:") {
		return fmt.Errorf("%w: -device %s: the network learns in the simulator: use sim:PROFILE", errUsage, *device)
	}
	bspec, err := train.ParseBudget(*budgetFlag)
	if err != nil {
		return fmt.Errorf("%w: -budget: %v", errUsage, err)
	}
	var w *ooc.DQNWeights
	switch *from {
	case "":
	case "default":
		if w, err = ooc.DefaultDQNWeights(); err != nil {
			return err
		}
	default:
		if w, err = ooc.LoadDQNWeights(*from); err != nil {
			return err
		}
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
	tr, err := ooc.NewTrace(m.Graph)
	if err != nil {
		return err
	}
	w, err = ooc.TrainDQN(&ooc.Problem{Trace: tr, Budget: budget, Device: dev}, w, *episodes, *seed)
	if err != nil {
		return err
	}
	if err := ooc.SaveDQNWeights(*out, w); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s batch %d, %dx%d on %s, budget %s of %s in-core: trained %d episodes (seed %d), weights written to %s\n",
		*model, *batch, *image, *image, dev.Name(), train.FormatBytes(budget), train.FormatBytes(peak), *episodes, *seed, *out)
	p, err := ooc.Plan(m.Graph, ooc.WithDevice(dev), ooc.WithBudget(budget), ooc.WithScheduler(ooc.DQN{Weights: w}))
	if err != nil {
		fmt.Fprintf(stdout, "the greedy plan of these weights: %v\n", err)
		return ctx.Err()
	}
	n, _ := p.Count(vm.Recompute)
	swaps, _ := p.Count(vm.SwapOut)
	fmt.Fprintf(stdout, "the greedy plan of these weights fits: planned peak %s, %d swap-outs, %d recomputes\n", train.FormatBytes(p.Peak), swaps, n)
	return ctx.Err()
}
