package ooc_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm"
)

// forwardReads adds gorgonia.Read statements of the cost and the
// prediction and returns where they store their values.
func forwardReads(n *net) []*G.Value {
	var out []*G.Value
	for _, node := range []*G.Node{n.cost, n.out} {
		v := new(G.Value)
		G.Read(node, v)
		out = append(out, v)
	}
	return out
}

func runReads(t *testing.T, m G.VM, reads []*G.Value, steps int) [][]uint64 {
	t.Helper()
	var out [][]uint64
	for s := 0; s < steps; s++ {
		require.NoError(t, m.RunAll())
		for _, r := range reads {
			out = append(out, bits(t, *r))
		}
		m.Reset()
	}
	return out
}

// TestInferenceMatchesTapeMachine: a training graph compiled with
// Inference() runs its forward only, batch norm in inference mode, and
// gives what TapeMachine gives under EvalMode, bit for bit, in core and at
// the least feasible budget, which is below the training step's.
func TestInferenceMatchesTapeMachine(t *testing.T) {
	models := map[string]builder{"cnn": cnn, "stock-cnn": stockCNN}
	for _, name := range sortedNames(models) {
		build := models[name]
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			ref := build(dt, 1)
			reads := forwardReads(ref)
			tm := G.NewTapeMachine(ref.g, G.EvalMode())
			want := runReads(t, tm, reads, 2)
			tm.Close()

			train, err := ooc.Plan(build(dt, 1).g, ooc.Baseline())
			require.NoError(t, err)
			inCore, err := ooc.Plan(build(dt, 1).g, ooc.Baseline(), ooc.Inference())
			require.NoError(t, err)
			require.Less(t, inCore.Peak, train.Peak, "the forward alone needs less than a training step")
			least := minFeasibleWith(t, build, dt, inCore.Peak, ooc.Inference())
			for _, budget := range []int64{0, least} {
				t.Run(name+"/"+dt.String()+"/"+map[bool]string{true: "in-core", false: "min"}[budget == 0], func(t *testing.T) {
					n := build(dt, 1)
					reads := forwardReads(n)
					opts := []ooc.Option{ooc.Inference(), ooc.WithPoison(), ooc.Baseline()}
					if budget > 0 {
						opts = []ooc.Option{ooc.Inference(), ooc.WithPoison(), ooc.WithBudget(budget)}
					}
					m, err := ooc.Compile(n.g, opts...)
					require.NoError(t, err)
					defer m.Close()
					p := m.Program()
					require.True(t, p.Inference)
					for _, v := range p.Vars {
						require.NotEqual(t, vm.Gradient, v.Role, "%s: an inference run has no gradients", v.Name)
					}
					require.Equal(t, want, runReads(t, m, reads, 2))
					if budget > 0 {
						require.LessOrEqual(t, m.Stats().PeakDeviceBytes, budget)
					}
					if budget > 0 && budget < inCore.Peak {
						require.Positive(t, m.Stats().SwapInBytes, "below the in-core peak something must move")
					}
				})
			}
		}
	}
}

// TestForwardOnlyGraph: a graph without a backward runs forward only with
// no option, in training mode as a plain TapeMachine runs it, what it
// computes named by its Read statements alone.
func TestForwardOnlyGraph(t *testing.T) {
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		ref := stockCNNGrad(dt, 2, false)
		tm := G.NewTapeMachine(ref.g)
		want := runReads(t, tm, []*G.Value{ref.read}, 2)
		tm.Close()
		n := stockCNNGrad(dt, 2, false)
		peak, err := ooc.InCorePeak(n.g)
		require.NoError(t, err)
		fwd := func(dt tensor.Dtype, seed int64) *net { return stockCNNGrad(dt, seed, false) }
		m, err := ooc.Compile(n.g, ooc.WithPoison(), ooc.WithBudget(minFeasible(t, fwd, dt, peak)))
		require.NoError(t, err)
		require.Equal(t, want, runReads(t, m, []*G.Value{n.read}, 2))
		require.NoError(t, m.Close())
	}
}

// TestInferenceRefusesBackwardOutputs: asking an inference run for a
// gradient is an error that names it.
func TestInferenceRefusesBackwardOutputs(t *testing.T) {
	n := mlp(tensor.Float64, 1)
	d := n.params[0].Deriv()
	_, err := ooc.Compile(n.g, ooc.Inference(), ooc.WithOutputs(d))
	require.ErrorContains(t, err, d.Name())
	require.ErrorContains(t, err, "computed by the backward")
}

// TestForwardGraphBindsItsResults: with nothing named (no gradients, no
// Read, no WithOutputs), the nodes nothing else reads are the results, and
// hold TapeMachine's values after a run.
func TestForwardGraphBindsItsResults(t *testing.T) {
	build := func() (*G.ExprGraph, *G.Node, *G.Node) {
		g := G.NewGraph()
		x := G.NewMatrix(g, tensor.Float64, G.WithShape(6, 5), G.WithName("x"), G.WithValue(filled(6, 5)))
		w := G.NewMatrix(g, tensor.Float64, G.WithShape(5, 4), G.WithName("w"), G.WithValue(filled(5, 4)))
		h := G.Must(G.Tanh(G.Must(G.Mul(x, w))))
		return g, G.Must(G.Sum(h)), G.Must(G.Sigmoid(h))
	}
	g, s, p := build()
	tm := G.NewTapeMachine(g)
	require.NoError(t, tm.RunAll())
	wantS, wantP := bits(t, s.Value()), bits(t, p.Value())
	tm.Close()

	g, s, p = build()
	m, err := ooc.Compile(g, ooc.WithPoison())
	require.NoError(t, err)
	defer m.Close()
	require.NoError(t, m.RunAll())
	require.Equal(t, wantS, bits(t, s.Value()))
	require.Equal(t, wantP, bits(t, p.Value()))
}

func filled(shape ...int) *tensor.Dense {
	t := tensor.New(tensor.Of(tensor.Float64), tensor.WithShape(shape...))
	for i, d := 0, t.Data().([]float64); i < len(d); i++ {
		d[i] = float64(i%7)/7 - 0.4
	}
	return t
}
