package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/gorgonia-ooc/outofcore/models"
	"github.com/gorgonia-ooc/outofcore/sweep"
)

// runCompare is "ooc compare": makespan / lower bound of every scheduler at
// budgets between the least memory and the in-core peak (the offloading
// paper's Fig. 5).
func runCompare(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("compare", "[flags]", "Plans one training step with every scheduler at budgets from the least memory a step needs to its\n"+
		"in-core peak, and prints each makespan over the lower bound (the offloading paper's Fig. 5). Simulated: sim:PROFILE only.", stderr)
	model := fs.String("model", "resnet50", "model: "+strings.Join(models.Names(), ", "))
	image := fs.Int("image", 224, "input height and width (lstm: the sequence length)")
	classes := fs.Int("classes", 1000, "number of classes (lstm: the vocabulary)")
	batch := fs.Int("batch", 32, "batch size")
	device := fs.String("device", "sim:v100-pcie", "simulated device, sim:PROFILE")
	budgets := fs.String("budgets", "0%,10%,20%,30%,40%,50%,60%,70%,80%,90%,100%", "budgets as % of the way from the least memory to the in-core peak")
	schedulers := fs.String("schedulers", "window,lms,greedy,dynprog,vdnn", "schedulers to compare: "+strings.Join(sweep.AllSchedulerNames(), ", "))
	jsonFile := fs.String("json", "", "also write the results as JSON to this file")
	plotFile := fs.String("plot", "", "draw makespan / LB against the budget to this file (.svg, .png)")
	quiet := fs.Bool("q", false, "no progress lines")
	overheadFile := fs.String("plot-overhead", "", "draw the DQN paper's Fig. 5, overhead against memory saved, to this file (.svg, .png)")
	fig5 := fs.Bool("overhead", false, "also print the DQN paper's Fig. 5 table: memory saved against the in-core peak and overhead against the in-core step")
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	if err := checkModel(*model, map[string]int{"image": *image, "batch": *batch, "classes": *classes}); err != nil {
		return err
	}
	cfg := sweep.CompareConfig{Model: *model, Image: *image, Classes: *classes, Batch: *batch, Device: *device}
	var err error
	if cfg.Schedulers, err = parseList("schedulers", *schedulers); err != nil {
		return err
	}
	for _, n := range cfg.Schedulers {
		if _, err := sweep.SchedulerNamed(n); err != nil {
			return usageError{err}
		}
	}
	items, err := parseList("budgets", *budgets)
	if err != nil {
		return err
	}
	for _, b := range items {
		n, err := strconv.Atoi(strings.TrimSuffix(b, "%"))
		if err != nil || n < 0 || n > 100 {
			return fmt.Errorf("%w: -budgets: %q is not a percentage from 0%% to 100%%", errUsage, b)
		}
		cfg.Percents = append(cfg.Percents, n)
	}
	if err := checkOutputs(map[string]string{"json": *jsonFile}, map[string]string{"plot": *plotFile, "plot-overhead": *overheadFile}); err != nil {
		return err
	}
	if !strings.HasPrefix(*device, "sim:") {
		if *device != "cpu" {
			// A device that cannot even open here says why first.
			d, err := openDevice(*device, 0)
			if err != nil {
				return err
			}
			if err := d.Close(); err != nil {
				return err
			}
		}
		return usagef("-device %s: compare needs a simulated device (sim:PROFILE): the bound and makespans are simulated", *device)
	}
	d, err := openDevice(*device, 0)
	if err != nil {
		return err
	}
	d.Close()
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
	if *overheadFile != "" {
		if err := sweep.PlotOverhead(rs, *overheadFile); err != nil {
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
