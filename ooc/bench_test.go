package ooc_test

import (
	"errors"
	"math"
	"slices"
	"syscall"
	"testing"
	"time"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/models"
	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/solvers"
	"github.com/gorgonia-ooc/outofcore/vm"
	"github.com/gorgonia-ooc/outofcore/vm/alloc"
)

// benchModel is the small CNN of the main job, with its data bound.
func benchModel(b *testing.B) *models.Model {
	cfg := models.Config{Batch: 16, Channels: 3, Height: 32, Width: 32, Classes: 10, Dtype: tensor.Float32, Seed: 1}
	m, err := models.Build("smallcnn", cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := G.Let(m.Input, tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(16, 3, 32, 32))); err != nil {
		b.Fatal(err)
	}
	y := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(16, 10))
	for i := 0; i < 16; i++ {
		y.Data().([]float32)[i*10+i%10] = 1
	}
	if err := G.Let(m.Labels, y); err != nil {
		b.Fatal(err)
	}
	return m
}

// benchSteps times b.N training steps (run, Adam, reset) of a model.
// trainStep returns a function that runs one training step of m on vm:
// RunAll, an Adam update and Reset.
func trainStep(b *testing.B, m *models.Model, vm G.VM) func() {
	// The in-place solver gives gorgonia's Adam bit for bit, without its clones.
	solver := solvers.NewAdam(G.WithLearnRate(1e-3))
	// Made once, as ooc train does, so -benchmem counts the step's allocations only.
	vgs := G.NodesToValueGrads(m.Learnables)
	return func() {
		if err := vm.RunAll(); err != nil {
			b.Fatal(err)
		}
		if err := solver.Step(vgs); err != nil {
			b.Fatal(err)
		}
		vm.Reset()
	}
}

func benchSteps(b *testing.B, m *models.Model, vm G.VM) {
	// The in-place solver gives gorgonia's Adam bit for bit, without its clones.
	step := trainStep(b, m, vm)
	// Two steps first: the first maps memory, makes the solver's state and
	// may replan from its measured op times; none of that is the steady state.
	step()
	step()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		step()
	}
}

// BenchmarkStep times one training step (forward, backward, Adam) of a
// small CNN on this machine's CPU: gorgonia's TapeMachine, and the
// out-of-core machine in Baseline() mode and under 60% of its in-core peak.
// Compare the sub-benchmarks as ratios: go test -bench Step -count 5 ./ooc/
func BenchmarkStep(b *testing.B) {
	b.Run("tapemachine", func(b *testing.B) {
		m := benchModel(b)
		tm := G.NewTapeMachine(m.Graph, G.BindDualValues(m.Learnables...))
		defer tm.Close()
		benchSteps(b, m, tm)
	})
	b.Run("baseline", func(b *testing.B) {
		m := benchModel(b)
		vm, err := ooc.Compile(m.Graph, ooc.BindDualValues(m.Learnables...), ooc.Baseline())
		if err != nil {
			b.Fatal(err)
		}
		defer vm.Close()
		benchSteps(b, m, vm)
	})
	b.Run("window-60%", func(b *testing.B) {
		m := benchModel(b)
		p, err := ooc.Plan(m.Graph, ooc.Baseline())
		if err != nil {
			b.Fatal(err)
		}
		vm, err := ooc.Compile(m.Graph, ooc.BindDualValues(m.Learnables...), ooc.WithBudget(p.Peak*6/10))
		if err != nil {
			b.Fatal(err)
		}
		defer vm.Close()
		benchSteps(b, m, vm)
		st := vm.Stats()
		b.ReportMetric(float64(st.SwapInBytes)/float64(st.Steps), "swapin-B/step")
	})
}

