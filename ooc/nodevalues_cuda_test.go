package ooc_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/ooc"
)

// TestNodeValuesOnCUDA: on the fake CUDA device (vm/cuda's fake driver:
// this proves the downloads and bindings, not a GPU), after RunAll every
// node an op computes, forward and backward, holds the value the CPU
// device binds to it, within the zoo's tolerance, in core and at the least
// budget, and after a second run, which reuses the host tensors; WithNodeValues
// has the CPU device's semantics there: 0 binds the scalars only.
func TestNodeValuesOnCUDA(t *testing.T) {
	dev := fakeCUDA(t)
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		ref := softmaxMLP(dt, 7)
		cpu, err := ooc.Compile(ref.g)
		require.NoError(t, err)
		require.NoError(t, cpu.RunAll())
		refNodes := opNodes(t, ref.g)
		least, err := ooc.LeastBudget(softmaxMLP(dt, 7).g, append(dev.options(), ooc.WithScheduler(ooc.Window{}))...)
		require.NoError(t, err)
		for _, budget := range []int64{0, least} {
			what := fmt.Sprintf("%v budget %d", dt, budget)
			n := softmaxMLP(dt, 7)
			opts := append(dev.options(), ooc.Baseline())
			if budget > 0 {
				opts = append(dev.options(), ooc.WithBudget(budget))
			}
			m, err := ooc.Compile(n.g, opts...)
			require.NoError(t, err, what)
			// The second run reuses the host tensors the first made; no
			// solver moves the weights, so both compute the same values.
			require.NoError(t, m.RunAll(), what)
			m.Reset()
			require.NoError(t, m.RunAll(), what)
			nodes := opNodes(t, n.g)
			require.Len(t, nodes, len(refNodes), what)
			for i, node := range nodes {
				require.NotNil(t, node.Value(), "%s: %s is not bound on CUDA", what, node.Name())
				require.NotNil(t, refNodes[i].Value(), "%s: %s is not bound on the CPU device", what, node.Name())
				e, err := closeTo(dt, bits(t, refNodes[i].Value()), bits(t, node.Value()))
				require.NoError(t, err, "%s: %s", what, node.Name())
				require.LessOrEqual(t, e, tolOf(dt), "%s: %s differs from the CPU device's", what, node.Name())
			}
			t.Logf("%s: %d nodes bound as on the CPU device", what, len(nodes))
			require.NoError(t, m.Close())
		}
		require.NoError(t, cpu.Close())
	}
	// WithNodeValues(0): the scalars only, as on the CPU device.
	n := softmaxMLP(tensor.Float64, 7)
	m, err := ooc.Compile(n.g, append(dev.options(), ooc.WithNodeValues(0))...)
	require.NoError(t, err)
	require.NoError(t, m.RunAll())
	scalars := 0
	for _, node := range forwardNodes(t, n.g, n.cost) {
		if node.IsScalar() {
			require.NotNil(t, node.Value(), "scalar %s", node.Name())
			scalars++
		} else {
			require.Nil(t, node.Value(), "WithNodeValues(0) bound %s", node.Name())
		}
	}
	require.Positive(t, scalars)
	require.NoError(t, m.Close())
}
