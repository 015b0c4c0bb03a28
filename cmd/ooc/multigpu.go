package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"runtime"

	"github.com/gorgonia-ooc/outofcore/sweep"
)

// runMultiGPU is "ooc multigpu": the multi-GPU paper's Tables I-III in the
// simulator (largest batch per device and images/s per device, for
// non-swap, the original vDNN, vDNN with the transfer cap and trigger
// search, and window + VA, on 1, 2 and 4 devices sharing switches; with
// -schemes cap, the planners with and without the transfer cap), or
// with -cpu a measured step of CPU replicas against one CPU device.
func runMultiGPU(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("multigpu", flag.ContinueOnError)
	fs.SetOutput(stderr)
	modelsFlag := fs.String("models", "vgg16,inceptionv3", "models (vgg16 at -image, inceptionv3 at -inception-image)")
	image := fs.Int("image", 224, "input size for every model but inceptionv3")
	incImage := fs.Int("inception-image", 299, "input size for inceptionv3")
	classes := fs.Int("classes", 1000, "number of classes")
	profile := fs.String("profile", "titanxp-switch", "simulated device profile with a shared switch (titanxp-switch, p100-2switch)")
	devices := fs.String("devices", "1,2,4", "device counts")
	step := fs.Int("step", 16, "batch granularity of the largest-batch search (the paper's constant C)")
	maxBatch := fs.Int("max-batch", 1024, "largest batch per device tried")
	batches := fs.String("batches", "", "per-device batches for the throughput tables (default: from the non-swap largest up by -step)")
	tablesOnly := fs.Bool("tables-only", false, "skip the largest-batch search: only the throughput tables at -batches")
	schemes := fs.String("schemes", "paper", "paper: non-swap, vdnn, vdnn-cap-tuned, window+va; cap: greedy, dynprog and window each without and with the transfer cap")
	cpu := fs.Bool("cpu", false, "instead: measure one step of -replicas CPU devices against one CPU device on the same batch")
	cpuModel := fs.String("cpu-model", "smallcnn", "model for -cpu")
	cpuBatch := fs.Int("cpu-batch", 64, "whole batch for -cpu")
	cpuImage := fs.Int("cpu-image", 32, "input size for -cpu")
	replicas := fs.Int("replicas", 2, "CPU replicas for -cpu")
	steps := fs.Int("steps", 5, "timed steps for -cpu")
	quiet := fs.Bool("q", false, "no progress lines")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *cpu {
		r, err := sweep.MeasureCPUReplicas(*cpuModel, *cpuBatch, *cpuImage, 10, *steps, *replicas)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "measured on this machine's CPU (%s/%s, %d CPUs, shared: other load not controlled), %s batch %d at %dx%d, mean of %d steps after a warm-up, alternating:\n",
			runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), r.Model, r.Batch, r.Image, r.Image, r.Steps)
		fmt.Fprintf(stdout, "  1 CPU device, whole batch:      %8.3f s/step (loss %.4f)\n", r.Single.Seconds(), r.SingleLoss)
		fmt.Fprintf(stdout, "  %d CPU replicas, batch split:    %8.3f s/step (loss %.4f), cores split among the replicas' GEMMs\n", r.Replicas, r.Parallel.Seconds(), r.ParaLoss)
		fmt.Fprintf(stdout, "  %d CPU replicas, batch split:    %8.3f s/step, each replica's GEMMs on every core\n", r.Replicas, r.Shared.Seconds())
		fmt.Fprintf(stdout, "  speed-up: %.2fx (split cores), %.2fx (shared cores)\n", r.Single.Seconds()/r.Parallel.Seconds(), r.Single.Seconds()/r.Shared.Seconds())
		fmt.Fprintf(stdout, "  the machine's concurrency meanwhile: %d loops of arithmetic on %d goroutines ran %.2fx as fast as one after another (%d on an idle machine)\n",
			r.Replicas, r.Replicas, r.Ceiling, min(r.Replicas, runtime.NumCPU()))
		return nil
	}
	cfg := sweep.MultiGPUConfig{Profile: *profile, Classes: *classes, Step: *step, MaxBatch: *maxBatch, TablesOnly: *tablesOnly}
	switch *schemes {
	case "paper":
	case "cap":
		cfg.Schemes = sweep.CapSchemes()
	default:
		return usagef("-schemes %s: want paper or cap", *schemes)
	}
	var err error
	if cfg.Devices, err = parseInts("devices", *devices); err != nil {
		return err
	}
	if *batches != "" {
		if cfg.Batches, err = parseInts("batches", *batches); err != nil {
			return err
		}
	}
	names, err := parseList("models", *modelsFlag)
	if err != nil {
		return err
	}
	if !*quiet {
		cfg.Log = stderr
	}
	for i, m := range names {
		c := cfg
		c.Model, c.Image = m, *image
		if m == "inceptionv3" {
			c.Image = *incImage
		}
		r, err := sweep.RunMultiGPU(c)
		if err != nil {
			return err
		}
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		sweep.WriteMultiGPU(stdout, r)
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}
