package train

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/gorgonia-ooc/outofcore/models"
	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm/alloc"
	"github.com/gorgonia-ooc/outofcore/vm/cuda"
)

// Config is a training run's whole configuration. A checkpoint holds it, so
// that a run resumed from the checkpoint alone continues as it was started.
type Config struct {
	// The run's identity: a resumed run must keep all of these, since any
	// change would make it another run.

	// Model names a models.Build network; Data a datasets.Open spec. Open
	// builds both from them; New takes them built and records their names.
	Model string `json:"model"`
	Data  string `json:"data"`
	Batch int    `json:"batch"`
	// Image and Width are the input height and width (0: the data's native
	// size; Width 0: square). Classes 0 takes the data's. Hidden is lstm's width.
	Image   int   `json:"image,omitempty"`
	Width   int   `json:"width,omitempty"`
	Classes int   `json:"classes,omitempty"`
	Hidden  int   `json:"hidden,omitempty"`
	Seed    int64 `json:"seed"`
	Augment bool  `json:"augment,omitempty"`
	// Optimizer picks the update rule that steps the learnables: sgd,
	// momentum or adam (gorgonia's rules; Solver says whose code runs them).
	// This is where another rule plugs in: a new name here, its constructors
	// in newSolver, its state in exportSolver and importSolver. LR 0 takes
	// the optimizer's default.
	Optimizer string  `json:"optimizer"`
	LR        float64 `json:"lr"`
	// LRDrop are the epochs after which the learning rate is multiplied by 0.1.
	LRDrop []int `json:"lr_drop,omitempty"`

	// How long: Epochs in all, and at most Steps steps in all (0: no cap).
	// Epochs 0 with Steps > 0 trains as many epochs as Steps needs (the
	// last one cut short); Defaults makes Epochs 1 when neither is given.
	// A resume may change them.
	Epochs int `json:"epochs"`
	Steps  int `json:"steps,omitempty"`

	// How each step runs; a resume may change these too (the steps compute
	// the same values under any of them, bit for bit, but on another kind
	// or number of devices: see Device).
	//
	// Device is where the steps run: "cpu" (the default), "cuda" or "cuda:N"
	// (the CUDA kernels of vm/cuda/dispatch), or several CPU devices for
	// data-parallel training ("cpu,cpu", "cpu*2"; see Devices). A CUDA or
	// data-parallel step computes the CPU device's values up to float
	// rounding, not bit for bit.
	Device string `json:"device,omitempty"`
	// Devices N > 1 trains data parallel on N copies of Device (the same as
	// Device "cpu*N"): ooc.CompileParallel, each device a share of the batch.
	Devices int `json:"devices,omitempty"`
	// HostUpdate, on a CUDA device, runs gorgonia's solver on the host
	// (gradients down, weights up every step) instead of the update kernels
	// on the device (dispatch.Solver), the default.
	HostUpdate bool `json:"host_update,omitempty"`
	// LaunchTable, on a CUDA device, is where Fit writes the kernel launch
	// table of the training machine at the end (dispatch.WriteLaunchTable).
	LaunchTable string `json:"launch_table,omitempty"`
	// WorldSize N > 1 makes this process rank Rank of a data-parallel run
	// across N processes, on one machine or several (torchrun's RANK and
	// WORLD_SIZE), each on one CUDA device (Device cuda or cuda:LOCAL_RANK),
	// averaging gradients with NCCL. Every rank loads the same global
	// batch (the same seed, the same order) and trains on its share: the
	// rows a one-process run on N devices gives its replica Rank, so the
	// ranks compute that run's steps (bit for bit where NCCL sums in rank
	// order, as the fake NCCL does). Rank 0 evaluates, reports and writes
	// the checkpoint and the other outputs; every rank reads the checkpoint
	// to resume. NCCLID names the communicator: rank 0 makes it
	// (cuda.NewUniqueID) and hands it to the others (a file, the
	// environment, a rendezvous) before they Open. Rank and NCCLID are the
	// process's, not the run's: a checkpoint keeps WorldSize only.
	WorldSize int           `json:"world_size,omitempty"`
	Rank      int           `json:"-"`
	NCCLID    cuda.UniqueID `json:"-"`

	Budget    Budget `json:"budget"`
	Window    int64  `json:"window,omitempty"`    // window scheduler's schedule-window; 0: automatic
	Scheduler string `json:"scheduler,omitempty"` // auto (default: ooc.Auto), window (ooc.Window) or baseline
	Allocator string `json:"allocator,omitempty"` // va (default) or bestfit
	Chunk     int64  `json:"chunk,omitempty"`     // VA chunk size; 0: ooc's default
	// Solver runs the optimizer: "fast" (default), package solvers' in-place
	// multi-core rewrite, or "gorgonia", gorgonia's own solvers. They step
	// the same bits and checkpoint the same state, so a resume may switch.
	Solver string `json:"solver,omitempty"`

	// Outputs. Checkpoint is written atomically after each epoch, every
	// SaveEvery steps and at the end; History (JSON) and Plot (.svg, .png, ...)
	// are written at the end and cover the whole run, resumes included.
	Checkpoint    string `json:"checkpoint,omitempty"`
	SaveEvery     int    `json:"save_every,omitempty"`
	History       string `json:"history,omitempty"`
	Plot          string `json:"plot,omitempty"`
	RecordProfile string `json:"record_profile,omitempty"`
}

