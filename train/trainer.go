package train

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"runtime"
	"strings"
	"time"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/datasets"
	"github.com/gorgonia-ooc/outofcore/models"
	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm"
)

// EventKind says what an Event reports.
type EventKind int

const (
	// EpochStart: an epoch begins (or continues, after a resume) at Batch.
	EpochStart EventKind = iota
	// StepDone: a training step finished.
	StepDone
	// EpochDone: an epoch finished; Text holds its mean train loss.
	EpochDone
	// Evaluated: the test split was evaluated; Eval holds the result.
	Evaluated
	// Saved: the checkpoint was written.
	Saved
)

// Event is what Fit reports to the Progress callback.
type Event struct {
	Kind           EventKind
	Step, LastStep int // global step number and the last one this Fit will do
	Epoch, Epochs  int // 1-based epoch and the epoch count
	Batch, Batches int // 1-based batch within the epoch and batches per epoch
	BatchSize      int
	Images         int // images in the step's batch
	Loss           float64
	ImagesPerSec   float64 // over this Fit so far
	PeakDevice     int64
	// SwapInBytes and SwapOutBytes count this Fit's swaps so far.
	SwapInBytes, SwapOutBytes int64
	Eval                      *EvalResult
	// Text is a line for a person (EpochDone, Evaluated, Saved).
	Text string
}

// Result is what one call of Fit did.
type Result struct {
	Losses []float64     // per step of this Fit, exactly as computed
	Evals  []EvalResult  // the evaluations this Fit made
	Epochs []EpochRecord // the epochs this Fit finished
	First  int           // global number of this Fit's first step
	Steps  int           // global steps done at the end
	Stats  vm.Stats

	images                                int
	elapsed, solverTime, dataWait, evTime time.Duration
	firstLoss, lastLoss                   float64
	lastStep                              int
}

// Trainer trains a model on a dataset with a machine ooc.Compile made, and
// evaluates it on a test set after each epoch. It is not safe for
// concurrent use.
type Trainer struct {
	cfg      Config
	model    *models.Model
	trainSet datasets.Dataset
	testSet  datasets.Dataset // nil: no evaluation
	testNote string
	shape    dataShape
	lo       datasets.Options
	loader   *datasets.Loader
	bpe      int
	inCore   int64
	budget   int64      // the budget resolved to bytes
	mem      memoryPlan // the device and the scheduling budget it allows
	dev      vm.Device  // the training device when the trainer made it
	extra    []ooc.Option
	machine  *vm.Machine  // the training machine (replica 0's when data parallel)
	par      *parallelRun // data-parallel runs: the replicas
	upd      *deviceUpdate
	ev       *evaluator
	solver   G.Solver
	bns      []batchNorm

	// Position and history of the whole run.
	step, nextEpoch, nextBatch int
	epochLoss                  float64
	epochSteps                 int
	lastEval                   *EvalResult
	losses                     []float64 // every step's loss since historyFrom
	historyFrom                int       // global number of losses[0]
	epochs                     []EpochRecord
	saved                      int
	resumed                    string // the checkpoint restored, if any
	existed                    bool   // cfg.Checkpoint existed when the trainer was made
	stale                      []string

	// Progress, when set, is called as training goes.
	Progress func(Event)
}

// Open builds the model and opens the data cfg names (cfg.Model, cfg.Data)
// and returns a Trainer over them, for a new run: cfg.Checkpoint, if given,
// must not exist yet. Extra options go to ooc.Compile.
func Open(cfg Config, extra ...ooc.Option) (*Trainer, error) {
	// Every rank of a run across processes checks, so that none is left
	// waiting for rank 0: none can find rank 0's first checkpoint, which
	// comes after a step all ranks joined.
	if err := checkNew(cfg.Checkpoint); err != nil {
		return nil, err
	}
	return open(cfg, extra)
}

// Resume continues the run saved in the checkpoint ck read from file (Load):
// cfg is the run's configuration, ck.Meta.Run or RunConfig(ck) with any
// changes to its duration, memory or outputs. cfg.Checkpoint empty means
// file.
func Resume(ck *Checkpoint, file string, cfg Config, extra ...ooc.Option) (*Trainer, error) {
	if cfg.Checkpoint == "" {
		cfg.Checkpoint = file
	}
	t, err := open(cfg, extra)
	if err != nil {
		return nil, err
	}
	if err := t.Restore(ck, file); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// RunConfig is the configuration a checkpoint was written under: its Run
// record, or for a version 1 file the fields its meta record holds.
func RunConfig(ck *Checkpoint) Config {
	if ck.Meta.Run != nil {
		return *ck.Meta.Run
	}
	m := ck.Meta
	c := Config{Model: m.Model, Data: m.Data, Batch: m.Batch, Image: m.Image, Width: m.Width, Classes: m.Classes, Hidden: m.Hidden,
		Seed: m.Seed, Augment: m.Augment, Optimizer: m.Optimizer, LR: m.LR, LRDrop: m.LRDrop, Budget: Budget{Bytes: m.Budget}}
	if m.Budget == 0 {
		c.Scheduler = "baseline"
	}
	c.Defaults()
	return c
}

func open(cfg Config, extra []ooc.Option) (*Trainer, error) {
	cfg.Defaults()
	if cfg.Model == "" || cfg.Data == "" {
		return nil, configErrorf("train.Open needs Config.Model and Config.Data (or use train.New)")
	}
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	trainDS, err := openSplit(cfg.Data, datasets.Train, cfg.Image, cfg.Width, cfg.Classes, cfg.Seed, false)
	if err != nil {
		return nil, err
	}
	shape, err := resolveShape(trainDS.Info(), cfg.Data, cfg.Image, cfg.Width, cfg.Classes)
	if err != nil {
		return nil, err
	}
	shape.hidden = cfg.Hidden
	m, err := buildModel(cfg.Model, cfg.Batch, shape, cfg.Seed)
	if err != nil {
		return nil, err
	}
	if wantsSegmentation(m) && !shape.seg && isSynthetic(cfg.Data) {
		// Synthetic data can carry masks; reopen it so.
		if trainDS, err = openSplit(cfg.Data, datasets.Train, shape.height, shape.width, cfg.Classes, cfg.Seed, true); err != nil {
			return nil, err
		}
		if shape, err = resolveShape(trainDS.Info(), cfg.Data, shape.height, shape.width, cfg.Classes); err != nil {
			return nil, err
		}
		shape.hidden = cfg.Hidden
		if m, err = buildModel(cfg.Model, cfg.Batch, shape, cfg.Seed); err != nil {
			return nil, err
		}
	}
	testDS, err := openSplit(cfg.Data, datasets.Test, shape.height, shape.width, shape.classes, cfg.Seed, shape.seg)
	note := ""
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		testDS, note = nil, fmt.Sprintf("no test split, evaluation skipped (%v)", err)
	}
	t, err := newTrainer(m, trainDS, testDS, cfg, shape, extra)
	if t != nil && note != "" && t.testNote == "" {
		t.testNote = note
	}
	return t, err
}

