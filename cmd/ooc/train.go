package main

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

func runTrain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseTrainFlags(args, stderr)
	if err != nil {
		return err
	}
	_, err = train(ctx, o, stdout)
	return err
}

// trainResult is what a run did, for tests and callers.
type trainResult struct {
	Losses []float64 // per step of this run, exactly as computed
	Evals  []evalResult
	Epochs []epochRecord // one per epoch this run finished
	First  int           // global number of this run's first step
	Steps  int           // global steps done at the end
	Stats  vm.Stats
}

// dataShape is what a model is built for and a loader produces.
type dataShape struct {
	channels, height, width, classes int
	seg                              bool
	hidden                           int // lstm's width (-hidden)
}

// size is the input size as HxW.
func (s dataShape) size() string { return fmt.Sprintf("%dx%d", s.height, s.width) }

// openSplit opens one split of a data spec. Synthetic data takes its shape,
// classes and seed from the run; files have their own.
func openSplit(spec string, split datasets.Split, height, width, classes int, seed int64, seg bool) (datasets.Dataset, error) {
	if height == 0 {
		height = 32
	}
	if width == 0 {
		width = height
	}
	opts := []datasets.OpenOption{datasets.WithSplit(split), datasets.WithShape(3, height, width), datasets.WithSeed(seed)}
	if classes > 0 {
		opts = append(opts, datasets.WithClasses(classes))
	}
	if seg {
		opts = append(opts, datasets.WithSegmentation(true))
	}
	ds, err := datasets.Open(spec, opts...)
	if err != nil {
		return nil, fmt.Errorf("-data %s: %w", spec, err)
	}
	return ds, nil
}

func isSynthetic(spec string) bool {
	name, _, _ := strings.Cut(spec, ":")
	return strings.EqualFold(name, "synthetic")
}

// resolveShape picks the model input for a dataset and the -image, -width and
// -classes flags: by default a square of the data's shorter side, or for
// sequences (one pixel high, as text data) their native 1 x length.
func resolveShape(info datasets.Info, spec string, image, width, classes int) (dataShape, error) {
	s := dataShape{channels: info.Channels, height: image, width: width, classes: info.Classes, seg: info.Segmentation}
	switch {
	case image == 0 && width == 0 && info.Height == 1 && info.Width > 0:
		s.height, s.width = 1, info.Width
	case image == 0 && info.Height > 0 && info.Width > 0:
		s.height = min(info.Height, info.Width)
	case image == 0:
		s.height = 32
	}
	if s.width == 0 {
		s.width = s.height
	}
	if classes > 0 && classes != info.Classes {
		return s, usagef("-classes %d: -data %s has %d classes", classes, spec, info.Classes)
	}
	return s, nil
}

// buildModel builds the model for the data and checks they fit each other.
func buildModel(name string, batch int, s dataShape, seed int64) (*models.Model, error) {
	m, err := models.Build(name, models.Config{Batch: batch, Channels: s.channels, Height: s.height, Width: s.width,
		Classes: s.classes, Hidden: s.hidden, Dtype: tensor.Float32, Seed: seed})
	if err != nil {
		return nil, err
	}
	return m, nil
}

func checkFit(m *models.Model, l *datasets.Loader, model, spec string) error {
	if in, want := m.Input.Shape(), l.InputShape(); !in.Eq(tensor.Shape(want)) {
		return fmt.Errorf("model %s takes input %v, -data %s gives %v", model, in, spec, want)
	}
	if y, want := m.Labels.Shape(), l.TargetShape(); !y.Eq(tensor.Shape(want)) {
		what := "class labels"
		if l.Info().Segmentation {
			what = "segmentation masks"
		}
		return fmt.Errorf("model %s wants targets of shape %v, -data %s gives %s of shape %v", model, y, spec, what, want)
	}
	return nil
}

// wantsSegmentation reports whether the model's targets are per pixel.
func wantsSegmentation(m *models.Model) bool { return m.Labels.Shape().Dims() == 4 }