// ConfigError is a configuration the run cannot start with; commands report
// it as a usage error.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

func configErrorf(format string, args ...any) error {
	return &ConfigError{fmt.Errorf(format, args...)}
}

// Defaults fills in the zero fields that have a default.
func (c *Config) Defaults() {
	if c.Optimizer == "" {
		c.Optimizer = "adam"
	}
	if c.LR == 0 {
		c.LR = DefaultLR(c.Optimizer)
	}
	if c.Epochs == 0 && c.Steps == 0 {
		c.Epochs = 1
	}
	if c.Scheduler == "" {
		c.Scheduler = "auto"
	}
	if c.Allocator == "" {
		c.Allocator = ooc.VA.String()
	}
	if c.Device == "" {
		c.Device = "cpu"
	}
	if c.Solver == "" {
		c.Solver = FastSolver
	}
}

// Check validates every field, and the output paths (their directories exist
// and are writable, their formats are known), before any work starts.
func (c *Config) Check() error {
	if c.Model != "" && !KnownModel(c.Model) {
		return configErrorf("-model %q: unknown model (known: %s)", c.Model, strings.Join(models.Names(), ", "))
	}
	if _, ok := optimizerSlots(c.Optimizer); !ok {
		return configErrorf("-optimizer %q: unknown optimizer (want %s)", c.Optimizer, OptimizerNames())
	}
	if _, err := ooc.ParseAllocator(c.Allocator); err != nil {
		return configErrorf("-allocator: %v", err)
	}
	switch {
	case c.Solver != FastSolver && c.Solver != GorgoniaSolver:
		return configErrorf("-solver %q: unknown solver (want %s or %s)", c.Solver, FastSolver, GorgoniaSolver)
	case c.Scheduler != "auto" && c.Scheduler != "window" && c.Scheduler != "baseline":
		return configErrorf("-scheduler %q: unknown scheduler (want auto, window or baseline)", c.Scheduler)
	case c.Devices < 0:
		return configErrorf("-devices %d: want a positive count", c.Devices)
	case c.Devices > 1 && strings.ContainsAny(c.Device, ",*"):
		return configErrorf("-devices %d with -device %s: give the devices one way", c.Devices, c.Device)
	case c.WorldSize < 0:
		return configErrorf("-world-size %d: want a positive count of processes", c.WorldSize)
	case c.WorldSize > 1 && (c.Rank < 0 || c.Rank >= c.WorldSize):
		return configErrorf("-rank %d: want 0 to %d for -world-size %d", c.Rank, c.WorldSize-1, c.WorldSize)
	case c.WorldSize <= 1 && c.Rank != 0:
		return configErrorf("-rank %d: a rank is one of several processes: give -world-size too", c.Rank)
	case c.Budget.Bytes < 0 || c.Budget.Percent < 0 || math.IsNaN(c.Budget.Percent) || math.IsInf(c.Budget.Percent, 0):
		return configErrorf("-budget %v: must be positive", c.Budget)
	case c.Window < 0:
		return configErrorf("-window %d: must not be negative", c.Window)
	case c.Chunk < 0 || c.Chunk%alloc.HostGranularity() != 0:
		return configErrorf("-chunk %d: must be a multiple of the %d-byte page (2 MiB on a CUDA device), or 0: chosen for the budget", c.Chunk, alloc.HostGranularity())
	case c.Batch <= 0:
		return configErrorf("-batch %d: must be positive", c.Batch)
	case c.Image < 0:
		return configErrorf("-image %d: must be positive (or 0 for the data's size)", c.Image)
	case c.Hidden < 0:
		return configErrorf("-hidden %d: must be positive (or 0 for the model's default)", c.Hidden)
	case c.Width < 0:
		return configErrorf("-width %d: must be positive (or 0 for the same as -image)", c.Width)
	case c.Classes < 0:
		return configErrorf("-classes %d: must be positive (or 0 for the data's)", c.Classes)
	case c.Epochs < 0:
		return configErrorf("-epochs %d: must be positive", c.Epochs)
	case c.Steps < 0:
		return configErrorf("-steps %d: must not be negative", c.Steps)
	case c.Epochs == 0 && c.Steps == 0:
		return configErrorf("-epochs 0: give a positive -epochs, or -steps N to train N steps")
	case c.LR < 0 || math.IsNaN(c.LR) || math.IsInf(c.LR, 0):
		return configErrorf("-lr %v: must be a positive number (or 0 for the optimizer's default)", c.LR)
	case c.SaveEvery < 0:
		return configErrorf("-save-every %d: must not be negative", c.SaveEvery)
	case c.SaveEvery > 0 && c.Checkpoint == "":
		return configErrorf("-save-every needs -checkpoint FILE")
	}
	if err := c.checkDevice(); err != nil {
		return err
	}
	for i, e := range c.LRDrop {
		if e <= 0 || (i > 0 && e <= c.LRDrop[i-1]) {
			return configErrorf("-lr-drop %v: want increasing epoch numbers, e.g. 3,5", c.LRDrop)
		}
	}
	for _, out := range []struct{ flag, path string }{
		{"-checkpoint", c.Checkpoint}, {"-history", c.History}, {"-plot", c.Plot}, {"-record-profile", c.RecordProfile},
		{"-launch-table", c.LaunchTable},
	} {
		if err := CheckOutput(out.flag, out.path); err != nil {
			return err
		}
	}
	return CheckPlotFormat("-plot", c.Plot)
}

