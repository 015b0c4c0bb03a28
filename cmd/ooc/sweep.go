package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/gorgonia-ooc/outofcore/sweep"
)

// runSweep is "ooc sweep": for each scheduler, allocator and batch size, the
// largest scheduling budget at which a step completes, and images/s there
// (the Sony paper's Table 1).
func runSweep(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sweep", flag.ContinueOnError)
	fs.SetOutput(stderr)
	model := fs.String("model", "resnet18", "model to sweep")
	image := fs.Int("image", 32, "input height, and width unless -width is given")
	width := fs.Int("width", 0, "input width (0: the same as -image; Pix2PixHD's Cityscapes: -image 512 -width 1024)")
	classes := fs.Int("classes", 10, "number of classes")
	batches := fs.String("batches", "16,64,128", "comma-separated batch sizes")
	budget := fs.String("budget", "48MiB", "device memory (e.g. 16GiB); 0 = the profile's")
	device := fs.String("device", "cpu", "cpu, or sim:PROFILE (v100-nvlink, v100-pcie, p100-pcie, titanxp-pcie, h100-pcie, gtx1080ti, measured:FILE); cuda / cuda:N are opened and checked, their steps come with part 2 of issue 14")
	schedulers := fs.String("schedulers", "baseline,window", "schedulers: baseline, lms, window")
	allocators := fs.String("allocators", "va", "allocators: bestfit, va")
	chunk := fs.String("chunk", "2MiB", "VA chunk size (the paper uses 40MiB on a GPU)")
	steps := fs.Int("steps", 1, "timed steps per point on the CPU device")
	untilStop := fs.Bool("until-stop", false, "add batch sizes until every row runs out of memory")
	jsonFile := fs.String("json", "", "also write the results as JSON to this file")
	plotFile := fs.String("plot", "", "draw budgets and reserved memory per batch (the paper's Fig. 3) to this file (.svg, .png)")
	speedFile := fs.String("plot-speed", "", "draw images/s per batch (the paper's Fig. 4) to this file (.svg, .png)")
	reservedFile := fs.String("plot-reserved", "", "draw the allocator's reserved memory per batch (the paper's Fig. 5) to this file (.svg, .png)")
	quiet := fs.Bool("q", false, "no progress lines")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !strings.HasPrefix(*device, "sim:") {
		if err := checkRunDevice(*device); err != nil {
			return err
		}
	}
	cfg := sweep.Config{Model: *model, Image: *image, Width: *width, Classes: *classes, Device: *device, Steps: *steps, UntilStop: *untilStop,
		Schedulers: splitList(*schedulers), Allocators: splitList(*allocators)}
	for _, b := range splitList(*batches) {
		n, err := strconv.Atoi(b)
		if err != nil || n <= 0 {
			return fmt.Errorf("%w: -batches: %q is not a positive batch size", errUsage, b)
		}
		cfg.Batches = append(cfg.Batches, n)
	}
	var err error
	if cfg.Capacity, err = parseBytes(*budget); err != nil {
		return fmt.Errorf("%w: -budget: %v", errUsage, err)
	}
	if cfg.ChunkSize, err = parseBytes(*chunk); err != nil {
		return fmt.Errorf("%w: -chunk: %v", errUsage, err)
	}
	if !*quiet {
		cfg.Log = stderr
	}
	rs, err := sweep.Run(cfg)
	if err != nil {
		return err
	}
	if err := sweep.WriteTable(stdout, rs); err != nil {
		return err
	}
	if *reservedFile != "" {
		if err := sweep.WriteReservedTable(stdout, rs); err != nil {
			return err
		}
		if err := sweep.Summarize(rs).Write(stdout); err != nil {
			return err
		}
	}
	if *jsonFile != "" {
		if err := writeJSON(*jsonFile, rs); err != nil {
			return err
		}
	}
	if *plotFile != "" {
		if err := sweep.PlotBudgets(rs, *plotFile); err != nil {
			return err
		}
	}
	if *speedFile != "" {
		if err := sweep.PlotSpeed(rs, *speedFile); err != nil {
			return err
		}
	}
	if *reservedFile != "" {
		if err := sweep.PlotReserved(rs, *reservedFile); err != nil {
			return err
		}
	}
	return ctx.Err()
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// writeJSON writes v, indented, to file.
func writeJSON(file string, v interface{}) error {
	raw, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(file, append(raw, '\n'), 0o644)
}
