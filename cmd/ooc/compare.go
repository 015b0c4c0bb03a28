package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/gorgonia-ooc/outofcore/sweep"
)

// runCompare is "ooc compare": makespan / lower bound of every scheduler at
// budgets between the least memory and the in-core peak (the offloading
// paper's Fig. 5).
func runCompare(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	model := fs.String("model", "resnet50", "model")
	image := fs.Int("image", 224, "input height and width (lstm: the sequence length)")
	classes := fs.Int("classes", 1000, "number of classes (lstm: the vocabulary)")
	batch := fs.Int("batch", 32, "batch size")
	device := fs.String("device", "sim:v100-pcie", "simulated device, sim:PROFILE")
	budgets := fs.String("budgets", "0%,10%,20%,30%,40%,50%,60%,70%,80%,90%,100%", "budgets as % of the way from the least memory to the in-core peak")
	schedulers := fs.String("schedulers", "window,lms,greedy,dynprog,vdnn", "schedulers to compare (also checkpoint, hybrid)")
	jsonFile := fs.String("json", "", "also write the results as JSON to this file")
	plotFile := fs.String("plot", "", "draw makespan / LB against the budget to this file (.svg, .png)")
	quiet := fs.Bool("q", false, "no progress lines")
	fig5 := fs.Bool("overhead", false, "also print the DQN paper's Fig. 5 table: memory saved against the in-core peak and overhead against the in-core step")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !strings.HasPrefix(*device, "sim:") && *device != "cpu" {
		// Not simulated, so Compare will refuse it; but a device that cannot even open
		// here says why first.
		d, err := openDevice(*device, 0)
		if err != nil {
			return err
		}
		if err := d.Close(); err != nil {
			return err
		}
	}
	cfg := sweep.CompareConfig{Model: *model, Image: *image, Classes: *classes, Batch: *batch, Device: *device, Schedulers: splitList(*schedulers)}
	for _, b := range splitList(*budgets) {
		n, err := strconv.Atoi(strings.TrimSuffix(b, "%"))
		if err != nil || n < 0 || n > 100 {
			return fmt.Errorf("%w: -budgets: %q is not a percentage from 0%% to 100%%", errUsage, b)
		}
		cfg.Percents = append(cfg.Percents, n)
	}
	if !*quiet {
		cfg.Log = stderr
	}
	rs, err := sweep.Compare(cfg)
	if err != nil {
		return err
	}
	if err := sweep.WriteCompareTable(stdout, rs); err != nil {
		return err
	}
	if *fig5 {
		if err := sweep.WriteOverheadTable(stdout, rs); err != nil {
			return err
		}
	}
	if *jsonFile != "" {
		if err := writeJSON(*jsonFile, rs); err != nil {
			return err
		}
	}
	if *plotFile != "" {
		if err := sweep.PlotCompare(rs, *plotFile); err != nil {
			return err
		}
	}
	return ctx.Err()
}