// BenchmarkResNetStep times a training step of a small ResNet (resnet18 at
// 32x32, batch 32) on this machine's CPU device in Baseline() and under the
// window scheduler at 50% of the baseline's peak and at the smallest budget
// it can plan for, in one run:
// go test -bench ResNetStep -benchtime 3x -count 3 ./ooc/
// (25% is below what one function needs here: the filter gradient of the
// 512-channel convolutions takes a 9.6 MiB workspace, 44% of the peak.)
func BenchmarkResNetStep(b *testing.B) {
	const batch = 32
	build := func(b *testing.B) *models.Model {
		return boundModel(b, "resnet18", batch, 3, 32, func(x []float32) {
			for i := 0; i < batch; i++ {
				x[i*3*32*32+i] = 1
			}
		})
	}
	probe := build(b)
	inCore, err := ooc.Plan(probe.Graph, ooc.Baseline())
	if err != nil {
		b.Fatal(err)
	}
	least := leastPlanned(probe.Graph, inCore.Peak)
	for _, c := range []struct {
		name   string
		budget int64
	}{{"baseline", 0}, {"window-50%", inCore.Peak / 2}, {"window-least", least}} {
		b.Run(c.name, func(b *testing.B) {
			m := build(b)
			vm := compileAt(b, m, c.budget)
			defer vm.Close()
			benchSteps(b, m, vm)
			st := vm.Stats()
			b.ReportMetric(100*float64(c.budget)/float64(inCore.Peak), "budget-%")
			b.ReportMetric(float64(st.PeakDeviceBytes)/(1<<20), "peak-MiB")
			b.ReportMetric(float64(st.SwapInBytes)/float64(st.Steps)/(1<<20), "swapin-MiB/step")
			b.ReportMetric(st.StallTime.Seconds()/float64(st.Steps)*1e3, "stall-ms/step")
		})
	}
}

// memfdCPU is the CPU device as it was before alloc.NewRecycledHostMemory:
// VA chunks are pieces of a memfd mapped into fresh ranges, so each range
// the allocator maps or unmaps changes page tables.
type memfdCPU struct {
	*vm.CPU
	mem alloc.Memory
}

func (d memfdCPU) Memory() alloc.Memory { return d.mem }
func (d memfdCPU) Close() error         { return errors.Join(d.mem.Close(), d.CPU.Close()) }

// BenchmarkSwapStepMemory times the step of ooc train's Fashion-MNIST run
// (smallcnn, 1x28x28, batch 64, a CPU device of 33% of the in-core peak, VA
// chunks of 64 KiB, 31 MiB swapped in and 26 MiB out a step) on the CPU
// device's memory before and after alloc.NewRecycledHostMemory, one step of
// each in turn so both see the same load, and checks that both give the same
// loss bits. It reports each one's wall and system (kernel) milliseconds a
// step, and before/after as ratios:
// go test -run XXX -bench SwapStepMemory -benchtime 20x ./ooc/
func BenchmarkSwapStepMemory(b *testing.B) {
	const batch = 64
	type run struct {
		m         *models.Model
		vm        *vm.Machine
		solver    *solvers.Solver
		wall, sys time.Duration
	}
	probe := fashionModel(b, batch)
	peak, err := ooc.InCorePeak(probe.Graph)
	if err != nil {
		b.Fatal(err)
	}
	capacity := peak * 33 / 100
	var runs [2]*run
	for i := range runs {
		cpu, err := vm.NewCPU(capacity)
		if err != nil {
			b.Fatal(err)
		}
		var dev vm.Device = cpu
		if i == 0 {
			mem, err := alloc.NewHostMemory(capacity)
			if err != nil {
				b.Fatal(err)
			}
			dev = memfdCPU{CPU: cpu, mem: mem}
		}
		defer dev.Close()
		m := fashionModel(b, batch)
		// 95% of the device: the budget ooc train finds the allocator serves.
		machine, err := ooc.Compile(m.Graph, ooc.BindDualValues(m.Learnables...), ooc.WithDevice(dev),
			ooc.WithBudget(capacity*95/100), ooc.WithChunkSize(64<<10))
		if err != nil {
			b.Fatal(err)
		}
		defer machine.Close()
		runs[i] = &run{m: m, vm: machine, solver: solvers.NewAdam(G.WithLearnRate(3e-3))}
	}
	sysTime := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Stime.Nano())
	}
	step := func(r *run) float32 {
		t, s := time.Now(), sysTime()
		if err := r.vm.RunAll(); err != nil {
			b.Fatal(err)
		}
		if err := r.solver.Step(G.NodesToValueGrads(r.m.Learnables)); err != nil {
			b.Fatal(err)
		}
		r.wall += time.Since(t)
		r.sys += sysTime() - s
		loss := r.m.Loss.Value().Data().(float32)
		r.vm.Reset()
		return loss
	}
	for _, r := range runs { // the first step maps every range: not the steady state
		step(r)
		r.wall, r.sys = 0, 0
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if before, after := step(runs[0]), step(runs[1]); math.Float32bits(before) != math.Float32bits(after) {
			b.Fatalf("step %d: loss %v on memfd memory, %v on recycled memory", i+2, before, after)
		}
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(b.N) / 1e6 }
	b.ReportMetric(ms(runs[0].wall), "memfd-ms/step")
	b.ReportMetric(ms(runs[1].wall), "recycled-ms/step")
	b.ReportMetric(ms(runs[0].sys), "memfd-sys-ms/step")
	b.ReportMetric(ms(runs[1].sys), "recycled-sys-ms/step")
	b.ReportMetric(float64(runs[0].wall)/float64(runs[1].wall), "wall-before/after")
	b.ReportMetric(float64(runs[0].sys)/float64(max(runs[1].sys, 1)), "sys-before/after")
}

