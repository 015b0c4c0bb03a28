package ooc_test

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/models"
	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/solvers"
	"github.com/gorgonia-ooc/outofcore/vm"
)

// softmaxMLP predicts with a SoftMax node the cost reads, the node a script
// reads for its accuracy.
func softmaxMLP(dt tensor.Dtype, seed int64) *net {
	rng := rand.New(rand.NewSource(seed))
	g := G.NewGraph()
	const batch, in, hid, out = 16, 10, 12, 4
	x := G.NewMatrix(g, dt, G.WithShape(batch, in), G.WithName("x"), G.WithValue(randT(rng, dt, 1, batch, in)))
	y := G.NewMatrix(g, dt, G.WithShape(batch, out), G.WithName("y"), G.WithValue(onehot(rng, dt, batch, out)))
	w1 := G.NewMatrix(g, dt, G.WithShape(in, hid), G.WithName("w1"), G.WithValue(randT(rng, dt, 0.3, in, hid)))
	w2 := G.NewMatrix(g, dt, G.WithShape(hid, out), G.WithName("w2"), G.WithValue(randT(rng, dt, 0.3, hid, out)))
	h := G.Must(G.Rectify(G.Must(G.Mul(x, w1))))
	pred := G.Must(G.SoftMax(G.Must(G.Mul(h, w2))))
	cost := G.Must(G.Neg(G.Must(G.Mean(G.Must(G.Sum(G.Must(G.HadamardProd(G.Must(G.Log(pred)), y)), 1))))))
	params := G.Nodes{w1, w2}
	if _, err := G.Grad(cost, params...); err != nil {
		panic(err)
	}
	return &net{g: g, x: x, y: y, cost: cost, params: params, out: pred}
}

// forwardNodes are the nodes of the forward that an op computes for the
// cost, in the order the graph holds them (the same in two builds of one
// program). (Dead ends, which the cost does not read, are
// TestDeadEndsComputed's.)
func forwardNodes(t *testing.T, g *G.ExprGraph, cost *G.Node) []*G.Node {
	t.Helper()
	forCost := ancestors(cost)
	fromGrad := fromGradient(t, g)
	var out []*G.Node
	for _, n := range g.AllNodes() {
		if n.Op() != nil && !fromGrad[n] && forCost[n] {
			out = append(out, n)
		}
	}
	return out
}

// overwritten tells the nodes whose value under TapeMachine shares its
// memory with another node's: an op that wrote its result in place over
// it (or a view of it) may have changed it after it was computed.
func overwritten(g *G.ExprGraph) map[*G.Node]bool {
	owner := map[uintptr][]*G.Node{}
	for _, n := range g.AllNodes() {
		if d, ok := n.Value().(*tensor.Dense); ok && d.Uintptr() != 0 {
			owner[d.Uintptr()] = append(owner[d.Uintptr()], n)
		}
	}
	out := map[*G.Node]bool{}
	for _, ns := range owner {
		if len(ns) > 1 {
			for _, n := range ns {
				out[n] = true
			}
		}
	}
	return out
}

// TestForwardNodesBound: after RunAll every node of the forward holds its
// value, as under TapeMachine, in core and at the least feasible budget.
// Where TapeMachine's value is its own memory it is compared bit for bit;
// where TapeMachine shares that memory with another node (an in-place op
// may have written over it, so its Value() is not the op's result) ooc's
// value is checked against the op run again on ooc's values of its
// operands, which is what ooc promises to show.
func TestForwardNodesBound(t *testing.T) {
	programs := []struct {
		name  string
		build builder
	}{
		{"mlp-softmax", softmaxMLP},
		{"cnn", cnn},
		{"rnn-slice-concat", rnn},
	}
	dt := tensor.Float64
	for _, p := range programs {
		t.Run(p.name, func(t *testing.T) {
			ref := p.build(dt, 7)
			tm := G.NewTapeMachine(ref.g)
			require.NoError(t, tm.RunAll())
			refNodes := forwardNodes(t, ref.g, ref.cost)
			clobbered := overwritten(ref.g)
			peak, err := ooc.InCorePeak(p.build(dt, 7).g)
			require.NoError(t, err)
			for _, budget := range []int64{0, minFeasible(t, p.build, dt, peak)} {
				n := p.build(dt, 7)
				opts := []ooc.Option{ooc.WithPoison(), ooc.Baseline()}
				if budget > 0 {
					opts = []ooc.Option{ooc.WithPoison(), ooc.WithBudget(budget)}
				}
				m, err := ooc.Compile(n.g, opts...)
				require.NoError(t, err)
				require.NoError(t, m.RunAll())
				nodes := forwardNodes(t, n.g, n.cost)
				checkNodeValues(t, fmt.Sprintf("%s budget %d", p.name, budget), refNodes, nodes, clobbered)
				require.NoError(t, m.Close())
			}
			require.NoError(t, tm.Close())
		})
	}
}

