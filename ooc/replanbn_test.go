package ooc_test

import (
	"math"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/models"
	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm"
)

// TestLayersBatchNormThroughReplan: a hybrid machine on the CPU device runs
// its first step on the window scheduler's tape while it measures op times,
// then replans; models/layers' batch norm keeps the running statistics, and
// the loss, the window scheduler's machine gives (float64, bit for bit).
// gorgonia's own BatchNorm does not (TestBatchNormStateThenEvaluation), so
// Compile does not replan a graph that has it.
func TestLayersBatchNormThroughReplan(t *testing.T) {
	run := func(sc ooc.Scheduler) (mean []float64, loss float64, timing string) {
		m, err := models.Build("smallcnn", models.Config{Batch: 8, Channels: 3, Height: 16, Width: 16, Classes: 4, Dtype: tensor.Float64, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		peak, err := ooc.InCorePeak(m.Graph)
		if err != nil {
			t.Fatal(err)
		}
		mach, err := ooc.Compile(m.Graph, ooc.BindDualValues(m.Learnables...), ooc.WithBudget(peak/2), ooc.WithScheduler(sc))
		if err != nil {
			t.Fatal(err)
		}
		defer mach.Close()
		x := tensor.New(tensor.WithShape(8, 3, 16, 16), tensor.Of(tensor.Float64))
		for i := range x.Data().([]float64) {
			x.Data().([]float64)[i] = float64(i%7) / 7
		}
		y := tensor.New(tensor.WithShape(8, 4), tensor.Of(tensor.Float64))
		for i := 0; i < 8; i++ {
			y.Data().([]float64)[i*4+i%4] = 1
		}
		s := G.NewVanillaSolver(G.WithLearnRate(0.1))
		for st := 0; st < 3; st++ {
			if err := G.Let(m.Input, x); err != nil {
				t.Fatal(err)
			}
			if err := G.Let(m.Labels, y); err != nil {
				t.Fatal(err)
			}
			if err := mach.RunAll(); err != nil {
				t.Fatal(err)
			}
			if err := s.Step(G.NodesToValueGrads(m.Learnables)); err != nil {
				t.Fatal(err)
			}
			mach.Reset()
		}
		for _, n := range m.Graph.AllNodes() {
			if rs, ok := n.Op().(vm.RunningStatser); ok {
				mv, vv := rs.RunningStats()
				mean = append(append(mean, mv...), vv...)
			}
		}
		return mean, m.Loss.Value().Data().(float64), mach.Program().Timing
	}
	wantMean, wantLoss, _ := run(ooc.Window{})
	gotMean, gotLoss, timing := run(ooc.Hybrid{})
	if !strings.Contains(timing, "measured on cpu") {
		t.Fatalf("hybrid's tape was not replanned from measured times: %q", timing)
	}
	if len(wantMean) == 0 || len(gotMean) != len(wantMean) {
		t.Fatalf("%d and %d running statistics", len(wantMean), len(gotMean))
	}
	for i := range wantMean {
		if math.Float64bits(gotMean[i]) != math.Float64bits(wantMean[i]) {
			t.Fatalf("running statistic %d: %v after the replan, %v under window", i, gotMean[i], wantMean[i])
		}
	}
	if math.Float64bits(gotLoss) != math.Float64bits(wantLoss) {
		t.Errorf("loss %v after the replan, %v under window", gotLoss, wantLoss)
	}
}
