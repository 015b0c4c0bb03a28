package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/gorgonia-ooc/outofcore/datasets"
	"github.com/gorgonia-ooc/outofcore/models"
	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/train"
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
	Budget     train.Budget
	WindowText string
	Window     int64
	Scheduler  string
	Allocator  ooc.AllocatorKind
}

func (m *memoryOptions) define(fs *flag.FlagSet, def, of string) {
	fs.StringVar(&m.Device, "device", "cpu", deviceHelp)
	fs.StringVar(&m.BudgetText, "budget", def, "device-memory budget: bytes (1048576, 64MiB, 1.5GiB) or N% of "+of+"; 0 = the device's capacity")
	fs.StringVar(&m.WindowText, "window", "0", "schedule-window in bytes for the window scheduler (0: automatic)")
	fs.StringVar(&m.Scheduler, "scheduler", "auto", "swap scheduler: auto (the faster of window and hybrid, simulated on times measured in the first step), window (the paper's: swap under the budget) or baseline (in core, no swapping)")
	fs.Func("allocator", "device allocator: va (virtual addressing, default) or bestfit", func(s string) error {
		k, err := ooc.ParseAllocator(s)
		m.Allocator = k
		return err
	})
}

func (m *memoryOptions) check() error {
	var err error
	if m.BudgetText != "" {
		if m.Budget, err = train.ParseBudget(m.BudgetText); err != nil {
			return usageError{err}
		}
	}
	if m.Window, err = train.ParseBytes(m.WindowText); err != nil {
		return usagef("-window: %v", err)
	}
	if m.Scheduler != "auto" && m.Scheduler != "window" && m.Scheduler != "baseline" {
		return usagef("-scheduler %q: unknown scheduler (want auto, window or baseline)", m.Scheduler)
	}
	return nil
}

// trainOptions are the flags of "ooc train": the run's train.Config and how
// to show its progress.
type trainOptions struct {
	Model, Data, Optimizer string
	Solver                 string
	Batch, Image, Width    int
	Classes, Hidden        int
	Epochs, Steps          int
	LR                     float64
	LRDropText             string
	LRDrop                 []int // epochs after which the learning rate is multiplied by 0.1
	Seed                   int64
	Augment                bool
	memoryOptions
	Devices int // -devices: data parallel on this many copies of -device
	// HostUpdate runs the optimizer on the host on a CUDA device (default: on the device).
	HostUpdate bool
	// LaunchTable is where to write the kernel launch table of a CUDA run.
	LaunchTable string
	// WorldSize, Rank and NCCLIDFile make this process one rank of a run
	// across processes (worldID says how the ranks meet).
	WorldSize, Rank int
	NCCLIDFile      string

	Checkpoint string
	Resume     bool
	SaveEvery  int
	LogEvery   int
	Progress   string
	// RecordProfile is where to write the measured per-op times.
	RecordProfile string
	// History and Plot receive the per-epoch train loss and test accuracy.
	History, Plot string
	// CPUProfile is where to write a pprof CPU profile of the run (go tool pprof reads it).
	CPUProfile string

	set map[string]bool // flags given on the command line
}

