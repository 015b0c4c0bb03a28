package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gorgonia-ooc/outofcore/datasets"
	"github.com/gorgonia-ooc/outofcore/models"
	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm"
)

// errUsage marks errors in the command line (exit status 2).
var errUsage = errors.New("invalid usage")

type usageError struct{ error }

func (usageError) Is(target error) bool { return target == errUsage }

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// memoryOptions are the flags train and eval share: how the step is run.
type memoryOptions struct {
	Device     string
	BudgetText string
	Budget     budgetSpec
	WindowText string
	Window     int64
	Scheduler  string
	Allocator  ooc.AllocatorKind

	dev vm.Device // the -device opened by openRunDevice (nil: the CPU device Compile makes)
}

func (m *memoryOptions) define(fs *flag.FlagSet, def, of string) {
	fs.StringVar(&m.Device, "device", "cpu", deviceHelp)
	fs.StringVar(&m.BudgetText, "budget", def, "device-memory budget: bytes (1048576, 64MiB, 1.5GiB) or N% of "+of+"; 0 = the device's capacity")
	fs.StringVar(&m.WindowText, "window", "0", "schedule-window in bytes for the window scheduler (0: automatic)")
	fs.StringVar(&m.Scheduler, "scheduler", "window", "swap scheduler: window (swap under the budget) or baseline (in core, no swapping)")
	fs.Func("allocator", "device allocator: va (virtual addressing, default) or bestfit", func(s string) error {
		k, err := ooc.ParseAllocator(s)
		m.Allocator = k
		return err
	})
}

func (m *memoryOptions) check() error {
	var err error
	if m.BudgetText != "" {
		if m.Budget, err = parseBudget(m.BudgetText); err != nil {
			return usageError{err}
		}
	}
	if m.Window, err = parseBytes(m.WindowText); err != nil {
		return usagef("-window: %v", err)
	}
	if m.Scheduler != "window" && m.Scheduler != "baseline" {
		return usagef("-scheduler %q: unknown scheduler (want window or baseline)", m.Scheduler)
	}
	return nil
}

// options returns the Compile options for a resolved budget.
func (m *memoryOptions) options(budget int64) []ooc.Option {
	opts := []ooc.Option{ooc.WithAllocator(m.Allocator), ooc.WithWindow(m.Window)}
	if m.dev != nil {
		opts = append(opts, ooc.WithDevice(m.dev))
	}
	if m.Scheduler == "baseline" {
		return append(opts, ooc.Baseline())
	}
	return append(opts, ooc.WithBudget(budget))
}

// trainOptions are the flags of "ooc train".
type trainOptions struct {
	Model, Data, Optimizer string
	Batch, Image, Width    int
	Classes, Hidden        int
	Epochs, Steps          int
	LR                     float64
	LRDropText             string
	LRDrop                 []int // epochs after which the learning rate is multiplied by 0.1
	Seed                   int64
	Augment                bool
	memoryOptions

	Checkpoint string
	Resume     bool
	SaveEvery  int
	LogEvery   int
	Progress   string
	// RecordProfile is where to write the measured per-op times.
	RecordProfile string
	// HostUpdate runs the optimizer on the host on a CUDA device (default: on the device).
	HostUpdate bool
	// LaunchTable is where to write the kernel launch table of a CUDA run.
	LaunchTable string
	// History and Plot receive the per-epoch train loss and test accuracy.
	History, Plot string

	set map[string]bool // flags given on the command line
}