// boundModel builds a float32 model of 10 classes on square images, with
// one batch bound: the input as fill sets it, image i labelled i%10.
func boundModel(b testing.TB, name string, batch, channels, size int, fill func(x []float32)) *models.Model {
	cfg := models.Config{Batch: batch, Channels: channels, Height: size, Width: size, Classes: 10, Dtype: tensor.Float32, Seed: 1}
	m, err := models.Build(name, cfg)
	if err != nil {
		b.Fatal(err)
	}
	x := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(batch, channels, size, size))
	y := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(batch, 10))
	fill(x.Data().([]float32))
	for i := 0; i < batch; i++ {
		y.Data().([]float32)[i*10+i%10] = 1
	}
	if err := G.Let(m.Input, x); err != nil {
		b.Fatal(err)
	}
	if err := G.Let(m.Labels, y); err != nil {
		b.Fatal(err)
	}
	return m
}

// compileAt compiles m's step with its learnables' gradients bound, in core
// (budget 0: ooc.Baseline) or under the budget, plus opts.
func compileAt(tb testing.TB, m *models.Model, budget int64, opts ...ooc.Option) *vm.Machine {
	tb.Helper()
	opts = append([]ooc.Option{ooc.BindDualValues(m.Learnables...)}, opts...)
	if budget == 0 {
		opts = append(opts, ooc.Baseline())
	} else {
		opts = append(opts, ooc.WithBudget(budget))
	}
	machine, err := ooc.Compile(m.Graph, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return machine
}

// fashionModel is smallcnn on Fashion-MNIST's shape, with one batch of
// synthetic data bound.
func fashionModel(b testing.TB, batch int) *models.Model {
	return boundModel(b, "smallcnn", batch, 1, 28, func(x []float32) {
		for i := range x {
			x[i] = float32(i%251) / 251
		}
	})
}

// leastPlanned is the smallest budget (to 64 KiB) the planner finds a plan
// for below the in-core peak.
func leastPlanned(g *G.ExprGraph, peak int64) int64 {
	return leastBudget(peak, func(b int64) bool {
		_, err := ooc.Plan(g, ooc.WithBudget(b))
		return err == nil
	})
}

// fashionPeakAndLeast is fashionModel's in-core peak and the least budget
// the planner serves it.
func fashionPeakAndLeast(b *testing.B, batch int) (peak, least int64) {
	probe := fashionModel(b, batch)
	inCore, err := ooc.Plan(probe.Graph, ooc.Baseline())
	if err != nil {
		b.Fatal(err)
	}
	return inCore.Peak, leastPlanned(probe.Graph, inCore.Peak)
}

// BenchmarkTrainStep is a whole training step (forward, backward, Adam,
// Reset) of ooc train's Fashion-MNIST model (smallcnn, 1x28x28, batch 64) on
// the CPU device, in core and at the least budget the planner serves. Run it
// with -benchmem: allocs/op and B/op are what the step allocates on the Go
// heap, which the hot path should keep near zero:
// go test -run XXX -bench TrainStep -benchmem -benchtime 10x ./ooc/
func BenchmarkTrainStep(b *testing.B) {
	const batch = 64
	peak, least := fashionPeakAndLeast(b, batch)
	for _, c := range []struct {
		name   string
		budget int64
	}{{"in-core", 0}, {"least", least}} {
		b.Run(c.name, func(b *testing.B) {
			m := fashionModel(b, batch)
			// WithNodeValues(0), as package train compiles: a step reads the loss only. The
			// default binds the forward's values to their nodes, a host copy of each activation
			// every step, which would time those copies as much as the step.
			vm := compileAt(b, m, c.budget, ooc.WithNodeValues(0))
			defer vm.Close()
			benchSteps(b, m, vm)
			b.ReportMetric(100*float64(c.budget)/float64(peak), "budget-%")
		})
	}
}

// BenchmarkFusedTrainStep is a training step (forward, backward, Adam, Reset) in core, as
// package train compiles it, of BenchmarkTrainStep's smallcnn (1x28x28, batch 64) and of
// torchbench's ResNet-18 (3x32x32, batch 32), on one machine each with its run-time fusion (a
// batch norm and the ReLU after it in one pass, vm.Fuser) off and on by turns, so both see the
// same machine load; it reports each one's ns a step and their ratio (fused/unfused):
// go test -run XXX -bench FusedTrainStep -benchtime 20x ./ooc/
func BenchmarkFusedTrainStep(b *testing.B) {
	for _, c := range []struct {
		name  string
		build func(b *testing.B) *models.Model
	}{
		{"smallcnn", func(b *testing.B) *models.Model { return fashionModel(b, 64) }},
		{"resnet18", func(b *testing.B) *models.Model {
			return boundModel(b, "resnet18", 32, 3, 32, func(x []float32) {
				for i := range x {
					x[i] = float32(i%251) / 251
				}
			})
		}},
	} {
		b.Run(c.name, func(b *testing.B) { fusedSteps(b, c.build(b)) })
	}
}

// fusedSteps times b.N steps of m fused and b.N unfused, by turns.
func fusedSteps(b *testing.B, m *models.Model) {
	machine := compileAt(b, m, 0, ooc.WithNodeValues(0))
	defer machine.Close()
	step := trainStep(b, m, machine)
	step()
	step()
	byTurns(b, [2]string{"unfused", "fused"}, [2]func(){
		func() { machine.SetFusion(false); step() },
		func() { machine.SetFusion(true); step() },
	})
	machine.SetFusion(true)
	b.ReportMetric(float64(len(machine.Fused())), "fused-pairs")
}

// byTurns times b.N pairs of steps, one of each, the order alternating (so
// both see the same machine load), and reports each one's ns a step, their
// ratio (second/first) and the median of the per-pair ratios, which a burst
// of other load sways less.
func byTurns(b *testing.B, names [2]string, steps [2]func()) {
	b.ResetTimer()
	var took [2]time.Duration
	ratios := make([]float64, b.N)
	for i := 0; i < b.N; i++ {
		var pair [2]time.Duration
		for j := 0; j < 2; j++ {
			k := (i + j) % 2
			t0 := time.Now()
			steps[k]()
			pair[k] = time.Since(t0)
		}
		took[0], took[1] = took[0]+pair[0], took[1]+pair[1]
		ratios[i] = float64(pair[1]) / float64(pair[0])
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(took[0].Nanoseconds())/n, names[0]+"-ns/step")
	b.ReportMetric(float64(took[1].Nanoseconds())/n, names[1]+"-ns/step")
	b.ReportMetric(float64(took[1])/float64(took[0]), names[1]+"/"+names[0])
	slices.Sort(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "median-pair-ratio")
}

// BenchmarkOutOfCoreStep is BenchmarkTrainStep's step (smallcnn, 1x28x28,
// batch 64, compiled as package train does) in core and under a budget (the
// least the planner serves, 40% and 60% of the in-core peak), on two
// machines that take steps by turns (the order alternating), so both see the
// same machine load. It reports each one's ns a step, their ratio
// (budget/in-core: issue 28 holds it within 1.10 at the least budget), the
// median of the per-pair ratios, and what the budget's step swaps and
// stalls. 300 pairs (about 30 s a budget) give a figure to 1-2 points; a
// run of 40-60 pairs swings by 5 with the machine's state:
// go test -run XXX -bench OutOfCoreStep -benchtime 300x ./ooc/
func BenchmarkOutOfCoreStep(b *testing.B) {
	const batch = 64
	peak, least := fashionPeakAndLeast(b, batch)
	for _, c := range []struct {
		name   string
		budget int64
	}{{"least", least}, {"40%", peak * 4 / 10}, {"60%", peak * 6 / 10}} {
		b.Run(c.name, func(b *testing.B) {
			pairedSteps(b, c.budget)
			b.ReportMetric(100*float64(c.budget)/float64(peak), "budget-%")
		})
	}
}

// pairedSteps times b.N steps of fashionModel in core and b.N under the
// budget, by turns.
func pairedSteps(b *testing.B, budget int64) {
	var steps [2]func()
	var machines [2]*vm.Machine
	for k, budget := range []int64{0, budget} {
		m := fashionModel(b, 64)
		machines[k] = compileAt(b, m, budget, ooc.WithNodeValues(0))
		defer machines[k].Close()
		steps[k] = trainStep(b, m, machines[k])
		steps[k]()
		steps[k]()
	}
	before := machines[1].Stats()
	byTurns(b, [2]string{"in-core", "budget"}, steps)
	after := machines[1].Stats()
	n := float64(b.N)
	b.ReportMetric(float64(after.SwapInBytes-before.SwapInBytes+after.SwapOutBytes-before.SwapOutBytes)/n/1e6, "swapped-MB/step")
	b.ReportMetric(float64((after.StallTime-before.StallTime).Nanoseconds())/n, "stall-ns/step")
}