// KnownModel reports whether models.Build knows the name.
func KnownModel(name string) bool {
	for _, n := range models.Names() {
		if n == name {
			return true
		}
	}
	return false
}

// CheckOutput checks that a file can be written at path, by creating and
// removing a temporary file next to it, so that a run does not fail after its
// work for a reason it could have found first. An empty path is fine.
func CheckOutput(flag, path string) error {
	if path == "" {
		return nil
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return configErrorf("%s %s: is a directory", flag, path)
	}
	dir := filepath.Dir(path)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return configErrorf("%s %s: directory %s does not exist", flag, path, dir)
	}
	f, err := os.CreateTemp(dir, ".ooc-probe-*")
	if err != nil {
		return configErrorf("%s %s: cannot write in %s: %v", flag, path, dir, errors.Unwrap(err))
	}
	f.Close()
	os.Remove(f.Name())
	return nil
}

// plotFormats are the file types gonum/plot saves.
var plotFormats = []string{".svg", ".png", ".pdf", ".eps", ".jpg", ".jpeg", ".tif", ".tiff"}

// CheckPlotFormat checks that a plot file's extension names a format plots
// can be written in. An empty path is fine.
func CheckPlotFormat(flag, path string) error {
	if path == "" {
		return nil
	}
	ext := strings.ToLower(filepath.Ext(path))
	for _, f := range plotFormats {
		if ext == f {
			return nil
		}
	}
	return configErrorf("%s %s: unknown plot format %q (want %s)", flag, path, ext, strings.Join(plotFormats, ", "))
}