// New returns a Trainer over a built model (models.Build), its training data
// and its test data (nil: no evaluation). cfg.Model and cfg.Data may be
// empty; cfg's shape fields are taken from the model. Extra options go to
// ooc.Compile (e.g. ooc.WithDevice).
func New(m *models.Model, trainSet, testSet datasets.Dataset, cfg Config, extra ...ooc.Option) (*Trainer, error) {
	if m == nil || trainSet == nil {
		return nil, configErrorf("train.New: a model and a training set are required")
	}
	cfg.Defaults()
	if cfg.Model == "" {
		cfg.Model = m.Name
	}
	shape := modelShape(m)
	cfg.Batch, cfg.Hidden, cfg.Classes = m.Config.Batch, m.Config.Hidden, shape.classes
	cfg.Image, cfg.Width = shape.height, ckptWidth(shape)
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	t, err := newTrainer(m, trainSet, testSet, cfg, shape, extra)
	if t != nil && testSet == nil && t.testNote == "" {
		t.testNote = "no test set, evaluation skipped"
	}
	return t, err
}

func newTrainer(m *models.Model, trainDS, testDS datasets.Dataset, cfg Config, shape dataShape, extra []ooc.Option) (t *Trainer, err error) {
	t = &Trainer{cfg: cfg, model: m, trainSet: trainDS, testSet: testDS, shape: shape, extra: extra}
	defer func() {
		if err != nil {
			t.Close()
			t = nil
		}
	}()
	if cfg.Rank > 0 && testDS != nil {
		testDS, t.testSet = nil, nil
		t.testNote = fmt.Sprintf("rank 0 evaluates (this is rank %d of %d)", cfg.Rank, cfg.WorldSize)
	}
	if cfg.Checkpoint != "" {
		// A run either resumes a checkpoint or starts one; it never replaces
		// a checkpoint it did not load (Fit refuses unless Restore ran).
		t.existed = checkNew(cfg.Checkpoint) != nil
		if cfg.Rank == 0 { // the writer's temporary files
			if t.stale, err = RemoveStaleTemps(cfg.Checkpoint); err != nil {
				return t, err
			}
		}
	}
	info := trainDS.Info()
	t.lo = datasets.Options{
		BatchSize: cfg.Batch, Channels: shape.channels, Height: shape.height, Width: shape.width,
		Dtype: tensor.Float32, Shuffle: true, Seed: cfg.Seed, Last: datasets.DropLast,
		Mean: info.Mean, Std: info.Std, Epochs: cfg.Epochs,
	}
	if cfg.Augment {
		t.lo.RandomCrop, t.lo.Flip = 4, true
	}
	if err := t.openLoader(); err != nil {
		return t, err
	}
	if err := checkFit(m, t.loader, cfg.Model, cfg.Data); err != nil {
		return t, err
	}
	if t.bpe = t.loader.BatchesPerEpoch(); t.bpe == 0 {
		return t, fmt.Errorf("-data %s has %d training examples, fewer than one batch of %d", cfg.Data, info.Examples, cfg.Batch)
	}

	// Memory: the in-core peak, the budget, the machines. Each device of
	// a data-parallel run holds a replica with its share of the batch:
	// that is the model planned.
	pm := m
	if n := cfg.replicas(); n > 1 {
		if cfg.Batch%n != 0 && cfg.WorldSize > 1 {
			return t, configErrorf("-batch %d does not split evenly among %d ranks (-world-size %d) of %d device each", cfg.Batch, n, cfg.WorldSize, cfg.deviceCount())
		}
		if cfg.Batch%n != 0 {
			return t, configErrorf("-batch %d does not split evenly among %d devices (-device %s)", cfg.Batch, n, cfg.deviceName())
		}
		if pm, err = replicaModel(m, cfg.Batch/n); err != nil {
			return t, fmt.Errorf("a replica of %s for %d devices: %w", m.Name, n, err)
		}
	}
	inCore, err := ooc.Plan(pm.Graph, ooc.Baseline())
	if err != nil {
		return t, err
	}
	t.inCore = inCore.Peak
	t.budget = cfg.Budget.Resolve(t.inCore)
	explain := func(err error) error {
		return cfg.budgetError(err, t.budget, t.inCore)
	}
	if cfg.usesCUDA() {
		// The CUDA device's own memory bounds the allocator: no CPU
		// device stands in for it.
		t.mem = memoryPlan{planned: t.budget, chunk: cfg.Chunk}
	} else if t.mem, err = fitMemory(&t.cfg, pm, t.budget); err != nil {
		var small *deviceTooSmallError
		if !errors.As(err, &small) && !strings.Contains(err.Error(), "infeasible") {
			return t, explain(err)
		}
		msg := fmt.Sprintf("-budget %s (%d bytes; in-core peak %d bytes): %v", cfg.Budget, t.budget, t.inCore, err)
		if least, lerr := ooc.LeastBudget(pm.Graph, t.cfg.leastOptions(pm)...); lerr == nil && least > 0 {
			pct := math.Ceil(100 * float64(least) / float64(t.inCore))
			return t, fmt.Errorf("%s; the least device that serves a step is about %s (%.0f%% of the in-core peak): try -budget %.0f%% (or -budget %d)",
				msg, FormatBytes(least), pct, pct, least)
		}
		return t, errors.New(msg)
	}
	opts := t.cfg.compileOptionsFor(t.mem)
	switch {
	case cfg.parallelSpec() != "":
		if t.par, err = compileParallel(&t.cfg, m, pm, t.mem, append(append(opts, t.extra...), ooc.BindDualValues(m.Learnables...))); err != nil {
			return t, explain(err)
		}
		t.machine = t.par.p.Machines()[0]
		if t.par.reserve > 0 {
			t.budget += t.par.reserve
			t.mem.planned = t.budget
		}
	case cfg.onCUDA():
		if t.dev, err = openCUDA(cfg.Device); err != nil {
			return t, err
		}
		opts = append(opts, ooc.WithDevice(t.dev))
		if r := vm.BackendReserve(t.dev); r > 0 && cfg.Budget.Percent > 0 && cfg.Scheduler != "baseline" {
			// A percentage is of the program's in-core peak; the budget
			// also holds the backend's fixed reserve (cuBLAS's
			// workspace), which ooc plans beside the program.
			t.budget += r
			t.mem.planned = t.budget
			opts = append(opts, ooc.WithBudget(t.budget))
		}
	case t.mem.device > 0:
		if t.dev, err = vm.NewCPU(t.mem.device); err != nil {
			return t, err
		}
		opts = append(opts, ooc.WithDevice(t.dev))
	}
	if t.par == nil {
		opts = append(append(opts, t.extra...), ooc.BindDualValues(m.Learnables...))
		if t.machine, err = ooc.Compile(m.Graph, opts...); err != nil {
			return t, explain(err)
		}
	}
	t.bns = modelBatchNorms(m)
	if testDS != nil {
		em, ebns := m, t.bns
		if t.par != nil {
			em, ebns = t.par.eval, t.par.evalBNs
		}
		if t.ev, err = newEvaluator(em, ebns); err == nil {
			evOpts := t.compileOptions()
			if d := t.evalDevice(); d != nil {
				evOpts = append(evOpts, ooc.WithDevice(d)) // the forward pass computes there too
			}
			err = t.ev.compile(evOpts...)
		}
		if err != nil {
			return t, fmt.Errorf("evaluation: %w", err)
		}
	}
	impl := cfg.Solver
	if cfg.usesCUDA() && !cfg.HostUpdate {
		// The update runs on the device with the settings of a gorgonia
		// solver (vm/cuda/dispatch.NewSolver); the host solver never steps.
		impl = GorgoniaSolver
	}
	if t.solver, err = newSolver(cfg.Optimizer, impl, cfg.LR); err != nil {
		return t, err
	}
	t.historyFrom = 1
	return t, nil
}

