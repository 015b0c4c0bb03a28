package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/gorgonia-ooc/outofcore/models"
	"github.com/gorgonia-ooc/outofcore/train"
)

// newFlagSet is a command's flag set with usage text: the synopsis, what
// the command does, and its flags.
func newFlagSet(name, synopsis, about string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: ooc %s %s\n\n%s\n\nflags:\n", name, synopsis, about)
		fs.PrintDefaults()
	}
	return fs
}

// parseArgs parses a command line, refusing positional arguments; errors
// other than -h are usage errors.
func parseArgs(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usagef("unexpected arguments %q (flags only)", fs.Args())
	}
	return nil
}

// parseList splits a comma-separated flag value strictly: an empty item
// ("16,,64", a trailing comma) is an error, not skipped.
func parseList(flagName, s string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			return nil, usagef("-%s %q: an empty item in the list", flagName, s)
		}
		out = append(out, f)
	}
	return out, nil
}

// parseInts is parseList of positive integers.
func parseInts(flagName, s string) ([]int, error) {
	items, err := parseList(flagName, s)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, it := range items {
		n, err := strconv.Atoi(it)
		if err != nil || n <= 0 {
			return nil, usagef("-%s: %q is not a positive integer", flagName, it)
		}
		out = append(out, n)
	}
	return out, nil
}

// checkModel checks a -model name and the shape flags that go with it.
func checkModel(model string, sizes map[string]int) error {
	if !train.KnownModel(model) {
		return usagef("-model %q: unknown model (known: %s)", model, strings.Join(models.Names(), ", "))
	}
	for _, name := range []string{"image", "batch", "classes", "steps"} {
		if v, ok := sizes[name]; ok && v <= 0 {
			return usagef("-%s %d: must be positive", name, v)
		}
	}
	if v, ok := sizes["width"]; ok && v < 0 {
		return usagef("-width %d: must be positive (or 0 for the same as -image)", v)
	}
	return nil
}

// checkOutputs checks output files before any work: each can be written, and
// those named as plots have a format plots are saved in.
func checkOutputs(files, plots map[string]string) error {
	for flagName, path := range files {
		if err := train.CheckOutput("-"+flagName, path); err != nil {
			return usageError{err}
		}
	}
	for flagName, path := range plots {
		if err := train.CheckOutput("-"+flagName, path); err != nil {
			return usageError{err}
		}
		if err := train.CheckPlotFormat("-"+flagName, path); err != nil {
			return usageError{err}
		}
	}
	return nil
}