// allocator is the parsed Allocator (Check has vetted it).
func (c *Config) allocator() ooc.AllocatorKind {
	k, _ := ooc.ParseAllocator(c.Allocator)
	return k
}

// compileOptions are the Compile options for a resolved budget.
func (c *Config) compileOptions(budget int64) []ooc.Option {
	return c.compileOptionsFor(memoryPlan{planned: budget, chunk: c.Chunk})
}

// compileOptionsFor are the Compile options for a memory plan (its device
// not included).
//
// Training reads the loss only: WithNodeValues(0) keeps Compile from copying the other
// activations to the host after each op.
func (c *Config) compileOptionsFor(p memoryPlan) []ooc.Option {
	opts := []ooc.Option{ooc.WithAllocator(c.allocator()), ooc.WithWindow(c.Window), ooc.WithNodeValues(0)}
	if p.chunk > 0 {
		opts = append(opts, ooc.WithChunkSize(p.chunk))
	}
	switch c.Scheduler {
	case "baseline":
		return append(opts, ooc.Baseline())
	case "window":
		opts = append(opts, ooc.WithScheduler(ooc.Window{}))
	}
	return append(opts, ooc.WithBudget(p.planned))
}

// budgetError explains a budget Compile refused: an infeasible budget's
// *ooc.BudgetError carries about the least budget that works
// (ooc.LeastBudget), which the error turns into the -budget to ask for.
func (c *Config) budgetError(err error, budget, inCore int64) error {
	var open *openError
	if errors.As(err, &open) {
		return open.error // not the budget's doing
	}
	msg := fmt.Sprintf("-budget %s (%d bytes; in-core peak %d bytes): %v", c.Budget, budget, inCore, err)
	var be *ooc.BudgetError
	if !errors.As(err, &be) || be.Least <= 0 || inCore <= 0 {
		return errors.New(msg)
	}
	return fmt.Errorf("%s: try -budget %.0f%% (or -budget %d)", msg, math.Ceil(100*float64(be.Least)/float64(inCore)), be.Least)
}

// budgetLine describes the budget a program was planned under: the -budget
// given and, where the scheduler plans under less (the allocator's rounding
// on a device of exactly that size, or a backend's reserve), both, in words.
func (c *Config) budgetLine(planned, inCore int64) string {
	if c.Scheduler == "baseline" {
		return "no budget (baseline: in core, each tensor freed after its last use)"
	}
	pct := func(b int64) string {
		if inCore <= 0 {
			return ""
		}
		return fmt.Sprintf(", %.0f%% of the in-core peak %s", 100*float64(b)/float64(inCore), FormatBytes(inCore))
	}
	given := c.Budget.Resolve(inCore)
	if given <= 0 || given == planned {
		if c.Budget.Percent > 0 {
			return fmt.Sprintf("budget %d B (%s, %s of the in-core peak %s)", planned, FormatBytes(planned), c.Budget, FormatBytes(inCore))
		}
		return fmt.Sprintf("budget %d B (%s%s)", planned, FormatBytes(planned), pct(planned))
	}
	what := fmt.Sprintf("%d B (%s%s)", given, FormatBytes(given), pct(given))
	if c.Budget.Percent > 0 {
		what = fmt.Sprintf("%s of the in-core peak %s = %d B (%s)", c.Budget, FormatBytes(inCore), given, FormatBytes(given))
	}
	return fmt.Sprintf("budget %s, of which the scheduler plans under %d B (%s%s)", what, planned, FormatBytes(planned), pct(planned))
}

// learningRate is the rate for a (1-based) epoch: lr, times 0.1 for every
// drop epoch before it.
func learningRate(lr float64, drops []int, epoch int) float64 {
	for _, d := range drops {
		if d < epoch {
			lr *= 0.1
		}
	}
	return lr
}