// compileOptions are the evaluation machine's: the training run's
// scheduling budget and chunk, on a device of its own.
func (t *Trainer) compileOptions() []ooc.Option {
	p := t.mem
	if p.planned == 0 {
		p.planned = t.budget
	}
	return append(t.cfg.compileOptionsFor(p), t.extra...)
}

// openLoader (re)opens the training loader at the run's position.
func (t *Trainer) openLoader() error {
	if t.loader != nil {
		t.loader.Close()
	}
	lo := t.lo
	lo.StartEpoch, lo.StartBatch = t.nextEpoch, t.nextBatch
	l, err := datasets.NewLoader(t.trainSet, lo)
	if err != nil {
		return fmt.Errorf("-data %s: %w", t.cfg.Data, err)
	}
	t.loader = l
	return nil
}

// Close releases the machines and the loader.
func (t *Trainer) Close() error {
	var errs []error
	if t.loader != nil {
		errs = append(errs, t.loader.Close())
	}
	if t.ev != nil {
		errs = append(errs, t.ev.Close())
	}
	errs = append(errs, t.upd.close())
	t.upd = nil
	if t.par != nil {
		errs = append(errs, t.par.close()) // closes t.machine, replica 0's
	} else if t.machine != nil {
		errs = append(errs, t.machine.Close())
	}
	if t.dev != nil {
		errs = append(errs, t.dev.Close())
	}
	return errors.Join(errs...)
}

