package ooc_test

import (
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/models"
	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/solvers"
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
func benchSteps(b *testing.B, m *models.Model, vm G.VM) {
	// The in-place solver gives gorgonia's Adam bit for bit, without its clones.
	solver := solvers.NewAdam(G.WithLearnRate(1e-3))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := vm.RunAll(); err != nil {
			b.Fatal(err)
		}
		if err := solver.Step(G.NodesToValueGrads(m.Learnables)); err != nil {
			b.Fatal(err)
		}
		vm.Reset()
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
		cfg := models.Config{Batch: batch, Channels: 3, Height: 32, Width: 32, Classes: 10, Dtype: tensor.Float32, Seed: 1}
		m, err := models.Build("resnet18", cfg)
		if err != nil {
			b.Fatal(err)
		}
		x := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(batch, 3, 32, 32))
		y := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(batch, 10))
		for i := 0; i < batch; i++ {
			x.Data().([]float32)[i*3*32*32+i] = 1
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
	probe := build(b)
	inCore, err := ooc.Plan(probe.Graph, ooc.Baseline())
	if err != nil {
		b.Fatal(err)
	}
	lo, least := int64(0), inCore.Peak
	for least-lo > 64<<10 {
		mid := (lo + least) / 2
		if _, err := ooc.Plan(probe.Graph, ooc.WithBudget(mid)); err == nil {
			least = mid
		} else {
			lo = mid
		}
	}
	for _, c := range []struct {
		name   string
		budget int64
	}{{"baseline", 0}, {"window-50%", inCore.Peak / 2}, {"window-least", least}} {
		b.Run(c.name, func(b *testing.B) {
			m := build(b)
			opts := []ooc.Option{ooc.BindDualValues(m.Learnables...)}
			if c.budget == 0 {
				opts = append(opts, ooc.Baseline())
			} else {
				opts = append(opts, ooc.WithBudget(c.budget))
			}
			vm, err := ooc.Compile(m.Graph, opts...)
			if err != nil {
				b.Fatal(err)
			}
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
