package ooc_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/ooc"
)

// opNodes are the nodes of a graph an op computes, statements and
// constants aside, in the order the graph holds them (the same in two
// builds of one program): every node TapeMachine computes and binds, but
// for what gorgonia.Grad left unread (computed from a gradient, read by no
// learnable's gradient), which ooc does not compute.
func opNodes(t *testing.T, g *G.ExprGraph) []*G.Node {
	fromGrad := fromGradient(t, g)
	var grads []*G.Node
	for _, n := range g.AllNodes() {
		if n.Op() == nil && n.Deriv() != nil {
			grads = append(grads, n.Deriv())
		}
	}
	forGrad := ancestors(grads...)
	var out []*G.Node
	for _, n := range g.AllNodes() {
		if n.Op() == nil || len(ooc.Operands(n)) == 0 || (fromGrad[n] && !forGrad[n]) {
			continue
		}
		out = append(out, n)
	}
	return out
}

// ancestors tells the roots and every node they are computed from.
func ancestors(roots ...*G.Node) map[*G.Node]bool {
	seen := map[*G.Node]bool{}
	var mark func(n *G.Node)
	mark = func(n *G.Node) {
		if !seen[n] {
			seen[n] = true
			for _, c := range ooc.Operands(n) {
				mark(c)
			}
		}
	}
	for _, r := range roots {
		mark(r)
	}
	return seen
}

// fromGradient tells the nodes computed from a gradient node: the
// backward's.
func fromGradient(t *testing.T, g *G.ExprGraph) map[*G.Node]bool {
	sorted, err := G.Sort(g)
	require.NoError(t, err)
	fromGrad := map[*G.Node]bool{}
	for i := len(sorted) - 1; i >= 0; i-- {
		n := sorted[i]
		fromGrad[n] = len(n.DerivOf()) > 0 && n.Op() != nil
		for _, c := range ooc.Operands(n) {
			fromGrad[n] = fromGrad[n] || fromGrad[c]
		}
	}
	return fromGrad
}

// TestBackwardNodesBound: after RunAll every node of the graph (opNodes),
// the backward's intermediates included (the gradient of the logits a script
// inspects with logits.Deriv().Value()), holds TapeMachine's value (or,
// where TapeMachine's memory was written over by an in-place op, its op's
// result), in core and at the least feasible budget.
func TestBackwardNodesBound(t *testing.T) {
	programs := map[string]builder{"mlp-softmax": softmaxMLP, "cnn": cnn, "rnn-slice-concat": rnn}
	dt := tensor.Float64
	for _, name := range sortedNames(programs) {
		build := programs[name]
		t.Run(name, func(t *testing.T) {
			ref := build(dt, 7)
			tm := G.NewTapeMachine(ref.g)
			require.NoError(t, tm.RunAll())
			refNodes := opNodes(t, ref.g)
			clobbered := overwritten(ref.g)
			peak, err := ooc.InCorePeak(build(dt, 7).g)
			require.NoError(t, err)
			for _, budget := range []int64{0, minFeasible(t, build, dt, peak)} {
				n := build(dt, 7)
				opts := []ooc.Option{ooc.WithPoison(), ooc.Baseline()}
				if budget > 0 {
					opts = []ooc.Option{ooc.WithPoison(), ooc.WithBudget(budget)}
				}
				m, err := ooc.Compile(n.g, opts...)
				require.NoError(t, err)
				require.NoError(t, m.RunAll())
				checkNodeValues(t, fmt.Sprintf("%s budget %d", name, budget), refNodes, opNodes(t, n.g), clobbered)
				require.NoError(t, m.Close())
			}
			require.NoError(t, tm.Close())
		})
	}
}