func parseTrainFlags(args []string, stderr io.Writer) (*trainOptions, error) {
	o := &trainOptions{set: map[string]bool{}}
	fs := flag.NewFlagSet("train", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: ooc train [flags]\n\nTrains a model with ooc.Compile under a device-memory budget, evaluating on the test split after each epoch.\n\nflags:\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&o.Model, "model", "smallcnn", "model to train: "+strings.Join(models.Names(), ", "))
	fs.StringVar(&o.Data, "data", "synthetic", "training data: "+datasets.Specs)
	fs.IntVar(&o.Batch, "batch", 32, "batch size")
	fs.IntVar(&o.Image, "image", 0, "input height, and width unless -width is given (0: the data's native size; 32 for synthetic data; a text corpus's 1 x sequence length)")
	fs.IntVar(&o.Width, "width", 0, "input width (0: the same as -image), e.g. -image 512 -width 1024 for Pix2PixHD on Cityscapes")
	fs.IntVar(&o.Classes, "classes", 0, "number of classes (0: the data's; 10 for synthetic data)")
	fs.IntVar(&o.Hidden, "hidden", 0, "lstm: embedding and hidden width (0: 650)")
	fs.IntVar(&o.Epochs, "epochs", 1, "epochs to train (in all, counting those a resumed checkpoint has done)")
	fs.IntVar(&o.Steps, "steps", 0, "stop after this many steps in all (0: no cap)")
	fs.Float64Var(&o.LR, "lr", 0, "learning rate (0: 0.001 for adam, 0.01 for sgd and momentum)")
	fs.StringVar(&o.LRDropText, "lr-drop", "", "epochs after which the learning rate is multiplied by 0.1, e.g. 5 or 3,5")
	fs.StringVar(&o.Optimizer, "optimizer", "adam", "optimizer: "+optimizerNames()+" (gorgonia's solvers)")
	fs.Int64Var(&o.Seed, "seed", 1, "seed of the weights, the data order and synthetic data")
	fs.BoolVar(&o.Augment, "augment", false, "augment the training data: random crop (4-pixel padding) and horizontal flip")
	o.memoryOptions.define(fs, "60%", "the in-core peak (ooc.Plan with ooc.Baseline)")
	fs.StringVar(&o.Checkpoint, "checkpoint", "", "checkpoint file, written atomically after each epoch, every -save-every steps and at the end")
	fs.BoolVar(&o.Resume, "resume", false, "continue the run saved in -checkpoint, bit for bit")
	fs.IntVar(&o.SaveEvery, "save-every", 0, "also write the checkpoint every N steps (0: after each epoch and at the end only)")
	fs.IntVar(&o.LogEvery, "log-every", 0, "print a plain progress line every N steps (0: about 100 lines per run, and each epoch's last step)")
	fs.StringVar(&o.Progress, "progress", "auto", "progress display: bar, plain, or auto (a bar when stdout is a terminal)")
	fs.StringVar(&o.History, "history", "", "write per-epoch train loss and test accuracy, and per-step losses, as JSON to this file")
	fs.StringVar(&o.Plot, "plot", "", "draw per-epoch train loss and test accuracy to this file (.svg, .png)")
	fs.StringVar(&o.RecordProfile, "record-profile", "", "write the per-op times measured here as a device profile for -device sim:measured:FILE")
	fs.BoolVar(&o.HostUpdate, "host-update", false, "-device cuda: run the optimizer on the host (gradients down, weights up each step) instead of on the device")
	fs.StringVar(&o.LaunchTable, "launch-table", "", "-device cuda: write each kernel's launch configuration, launches per step, bytes moved and FLOPs to this file")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, usageError{err}
	}
	if fs.NArg() > 0 {
		return nil, usagef("unexpected arguments %q (flags only)", fs.Args())
	}
	if err := checkRunDevice(o.Device); err != nil {
		return nil, err
	}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
	return o, o.check()
}

