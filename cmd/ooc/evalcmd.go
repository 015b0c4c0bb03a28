package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"

	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/datasets"
	"github.com/gorgonia-ooc/outofcore/ooc"
)

func runEval(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseEvalFlags(args, stderr)
	if err != nil {
		return err
	}
	_, err = evalCheckpoint(o, stdout)
	return err
}

// evalCheckpoint rebuilds the checkpoint's model, loads its weights and
// batch-norm statistics, and evaluates it on a split of the data.
func evalCheckpoint(o *evalOptions, out io.Writer) (*evalResult, error) {
	ck, err := loadCheckpoint(o.Checkpoint)
	if err != nil {
		return nil, err
	}
	meta := ck.Meta
	if !knownModel(meta.Model) {
		return nil, fmt.Errorf("checkpoint %s: unknown model %q", o.Checkpoint, meta.Model)
	}
	spec := o.Data
	if spec == "" {
		spec = meta.Data
	}
	batch := o.Batch
	if batch == 0 {
		batch = meta.Batch
	}
	split, _ := datasets.ParseSplit(o.Split)
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
	budget := o.Budget.resolve(peak)
	if o.BudgetText == "" {
		// The budget training ran under; the forward pass fits in it.
		budget = meta.Budget
		if o.Scheduler == "window" && budget == 0 {
			budget = peak
		}
		o.Budget = budgetSpec{bytes: budget}
	}
	if err := o.openRunDevice(); err != nil {
		return nil, err
	}
	defer o.closeRunDevice()
	if err := ev.compile(o.options(budget)...); err != nil {
		return nil, o.budgetError(err, func(b int64) error {
			_, err := ooc.Plan(ev.graph, ev.options(ooc.WithWindow(o.Window), ooc.WithBudget(b))...)
			return err
		}, budget, peak)
	}
	defer ev.Close()
	solver, err := newSolver(meta.Optimizer, meta.LR)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", o.Checkpoint, err)
	}
	if err := restoreTensors(o.Checkpoint, ck, m.Learnables, bns, solver); err != nil {
		return nil, err
	}

	prog := ev.machine.Program()
	fmt.Fprintf(out, "checkpoint %s: model %s (%s parameters), input %dx%s, %d classes; trained %d steps with %s (lr %g)\n",
		o.Checkpoint, meta.Model, withCommas(m.NumParams()), meta.Channels, shape.size(), meta.Classes, meta.Step, meta.Optimizer, meta.LR)
	fmt.Fprintf(out, "data %s, %s split: %d examples, batch %d\n", spec, split, info.Examples, batch)
	fmt.Fprintf(out, "evaluation: forward pass only, batch norm in inference mode; logits: %s\n", ev.Note)
	fmt.Fprintf(out, "memory: in-core peak %s; scheduler %s, %s, allocator %s\n",
		formatBytes(peak), prog.Scheduler, budgetLine(o.memoryOptions, prog.Budget, peak), o.Allocator)
	t0 := time.Now()
	r, err := ev.evaluate(ds, lo)
	if err != nil {
		return nil, err
	}
	elapsed := time.Since(t0)
	r.Step = meta.Step
	st := ev.machine.Stats()
	fmt.Fprintf(out, "%s\n", r)
	fmt.Fprintf(out, "measured on the %s device of this machine (%s/%s, %d CPUs; not simulated): %d images in %.2fs, %.1f images/s; device peak %d B (%s), swap bytes in %d, out %d\n",
		strings.Replace(ev.machine.Device().Name(), "cpu", "CPU", 1), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), r.Examples, elapsed.Seconds(), float64(r.Examples)/elapsed.Seconds(),
		st.PeakDeviceBytes, formatBytes(st.PeakDeviceBytes), st.SwapInBytes, st.SwapOutBytes)
	return &r, nil
}
