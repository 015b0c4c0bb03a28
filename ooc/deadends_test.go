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

// Dead ends: nodes of the forward that the cost does not read, as scripts
// write them for metrics and extra heads. TapeMachine computes and binds
// every node of the graph it was made with, so their Value() after RunAll
// is what a script prints.

// deadEndNet is a two-layer classifier whose script also builds, beside
// the cost: a second head nobody differentiates (a float matrix), a
// thresholded prediction (a Bool matrix), the predicted class as an Int
// vector (ConvType of a float vector), the hits per row (a float vector
// under a float scalar accuracy), and an Int count of them.
func deadEndNet(dt tensor.Dtype, seed int64) (*net, G.Nodes) {
	c := &userCtx{g: G.NewGraph(), dt: dt, rng: rand.New(rand.NewSource(seed))}
	const batch, in, hid, classes = 8, 6, 10, 4
	x := c.leaf("x", 1, batch, in)
	y := G.NewMatrix(c.g, dt, G.WithShape(batch, classes), G.WithName("y"), G.WithValue(onehot(c.rng, dt, batch, classes)))
	w1 := c.leaf("w1", 0.3, in, hid)
	w2 := c.leaf("w2", 0.3, hid, classes)
	w3 := c.leaf("w3", 0.3, hid, 3)
	h := G.Must(G.Tanh(G.Must(G.Mul(x, w1))))
	logits := G.Must(G.Mul(h, w2))
	pred := G.Must(G.SoftMax(logits))
	cost := G.Must(G.Neg(G.Must(G.Mean(G.Must(G.Sum(G.Must(G.HadamardProd(G.Must(G.Log(pred)), y)), 1))))))

	head2 := G.Must(G.Sigmoid(G.Must(G.Mul(h, w3))))                                             // float matrix
	mask := G.Must(G.Gt(pred, c.scalar(0.3), false))                                             // Bool matrix
	hits := G.Must(G.Sum(G.Must(G.HadamardProd(G.Must(G.Gt(pred, c.scalar(0.3), true)), y)), 1)) // float vector
	acc := G.Must(G.Mean(hits))                                                                  // float scalar
	top := G.Must(G.Max(logits, 1))                                                              // float vector
	cls := G.Must(G.ConvType(G.Must(G.Floor(top)), dt, tensor.Int))                              // Int vector
	count := G.Must(G.Sum(G.Must(G.ConvType(hits, dt, tensor.Int))))                             // Int scalar
	params := G.Nodes{w1, w2}
	if _, err := G.Grad(cost, params...); err != nil {
		panic(err)
	}
	return &net{g: c.g, x: x, y: y, cost: cost, params: params, out: pred}, G.Nodes{head2, mask, hits, acc, top, cls, count}
}

// TestDeadEndsComputed: after each of three training steps, every dead end
// of the forward holds TapeMachine's value, bit for bit, float, Int and
// Bool, in core and at the least feasible budget, and the training itself
// (loss, gradients, weights) is unchanged. Under WithNodeValues(0) the
// non-scalar dead ends are not computed (nothing would be bound).
func TestDeadEndsComputed(t *testing.T) {
	run := func(t *testing.T, n *net, watch G.Nodes, m G.VM) [][]uint64 {
		solver := G.NewAdamSolver(G.WithLearnRate(0.01))
		var out [][]uint64
		for s := 0; s < 3; s++ {
			require.NoError(t, m.RunAll())
			out = append(out, bits(t, n.cost.Value()))
			for _, w := range watch {
				require.NotNil(t, w.Value(), "step %d: %s has no value", s, w.Name())
				out = append(out, valueBits(t, w.Value()))
			}
			for _, p := range n.params {
				g, err := p.Grad()
				require.NoError(t, err)
				out = append(out, bits(t, g))
			}
			require.NoError(t, solver.Step(G.NodesToValueGrads(n.params)))
			m.Reset()
		}
		for _, p := range n.params {
			out = append(out, bits(t, p.Value()))
		}
		return out
	}
	build := func(dt tensor.Dtype, seed int64) *net { n, _ := deadEndNet(dt, seed); return n }
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		ref, watch := deadEndNet(dt, 1)
		tm := G.NewTapeMachine(ref.g, G.BindDualValues(ref.params...))
		want := run(t, ref, watch, tm)
		require.NoError(t, tm.Close())
		peak, err := ooc.InCorePeak(build(dt, 1).g)
		require.NoError(t, err)
		for _, budget := range []int64{0, minFeasible(t, build, dt, peak)} {
			t.Run(fmt.Sprintf("%v/budget-%d", dt, budget), func(t *testing.T) {
				n, watch := deadEndNet(dt, 1)
				opts := []ooc.Option{ooc.BindDualValues(n.params...), ooc.WithPoison(), ooc.Baseline()}
				if budget > 0 {
					opts = []ooc.Option{ooc.BindDualValues(n.params...), ooc.WithPoison(), ooc.WithBudget(budget)}
				}
				m, err := ooc.Compile(n.g, opts...)
				require.NoError(t, err)
				defer m.Close()
				require.Equal(t, want, run(t, n, watch, m))
				if budget > 0 {
					require.LessOrEqual(t, m.Stats().PeakDeviceBytes, budget)
				}
			})
		}
	}
}

// TestDeadEndsUnderTheLimit: the non-scalar dead ends count in the
// node-value limit with the forward's other intermediates. Where all fit
// they are computed and bound; where only the others fit, those are bound
// and the dead ends not computed (their Value() stays nil); under
// WithNodeValues(0) neither. Scalar dead ends (the accuracy, an Int count)
// are computed and bound whatever the limit, and the loss never changes.
func TestDeadEndsUnderTheLimit(t *testing.T) {
	dt := tensor.Float64
	type result struct {
		pred, head2, acc, count bool
		loss                    []uint64
	}
	// step returns what a run bound, and the bytes bound of the forward.
	step := func(opts ...ooc.Option) (result, int64) {
		n, watch := deadEndNet(dt, 1)
		m, err := ooc.Compile(n.g, opts...)
		require.NoError(t, err)
		defer m.Close()
		require.NoError(t, m.RunAll())
		fromGrad := fromGradient(t, n.g)
		var bound int64
		for _, v := range m.Program().Vars {
			if v.Bind && !v.Node.IsScalar() && !fromGrad[v.Node] {
				bound += v.Bytes
			}
		}
		return result{n.out.Value() != nil, watch[0].Value() != nil, watch[3].Value() != nil, watch[6].Value() != nil,
			bits(t, n.cost.Value())}, bound
	}
	all, forward := step()
	require.Equal(t, result{true, true, true, true, all.loss}, all)
	require.Positive(t, forward)
	noDead, _ := step(ooc.WithNodeValues(forward - 1))
	require.Equal(t, result{true, false, true, true, all.loss}, noDead)
	none, _ := step(ooc.WithNodeValues(0))
	require.Equal(t, result{false, false, true, true, all.loss}, none)
}
