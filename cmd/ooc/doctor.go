package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/gorgonia-ooc/outofcore/vm/cuda"
)

// runDoctor is "ooc doctor", the acceptance check of a machine with an NVIDIA GPU: the
// driver, the device, its memory and reserve, virtual memory management and granularity,
// pinned bandwidth each way, and the allocator and stream-ordering checks that vm/cuda's
// tests run on a fake driver, run here on the real one (cuda.Doctor says what each does).
// Then, unless -sweep=false, it runs the ResNet-50 224x224 batch sweep on the GPU (in-core
// baseline, window + best fit, window + VA, in the device's whole memory, VA in the paper's
// 40 MiB chunks) and prints the table as Markdown in docs/results.md's layout, the first real-GPU
// row of the project's results for whoever runs it first (no GPU result exists yet).
// It cannot run on a machine without a GPU: there it says what is missing (no NVIDIA
// driver: libcuda.so.1 not found, or no CUDA device) and exits 1.
func runDoctor(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: ooc doctor [flags]\n\nChecks a GPU through the CUDA driver: driver, device, memory, VMM, pinned bandwidth,\n"+
			"and the allocators and stream ordering against the real driver. Exits 1 if anything fails.\n\nflags:\n")
		fs.PrintDefaults()
	}
	device := fs.String("device", "cuda", "the GPU to check: cuda (cuda:0) or cuda:N")
	library := fs.String("library", "", "the driver library (default: $"+cuda.LibraryEnv+", else the first "+cuda.DefaultLibrary+" found: see package cuda's Search)")
	checks := fs.Bool("checks", true, "run the driver, memory, allocator and stream-ordering checks (-checks=false: the sweep only)")
	sweepOn := fs.Bool("sweep", true, "after the checks, run the ResNet-50 batch sweep on the GPU and print its Markdown table")
	sweepModel := fs.String("sweep-model", "resnet50", "-sweep: the model")
	sweepImage := fs.Int("sweep-image", 224, "-sweep: the input size")
	sweepClasses := fs.Int("sweep-classes", 1000, "-sweep: the number of classes")
	sweepBatches := fs.String("sweep-batches", "64,128,192,256,384,512,768,1024", "-sweep: the batch sizes")
	sweepBudget := fs.String("sweep-budget", "0", "-sweep: the device memory to sweep in (0: all of the GPU's)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usagef("unexpected arguments %q (flags only)", fs.Args())
	}
	ordinal, err := cuda.ParseSpec(*device)
	if err != nil {
		return usagef("-device: %v", err)
	}
	var opts []cuda.Option
	if *library != "" {
		opts = append(opts, cuda.WithLibrary(*library))
	}
	if *checks {
		if err := cuda.Doctor(stdout, ordinal, opts...); err != nil {
			return err
		}
	}
	if !*sweepOn || ctx.Err() != nil {
		return ctx.Err()
	}
	if *library != "" {
		// The sweep opens the device by name, through the environment's library.
		if err := os.Setenv(cuda.LibraryEnv, *library); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "\n%s %dx%d batch sweep on %s:\n", *sweepModel, *sweepImage, *sweepImage, *device)
	return runSweep(ctx, []string{"-device", *device, "-model", *sweepModel, "-image", fmt.Sprint(*sweepImage),
		"-classes", fmt.Sprint(*sweepClasses), "-batches", *sweepBatches, "-budget", *sweepBudget,
		"-schedulers", "baseline,window", "-allocators", "bestfit,va", "-chunk", "40MiB", "-markdown", "-q"}, stdout, stderr)
}