// Config is the run's configuration, defaults filled in.
func (t *Trainer) Config() Config { return t.cfg }

// Model is the model being trained.
func (t *Trainer) Model() *models.Model { return t.model }

// Machine is the training machine (replica 0's in a data-parallel run).
func (t *Trainer) Machine() *vm.Machine { return t.machine }

// runStep runs one training step's graph: the machine, or every replica.
// Each step is Reset first: like TapeMachine's, a machine's RunAll does
// nothing after a finished run until Reset.
func (t *Trainer) runStep() error {
	if t.par != nil {
		t.par.p.Reset()
		return t.par.p.RunAll() // a failed step resets the replicas
	}
	t.machine.Reset()
	if err := t.machine.RunAll(); err != nil {
		t.machine.Reset()
		return err
	}
	return nil
}

// stageNext takes the next batch from the loader and stages it on the
// machine (vm.Machine.StageNext): the step about to run copies it to the
// device after its last read of the input.
func (t *Trainer) stageNext() (*datasets.Batch, error) {
	b, err := t.loader.Next()
	if err != nil {
		return nil, fmt.Errorf("-data %s: %w", t.cfg.Data, err)
	}
	if err := t.machine.StageNext(t.model.Input, b.X); err != nil {
		return nil, err
	}
	if err := t.machine.StageNext(t.model.Labels, b.Y); err != nil {
		return nil, err
	}
	return b, nil
}

// parStats are a data-parallel run's (zero for one device).
func (t *Trainer) parStats() ooc.ParallelStats {
	if t.par == nil {
		return ooc.ParallelStats{}
	}
	return t.par.p.Stats()
}

// stats are the training machine's, or the replicas' (parallelRun.stats).
func (t *Trainer) stats() vm.Stats {
	if t.par != nil {
		return t.par.stats()
	}
	return t.machine.Stats()
}

// Step is the number of steps done in the whole run.
func (t *Trainer) Step() int { return t.step }

// History is the whole run's record: finished epochs and per-step losses.
func (t *Trainer) History() History {
	return History{Epochs: append([]EpochRecord{}, t.epochs...), Losses: append([]float64{}, t.losses...), First: t.historyFrom}
}

// LastStep is where Fit stops: the end of the last epoch or the step cap.
func (t *Trainer) LastStep() int {
	last := t.Epochs() * t.bpe
	if t.cfg.Steps > 0 && t.cfg.Steps < last {
		last = t.cfg.Steps
	}
	return last
}

// Epochs is the number of epochs Fit trains into: Config.Epochs, or as many
// as Config.Steps needs when Epochs is 0 (the last one may be cut short).
func (t *Trainer) Epochs() int {
	if t.cfg.Epochs > 0 || t.bpe == 0 {
		return t.cfg.Epochs
	}
	return (t.cfg.Steps + t.bpe - 1) / t.bpe
}

// Restore continues the run saved in ck: weights, batch-norm statistics,
// optimizer state, data position and history. The checkpoint must come from
// the same model, data and optimizer (its Run, or Meta's identity fields).
func (t *Trainer) Restore(ck *Checkpoint, file string) error {
	m := ck.Meta
	if m.Model != t.cfg.Model || m.Batch != t.cfg.Batch || m.Optimizer != t.cfg.Optimizer || m.Seed != t.cfg.Seed {
		return configErrorf("checkpoint %s is of model %s (batch %d, %s, seed %d), this run %s (batch %d, %s, seed %d)",
			file, m.Model, m.Batch, m.Optimizer, m.Seed, t.cfg.Model, t.cfg.Batch, t.cfg.Optimizer, t.cfg.Seed)
	}
	if t.upd != nil {
		return errors.New("train: Restore after Fit moved the update to the CUDA device: restore into a new Trainer")
	}
	if err := restoreTensors(file, ck, t.model.Learnables, t.bns, t.solver); err != nil {
		return err
	}
	if err := t.par.statsFrom(t.bns); err != nil {
		return fmt.Errorf("checkpoint %s: batch-norm statistics to the replicas: %w", file, err)
	}
	t.step, t.nextEpoch, t.nextBatch = m.Step, m.NextEpoch, m.NextBatch
	t.epochLoss, t.epochSteps, t.lastEval = m.EpochLossSum, m.EpochSteps, m.LastEval
	t.epochs = append([]EpochRecord{}, m.Epochs...)
	t.losses = append([]float64{}, ck.Losses...)
	t.historyFrom = m.Step - len(ck.Losses) + 1
	t.saved, t.resumed = t.step, file
	return t.openLoader()
}

