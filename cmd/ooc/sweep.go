package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"github.com/gorgonia-ooc/outofcore/models"
	"github.com/gorgonia-ooc/outofcore/sweep"
	"github.com/gorgonia-ooc/outofcore/train"
)

// runSweep is "ooc sweep": for each scheduler, allocator and batch size, the
// largest scheduling budget at which a step completes, and images/s there
// (the Sony paper's Table 1).
func runSweep(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("sweep", "[flags]", "For each scheduler, allocator and batch size, finds the largest scheduling budget at which a training\n"+
		"step runs in the device's memory, and its images/s there (the Sony paper's Table 1). On the CPU device each\n"+
		"figure is measured: the median of -steps timed steps after a warm-up step. On sim:PROFILE it is simulated.", stderr)
	model := fs.String("model", "resnet18", "model to sweep: "+strings.Join(models.Names(), ", "))
	image := fs.Int("image", 32, "input height, and width unless -width is given")
	width := fs.Int("width", 0, "input width (0: the same as -image; Pix2PixHD's Cityscapes: -image 512 -width 1024)")
	classes := fs.Int("classes", 10, "number of classes")
	batches := fs.String("batches", "16,64,128", "comma-separated batch sizes")
	budget := fs.String("budget", "48MiB", "device memory in bytes (e.g. 48MiB, 16GiB); 0 = the profile's (64MiB on cpu)")
	device := fs.String("device", "cpu", "cpu, or sim:PROFILE (v100-nvlink, v100-pcie, p100-pcie, titanxp-pcie, h100-pcie, gtx1080ti, measured:FILE); or cuda / cuda:N (real steps with the CUDA kernels)")
	schedulers := fs.String("schedulers", "baseline,window", "schedulers: baseline (in core) or any of "+strings.Join(sweep.AllSchedulerNames(), ", "))
	allocators := fs.String("allocators", "va", "allocators: bestfit, va")
	chunk := fs.String("chunk", "2MiB", "VA chunk size (the paper uses 40MiB on a GPU)")
	steps := fs.Int("steps", 5, "timed steps per point on the CPU device, after a warm-up step: a point is their median")
	untilStop := fs.Bool("until-stop", false, "add batch sizes until every row runs out of memory")
	maxBatch := fs.Int("max-batch", 4096, "-until-stop adds no batch size larger than this")
	stopAtOOM := fs.Bool("stop-at-oom", false, "try a scheduler and allocator at no batch size larger than the first it failed at")
	timeLimit := fs.Duration("time-limit", 0, "start no point after this long (e.g. 5m; 0: no limit): the table and -json hold the points run, and a note says where it stopped")
	jsonFile := fs.String("json", "", "also write the results as JSON to this file")
	plotFile := fs.String("plot", "", "draw budgets and reserved memory per batch (the paper's Fig. 3) to this file (.svg, .png)")
	speedFile := fs.String("plot-speed", "", "draw images/s per batch (the paper's Fig. 4) to this file (.svg, .png)")
	reservedFile := fs.String("plot-reserved", "", "draw the allocator's reserved memory per batch (the paper's Fig. 5) to this file (.svg, .png)")
	markdown := fs.Bool("markdown", false, "print the table as Markdown, the layout of docs/results.md")
	quiet := fs.Bool("q", false, "no progress lines")
	verbose := fs.Bool("v", false, "also log every budget the search tries and why it fails")
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	if err := checkModel(*model, map[string]int{"image": *image, "width": *width, "classes": *classes, "steps": *steps}); err != nil {
		return err
	}
	if *maxBatch < 1 {
		return usagef("-max-batch %d: want a positive batch size", *maxBatch)
	}
	if *timeLimit < 0 {
		return usagef("-time-limit %v: want a duration of 0 (no limit) or more", *timeLimit)
	}
	cfg := sweep.Config{Model: *model, Image: *image, Width: *width, Classes: *classes, Device: *device, Steps: *steps,
		UntilStop: *untilStop, MaxBatch: *maxBatch, StopAtOOM: *stopAtOOM, TimeLimit: *timeLimit, Verbose: *verbose}
	var err error
	if cfg.Batches, err = parseInts("batches", *batches); err != nil {
		return err
	}
	if cfg.Schedulers, err = parseList("schedulers", *schedulers); err != nil {
		return err
	}
	if cfg.Allocators, err = parseList("allocators", *allocators); err != nil {
		return err
	}
	if strings.HasSuffix(strings.TrimSpace(*budget), "%") {
		return usagef("-budget %s: a sweep's -budget is the device's memory in bytes (e.g. 48MiB); a percentage of the in-core peak "+
			"is for train, eval and plan, where one model and batch size fix that peak", *budget)
	}
	if cfg.Capacity, err = train.ParseBytes(*budget); err != nil {
		return usagef("-budget: %v", err)
	}
	if cfg.ChunkSize, err = train.ParseBytes(*chunk); err != nil || cfg.ChunkSize == 0 {
		return usagef("-chunk %s: want a positive byte size (e.g. 2MiB)", *chunk)
	}
	if err := cfg.Check(); err != nil {
		return usageError{err}
	}
	if err := checkOutputs(map[string]string{"json": *jsonFile}, map[string]string{"plot": *plotFile, "plot-speed": *speedFile, "plot-reserved": *reservedFile}); err != nil {
		return err
	}
	if strings.HasPrefix(*device, "sim:") {
		d, err := openDevice(*device, cfg.Capacity)
		if err != nil {
			return err
		}
		d.Close()
	} else if err := checkRunDevice(*device); err != nil {
		return err
	}
	if !*quiet {
		cfg.Log = stderr
	}
	if *jsonFile != "" {
		// Written after every point, so that a run stopped from outside keeps what it measured.
		cfg.OnPoint = func(sofar []sweep.Result) {
			if err := writeJSON(*jsonFile, sofar); err != nil {
				fmt.Fprintf(stderr, "ooc sweep: -json: %v\n", err)
			}
		}
	}
	cfg.Context = ctx
	rs, err := sweep.Run(cfg)
	var limited *sweep.TimeLimitError
	if errors.As(err, &limited) {
		// Stopping at the time limit is what was asked for: the points that ran are the result.
		fmt.Fprintf(stderr, "ooc sweep: %v\n", limited)
		defer fmt.Fprintf(stdout, "Stopped at the time limit (-time-limit %v): batch %d and larger were not run (or not for every row).\n", limited.Limit, limited.Batch)
		if len(rs) == 0 {
			return limited
		}
	} else if err != nil {
		return err
	}
	if err := allFailed(rs); err != nil {
		return err
	}
	write := sweep.WriteTable
	if *markdown {
		write = sweep.WriteMarkdownTable
	}
	if err := write(stdout, rs); err != nil {
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

// allFailed is an error when no point of a sweep ran, giving each distinct
// reason once: reasons that differ only in their numbers (bytes needed at
// each batch size) are one reason, shown by its first point.
func allFailed(rs []sweep.Result) error {
	var reasons []string
	seen := map[string]bool{}
	for _, r := range rs {
		if r.OK {
			return nil
		}
		why := r.Error
		if i := strings.IndexByte(why, '\n'); i >= 0 {
			why = why[:i]
		}
		if key := digits.ReplaceAllString(why, "N"); !seen[key] {
			seen[key] = true
			reasons = append(reasons, fmt.Sprintf("batch %d %s+%s: %s", r.Batch, r.Scheduler, r.Allocator, why))
		}
	}
	if len(reasons) == 1 {
		return fmt.Errorf("every point of the sweep failed (%d points), for one reason, e.g. at %s", len(rs), reasons[0])
	}
	if len(reasons) > 3 {
		reasons = append(reasons[:3], fmt.Sprintf("and %d more", len(reasons)-3))
	}
	return fmt.Errorf("every point of the sweep failed (%d points); the reasons: %s", len(rs), strings.Join(reasons, "; "))
}

var digits = regexp.MustCompile(`[0-9]+`)

// writeJSON writes v, indented, to file, through file.tmp and a rename: a
// process killed while writing (a sweep stopped from outside) leaves the
// previous whole file, not half of this one.
func writeJSON(file string, v interface{}) error {
	raw, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, append(raw, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, file)
}
