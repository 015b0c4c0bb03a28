package dispatch_test

import (
	"math/rand"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/models"
	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/dispatch"
)

// TestDeviceSolver: the update on the device (sgd, momentum, adam, rmsprop and adagrad
// kernels, weights kept on the device, gradients accumulated there) gives
// the weights gorgonia's solvers give on the CPU device, step after step;
// and its state round-trips through State and SetState.
func TestDeviceSolver(t *testing.T) {
	d := openFake(t)
	for _, c := range []struct {
		kind string
		dt   tensor.Dtype
		tol  float64
		make func() G.Solver
	}{
		{"sgd", tensor.Float64, 1e-12, func() G.Solver { return G.NewVanillaSolver(G.WithLearnRate(0.05), G.WithL2Reg(0.01), G.WithClip(0.5)) }},
		{"momentum", tensor.Float32, 1e-5, func() G.Solver { return G.NewMomentum(G.WithLearnRate(0.02), G.WithMomentum(0.8)) }},
		{"adam", tensor.Float64, 1e-12, func() G.Solver { return G.NewAdamSolver(G.WithLearnRate(1e-3)) }},
		{"adam", tensor.Float32, 1e-5, func() G.Solver { return G.NewAdamSolver(G.WithLearnRate(1e-3), G.WithBatchSize(4)) }},
		{"rmsprop", tensor.Float64, 1e-12, func() G.Solver { return G.NewRMSPropSolver(G.WithLearnRate(1e-3), G.WithL2Reg(0.01)) }},
		{"rmsprop", tensor.Float32, 1e-5, func() G.Solver { return G.NewRMSPropSolver(G.WithLearnRate(1e-3), G.WithClip(0.5)) }},
		{"adagrad", tensor.Float64, 1e-12, func() G.Solver { return G.NewAdaGradSolver(G.WithLearnRate(1e-2), G.WithL2Reg(0.01)) }},
		{"adagrad", tensor.Float32, 1e-5, func() G.Solver { return G.NewAdaGradSolver(G.WithLearnRate(1e-2), G.WithClip(0.5)) }},
	} {
		t.Run(c.kind+"/"+c.dt.String(), func(t *testing.T) {
			cfg := models.Config{Batch: 2, Channels: 3, Height: 8, Width: 8, Classes: 4, Dtype: c.dt, Seed: 11}
			p := newPair(t, d, zooCase{Name: "smallcnn", Cfg: cfg}, ooc.WithBudget(0))
			p.SC = c.make()
			gs := c.make()
			ds, err := dispatch.NewSolver(p.MG, gs, p.GPU.Learnables...)
			if err != nil {
				t.Fatal(err)
			}
			defer ds.Close()
			rng := rand.New(rand.NewSource(5))
			for s := 0; s < 3; s++ {
				x, y := batch(t, rng, p.CPU)
				for _, m := range []*models.Model{p.CPU, p.GPU} {
					if err := G.Let(m.Input, x.Clone()); err != nil {
						t.Fatal(err)
					}
					if err := G.Let(m.Labels, y.Clone()); err != nil {
						t.Fatal(err)
					}
				}
				if err := p.MC.RunAll(); err != nil {
					t.Fatal(err)
				}
				if err := p.MG.RunAll(); err != nil {
					t.Fatal(err)
				}
				p.Note("loss", floats(t, p.GPULoss), floats(t, p.CPULoss))
				if err := p.SC.Step(G.NodesToValueGrads(p.CPU.Learnables)); err != nil {
					t.Fatal(err)
				}
				if err := ds.Step(); err != nil {
					t.Fatal(err)
				}
				p.MC.Reset()
				p.MG.Reset()
				if err := ds.SyncToHost(); err != nil {
					t.Fatal(err)
				}
				for i, l := range p.CPU.Learnables {
					p.Note("weights", floats(t, p.GPU.Learnables[i].Value()), floats(t, l.Value()))
				}
			}
			p.Check(t, c.kind+" on the device vs gorgonia's on the CPU, "+c.dt.String(), c.tol)
			iter, st, err := ds.State()
			if err != nil {
				t.Fatal(err)
			}
			if err := ds.SetState(iter, st); err != nil {
				t.Fatal(err)
			}
			_, again, err := ds.State()
			if err != nil {
				t.Fatal(err)
			}
			for i := range st {
				for k := range st[i] {
					if relErr(floats(t, again[i][k]), floats(t, st[i][k])) != 0 {
						t.Errorf("state %d/%d changed in a round trip", i, k)
					}
				}
			}
		})
	}
}
