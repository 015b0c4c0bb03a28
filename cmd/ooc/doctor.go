package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/gorgonia-ooc/outofcore/vm/cuda"
)

// runDoctor is "ooc doctor", the acceptance check of a machine with an NVIDIA GPU: the
// driver, the device, its memory and reserve, virtual memory management and granularity,
// pinned bandwidth each way, and the allocator and stream-ordering checks that vm/cuda's
// tests run on a fake driver, run here on the real one (cuda.Doctor says what each does).
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
	library := fs.String("library", "", "the driver library (default: $"+cuda.LibraryEnv+", else "+cuda.DefaultLibrary+")")
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
	if err := cuda.Doctor(stdout, ordinal, opts...); err != nil {
		return err
	}
	return ctx.Err()
}