func (o *trainOptions) check() error {
	if !knownModel(o.Model) {
		return usagef("-model %q: unknown model (known: %s)", o.Model, strings.Join(models.Names(), ", "))
	}
	if _, ok := optimizerSlots(o.Optimizer); !ok {
		return usagef("-optimizer %q: unknown optimizer (want %s)", o.Optimizer, optimizerNames())
	}
	if err := o.memoryOptions.check(); err != nil {
		return err
	}
	switch {
	case o.Batch <= 0:
		return usagef("-batch %d: must be positive", o.Batch)
	case o.Image < 0:
		return usagef("-image %d: must be positive (or 0 for the data's size)", o.Image)
	case o.Hidden < 0:
		return usagef("-hidden %d: must be positive (or 0 for the model's default)", o.Hidden)
	case o.Width < 0:
		return usagef("-width %d: must be positive (or 0 for the same as -image)", o.Width)
	case o.Classes < 0:
		return usagef("-classes %d: must be positive (or 0 for the data's)", o.Classes)
	case o.Epochs <= 0:
		return usagef("-epochs %d: must be positive", o.Epochs)
	case o.Steps < 0:
		return usagef("-steps %d: must not be negative", o.Steps)
	case o.LR < 0 || math.IsNaN(o.LR) || math.IsInf(o.LR, 0):
		return usagef("-lr %v: must be a positive number (or 0 for the optimizer's default)", o.LR)
	case o.SaveEvery < 0:
		return usagef("-save-every %d: must not be negative", o.SaveEvery)
	case o.LogEvery < 0:
		return usagef("-log-every %d: must not be negative", o.LogEvery)
	case o.Resume && o.Checkpoint == "":
		return usagef("-resume needs -checkpoint FILE")
	case o.SaveEvery > 0 && o.Checkpoint == "":
		return usagef("-save-every needs -checkpoint FILE")
	}
	if _, err := newReporter(o.Progress, io.Discard, 1); err != nil {
		return usageError{err}
	}
	for _, f := range strings.Split(o.LRDropText, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		e, err := strconv.Atoi(f)
		if err != nil || e <= 0 || (len(o.LRDrop) > 0 && e <= o.LRDrop[len(o.LRDrop)-1]) {
			return usagef("-lr-drop %q: want increasing epoch numbers, e.g. 3,5", o.LRDropText)
		}
		o.LRDrop = append(o.LRDrop, e)
	}
	if o.LR == 0 {
		o.LR = defaultLR(o.Optimizer)
	}
	if o.Checkpoint != "" {
		dir := filepath.Dir(o.Checkpoint)
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return usagef("-checkpoint %s: directory %s does not exist", o.Checkpoint, dir)
		}
	}
	return nil
}

func knownModel(name string) bool {
	for _, n := range models.Names() {
		if n == name {
			return true
		}
	}
	return false
}

// adopt takes the run's identity from a checkpoint being resumed: flags not
// given take the checkpoint's values; flags given must agree with it, since
// anything else could not continue the run bit for bit.
func (o *trainOptions) adopt(file string, m ckptMeta) error {
	var errs []string
	str := func(flag string, v *string, saved string) {
		if o.set[flag] && *v != saved {
			errs = append(errs, fmt.Sprintf("-%s %s (the checkpoint has %s)", flag, *v, saved))
		}
		*v = saved
	}
	num := func(flag string, v *int, saved int) {
		if o.set[flag] && *v != saved {
			errs = append(errs, fmt.Sprintf("-%s %d (the checkpoint has %d)", flag, *v, saved))
		}
		*v = saved
	}
	str("model", &o.Model, m.Model)
	str("data", &o.Data, m.Data)
	str("optimizer", &o.Optimizer, m.Optimizer)
	num("batch", &o.Batch, m.Batch)
	num("image", &o.Image, m.Image)
	num("width", &o.Width, m.Width)
	num("hidden", &o.Hidden, m.Hidden)
	num("classes", &o.Classes, m.Classes)
	if o.set["seed"] && o.Seed != m.Seed {
		errs = append(errs, fmt.Sprintf("-seed %d (the checkpoint has %d)", o.Seed, m.Seed))
	}
	o.Seed = m.Seed
	if o.set["lr"] && o.LR != m.LR {
		errs = append(errs, fmt.Sprintf("-lr %v (the checkpoint has %v)", o.LR, m.LR))
	}
	o.LR = m.LR
	if o.set["lr-drop"] && fmt.Sprint(o.LRDrop) != fmt.Sprint(m.LRDrop) {
		errs = append(errs, fmt.Sprintf("-lr-drop %v (the checkpoint has %v)", o.LRDrop, m.LRDrop))
	}
	o.LRDrop = m.LRDrop
	if o.set["augment"] && o.Augment != m.Augment {
		errs = append(errs, fmt.Sprintf("-augment=%v (the checkpoint has %v)", o.Augment, m.Augment))
	}
	o.Augment = m.Augment
	if len(errs) > 0 {
		return usagef("-resume %s: %s; leave these flags out to continue the saved run", file, strings.Join(errs, ", "))
	}
	if _, ok := optimizerSlots(o.Optimizer); !ok || !knownModel(o.Model) {
		return fmt.Errorf("-resume %s: the checkpoint names model %q and optimizer %q, which this ooc does not know", file, o.Model, o.Optimizer)
	}
	return nil
}