// checkNodeValues requires each node to hold TapeMachine's value of its
// counterpart in refNodes, bit for bit, or, where TapeMachine's value
// shares its memory with another node's (clobbered), its op's result run
// again on the values of its operands, which is what ooc promises to show.
func checkNodeValues(t *testing.T, what string, refNodes, nodes []*G.Node, clobbered map[*G.Node]bool) {
	t.Helper()
	require.Len(t, nodes, len(refNodes))
	same, redone := 0, 0
	for i, node := range nodes {
		require.NotNil(t, node.Value(), "%s: %s", what, node.Name())
		if !clobbered[refNodes[i]] {
			require.Equal(t, valueBits(t, refNodes[i].Value()), valueBits(t, node.Value()), "%s: %s", what, node.Name())
			same++
			continue
		}
		var ins []G.Value
		for _, c := range ooc.Operands(node) {
			require.NotNil(t, c.Value(), "%s: operand %s of %s", what, c.Name(), node.Name())
			ins = append(ins, c.Value())
		}
		again, err := node.Op().Do(ins...)
		require.NoError(t, err, "%s: %s", what, node.Name())
		require.Equal(t, valueBits(t, again), valueBits(t, node.Value()), "%s: %s (op run again)", what, node.Name())
		redone++
	}
	require.Positive(t, same, "%s: nothing compared with TapeMachine", what)
	t.Logf("%s: %d nodes equal TapeMachine's, %d equal their op run again", what, same, redone)
}

// TestNodeValuesAboveLimit: when the forward's intermediates take more than
// the limit none is bound (the prediction's Value() stays nil, as before),
// and binding them never changes the device memory a step takes: the host
// copies are not in the budget.
func TestNodeValuesAboveLimit(t *testing.T) {
	dt := tensor.Float64
	peak, err := ooc.InCorePeak(cnn(dt, 7).g)
	require.NoError(t, err)
	least := minFeasible(t, cnn, dt, peak)
	type run struct {
		bound     int
		devPeak   int64
		costValue []uint64
	}
	step := func(budget int64, extra ...ooc.Option) run {
		n := cnn(dt, 7)
		opts := []ooc.Option{ooc.Baseline()}
		if budget > 0 {
			opts = []ooc.Option{ooc.WithBudget(budget)}
		}
		m, err := ooc.Compile(n.g, append(opts, extra...)...)
		require.NoError(t, err)
		defer func() { require.NoError(t, m.Close()) }()
		require.NoError(t, m.RunAll())
		var r run
		for _, node := range forwardNodes(t, n.g, n.cost) {
			if node.Value() != nil && !node.IsScalar() {
				r.bound++
			}
		}
		r.devPeak = m.Stats().PeakDeviceBytes
		r.costValue = bits(t, n.cost.Value())
		return r
	}
	for _, budget := range []int64{0, least} {
		on := step(budget)
		require.Positive(t, on.bound, "budget %d: nothing bound under the default limit", budget)
		for _, off := range []ooc.Option{ooc.WithNodeValues(0), ooc.WithNodeValues(1024)} {
			r := step(budget, off)
			require.Zero(t, r.bound, "budget %d: above the limit nothing but scalars is bound", budget)
			require.Equal(t, on.devPeak, r.devPeak, "budget %d: binding changed the device peak", budget)
			require.Equal(t, on.costValue, r.costValue, "budget %d", budget)
		}
	}
	_, err = ooc.Compile(cnn(dt, 7).g, ooc.WithNodeValues(-1))
	require.ErrorContains(t, err, "WithNodeValues(-1)")
}

// BenchmarkNodeValues times training steps of the small CNN of
// BenchmarkStep with the forward's intermediates copied out and bound (the
// default) and without (WithNodeValues(0)), in core and under 60% of the
// in-core peak. The two machines take turns step by step, so that the load
// of a shared machine falls on both alike; it reports each one's mean step
// time and the bytes bound: go test -run X -bench NodeValues -benchtime 40x ./ooc/
func BenchmarkNodeValues(b *testing.B) {
	for _, percent := range []int64{100, 60} {
		b.Run(fmt.Sprintf("budget-%d%%", percent), func(b *testing.B) {
			var nets [2]*models.Model
			var machines [2]*vm.Machine
			var bound int64
			for k, limit := range []int64{ooc.DefaultNodeValueLimit, 0} {
				m := benchModel(b)
				opts := []ooc.Option{ooc.BindDualValues(m.Learnables...), ooc.WithNodeValues(limit), ooc.Baseline()}
				if percent < 100 {
					p, err := ooc.Plan(m.Graph, ooc.Baseline())
					if err != nil {
						b.Fatal(err)
					}
					opts = []ooc.Option{ooc.BindDualValues(m.Learnables...), ooc.WithNodeValues(limit), ooc.WithBudget(p.Peak * percent / 100)}
				}
				machine, err := ooc.Compile(m.Graph, opts...)
				if err != nil {
					b.Fatal(err)
				}
				defer machine.Close()
				nets[k], machines[k] = m, machine
				if k == 0 {
					for _, v := range machine.Program().Vars {
						if v.Bind {
							bound += v.Bytes
						}
					}
				}
			}
			var took [2]time.Duration
			// One solver each: a solver keeps state per learnable.
			solvers := [2]G.Solver{solvers.NewAdam(G.WithLearnRate(1e-3)), solvers.NewAdam(G.WithLearnRate(1e-3))}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for k := range machines {
					t0 := time.Now()
					if err := machines[k].RunAll(); err != nil {
						b.Fatal(err)
					}
					took[k] += time.Since(t0)
					if err := solvers[k].Step(G.NodesToValueGrads(nets[k].Learnables)); err != nil {
						b.Fatal(err)
					}
					machines[k].Reset()
				}
			}
			b.ReportMetric(float64(took[0].Microseconds())/float64(b.N)/1000, "ms/run-bound")
			b.ReportMetric(float64(took[1].Microseconds())/float64(b.N)/1000, "ms/run-unbound")
			b.ReportMetric(float64(bound), "bound-B")
		})
	}
}
