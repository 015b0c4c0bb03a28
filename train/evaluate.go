package train

import (
	"fmt"
	"io"
	"runtime"
	"time"

	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/datasets"
	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm"
)

// EvalConfig says what EvaluateCheckpoint evaluates and how.
type EvalConfig struct {
	Checkpoint string
	Data       string // "": the checkpoint's
	Split      string // test (default) or train
	Batch      int    // 0: the checkpoint's (one device's share for a data-parallel run)
	// Budget nil: the budget training ran under (the forward pass fits in it).
	Budget    *Budget
	Window    int64
	Scheduler string // window (default) or baseline
	Allocator string // va (default) or bestfit
	// Device is where the forward pass computes: cpu (default), or cuda /
	// cuda:N (vm/cuda/dispatch).
	Device string
}

// EvaluateCheckpoint rebuilds a checkpoint's model, loads its weights and
// batch-norm statistics, evaluates it on a split of the data and prints what
// it did to out.
func EvaluateCheckpoint(ec EvalConfig, out io.Writer) (*EvalResult, error) {
	if ec.Split == "" {
		ec.Split = "test"
	}
	split, err := datasets.ParseSplit(ec.Split)
	if err != nil {
		return nil, configErrorf("-split %q: want test or train", ec.Split)
	}
	ck, err := Load(ec.Checkpoint)
	if err != nil {
		return nil, err
	}
	meta := ck.Meta
	if !KnownModel(meta.Model) {
		return nil, fmt.Errorf("checkpoint %s: unknown model %q", ec.Checkpoint, meta.Model)
	}
	cfg := Config{Scheduler: ec.Scheduler, Allocator: ec.Allocator, Window: ec.Window, Optimizer: meta.Optimizer, Device: ec.Device}
	if ec.Budget != nil {
		cfg.Budget = *ec.Budget
	}
	cfg.Defaults()
	if cfg.parallelSpec() != "" || (cfg.Device != "cpu" && !isCUDA(cfg.Device)) {
		return nil, configErrorf("-device %s: evaluation runs on one device: cpu, or cuda / cuda:N", cfg.Device)
	}
	spec := ec.Data
	if spec == "" {
		spec = meta.Data
	}
	batch := ec.Batch
	if batch == 0 {
		batch = meta.Batch
		// A data-parallel run's budget is one device's, which held a
		// share of the batch: its evaluations ran at that share.
		if n := meta.Run.deviceCountOrOne(); batch%n == 0 {
			batch /= n
		}
	}
	shape := meta.shape()
	m, err := buildModel(meta.Model, batch, shape, meta.Seed)
	if err != nil {
		return nil, err
	}
	shape.seg = wantsSegmentation(m)
	ds, err := openSplit(spec, split, shape.height, shape.width, meta.Classes, meta.Seed, shape.seg && isSynthetic(spec))
	if err != nil {
		return nil, err
	}
	info := ds.Info()
	if info.Classes != meta.Classes {
		return nil, fmt.Errorf("-data %s has %d classes, the checkpoint's model %d", spec, info.Classes, meta.Classes)
	}
	// Normalise as training did (the statistics are the training split's).
	lo := datasets.Options{BatchSize: batch, Channels: meta.Channels, Height: shape.height, Width: shape.width,
		Dtype: tensor.Float32, Mean: meta.Mean, Std: meta.Std}
	probe, err := datasets.NewLoader(ds, lo)
	if err != nil {
		return nil, fmt.Errorf("-data %s: %w", spec, err)
	}
	err = checkFit(m, probe, meta.Model, spec)
	probe.Close()
	if err != nil {
		return nil, err
	}

	bns := modelBatchNorms(m)
	ev, err := newEvaluator(m, bns)
	if err != nil {
		return nil, err
	}
	peak, err := ev.inCorePeak()
	if err != nil {
		return nil, err
	}
	budget := cfg.Budget.Resolve(peak)
	if ec.Budget == nil {
		// The budget training ran under; the forward pass fits in it.
		budget = meta.Budget
		if cfg.Scheduler != "baseline" && budget == 0 {
			budget = peak
		}
		cfg.Budget = Budget{Bytes: budget}
	}
	opts := cfg.compileOptions(budget)
	where := "the CPU device"
	if cfg.onCUDA() {
		dev, err := openCUDA(cfg.Device)
		if err != nil {
			return nil, err
		}
		defer dev.Close()
		opts, where = append(opts, ooc.WithDevice(dev)), "the CUDA device "+cudaName(dev)
		if r := vm.BackendReserve(dev); r > 0 && budget > 0 && cfg.Scheduler != "baseline" && (ec.Budget == nil || cfg.Budget.Percent > 0) {
			// The checkpoint's budget and a percentage are the program's;
			// the device's budget also holds cuBLAS's workspace.
			budget += r
			opts = append(opts, ooc.WithBudget(budget))
		}
	}
	if err := ev.compile(opts...); err != nil {
		return nil, cfg.budgetError(err, budget, peak)
	}
	defer ev.Close()
	solver, err := newSolver(meta.Optimizer, FastSolver, meta.LR)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", ec.Checkpoint, err)
	}
	if err := restoreTensors(ec.Checkpoint, ck, m.Learnables, bns, solver); err != nil {
		return nil, err
	}

	prog := ev.machine.Program()
	fmt.Fprintf(out, "checkpoint %s: model %s (%s parameters), input %dx%s, %d classes; trained %d steps with %s (lr %g)\n",
		ec.Checkpoint, meta.Model, withCommas(m.NumParams()), meta.Channels, shape.size(), meta.Classes, meta.Step, meta.Optimizer, meta.LR)
	fmt.Fprintf(out, "data %s, %s split: %d examples, batch %d\n", spec, split, info.Examples, batch)
	fmt.Fprintf(out, "evaluation: forward pass only, batch norm in inference mode; logits: %s\n", ev.Note)
	fmt.Fprintf(out, "memory: in-core peak %s; scheduler %s, %s, allocator %s\n",
		FormatBytes(peak), prog.Scheduler, cfg.budgetLine(prog.Budget, peak), cfg.Allocator)
	t0 := time.Now()
	r, err := ev.evaluate(ds, lo)
	if err != nil {
		return nil, err
	}
	elapsed := time.Since(t0)
	r.Step = meta.Step
	st := ev.machine.Stats()
	fmt.Fprintf(out, "%s\n", r)
	fmt.Fprintf(out, "measured on %s of this machine (%s/%s, %d CPUs; not simulated): %d images in %.2fs, %.1f images/s; device peak %d B (%s), swap bytes in %d, out %d\n",
		where, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), r.Examples, elapsed.Seconds(), float64(r.Examples)/elapsed.Seconds(),
		st.PeakDeviceBytes, FormatBytes(st.PeakDeviceBytes), st.SwapInBytes, st.SwapOutBytes)
	return &r, nil
}