// Describe prints what the run is about to do.
func (t *Trainer) Describe(out io.Writer) {
	cfg, m, prog := t.cfg, t.model, t.machine.Program()
	swapIns, _ := prog.Count(vm.SwapIn)
	fmt.Fprintf(out, "model %s: %s learnable parameters; input %dx%s, batch %d, %d classes\n",
		cfg.Model, withCommas(m.NumParams()), t.shape.channels, t.shape.size(), cfg.Batch, t.shape.classes)
	fmt.Fprintf(out, "data %s: %d training examples, %d batches per epoch", cfg.Data, t.trainSet.Info().Examples, t.bpe)
	if t.testSet != nil {
		fmt.Fprintf(out, "; %d test examples", t.testSet.Info().Examples)
	}
	fmt.Fprintln(out)
	fmt.Fprintf(out, "optimizer %s (%s solver), learning rate %g, seed %d\n", cfg.Optimizer, cfg.Solver, cfg.LR, cfg.Seed)
	if len(cfg.LRDrop) > 0 {
		fmt.Fprintf(out, "learning rate x0.1 after epochs %v\n", cfg.LRDrop)
	}
	mem := "memory"
	if t.par != nil {
		mem = "memory per device (its replica's step)"
	}
	fmt.Fprintf(out, "%s: in-core peak %s; scheduler %s, %s, allocator %s; tape of %d instructions, %d swap-ins per step\n",
		mem, FormatBytes(t.inCore), prog.Scheduler, cfg.budgetLine(prog.Budget, t.inCore), cfg.Allocator, len(prog.Instrs), swapIns)
	if line := t.deviceLine(); line != "" {
		fmt.Fprintf(out, "device: %s\n", line)
	}
	if line := t.computeLine(); line != "" {
		fmt.Fprintf(out, "compute: %s\n", line)
	}
	if t.ev != nil {
		ep := t.ev.machine.Program()
		fmt.Fprintf(out, "evaluation: forward pass only (%d ops, peak %s), batch norm in inference mode; logits: %s\n", len(ep.Funcs), FormatBytes(ep.Peak), t.ev.Note)
	} else {
		fmt.Fprintln(out, "evaluation:", t.testNote)
	}
	for _, f := range t.stale {
		fmt.Fprintf(out, "removed %s, a temporary file an interrupted write of %s left behind\n", f, cfg.Checkpoint)
	}
	if t.resumed != "" {
		fmt.Fprintf(out, "resuming %s after step %d: next is batch %d of %d in epoch %d\n", t.resumed, t.step, t.nextBatch+1, t.bpe, t.nextEpoch+1)
	}
}

func (t *Trainer) emit(e Event) {
	if t.Progress != nil {
		t.Progress(e)
	}
}

func (t *Trainer) note(kind EventKind, format string, args ...any) {
	t.emit(Event{Kind: kind, Step: t.step, Text: fmt.Sprintf(format, args...)})
}

// Save writes the run's checkpoint to cfg.Checkpoint now, atomically (a no-op
// without a checkpoint file, when nothing changed since the last save, or on
// a rank other than 0 of a run across processes).
func (t *Trainer) Save() error {
	if t.cfg.Checkpoint == "" || t.saved == t.step || t.cfg.Rank > 0 {
		return nil // rank 0 writes a run across processes' checkpoint
	}
	c, err := t.checkpoint()
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := Save(t.cfg.Checkpoint, c); err != nil {
		return err
	}
	t.saved = t.step
	t.note(Saved, "checkpoint %s written (step %d)", t.cfg.Checkpoint, t.step)
	return nil
}

// checkpoint captures the run as it stands (the live tensors: write it
// before the next step).
func (t *Trainer) checkpoint() (*Checkpoint, error) {
	if err := t.upd.toHost(); err != nil {
		return nil, err
	}
	if err := t.par.statsTo(t.bns); err != nil {
		return nil, err
	}
	tensors, iter, err := captureTensors(t.model.Learnables, t.bns, t.solver, t.cfg.Optimizer)
	if err != nil {
		return nil, err
	}
	trainBudget := t.machine.Program().Budget
	if t.cfg.Scheduler == "baseline" {
		trainBudget = 0
	}
	run := t.cfg
	cfg, shape := t.cfg, t.shape
	return &Checkpoint{Meta: Meta{
		Program: "ooc train", Saved: time.Now().UTC().Format(time.RFC3339),
		Model: cfg.Model, Batch: cfg.Batch, Channels: shape.channels, Image: shape.height, Width: ckptWidth(shape), Hidden: shape.hidden, Classes: shape.classes,
		Dtype: "float32", Params: t.model.NumParams(),
		Data: cfg.Data, Seed: cfg.Seed, Augment: cfg.Augment, Mean: t.lo.Mean, Std: t.lo.Std, Optimizer: cfg.Optimizer, LR: cfg.LR, LRDrop: cfg.LRDrop,
		OptimizerIter: iter, Budget: trainBudget,
		Step: t.step, NextEpoch: t.nextEpoch, NextBatch: t.nextBatch, EpochLossSum: t.epochLoss, EpochSteps: t.epochSteps,
		LastEval: t.lastEval, Run: &run, Epochs: t.epochs,
	}, Tensors: tensors, Losses: t.losses}, nil
}

// InterruptedError is Fit's error when its context was cancelled: the run
// stopped after Step, and the checkpoint (if any) holds it.
type InterruptedError struct {
	Step       int
	Checkpoint string // "" when the run has no checkpoint file
	Err        error  // the context's error
	SaveErr    error  // why the checkpoint could not be written, if it could not
}

func (e *InterruptedError) Error() string {
	if e.SaveErr != nil {
		return fmt.Sprintf("interrupted after step %d; the checkpoint could not be written: %v", e.Step, e.SaveErr)
	}
	if e.Checkpoint == "" {
		return fmt.Sprintf("interrupted after step %d (no checkpoint to continue from)", e.Step)
	}
	return fmt.Sprintf("interrupted after step %d; checkpoint %s holds the run", e.Step, e.Checkpoint)
}

func (e *InterruptedError) Unwrap() error { return e.Err }