func train(ctx context.Context, o *trainOptions, out io.Writer) (res *trainResult, err error) {
	// A run either resumes a checkpoint or starts one; it never replaces a
	// checkpoint it did not load.
	var ck *checkpoint
	if o.Resume {
		if ck, err = loadCheckpoint(o.Checkpoint); err != nil {
			return nil, fmt.Errorf("-resume: %w", err)
		}
		if err := o.adopt(o.Checkpoint, ck.Meta); err != nil {
			return nil, err
		}
	} else if o.Checkpoint != "" {
		if _, err := os.Stat(o.Checkpoint); err == nil {
			return nil, usagef("-checkpoint %s already exists: pass -resume to continue it, or remove it to start over", o.Checkpoint)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("-checkpoint: %w", err)
		}
	}

	// Data and model.
	trainDS, err := openSplit(o.Data, datasets.Train, o.Image, o.Width, o.Classes, o.Seed, false)
	if err != nil {
		return nil, err
	}
	shape, err := resolveShape(trainDS.Info(), o.Data, o.Image, o.Width, o.Classes)
	if err != nil {
		return nil, err
	}
	shape.hidden = o.Hidden
	m, err := buildModel(o.Model, o.Batch, shape, o.Seed)
	if err != nil {
		return nil, err
	}
	if wantsSegmentation(m) && !shape.seg && isSynthetic(o.Data) {
		// Synthetic data can carry masks; reopen it so.
		if trainDS, err = openSplit(o.Data, datasets.Train, shape.height, shape.width, o.Classes, o.Seed, true); err != nil {
			return nil, err
		}
		if shape, err = resolveShape(trainDS.Info(), o.Data, shape.height, shape.width, o.Classes); err != nil {
			return nil, err
		}
		shape.hidden = o.Hidden
		if m, err = buildModel(o.Model, o.Batch, shape, o.Seed); err != nil {
			return nil, err
		}
	}
	info := trainDS.Info()
	lo := datasets.Options{
		BatchSize: o.Batch, Channels: shape.channels, Height: shape.height, Width: shape.width,
		Dtype: tensor.Float32, Shuffle: true, Seed: o.Seed, Last: datasets.DropLast,
		Mean: info.Mean, Std: info.Std, Epochs: o.Epochs,
	}
	if o.Augment {
		lo.RandomCrop, lo.Flip = 4, true
	}
	if ck != nil {
		lo.StartEpoch, lo.StartBatch = ck.Meta.NextEpoch, ck.Meta.NextBatch
	}
	evalOpt := lo
	loader, err := datasets.NewLoader(trainDS, lo)
	if err != nil {
		return nil, fmt.Errorf("-data %s: %w", o.Data, err)
	}
	defer loader.Close()
	if err := checkFit(m, loader, o.Model, o.Data); err != nil {
		return nil, err
	}
	bpe := loader.BatchesPerEpoch()
	if bpe == 0 {
		return nil, fmt.Errorf("-data %s has %d training examples, fewer than one batch of %d", o.Data, info.Examples, o.Batch)
	}
	var testDS datasets.Dataset
	testNote := ""
	if testDS, err = openSplit(o.Data, datasets.Test, shape.height, shape.width, shape.classes, o.Seed, shape.seg); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		testDS, testNote = nil, fmt.Sprintf("no test split, evaluation skipped (%v)", err)
	}

	// Memory: the in-core peak, the budget, the machines.
	inCore, err := ooc.Plan(m.Graph, ooc.Baseline())
	if err != nil {
		return nil, err
	}
	budget := o.Budget.resolve(inCore.Peak)
	if err := o.openRunDevice(); err != nil {
		return nil, err
	}
	defer o.closeRunDevice()
	machine, err := ooc.Compile(m.Graph, append(o.options(budget), ooc.BindDualValues(m.Learnables...))...)
	if err != nil {
		return nil, o.budgetError(err, func(b int64) error {
			_, err := ooc.Plan(m.Graph, ooc.WithWindow(o.Window), ooc.WithBudget(b))
			return err
		}, budget, inCore.Peak)
	}
	defer machine.Close()
	trainBudget := machine.Program().Budget
	if o.Scheduler == "baseline" {
		trainBudget = 0
	}
	bns := modelBatchNorms(m)
	var ev *evaluator
	if testDS != nil {
		if ev, err = newEvaluator(m, bns); err == nil {
			err = ev.compile(o.options(budget)...)
		}
		if err != nil {
			return nil, fmt.Errorf("evaluation: %w", err)
		}
		defer ev.Close()
	}
	solver, err := newSolver(o.Optimizer, o.LR)
	if err != nil {
		return nil, err
	}

	// Where the run starts.
	res = &trainResult{}
	var (
		step, nextEpoch, nextBatch int
		epochLoss                  float64
		epochSteps                 int
		lastEval                   *evalResult
	)
	if ck != nil {
		if err := restoreTensors(o.Checkpoint, ck, m.Learnables, bns, solver); err != nil {
			return nil, err
		}
		step, nextEpoch, nextBatch = ck.Meta.Step, ck.Meta.NextEpoch, ck.Meta.NextBatch
		epochLoss, epochSteps, lastEval = ck.Meta.EpochLossSum, ck.Meta.EpochSteps, ck.Meta.LastEval
	}
	upd, err := newDeviceUpdate(o.HostUpdate, machine, solver, m.Learnables)
	if err != nil {
		return nil, err
	}
	defer upd.close()
	lastStep := o.Epochs * bpe
	if o.Steps > 0 && o.Steps < lastStep {
		lastStep = o.Steps
	}
	res.First, res.Steps = step+1, step

	// What is about to happen.
	prog := machine.Program()
	swapIns, _ := prog.Count(vm.SwapIn)
	fmt.Fprintf(out, "model %s: %s learnable parameters; input %dx%s, batch %d, %d classes\n",
		o.Model, withCommas(m.NumParams()), shape.channels, shape.size(), o.Batch, shape.classes)
	fmt.Fprintf(out, "data %s: %d training examples, %d batches per epoch", o.Data, info.Examples, bpe)
	if testDS != nil {
		fmt.Fprintf(out, "; %d test examples", testDS.Info().Examples)
	}
	fmt.Fprintln(out)
	fmt.Fprintf(out, "optimizer %s, learning rate %g, seed %d\n", o.Optimizer, o.LR, o.Seed)
	if len(o.LRDrop) > 0 {
		fmt.Fprintf(out, "learning rate x0.1 after epochs %v\n", o.LRDrop)
	}
	fmt.Fprintf(out, "memory: in-core peak %s; scheduler %s, %s, allocator %s; tape of %d instructions, %d swap-ins per step\n",
		formatBytes(inCore.Peak), prog.Scheduler, budgetLine(o.memoryOptions, prog.Budget, inCore.Peak), o.Allocator, len(prog.Instrs), swapIns)
	if ev != nil {
		ep := ev.machine.Program()
		fmt.Fprintf(out, "evaluation: forward pass only (%d ops, peak %s), batch norm in inference mode; logits: %s\n", len(ep.Funcs), formatBytes(ep.Peak), ev.Note)
	} else {
		fmt.Fprintln(out, "evaluation:", testNote)
	}
	if ck != nil {
		fmt.Fprintf(out, "resuming %s after step %d: next is batch %d of %d in epoch %d\n", o.Checkpoint, step, nextBatch+1, bpe, nextEpoch+1)
	}
	if step >= lastStep {
		fmt.Fprintf(out, "nothing to do: %d steps are done and -epochs %d, -steps %d allow %d\n", step, o.Epochs, o.Steps, lastStep)
		return res, nil
	}

	every := o.LogEvery
	if every == 0 {
		every = (lastStep - step + 99) / 100
	}
	rep, err := newReporter(o.Progress, out, every)
	if err != nil {
		return nil, err
	}
	defer rep.done()

	saved := step
	save := func() error {
		if o.Checkpoint == "" || saved == step {
			return nil
		}
		if err := upd.toHost(); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
		tensors, iter, err := captureTensors(m.Learnables, bns, solver, o.Optimizer)
		if err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
		c := &checkpoint{Meta: ckptMeta{
			Program: "ooc train", Saved: time.Now().UTC().Format(time.RFC3339),
			Model: o.Model, Batch: o.Batch, Channels: shape.channels, Image: shape.height, Width: ckptWidth(shape), Hidden: shape.hidden, Classes: shape.classes,
			Dtype: "float32", Params: m.NumParams(),
			Data: o.Data, Seed: o.Seed, Augment: o.Augment, Mean: lo.Mean, Std: lo.Std, Optimizer: o.Optimizer, LR: o.LR, LRDrop: o.LRDrop, OptimizerIter: iter, Budget: trainBudget,
			Step: step, NextEpoch: nextEpoch, NextBatch: nextBatch, EpochLossSum: epochLoss, EpochSteps: epochSteps,
			LastEval: lastEval,
		}, Tensors: tensors}
		if err := saveCheckpoint(o.Checkpoint, c); err != nil {
			return err
		}
		saved = step
		rep.printf("checkpoint %s written (step %d)", o.Checkpoint, step)
		return nil
	}
	var evalTime time.Duration
	evaluate := func(when string) error {
		if ev == nil {
			return nil
		}
		t0 := time.Now()
		if err := upd.weightsToHost(); err != nil {
			return err
		}
		r, err := ev.evaluate(testDS, evalOpt)
		evalTime += time.Since(t0)
		if err != nil {
			return fmt.Errorf("evaluation %s: %w", when, err)
		}
		r.Step, r.Epoch = step, nextEpoch
		lastEval = &r
		res.Evals = append(res.Evals, r)
		rep.printf("eval %s: %s", when, r)
		return nil
	}

	start := time.Now()
	var images int
	var solverTime, dataWait time.Duration
	firstLoss := math.NaN()
	var lastLoss float64
	newEpoch := true
	for step < lastStep {
		if err := ctx.Err(); err != nil {
			rep.done()
			if e := save(); e != nil {
				return res, errors.Join(fmt.Errorf("interrupted after step %d", step), e)
			}
			return res, fmt.Errorf("interrupted after step %d; continue with -resume", step)
		}
		t0 := time.Now()
		b, err := loader.Next()
		dataWait += time.Since(t0)
		if err != nil {
			return res, fmt.Errorf("-data %s: %w", o.Data, err)
		}
		if newEpoch || b.Index == 0 {
			// The rate is a function of the epoch alone, so a resumed run
			// sets it the same way.
			G.WithLearnRate(learningRate(o.LR, o.LRDrop, b.Epoch+1))(solver)
			n := min(bpe, b.Index+lastStep-step)
			rep.epoch(b.Epoch+1, o.Epochs, b.Index+1, n, o.Batch)
			newEpoch = false
		}
		if err := G.Let(m.Input, b.X); err != nil {
			return res, err
		}
		if err := G.Let(m.Labels, b.Y); err != nil {
			return res, err
		}
		if err := machine.RunAll(); err != nil {
			machine.Reset()
			return res, fmt.Errorf("step %d: %w", step+1, err)
		}
		loss, err := scalarOf(m.Loss.Value())
		if err != nil {
			return res, fmt.Errorf("step %d: loss: %w", step+1, err)
		}
		if math.IsNaN(loss) || math.IsInf(loss, 0) {
			return res, fmt.Errorf("step %d: the loss is %v (try a smaller -lr); the checkpoint, if any, is left as it was at step %d", step+1, loss, saved)
		}
		t1 := time.Now()
		if err := upd.step(solver, m.Learnables); err != nil {
			return res, fmt.Errorf("step %d: %s: %w", step+1, o.Optimizer, err)
		}
		solverTime += time.Since(t1)
		step++
		images += b.N
		res.Losses = append(res.Losses, loss)
		res.Steps = step
		if math.IsNaN(firstLoss) {
			firstLoss = loss
		}
		lastLoss = loss
		epochLoss += loss
		epochSteps++
		nextEpoch, nextBatch = b.Epoch, b.Index+1
		if b.EndOfEpoch {
			nextEpoch, nextBatch = b.Epoch+1, 0
		}
		st := machine.Stats()
		rep.step(stepInfo{
			Step: step, LastStep: lastStep, Epoch: b.Epoch + 1, Epochs: o.Epochs, Batch: b.Index + 1, Batches: bpe,
			Images: b.N, Loss: loss, ImagesPerSec: float64(images) / time.Since(start).Seconds(),
			PeakDevice: st.PeakDeviceBytes, SwapInBytes: st.SwapInBytes, SwapOutBytes: st.SwapOutBytes,
		})
		if b.EndOfEpoch {
			rep.done()
			meanLoss := epochLoss / float64(epochSteps)
			rep.printf("epoch %d/%d done at step %d: mean train loss %.4f over %d steps", b.Epoch+1, o.Epochs, step, meanLoss, epochSteps)
			epochLoss, epochSteps = 0, 0
			if err := evaluate(fmt.Sprintf("after epoch %d", b.Epoch+1)); err != nil {
				return res, err
			}
			res.Epochs = append(res.Epochs, epochRecord{Epoch: b.Epoch + 1, Step: step, TrainLoss: meanLoss, Eval: lastEval})
			if err := save(); err != nil {
				return res, err
			}
			newEpoch = true
			continue
		}
		if o.SaveEvery > 0 && step%o.SaveEvery == 0 {
			if err := save(); err != nil {
				return res, err
			}
		}
	}
	rep.done()
	if nextBatch != 0 {
		// Stopped by -steps inside an epoch.
		if err := evaluate(fmt.Sprintf("at step %d (epoch %d, batch %d of %d)", step, nextEpoch+1, nextBatch, bpe)); err != nil {
			return res, err
		}
	}
	if err := save(); err != nil {
		return res, err
	}
	elapsed := time.Since(start)
	st := machine.Stats()
	res.Stats = st
	if o.History != "" {
		if err := writeHistory(o.History, res); err != nil {
			return res, err
		}
		fmt.Fprintf(out, "per-epoch history written to %s\n", o.History)
	}
	if o.Plot != "" {
		if err := plotHistory(o.Plot, o.Model, o.Data, res.Epochs); err != nil {
			return res, err
		}
		fmt.Fprintf(out, "loss and accuracy plot written to %s\n", o.Plot)
	}
	if err := upd.weightsToHost(); err != nil {
		return res, err
	}
	if o.LaunchTable != "" {
		if err := writeLaunchTable(o.LaunchTable, machine); err != nil {
			return res, err
		}
		fmt.Fprintf(out, "kernel launch table written to %s\n", o.LaunchTable)
	}
	if o.RecordProfile != "" {
		if err := recordProfile(o.RecordProfile, machine); err != nil {
			return res, err
		}
		fmt.Fprintf(out, "per-op times of %d steps written to %s (use -device sim:measured:%s)\n", st.Steps, o.RecordProfile, o.RecordProfile)
	}

	fmt.Fprintf(out, "\nsummary, measured on the %s device of this machine (%s/%s, %d CPUs; real memory and copies, not simulated):\n",
		strings.Replace(machine.Device().Name(), "cpu", "CPU", 1), runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
	fmt.Fprintf(out, "  steps       %d..%d of %d (epoch %d of %d): %d images in %.2fs, %.1f images/s\n",
		res.First, step, lastStep, min(nextEpoch+1, o.Epochs), o.Epochs, images, elapsed.Seconds(), float64(images)/elapsed.Seconds())
	fmt.Fprintf(out, "  time        training steps %.2fs (ops %.2fs, stalled on copies %.3fs), solver %.2fs, waiting for data %.2fs, evaluation %.2fs\n",
		st.StepTime.Seconds(), st.ComputeTime.Seconds(), st.StallTime.Seconds(), solverTime.Seconds(), dataWait.Seconds(), evalTime.Seconds())
	fmt.Fprintf(out, "  train loss  first %.4f, last %.4f\n", firstLoss, lastLoss)
	switch {
	case lastEval != nil:
		fmt.Fprintf(out, "  evaluation  %s (after step %d)\n", lastEval, lastEval.Step)
	case testNote != "":
		fmt.Fprintf(out, "  evaluation  %s\n", testNote)
	}
	fmt.Fprintf(out, "  device      peak %d B (%s); %s; allocator reserved %s at most\n",
		st.PeakDeviceBytes, formatBytes(st.PeakDeviceBytes), budgetLine(o.memoryOptions, prog.Budget, inCore.Peak), formatBytes(st.ReservedBytes))
	fmt.Fprintf(out, "  swap bytes  in %d (%s), out %d (%s); %d swap-ins, %d swap-outs\n",
		st.SwapInBytes, formatBytes(st.SwapInBytes), st.SwapOutBytes, formatBytes(st.SwapOutBytes), st.SwapIns, st.SwapOuts)
	if o.Checkpoint != "" {
		fmt.Fprintf(out, "  checkpoint  %s (step %d)\n", o.Checkpoint, saved)
	}
	return res, nil
}

func budgetLine(m memoryOptions, budget, inCore int64) string {
	if m.Scheduler == "baseline" {
		return "no budget (baseline: in core, each tensor freed after its last use)"
	}
	s := fmt.Sprintf("budget %d B (%s", budget, formatBytes(budget))
	switch {
	case m.Budget.percent > 0:
		s += fmt.Sprintf(", %s of the in-core peak %s)", m.Budget, formatBytes(inCore))
	case inCore > 0:
		s += fmt.Sprintf(", %.0f%% of the in-core peak %s)", 100*float64(budget)/float64(inCore), formatBytes(inCore))
	default:
		s += ")"
	}
	return s
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
