package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/datasets"
	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm"
)

// devicesHelp describes train's -devices.
const devicesHelp = "train data parallel on N CPU devices (the batch split among them; same as -device cpu*N or -device cpu,cpu)"

// parallelDevices is the device list a train run asks for: -devices N, or
// a -device with a list (cpu,cpu) or a count (cpu*2). Empty: one device.
func (o *trainOptions) parallelDevices() string {
	switch {
	case o.Devices > 0:
		return fmt.Sprintf("%s*%d", o.Device, o.Devices)
	case strings.ContainsAny(o.Device, ",*"):
		return o.Device
	}
	return ""
}

// checkTrainDevices checks -device and -devices: a list runs on CPU
// devices only (the VM runs no ops on a GPU yet, and a simulated device
// runs no real step), without the options the one-device loop alone has.
func (o *trainOptions) checkTrainDevices() error {
	spec := o.parallelDevices()
	if o.Devices < 0 {
		return usagef("-devices %d: want a positive count", o.Devices)
	}
	if spec == "" {
		return checkRunDevice(o.Device)
	}
	if o.Devices > 0 && strings.ContainsAny(o.Device, ",*") {
		return usagef("-devices %d with -device %s: give the devices one way", o.Devices, o.Device)
	}
	for _, part := range strings.Split(spec, ",") {
		name, _, _ := strings.Cut(strings.TrimSpace(part), "*")
		if err := checkRunDevice(name); err != nil {
			return err
		}
	}
	for flag, set := range map[string]bool{"-checkpoint": o.Checkpoint != "", "-resume": o.Resume, "-history": o.History != "",
		"-plot": o.Plot != "", "-record-profile": o.RecordProfile != ""} {
		if set {
			return usagef("%s is not supported with several devices yet (-device %s)", flag, spec)
		}
	}
	return nil
}

// trainParallel is "ooc train" on several devices: ooc.CompileParallel,
// one replica per device, each with its share of every batch; the loss
// printed is the replicas' mean. No evaluation, checkpoints or history.
func trainParallel(ctx context.Context, o *trainOptions, out io.Writer) (*trainResult, error) {
	spec := o.parallelDevices()
	trainDS, err := openSplit(o.Data, datasets.Train, o.Image, o.Width, o.Classes, o.Seed, false)
	if err != nil {
		return nil, err
	}
	shape, err := resolveShape(trainDS.Info(), o.Data, o.Image, o.Width, o.Classes)
	if err != nil {
		return nil, err
	}
	shape.hidden = o.Hidden
	devs, err := vm.NewDevices(spec, 0)
	if err != nil {
		return nil, usagef("-device %s: %v", spec, err)
	}
	defer func() {
		for _, d := range devs {
			_ = d.Close()
		}
	}()
	n := len(devs)
	if o.Batch%n != 0 {
		return nil, usagef("-batch %d does not split evenly among %d devices", o.Batch, n)
	}
	build := func(batch int) (ooc.Replica, error) {
		m, err := buildModel(o.Model, batch, shape, o.Seed)
		if err != nil {
			return ooc.Replica{}, err
		}
		return ooc.Replica{Graph: m.Graph, Inputs: G.Nodes{m.Input, m.Labels}, Learnables: m.Learnables, Loss: m.Loss}, nil
	}
	one, err := build(o.Batch / n)
	if err != nil {
		return nil, err
	}
	inCore, err := ooc.Plan(one.Graph, ooc.Baseline())
	if err != nil {
		return nil, err
	}
	budget := o.Budget.resolve(inCore.Peak)
	p, err := ooc.CompileParallel(build, o.Batch, devs, append(o.options(budget), ooc.BindDualValues())...)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	model := p.Model()
	info := trainDS.Info()
	loader, err := datasets.NewLoader(trainDS, datasets.Options{
		BatchSize: o.Batch, Channels: shape.channels, Height: shape.height, Width: shape.width,
		Dtype: tensor.Float32, Shuffle: true, Seed: o.Seed, Last: datasets.DropLast,
		Mean: info.Mean, Std: info.Std, Epochs: o.Epochs, RandomCrop: map[bool]int{true: 4}[o.Augment], Flip: o.Augment,
	})
	if err != nil {
		return nil, fmt.Errorf("-data %s: %w", o.Data, err)
	}
	defer loader.Close()
	solver, err := newSolver(o.Optimizer, o.LR)
	if err != nil {
		return nil, err
	}
	bpe := loader.BatchesPerEpoch()
	if bpe == 0 {
		return nil, fmt.Errorf("-data %s has %d training examples, fewer than one batch of %d", o.Data, info.Examples, o.Batch)
	}
	last := o.Epochs * bpe
	if o.Steps > 0 {
		last = min(last, o.Steps)
	}
	fmt.Fprintf(out, "model %s, batch %d split among %d devices (%s), %d per device; data %s, %d batches per epoch\n",
		o.Model, o.Batch, n, spec, o.Batch/n, o.Data, bpe)
	fmt.Fprintf(out, "memory per device: in-core peak %s, %s; all-reduce %s; no evaluation, checkpoints or history with several devices yet\n",
		formatBytes(inCore.Peak), budgetLine(o.memoryOptions, budget, inCore.Peak), p.AllReducer().Name())
	every := o.LogEvery
	if every == 0 {
		every = max((last+19)/20, 1)
	}
	res := &trainResult{First: 1}
	start, images := time.Now(), 0
	for step := 1; step <= last; step++ {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		b, err := loader.Next()
		if err != nil {
			return res, fmt.Errorf("-data %s: %w", o.Data, err)
		}
		if b.Index == 0 {
			G.WithLearnRate(learningRate(o.LR, o.LRDrop, b.Epoch+1))(solver)
		}
		if err := G.Let(model.Inputs[0], b.X); err != nil {
			return res, err
		}
		if err := G.Let(model.Inputs[1], b.Y); err != nil {
			return res, err
		}
		if err := p.RunAll(); err != nil {
			return res, fmt.Errorf("step %d: %w", step, err)
		}
		loss, err := scalarOf(model.Loss.Value())
		if err != nil {
			return res, fmt.Errorf("step %d: loss: %w", step, err)
		}
		if math.IsNaN(loss) || math.IsInf(loss, 0) {
			return res, fmt.Errorf("step %d: the loss is %v (try a smaller -lr)", step, loss)
		}
		if err := solver.Step(G.NodesToValueGrads(model.Learnables)); err != nil {
			return res, fmt.Errorf("step %d: %s: %w", step, o.Optimizer, err)
		}
		p.Reset()
		images += b.N
		res.Losses = append(res.Losses, loss)
		res.Steps = step
		if step%every == 0 || step == last {
			fmt.Fprintf(out, "step %d/%d epoch %d: loss %.4f, %.1f images/s\n", step, last, b.Epoch+1, loss, float64(images)/time.Since(start).Seconds())
		}
	}
	st := p.Stats()
	fmt.Fprintf(out, "\nsummary, measured on %d CPU devices of this machine: %d steps, %.1f images/s, %.3f s per step (all-reduce %.4f s)\n",
		n, st.Steps, float64(images)/time.Since(start).Seconds(), st.StepTime.Seconds()/float64(max(st.Steps, 1)), st.AllReduceTime.Seconds()/float64(max(st.Steps, 1)))
	return res, nil
}