// Evaluate runs the forward pass over the whole test set, batch norm in
// inference mode, and leaves the training state exactly as it was.
func (t *Trainer) Evaluate() (EvalResult, error) {
	if t.ev == nil {
		return EvalResult{}, errors.New(t.testNote)
	}
	if err := t.upd.weightsToHost(); err != nil {
		return EvalResult{}, err
	}
	lo := t.lo
	if t.par != nil {
		if err := t.par.toEval(t.model.Learnables); err != nil {
			return EvalResult{}, err
		}
		lo.BatchSize /= t.par.replicas()
	}
	r, err := t.ev.evaluate(t.testSet, lo)
	r.Step, r.Epoch = t.step, t.nextEpoch
	return r, err
}

// Fit trains until cfg.Epochs (or cfg.Steps) are done, evaluating after each
// epoch and saving the checkpoint after each epoch, every cfg.SaveEvery
// steps and at the end. When ctx is cancelled it stops after the current
// step, saves, and returns an *InterruptedError.
func (t *Trainer) Fit(ctx context.Context) (*Result, error) {
	cfg, m := t.cfg, t.model
	lastStep := t.LastStep()
	res := &Result{First: t.step + 1, Steps: t.step, firstLoss: math.NaN(), lastStep: lastStep}
	if t.existed && t.resumed == "" {
		return res, checkNew(cfg.Checkpoint)
	}
	if t.step >= lastStep {
		return res, nil
	}
	if t.cfg.usesCUDA() && !t.cfg.HostUpdate && t.upd == nil {
		// After any Restore: the device solver starts from the state the
		// gorgonia solver holds.
		var err error
		if t.upd, err = t.newUpdate(); err != nil {
			return res, err
		}
	}
	evaluate := func(when string) error {
		if t.ev == nil {
			return nil
		}
		t0 := time.Now()
		r, err := t.Evaluate()
		res.evTime += time.Since(t0)
		if err != nil {
			return fmt.Errorf("evaluation %s: %w", when, err)
		}
		t.lastEval = &r
		res.Evals = append(res.Evals, r)
		t.emit(Event{Kind: Evaluated, Step: t.step, Eval: &r, Text: fmt.Sprintf("eval %s: %s", when, r)})
		return nil
	}

	start := time.Now()
	newEpoch := true
	// On a device with copy streams the loader hands each step's batch over
	// before the step before it runs, so the machine copies it in while that
	// step's tail (the rest of the backward, the update) runs.
	_, stage := t.machine.Runner().(vm.Stager)
	stage = stage && t.par == nil
	var ahead *datasets.Batch
	for t.step < lastStep {
		if err := t.stopNow(ctx); err != nil {
			res.elapsed = time.Since(start)
			var stop *stopError
			if !errors.As(err, &stop) {
				return res, err
			}
			return res, &InterruptedError{Step: t.step, Checkpoint: cfg.Checkpoint, Err: stop.err, SaveErr: t.Save()}
		}
		t0 := time.Now()
		b, err := ahead, error(nil)
		if b == nil {
			b, err = t.loader.Next()
		}
		ahead = nil
		res.dataWait += time.Since(t0)
		if err != nil {
			return res, fmt.Errorf("-data %s: %w", cfg.Data, err)
		}
		if newEpoch || b.Index == 0 {
			// The rate is a function of the epoch alone, so a resumed run
			// sets it the same way.
			setLearnRate(t.solver, learningRate(cfg.LR, cfg.LRDrop, b.Epoch+1))
			n := min(t.bpe, b.Index+lastStep-t.step)
			t.emit(Event{Kind: EpochStart, Step: t.step, LastStep: lastStep, Epoch: b.Epoch + 1, Epochs: t.Epochs(), Batch: b.Index + 1, Batches: n, BatchSize: cfg.Batch})
			newEpoch = false
		}
		if err := G.Let(m.Input, b.X); err != nil {
			return res, err
		}
		if err := G.Let(m.Labels, b.Y); err != nil {
			return res, err
		}
		if stage && t.step+1 < lastStep {
			t0 := time.Now()
			if ahead, err = t.stageNext(); err != nil {
				return res, err
			}
			res.dataWait += time.Since(t0)
		}
		if err := t.runStep(); err != nil {
			return res, fmt.Errorf("step %d: %w", t.step+1, err)
		}
		loss, err := scalarOf(m.Loss.Value())
		if err != nil {
			return res, fmt.Errorf("step %d: loss: %w", t.step+1, err)
		}
		if math.IsNaN(loss) || math.IsInf(loss, 0) {
			return res, fmt.Errorf("step %d: the loss is %v (try a smaller -lr); the checkpoint, if any, is left as it was at step %d", t.step+1, loss, t.saved)
		}
		t1 := time.Now()
		if err := t.upd.step(t.solver, m.Learnables); err != nil {
			return res, fmt.Errorf("step %d: %s: %w", t.step+1, cfg.Optimizer, err)
		}
		res.solverTime += time.Since(t1)
		t.step++
		res.images += b.N
		res.Losses = append(res.Losses, loss)
		t.losses = append(t.losses, loss)
		res.Steps = t.step
		if math.IsNaN(res.firstLoss) {
			res.firstLoss = loss
		}
		res.lastLoss = loss
		t.epochLoss += loss
		t.epochSteps++
		t.nextEpoch, t.nextBatch = b.Epoch, b.Index+1
		if b.EndOfEpoch {
			t.nextEpoch, t.nextBatch = b.Epoch+1, 0
		}
		st := t.stats()
		t.emit(Event{
			Kind: StepDone, Step: t.step, LastStep: lastStep, Epoch: b.Epoch + 1, Epochs: t.Epochs(), Batch: b.Index + 1, Batches: t.bpe,
			BatchSize: cfg.Batch, Images: b.N, Loss: loss, ImagesPerSec: float64(res.images) / time.Since(start).Seconds(),
			PeakDevice: st.PeakDeviceBytes, SwapInBytes: st.SwapInBytes, SwapOutBytes: st.SwapOutBytes,
		})
		if b.EndOfEpoch {
			meanLoss := t.epochLoss / float64(t.epochSteps)
			t.emit(Event{Kind: EpochDone, Step: t.step, Epoch: b.Epoch + 1, Epochs: t.Epochs(), Loss: meanLoss,
				Text: fmt.Sprintf("epoch %d/%d done at step %d: mean train loss %.4f over %d steps", b.Epoch+1, t.Epochs(), t.step, meanLoss, t.epochSteps)})
			t.epochLoss, t.epochSteps = 0, 0
			if err := evaluate(fmt.Sprintf("after epoch %d", b.Epoch+1)); err != nil {
				return res, err
			}
			rec := EpochRecord{Epoch: b.Epoch + 1, Step: t.step, TrainLoss: meanLoss, Eval: t.lastEval}
			res.Epochs = append(res.Epochs, rec)
			t.epochs = append(t.epochs, rec)
			if err := t.Save(); err != nil {
				return res, err
			}
			newEpoch = true
			continue
		}
		if cfg.SaveEvery > 0 && t.step%cfg.SaveEvery == 0 {
			if err := t.Save(); err != nil {
				return res, err
			}
		}
	}
	if t.nextBatch != 0 {
		// Stopped by -steps inside an epoch.
		if err := evaluate(fmt.Sprintf("at step %d (epoch %d, batch %d of %d)", t.step, t.nextEpoch+1, t.nextBatch, t.bpe)); err != nil {
			return res, err
		}
	}
	if err := t.Save(); err != nil {
		return res, err
	}
	res.elapsed = time.Since(start)
	res.Stats = t.stats()
	// The caller reads the model's weights on the host.
	if err := t.upd.weightsToHost(); err != nil {
		return res, err
	}
	return res, t.writeOutputs(res)
}

