package layers

import (
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestConvFilterGradientRunsFirst checks that in gorgonia's execution order (G.Sort, reversed, as
// TapeMachine and ooc run it) a convolution's filter gradient comes before its data gradient: the
// filter gradient is often the last read of the layer's input, which can then leave memory before
// the data gradient's output takes its place (with the data gradient first the input, dy and dx
// are all held at once).
func TestConvFilterGradientRunsFirst(t *testing.T) {
	g := G.NewGraph()
	b, err := NewBuilder(g, tensor.Float32, rand.New(rand.NewSource(1)))
	require.NoError(t, err)
	x, err := b.Input("x", 2, 4, 8, 8)
	require.NoError(t, err)
	h := x
	convs := 0
	for i, name := range []string{"c1", "c2", "c3"} {
		if h, err = b.ConvBN(h, 4, 3, 1, 1, true, name); err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			// A skip connection: c2's input is read again after c2's backward.
			if h, err = G.Add(h, x); err == nil {
				h, err = ReLU(h)
			}
			require.NoError(t, err)
		}
		convs++
	}
	loss, err := G.Mean(h)
	require.NoError(t, err)
	_, err = G.Grad(loss, append(b.Learnables(), x)...)
	require.NoError(t, err)

	sorted, err := G.Sort(g)
	require.NoError(t, err)
	at := map[*G.Node]int{}
	for i, n := range sorted {
		at[n] = len(sorted) - 1 - i // execution order is the reverse
	}
	// Pair each data gradient with the filter gradient of the same dy: the one operand they share.
	reads := func(n *G.Node) map[int64]bool {
		r := map[int64]bool{}
		for it := g.From(n.ID()); it.Next(); {
			r[it.Node().ID()] = true
		}
		return r
	}
	shareOperand := func(a, b *G.Node) bool {
		ra := reads(a)
		for id := range reads(b) {
			if ra[id] {
				return true
			}
		}
		return false
	}
	pairs := 0
	for _, n := range sorted {
		op, ok := n.Op().(*convOp)
		if !ok || op.kind != convData {
			continue
		}
		for _, m := range sorted {
			if f, ok := m.Op().(*convOp); ok && f.kind == convFilter && shareOperand(m, n) {
				pairs++
				require.Less(t, at[m], at[n], "%v (filter gradient) runs after %v (data gradient)", m, n)
			}
		}
	}
	require.Equal(t, convs, pairs, "every convolution's data gradient has its filter gradient")
}