// evalOptions are the flags of "ooc eval".
type evalOptions struct {
	Checkpoint string
	Data       string
	Split      string
	Batch      int
	memoryOptions
}

func parseEvalFlags(args []string, stderr io.Writer) (*evalOptions, error) {
	o := &evalOptions{}
	fs := flag.NewFlagSet("eval", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: ooc eval -checkpoint FILE [flags]\n\nEvaluates a checkpoint written by ooc train: test accuracy and loss, batch norm in inference mode.\n\nflags:\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&o.Checkpoint, "checkpoint", "", "checkpoint file written by ooc train (required)")
	fs.StringVar(&o.Data, "data", "", "data to evaluate on (default: the checkpoint's): "+datasets.Specs)
	fs.StringVar(&o.Split, "split", "test", "split to evaluate: test or train")
	fs.IntVar(&o.Batch, "batch", 0, "batch size (0: the checkpoint's)")
	o.memoryOptions.define(fs, "", "the forward pass's in-core peak (default: the budget the checkpoint was trained under)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, usageError{err}
	}
	if fs.NArg() > 0 {
		return nil, usagef("unexpected arguments %q (flags only)", fs.Args())
	}
	if err := checkRunDevice(o.Device); err != nil {
		return nil, err
	}
	if o.Checkpoint == "" {
		return nil, usagef("-checkpoint FILE is required")
	}
	if _, err := datasets.ParseSplit(o.Split); err != nil {
		return nil, usagef("-split %q: want test or train", o.Split)
	}
	if o.Batch < 0 {
		return nil, usagef("-batch %d: must be positive (or 0 for the checkpoint's)", o.Batch)
	}
	return o, o.memoryOptions.check()
}

// budgetError explains a budget Compile refused: with the window scheduler
// it also finds, by bisection over ooc.Plan, about the least budget that
// plans, so the user knows what to ask for.
func (m *memoryOptions) budgetError(err error, plan func(budget int64) error, budget, inCore int64) error {
	msg := fmt.Sprintf("-budget %s (%d bytes; in-core peak %d bytes): %v", m.BudgetText, budget, inCore, err)
	if m.Scheduler != "window" || !strings.Contains(err.Error(), "infeasible") || budget >= inCore || plan(inCore) != nil {
		return errors.New(msg)
	}
	lo, hi := budget, inCore
	for i := 0; i < 20 && hi-lo > max(hi/200, 1); i++ {
		mid := lo + (hi-lo)/2
		if plan(mid) == nil {
			hi = mid
		} else {
			lo = mid
		}
	}
	return fmt.Errorf("%s; the least budget that plans is about %d bytes (%s, %.0f%% of the in-core peak): try -budget %.0f%%",
		msg, hi, formatBytes(hi), 100*float64(hi)/float64(inCore), math.Ceil(100*float64(hi)/float64(inCore)))
}