// writeOutputs writes the history, the plot and the op-time profile the
// configuration asks for.
func (t *Trainer) writeOutputs(res *Result) error {
	cfg := t.cfg
	if cfg.Rank > 0 {
		return nil // rank 0's
	}
	if cfg.History != "" {
		if err := WriteHistory(cfg.History, t.History()); err != nil {
			return err
		}
		t.note(Saved, "history of steps %d..%d and %d epochs written to %s", t.historyFrom, t.step, len(t.epochs), cfg.History)
	}
	if cfg.Plot != "" {
		if len(t.epochs) == 0 {
			t.note(Saved, "no plot written to %s: no epoch has finished yet", cfg.Plot)
		} else {
			if err := PlotHistory(cfg.Plot, cfg.Model, cfg.Data, t.epochs); err != nil {
				return err
			}
			t.note(Saved, "loss and accuracy plot of %d epochs written to %s", len(t.epochs), cfg.Plot)
		}
	}
	if cfg.LaunchTable != "" {
		if err := writeLaunchTable(cfg.LaunchTable, t.machine); err != nil {
			return err
		}
		t.note(Saved, "kernel launch table of the training step written to %s", cfg.LaunchTable)
	}
	if cfg.RecordProfile != "" {
		if err := recordProfile(cfg.RecordProfile, t.machine); err != nil {
			return err
		}
		t.note(Saved, "per-op times of %d steps written to %s (use -device sim:measured:%s)", res.Stats.Steps, cfg.RecordProfile, cfg.RecordProfile)
	}
	return nil
}