func parseTrainFlags(args []string, stderr io.Writer) (*trainOptions, error) {
	o := &trainOptions{set: map[string]bool{}}
	fs := flag.NewFlagSet("train", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: ooc train [flags]\n       ooc train -checkpoint FILE -resume [flags to change]\n\n"+
			"Trains a model with ooc.Compile under a device-memory budget, evaluating on the test split after each epoch:\n"+
			"on the CPU device, on a GPU (-device cuda), or data parallel on several devices (-devices N, -device cpu,cpu,\n"+
			"-device cuda:0,cuda:1: each device a replica with its share of the batch and its own -budget; on CUDA devices\n"+
			"the update runs on each, gradients averaged by NCCL, or on the host without it; proven on a fake driver only),\n"+
			"or as one rank of such a run across processes and machines, one GPU each (-world-size N -rank R -nccl-id FILE;\n"+
			"proven with a fake driver and NCCL, ranks as processes of one machine).\n"+
			"-resume continues the run the checkpoint holds with its whole configuration; -epochs, -steps, the memory\n"+
			"flags and the output files given again override it.\n\nflags:\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&o.Model, "model", "smallcnn", "model to train: "+strings.Join(models.Names(), ", "))
	fs.StringVar(&o.Data, "data", "synthetic", "training data: "+datasets.Specs)
	fs.IntVar(&o.Batch, "batch", 32, "batch size")
	fs.IntVar(&o.Image, "image", 0, "input height, and width unless -width is given (0: the data's native size; 32 for synthetic data; a text corpus's 1 x sequence length)")
	fs.IntVar(&o.Width, "width", 0, "input width (0: the same as -image), e.g. -image 512 -width 1024 for Pix2PixHD on Cityscapes")
	fs.IntVar(&o.Classes, "classes", 0, "number of classes (0: the data's; 10 for synthetic data)")
	fs.IntVar(&o.Hidden, "hidden", 0, "lstm: embedding and hidden width (0: 650)")
	fs.IntVar(&o.Epochs, "epochs", 1, "epochs to train (in all, counting those a resumed checkpoint has done); with -steps and no -epochs, as many as -steps needs")
	fs.IntVar(&o.Steps, "steps", 0, "stop after this many steps in all (0: no cap); alone, it trains that many steps across epochs")
	fs.Float64Var(&o.LR, "lr", 0, "learning rate (0: 0.001 for adam, 0.01 for sgd and momentum)")
	fs.StringVar(&o.LRDropText, "lr-drop", "", "epochs after which the learning rate is multiplied by 0.1, e.g. 5 or 3,5")
	fs.StringVar(&o.Optimizer, "optimizer", "adam", "optimizer: "+train.OptimizerNames()+" (gorgonia's update rules)")
	fs.StringVar(&o.Solver, "solver", train.FastSolver, "code that runs the optimizer: "+train.FastSolver+" (package solvers: in place, all cores) or "+
		train.GorgoniaSolver+" (gorgonia's own); the same bits, so a resume may switch")
	fs.Int64Var(&o.Seed, "seed", 1, "seed of the weights, the data order and synthetic data")
	fs.BoolVar(&o.Augment, "augment", false, "augment the training data: random crop (4-pixel padding) and horizontal flip")
	o.memoryOptions.define(fs, "60%", "the in-core peak (ooc.Plan with ooc.Baseline)")
	fs.Lookup("device").Usage = deviceHelp + "; or several devices to train data parallel: CPU devices (cpu,cpu or cpu*N) or CUDA devices (cuda:0,cuda:1 or cuda*N, which is cuda:0 to cuda:N-1)"
	fs.IntVar(&o.Devices, "devices", 0, "train data parallel on N devices of -device's kind (the same as -device cpu*N or cuda*N): the batch split evenly among them, gradients averaged")
	fs.BoolVar(&o.HostUpdate, "host-update", false, "-device cuda: run the optimizer on the host (gradients down, weights up each step) instead of on the device")
	fs.IntVar(&o.WorldSize, "world-size", 0, "train data parallel across N processes, on one machine or several, one CUDA device each (-device cuda:LOCAL_RANK), "+
		"gradients averaged by NCCL: start one ooc train per rank, with the same flags and its own -rank (proven on a fake driver and NCCL only)")
	fs.IntVar(&o.Rank, "rank", 0, "with -world-size: this process's rank, 0 to N-1; rank 0 evaluates, reports and writes -checkpoint and the other outputs")
	fs.StringVar(&o.NCCLIDFile, "nccl-id", "", "with -world-size: a file every rank can read (a shared path across machines): rank 0 writes the NCCL id there "+
		"(the file must not exist yet) and removes it once every rank has joined; the other ranks wait for it")
	fs.StringVar(&o.LaunchTable, "launch-table", "", "-device cuda: write each kernel's launch configuration, launches per step, bytes moved and FLOPs to this file")
	fs.StringVar(&o.Checkpoint, "checkpoint", "", "checkpoint file, written atomically after each epoch, every -save-every steps, at the end and on an interrupt")
	fs.BoolVar(&o.Resume, "resume", false, "continue the run saved in -checkpoint, bit for bit, with its saved configuration")
	fs.IntVar(&o.SaveEvery, "save-every", 0, "also write the checkpoint every N steps (0: after each epoch and at the end only)")
	fs.IntVar(&o.LogEvery, "log-every", 0, "print a plain progress line every N steps (0: about 100 lines per run, and each epoch's last step)")
	fs.StringVar(&o.Progress, "progress", "auto", "progress display: bar, plain, or auto (a bar when stdout is a terminal)")
	fs.StringVar(&o.History, "history", "", "write per-epoch train loss and test accuracy, and per-step losses of the whole run, as JSON to this file")
	fs.StringVar(&o.Plot, "plot", "", "draw per-epoch train loss and test accuracy of the whole run to this file (.svg, .png, .pdf)")
	fs.StringVar(&o.RecordProfile, "record-profile", "", "write the per-op times measured here as a device profile for -device sim:measured:FILE")
	fs.StringVar(&o.CPUProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file, for go tool pprof")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, usageError{err}
	}
	if fs.NArg() > 0 {
		return nil, usagef("unexpected arguments %q (flags only)", fs.Args())
	}
	if err := checkTrainDevices(o.Device); err != nil {
		return nil, err
	}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
	return o, o.check()
}

func (o *trainOptions) check() error {
	if err := o.memoryOptions.check(); err != nil {
		return err
	}
	switch {
	case o.LogEvery < 0:
		return usagef("-log-every %d: must not be negative", o.LogEvery)
	case o.Epochs <= 0: // before train.Config's defaults make it 1
		return usagef("-epochs %d: must be positive", o.Epochs)
	case o.Resume && o.Checkpoint == "":
		return usagef("-resume needs -checkpoint FILE")
	case o.WorldSize > 1 && o.NCCLIDFile == "":
		return usagef("-world-size %d needs -nccl-id FILE: rank 0 writes the NCCL id there, the other ranks read it", o.WorldSize)
	case o.NCCLIDFile != "" && o.WorldSize <= 1 && !o.Resume: // a resume has the checkpoint's -world-size
		return usagef("-nccl-id %s: an NCCL id is for a run across processes: give -world-size N too", o.NCCLIDFile)
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
		o.LR = train.DefaultLR(o.Optimizer)
	}
	c := o.config()
	if o.Resume && !o.set["world-size"] {
		c.Rank = 0 // the checkpoint's -world-size bounds -rank: resumeConfig checks it
	}
	if err := c.Check(); err != nil {
		return usageError{err}
	}
	return nil
}

// epochs is -epochs, or 0 (as many as -steps needs: train.Config) when only
// -steps is given, so that "-steps 500" trains 500 steps rather than
// stopping at the end of the default single epoch.
func (o *trainOptions) epochs() int {
	if o.Steps > 0 && !o.set["epochs"] {
		return 0
	}
	return o.Epochs
}

// config is the train.Config the flags give.
func (o *trainOptions) config() train.Config {
	c := train.Config{
		Model: o.Model, Data: o.Data, Batch: o.Batch, Image: o.Image, Width: o.Width, Classes: o.Classes, Hidden: o.Hidden,
		Seed: o.Seed, Augment: o.Augment, Optimizer: o.Optimizer, Solver: o.Solver, LR: o.LR, LRDrop: o.LRDrop,
		Epochs: o.epochs(), Steps: o.Steps,
		Device: o.Device, Devices: o.Devices, HostUpdate: o.HostUpdate, LaunchTable: o.LaunchTable, Budget: o.Budget, Window: o.Window, Scheduler: o.Scheduler, Allocator: o.Allocator.String(),
		WorldSize: o.WorldSize, Rank: o.Rank,
		Checkpoint: o.Checkpoint, SaveEvery: o.SaveEvery, History: o.History, Plot: o.Plot, RecordProfile: o.RecordProfile,
	}
	c.Defaults()
	return c
}

// resumeConfig is the run a checkpoint holds, with the flags given again
// applied: flags of the run's identity (model, data, optimizer, ...) must
// agree with it, since anything else could not continue the run bit for bit;
// the others (duration, memory, outputs) override it, and notes say which.
func (o *trainOptions) resumeConfig(file string, saved train.Config) (train.Config, []string, error) {
	given := o.config()
	c := saved
	var errs, notes []string
	same := func(flag string, differs bool, have, want any) {
		if o.set[flag] && differs {
			errs = append(errs, fmt.Sprintf("-%s %v (the checkpoint has %v)", flag, have, want))
		}
	}
	same("model", given.Model != saved.Model, given.Model, saved.Model)
	same("data", given.Data != saved.Data, given.Data, saved.Data)
	same("optimizer", given.Optimizer != saved.Optimizer, given.Optimizer, saved.Optimizer)
	same("batch", given.Batch != saved.Batch, given.Batch, saved.Batch)
	same("image", given.Image != saved.Image, given.Image, saved.Image)
	same("width", given.Width != saved.Width, given.Width, saved.Width)
	same("hidden", given.Hidden != saved.Hidden, given.Hidden, saved.Hidden)
	same("classes", given.Classes != saved.Classes, given.Classes, saved.Classes)
	same("seed", given.Seed != saved.Seed, given.Seed, saved.Seed)
	same("lr", given.LR != saved.LR, given.LR, saved.LR)
	same("lr-drop", fmt.Sprint(given.LRDrop) != fmt.Sprint(saved.LRDrop), given.LRDrop, saved.LRDrop)
	if o.set["augment"] && given.Augment != saved.Augment {
		errs = append(errs, fmt.Sprintf("-augment=%v (the checkpoint has %v)", given.Augment, saved.Augment))
	}
	if len(errs) > 0 {
		return c, nil, usagef("-resume %s: %s; leave these flags out to continue the saved run", file, strings.Join(errs, ", "))
	}
	override := func(flag string, dst *string, v, old string) {
		if o.set[flag] && v != old {
			if old == "" {
				old = "none"
			}
			notes = append(notes, fmt.Sprintf("-%s %s overrides the checkpoint's %s", flag, v, old))
			*dst = v
		}
	}
	num := func(flag string, dst *int, v int) {
		if o.set[flag] && v != *dst {
			notes = append(notes, fmt.Sprintf("-%s %d overrides the checkpoint's %d", flag, v, *dst))
			*dst = v
		}
	}
	num("epochs", &c.Epochs, given.Epochs)
	num("steps", &c.Steps, given.Steps)
	if given.Epochs == 0 && c.Epochs != 0 {
		notes = append(notes, fmt.Sprintf("-steps %d without -epochs trains %d steps in all, past the checkpoint's -epochs %d", c.Steps, c.Steps, c.Epochs))
		c.Epochs = 0
	}
	num("save-every", &c.SaveEvery, given.SaveEvery)
	if o.set["budget"] && given.Budget != saved.Budget {
		notes = append(notes, fmt.Sprintf("-budget %s overrides the checkpoint's %s", given.Budget, saved.Budget))
		c.Budget = given.Budget
	}
	if o.set["window"] && given.Window != saved.Window {
		notes = append(notes, fmt.Sprintf("-window %d overrides the checkpoint's %d", given.Window, saved.Window))
		c.Window = given.Window
	}
	override("scheduler", &c.Scheduler, given.Scheduler, saved.Scheduler)
	override("allocator", &c.Allocator, given.Allocator, saved.Allocator)
	override("device", &c.Device, given.Device, saved.Device)
	override("solver", &c.Solver, given.Solver, saved.Solver)
	num("devices", &c.Devices, given.Devices)
	num("world-size", &c.WorldSize, given.WorldSize)
	c.Rank = given.Rank // the process's, not the run's
	if o.set["host-update"] && given.HostUpdate != saved.HostUpdate {
		notes = append(notes, fmt.Sprintf("-host-update=%v overrides the checkpoint's %v", given.HostUpdate, saved.HostUpdate))
		c.HostUpdate = given.HostUpdate
	}
	override("launch-table", &c.LaunchTable, given.LaunchTable, saved.LaunchTable)
	if !o.set["host-update"] && !o.set["launch-table"] && (c.HostUpdate || c.LaunchTable != "") && !strings.HasPrefix(c.Device, "cuda") {
		// What only a CUDA run does goes with the CUDA device.
		notes = append(notes, fmt.Sprintf("-device %s: the checkpoint's CUDA-only -host-update and -launch-table are dropped", c.Device))
		c.HostUpdate, c.LaunchTable = false, ""
	}
	override("history", &c.History, given.History, saved.History)
	override("plot", &c.Plot, given.Plot, saved.Plot)
	override("record-profile", &c.RecordProfile, given.RecordProfile, saved.RecordProfile)
	c.Checkpoint = file
	if !train.KnownModel(c.Model) {
		return c, nil, fmt.Errorf("-resume %s: the checkpoint names model %q, which this ooc does not know", file, c.Model)
	}
	if err := c.Check(); err != nil {
		return c, nil, fmt.Errorf("-resume %s: %w", file, err)
	}
	return c, notes, nil
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

// config is the train.EvalConfig the flags give.
func (o *evalOptions) config() train.EvalConfig {
	c := train.EvalConfig{Checkpoint: o.Checkpoint, Data: o.Data, Split: o.Split, Batch: o.Batch, Device: o.Device,
		Window: o.Window, Scheduler: o.Scheduler, Allocator: o.Allocator.String()}
	if o.BudgetText != "" {
		c.Budget = &o.Budget
	}
	return c
}

func runEval(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseEvalFlags(args, stderr)
	if err != nil {
		return err
	}
	_, err = train.EvaluateCheckpoint(o.config(), stdout)
	return err
}
