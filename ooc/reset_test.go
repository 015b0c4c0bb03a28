package ooc_test

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/ooc"
)

// Running again: gorgonia's TapeMachine keeps a program counter that
// RunAll leaves at the end of the tape, so a second RunAll without Reset
// runs nothing and returns nil, leaving every value as it was
// (vm_tape.go: runall loops from m.pc; only Reset sets it to 0). A loop
// that forgets Reset trains one step and then only lets the solver move
// the weights with the gradients it zeroed (Adam's momentum still moves
// them). ooc's machine does the same, so such a loop gives the same
// numbers under both.

// loopSteps runs a training loop of RunAll and an Adam step, with or
// without Reset, feeding a new batch with gorgonia.Let before each run, and
// returns per step the loss, a Read of the logits, every gradient, and
// every weight.
func loopSteps(t *testing.T, n *net, read *G.Value, m G.VM, steps int, reset bool) [][]uint64 {
	t.Helper()
	rng := rand.New(rand.NewSource(5))
	dt := n.x.Dtype()
	solver := G.NewAdamSolver(G.WithLearnRate(0.01))
	var out [][]uint64
	for s := 0; s < steps; s++ {
		require.NoError(t, G.Let(n.x, randT(rng, dt, 1, n.x.Shape()...)))
		require.NoError(t, m.RunAll())
		out = append(out, bits(t, n.cost.Value()), bits(t, *read))
		for _, p := range n.params {
			g, err := p.Grad()
			require.NoError(t, err)
			out = append(out, bits(t, g))
		}
		require.NoError(t, solver.Step(G.NodesToValueGrads(n.params)))
		for _, p := range n.params {
			out = append(out, bits(t, p.Value()))
		}
		if reset {
			m.Reset()
		}
	}
	return out
}

// TestRunAllWithoutReset: a loop of RunAll and solver.Step without Reset,
// and one with Reset, give what they give under TapeMachine bit for bit,
// float32 and float64, in core and at the least feasible budget.
func TestRunAllWithoutReset(t *testing.T) {
	build := func(dt tensor.Dtype, seed int64) (*net, *G.Value) {
		n := mlp(dt, seed)
		read := new(G.Value)
		G.Read(n.out, read)
		return n, read
	}
	asBuilder := func(dt tensor.Dtype, seed int64) *net { n, _ := build(dt, seed); return n }
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		peak, err := ooc.InCorePeak(asBuilder(dt, 1).g)
		require.NoError(t, err)
		least := minFeasible(t, asBuilder, dt, peak)
		for _, reset := range []bool{false, true} {
			ref, read := build(dt, 1)
			tm := G.NewTapeMachine(ref.g, G.BindDualValues(ref.params...))
			want := loopSteps(t, ref, read, tm, 3, reset)
			require.NoError(t, tm.Close())
			for _, budget := range []int64{0, least} {
				t.Run(fmt.Sprintf("%v/reset-%v/budget-%d", dt, reset, budget), func(t *testing.T) {
					n, read := build(dt, 1)
					opts := []ooc.Option{ooc.BindDualValues(n.params...), ooc.WithPoison(), ooc.Baseline()}
					if budget > 0 {
						opts = []ooc.Option{ooc.BindDualValues(n.params...), ooc.WithPoison(), ooc.WithBudget(budget)}
					}
					m, err := ooc.Compile(n.g, opts...)
					require.NoError(t, err)
					defer m.Close()
					require.Equal(t, want, loopSteps(t, n, read, m, 3, reset))
					steps := 3
					if !reset {
						steps = 1
					}
					require.Equal(t, steps, m.Stats().Steps, "steps run")
				})
			}
		}
	}
}

// TestScalarValuesHeldAcrossSteps: a script that keeps each step's loss
// Value() (losses = append(losses, cost.Value())) finds every step's loss
// in it afterwards, as under TapeMachine, which makes a new value at each
// run after Reset: a scalar is not overwritten by the next run.
func TestScalarValuesHeldAcrossSteps(t *testing.T) {
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		run := func(n *net, m G.VM) (atTheTime, heldAfter [][]uint64) {
			solver := G.NewAdamSolver(G.WithLearnRate(0.01))
			var held []G.Value
			for s := 0; s < 3; s++ {
				require.NoError(t, m.RunAll())
				held = append(held, n.cost.Value())
				atTheTime = append(atTheTime, bits(t, n.cost.Value()))
				require.NoError(t, solver.Step(G.NodesToValueGrads(n.params)))
				m.Reset()
			}
			for _, v := range held {
				heldAfter = append(heldAfter, bits(t, v))
			}
			return atTheTime, heldAfter
		}
		ref := mlp(dt, 1)
		tm := G.NewTapeMachine(ref.g, G.BindDualValues(ref.params...))
		want, wantHeld := run(ref, tm)
		require.NoError(t, tm.Close())
		require.Equal(t, want, wantHeld, "TapeMachine's held losses")
		n := mlp(dt, 1)
		m, err := ooc.Compile(n.g, ooc.BindDualValues(n.params...))
		require.NoError(t, err)
		got, gotHeld := run(n, m)
		require.NoError(t, m.Close())
		require.Equal(t, want, got, "%v: losses", dt)
		require.Equal(t, wantHeld, gotHeld, "%v: the losses held", dt)
	}
}