// Summary prints what a Fit did: steps, time, losses, evaluation, memory.
func (t *Trainer) Summary(out io.Writer, res *Result) {
	cfg, st, prog := t.cfg, res.Stats, t.machine.Program()
	el := res.elapsed.Seconds()
	fmt.Fprintf(out, "\nsummary, measured on %s of this machine (%s/%s, %d CPUs; real memory and copies, not simulated):\n",
		t.measuredOn(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
	fmt.Fprintf(out, "  steps       %d..%d of %d (epoch %d of %d): %d images in %.2fs, %.1f images/s\n",
		res.First, t.step, res.lastStep, min(t.nextEpoch+1, t.Epochs()), t.Epochs(), res.images, el, float64(res.images)/el)
	fmt.Fprintf(out, "  time        training steps %.2fs (ops %.2fs, stalled on copies %.3fs), solver %.2fs, waiting for data %.2fs, evaluation %.2fs\n",
		st.StepTime.Seconds(), st.ComputeTime.Seconds(), st.StallTime.Seconds(), res.solverTime.Seconds(), res.dataWait.Seconds(), res.evTime.Seconds())
	fmt.Fprintf(out, "  train loss  first %.4f, last %.4f\n", res.firstLoss, res.lastLoss)
	switch {
	case t.lastEval != nil:
		fmt.Fprintf(out, "  evaluation  %s (after step %d)\n", t.lastEval, t.lastEval.Step)
	case t.testNote != "":
		fmt.Fprintf(out, "  evaluation  %s\n", t.testNote)
	}
	switch ps := t.parStats(); {
	case t.par != nil && t.par.world > 1:
		fmt.Fprintf(out, "  ranks       %d processes, one device each, a share of %d images each; all-reduce (%s, gradients and loss) %.4fs of %.2fs in %d steps; below, this rank's (%d's) program and memory\n",
			t.par.world, cfg.Batch/t.par.replicas(), t.par.p.AllReducer().Name(), ps.AllReduceTime.Seconds(), ps.StepTime.Seconds(), ps.Steps, t.par.rank)
	case t.par != nil:
		fmt.Fprintf(out, "  devices     %d, a share of %d images each; all-reduce (%s) %.4fs of %.2fs in %d steps; below, one device's (replica 0's) program and memory, the swaps of all\n",
			len(t.par.devs), cfg.Batch/len(t.par.devs), t.par.p.AllReducer().Name(), ps.AllReduceTime.Seconds(), ps.StepTime.Seconds(), ps.Steps)
	}
	fmt.Fprintf(out, "  device      peak %d B (%s) requested by the step; %s; allocator %s reserved %s at most (peak requested from it %s)\n",
		st.PeakDeviceBytes, FormatBytes(st.PeakDeviceBytes), cfg.budgetLine(prog.Budget, t.inCore), cfg.Allocator,
		FormatBytes(st.ReservedBytes), FormatBytes(st.Allocator.PeakRequested))
	if line := t.deviceLine(); line != "" {
		fmt.Fprintf(out, "  memory      %s\n", line)
	}
	fmt.Fprintf(out, "  planner     %s\n", plannerLine(prog))
	fmt.Fprintf(out, "  swap bytes  in %d (%s), out %d (%s); %d swap-ins, %d swap-outs\n",
		st.SwapInBytes, FormatBytes(st.SwapInBytes), st.SwapOutBytes, FormatBytes(st.SwapOutBytes), st.SwapIns, st.SwapOuts)
	if st.StagedInputs > 0 {
		fmt.Fprintf(out, "  inputs      %d staged (vm.Machine.StageNext), %s of them copied to the device during the step before, after its last read of them\n",
			st.StagedInputs, FormatBytes(st.StagedAheadBytes))
	}
	if cfg.Checkpoint != "" {
		fmt.Fprintf(out, "  checkpoint  %s (step %d)\n", cfg.Checkpoint, t.saved)
	}
}

// plannerLine says which scheduler planned the tape the last step ran and,
// for ooc's default planner, which plan it picked and why.
func plannerLine(prog *vm.Program) string {
	if strings.HasPrefix(prog.Timing, "auto:") {
		return prog.Timing
	}
	if prog.Timing != "" {
		return prog.Scheduler + "; op and copy times: " + prog.Timing
	}
	return prog.Scheduler
}

// checkNew refuses to start a fresh run over an existing checkpoint.
func checkNew(path string) error {
	if path == "" {
		return nil
	}
	if _, err := os.Stat(path); err == nil {
		return configErrorf("-checkpoint %s already exists: pass -resume to continue it, or remove it to start over", path)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("-checkpoint: %w", err)
	}
	return nil
}

// deviceLine explains the device a budget made ("" when there is none).
func (t *Trainer) deviceLine() string {
	p := t.mem
	if p.device == 0 {
		return ""
	}
	s := fmt.Sprintf("a CPU device of %s (%d B) holds the step's memory, as a GPU's would: the allocator cannot reserve more", FormatBytes(p.device), p.device)
	if t.par != nil {
		s = fmt.Sprintf("each CPU device, of %s (%d B), holds its replica's step, as a GPU would: its allocator cannot reserve more", FormatBytes(p.device), p.device)
	}
	if p.device > t.budget {
		s += fmt.Sprintf(" (the budget %s is below the one chunk the allocator maps at least)", FormatBytes(t.budget))
	}
	if p.chunk > 0 {
		how := "given"
		if p.adaptive {
			how = "chosen for the device"
		}
		s += fmt.Sprintf("; VA chunk %s (%s)", FormatBytes(p.chunk), how)
	}
	if p.planned < t.budget {
		s += fmt.Sprintf("; the scheduler plans under %s, %d%% of the budget, the most at which the allocator serves a step in the device (%d simulated steps tried)",
			FormatBytes(p.planned), 100*p.planned/t.budget, p.tries)
	}
	return s
}

// measuredOn names what computed the steps, for the summary.
func (t *Trainer) measuredOn() string {
	switch {
	case t.par != nil && t.par.world > 1:
		return fmt.Sprintf("rank %d of %d processes, the CUDA device %s", t.par.rank, t.par.world, cudaName(t.par.devs[0]))
	case t.par != nil && t.cfg.parallelOnCUDA():
		return fmt.Sprintf("%d CUDA devices (-device %s), the first %s", len(t.par.devs), t.cfg.deviceName(), cudaName(t.par.devs[0]))
	case t.par != nil:
		return fmt.Sprintf("%d CPU devices (-device %s)", len(t.par.devs), t.cfg.deviceName())
	case t.cfg.onCUDA():
		return "the CUDA device " + cudaName(t.dev)
	}
	return "the CPU device"
}

// computeLine says where the steps compute when it is not one CPU device.
func (t *Trainer) computeLine() string {
	switch {
	case t.par != nil:
		return t.parallelLine()
	case t.cfg.onCUDA():
		upd := "the update on the device (dispatch.Solver; -host-update runs it on the host)"
		if t.cfg.HostUpdate {
			upd = "the update on the host (-host-update: gorgonia's solver, gradients down and weights up every step)"
		}
		return fmt.Sprintf("%s through the CUDA kernels and cuBLAS (vm/cuda/dispatch), %s", t.dev.Name(), upd)
	}
	return ""
}
