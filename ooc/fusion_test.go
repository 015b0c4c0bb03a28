package ooc_test

import (
	"fmt"
	"math/rand"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/models"
	"github.com/gorgonia-ooc/outofcore/models/layers"
	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/solvers"
	"github.com/gorgonia-ooc/outofcore/vm"
)

// fusionModel builds a bundled model with one batch of random data bound, in dt.
func fusionModel(t *testing.T, name string, dt tensor.Dtype, batch, size int) *models.Model {
	t.Helper()
	cfg := models.Config{Batch: batch, Channels: 3, Height: size, Width: size, Classes: 10, Dtype: dt, Seed: 7}
	m, err := models.Build(name, cfg)
	require.NoError(t, err)
	rng := rand.New(rand.NewSource(11))
	require.NoError(t, G.Let(m.Input, randT(rng, dt, 1, batch, 3, size, size)))
	require.NoError(t, G.Let(m.Labels, onehot(rng, dt, batch, 10)))
	return m
}

// fusionSteps trains steps Adam steps and returns the bits of each step's loss and gradients,
// then of the learnables.
func fusionSteps(t *testing.T, m *models.Model, machine G.VM, steps int) [][]uint64 {
	t.Helper()
	solver := solvers.NewAdam(G.WithLearnRate(1e-3))
	var out [][]uint64
	for s := 0; s < steps; s++ {
		require.NoError(t, machine.RunAll())
		out = append(out, bits(t, m.Loss.Value()))
		for _, n := range m.Learnables {
			g, err := n.Grad()
			require.NoError(t, err)
			out = append(out, bits(t, g))
		}
		require.NoError(t, solver.Step(G.NodesToValueGrads(m.Learnables)))
		machine.Reset()
	}
	for _, n := range m.Learnables {
		out = append(out, bits(t, n.Value()))
	}
	return out
}

// TestFusedModelsSameBits: smallcnn and ResNet-18 train to the same bits (losses, gradients,
// weights after Adam steps) with their batch norms fused with the ReLUs after them as without,
// float32 and float64, GOMAXPROCS 1 and 2 (ResNet-18: float32 at 2), in core and (smallcnn) at the
// least budget the planner serves, and in core as gorgonia's TapeMachine; and the fusion
// happens: once per conv-BN-ReLU (smallcnn has three; ResNet-18 the stem's and each basic
// block's first, nine), never at a batch norm whose output a residual add reads.
func TestFusedModelsSameBits(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, c := range []struct {
		name        string
		batch, size int
		small       bool // every GOMAXPROCS, the least budget and the TapeMachine too
		wantFused   int
	}{
		{"smallcnn", 4, 12, true, 3},
		{"resnet18", 2, 16, false, 9},
	} {
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			budgets, procs := []int64{0}, []int{1, 2}
			if c.small {
				g := fusionModel(t, c.name, dt, c.batch, c.size).Graph
				p, err := ooc.Plan(g, ooc.Baseline())
				require.NoError(t, err)
				budgets = append(budgets, leastPlanned(g, p.Peak))
			} else if dt == tensor.Float32 {
				procs = procs[1:] // smallcnn has the rest: this is about the count, and cheap
			} else {
				continue
			}
			for _, budget := range budgets {
				for _, n := range procs {
					t.Run(fmt.Sprintf("%s/%v/budget=%d/procs=%d", c.name, dt, budget, n), func(t *testing.T) {
						runtime.GOMAXPROCS(n)
						checkFusedSameBits(t, c.name, dt, c.batch, c.size, budget, c.wantFused, c.small && budget == 0)
					})
				}
			}
		}
	}
}

// checkFusedSameBits trains a model fused and unfused (and on the TapeMachine, with tape) and
// requires the same bits, and want fused pairs.
func checkFusedSameBits(t *testing.T, name string, dt tensor.Dtype, batch, size int, budget int64, want int, tape bool) {
	var runs [][][]uint64
	for _, fuse := range []bool{false, true} {
		m := fusionModel(t, name, dt, batch, size)
		machine := compileAt(t, m, budget, ooc.WithNodeValues(0))
		defer machine.Close()
		machine.SetFusion(fuse)
		runs = append(runs, fusionSteps(t, m, machine, 3))
		if fuse {
			// After the steps: a planner that measures op times replans after the first,
			// which runs unfused (vm.Machine.Fused).
			checkFused(t, machine, want)
		}
	}
	require.Equal(t, runs[0], runs[1], "fused against unfused")
	if tape {
		m := fusionModel(t, name, dt, batch, size)
		tm := G.NewTapeMachine(m.Graph, G.BindDualValues(m.Learnables...))
		defer tm.Close()
		require.Equal(t, fusionSteps(t, m, tm, 3), runs[1], "fused against gorgonia's TapeMachine")
	}
}

// checkFused requires want fused pairs, each a batch norm whose output only the ReLU after it
// reads.
func checkFused(t *testing.T, machine *vm.Machine, want int) {
	t.Helper()
	p := machine.Program()
	fused := machine.Fused()
	require.Len(t, fused, want, "fused pairs")
	for _, f := range fused {
		require.IsType(t, (*layers.BatchNormOp)(nil), p.Funcs[f.Head].Op)
		require.Equal(t, "ReLU", p.Funcs[f.Tail].Op.String())
		require.Equal(t, []int{p.Funcs[f.Head].Output}, p.Funcs[f.Tail].Inputs)
	}
}

// TestFusedInferenceSameBits: a forward-only program (batch norms on their running statistics)
// fuses smallcnn's three pairs too, and its predictions keep their bits.
func TestFusedInferenceSameBits(t *testing.T) {
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		var got [2][]uint64
		for k, fuse := range []bool{false, true} {
			m := fusionModel(t, "smallcnn", dt, 4, 12)
			machine, err := ooc.Compile(m.Graph, ooc.Inference(), ooc.WithNodeValues(0), ooc.WithOutputs(m.Logits))
			require.NoError(t, err)
			defer machine.Close()
			machine.SetFusion(fuse)
			require.NoError(t, machine.RunAll())
			got[k] = bits(t, m.Logits.Value())
			if fuse {
				checkFused(t, machine, 3)
			}
		}
		require.Equal(t, got[0], got[1], "%v logits, fused against unfused", dt)
	}
}