// TestTwoMachinesTwoGraphs: two scripts' machines on two graphs, their
// steps interleaved, each at its least feasible budget, train as two
// TapeMachines do, bit for bit: nothing one machine does reaches the
// other's values.
func TestTwoMachinesTwoGraphs(t *testing.T) {
	builds := []builder{mlp, logReg}
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		run := func(nets []*net, vms []G.VM) [][]uint64 {
			solvers := []G.Solver{G.NewAdamSolver(G.WithLearnRate(0.01)), G.NewAdamSolver(G.WithLearnRate(0.01))}
			var out [][]uint64
			for s := 0; s < 3; s++ {
				for k, n := range nets {
					require.NoError(t, vms[k].RunAll())
					out = append(out, bits(t, n.cost.Value()))
					require.NoError(t, solvers[k].Step(G.NodesToValueGrads(n.params)))
					vms[k].Reset()
				}
			}
			for _, n := range nets {
				for _, p := range n.params {
					out = append(out, bits(t, p.Value()))
				}
			}
			return out
		}
		var refs, nets []*net
		var tms, ms []G.VM
		for _, b := range builds {
			ref := b(dt, 1)
			refs = append(refs, ref)
			tms = append(tms, G.NewTapeMachine(ref.g, G.BindDualValues(ref.params...)))
			peak, err := ooc.InCorePeak(b(dt, 1).g)
			require.NoError(t, err)
			n := b(dt, 1)
			m, err := ooc.Compile(n.g, ooc.BindDualValues(n.params...), ooc.WithPoison(), ooc.WithBudget(minFeasible(t, b, dt, peak)))
			require.NoError(t, err)
			nets, ms = append(nets, n), append(ms, m)
		}
		want := run(refs, tms)
		got := run(nets, ms)
		for k := range ms {
			require.NoError(t, tms[k].Close())
			require.NoError(t, ms[k].Close())
		}
		require.Equal(t, want, got, "%v", dt)
	}
}

// TestMachineLetAndSet: TapeMachine's own Let and Set methods, which a
// script holding the machine may call, do on ooc's machine what they do on
// TapeMachine, bit for bit: Let binds an input, and Set binds a node to
// another node's value as it is then.
func TestMachineLetAndSet(t *testing.T) {
	type letSetter interface {
		G.VM
		Let(n *G.Node, be interface{}) error
		Set(a, b *G.Node) error
	}
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		run := func(n *net, m letSetter) [][]uint64 {
			rng := rand.New(rand.NewSource(9))
			var out [][]uint64
			for s := 0; s < 2; s++ {
				require.NoError(t, m.Let(n.x, randT(rng, dt, 1, n.x.Shape()...)))
				require.NoError(t, m.RunAll())
				out = append(out, bits(t, n.cost.Value()))
				m.Reset()
			}
			// The targets become the last run's logits, then runs on new
			// batches (new logits) see them.
			require.NoError(t, m.Set(n.y, n.out))
			require.NoError(t, m.Let(n.x, randT(rng, dt, 1, n.x.Shape()...)))
			require.NoError(t, m.RunAll())
			out = append(out, bits(t, n.y.Value()), bits(t, n.cost.Value()))
			m.Reset()
			require.NoError(t, m.Let(n.x, randT(rng, dt, 1, n.x.Shape()...)))
			require.NoError(t, m.RunAll())
			return append(out, bits(t, n.y.Value()), bits(t, n.cost.Value()))
		}
		ref := mlp(dt, 1)
		tm := G.NewTapeMachine(ref.g)
		want := run(ref, tm)
		require.NoError(t, tm.Close())
		n := mlp(dt, 1)
		m, err := ooc.Compile(n.g)
		require.NoError(t, err)
		require.Equal(t, want, run(n, m), "%v", dt)
		// TapeMachine looks the node up by id, so a node of another graph
		// with an id of this one passes; ooc refuses it.
		other := mlp(dt, 2)
		require.ErrorContains(t, m.Let(other.x, other.x.Value()), "not in this machine's graph")
		require.ErrorContains(t, m.Set(n.y, other.out), "not in this machine's graph")
		require.NoError(t, m.Close())
	}
}
