package ooc_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/ooc"
)

// TestReshapeIsAView: gorgonia's Reshape is no function of the tape: its
// result is a variable living in its operand's memory (counted once), and
// an activation after it writes over that memory in place although the
// shapes differ.
func TestReshapeIsAView(t *testing.T) {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float64, G.WithShape(8, 6), G.WithName("x"), G.WithInit(G.GlorotN(1)))
	w := G.NewMatrix(g, tensor.Float64, G.WithShape(6, 16), G.WithName("w"), G.WithInit(G.GlorotN(1)))
	h := G.Must(G.Mul(x, w))
	r := G.Must(G.Reshape(h, tensor.Shape{8, 4, 4}))
	a := G.Must(G.Tanh(r))
	cost := G.Must(G.Mean(G.Must(G.Reshape(a, tensor.Shape{128}))))
	_, err := G.Grad(cost, w)
	require.NoError(t, err)

	tr, err := ooc.NewTrace(g)
	require.NoError(t, err)
	for _, f := range tr.Funcs {
		require.NotContains(t, fmt.Sprintf("%T", f.Op), "reshapeOp", "a reshape is not a function of the tape")
	}
	var views int
	for i, v := range tr.Vars {
		if !v.View {
			continue
		}
		views++
		require.Zero(t, tr.DeviceBytes(i), "%s takes no device memory", v.Name)
		require.False(t, tr.Vars[v.Base].View, "a view's base is not a view")
		require.Equal(t, v.Bytes, tr.Vars[v.Base].Bytes)
	}
	require.GreaterOrEqual(t, views, 3, "the forward's two reshapes and the backward's")
	var tanh *int
	for i, f := range tr.Funcs {
		if f.Node == a {
			tanh = &i
		}
	}
	require.NotNil(t, tanh)
	f := tr.Funcs[*tanh]
	require.Equal(t, tr.Vars[f.Inputs[0]].Node, h, "tanh reads the matmul's memory")
	require.Equal(t, f.Inputs[0], f.InPlace, "and writes over it: (8,16) and (8,4,4) are the same bytes")

	m, err := ooc.Compile(g, ooc.WithPoison())
	require.NoError(t, err)
	defer m.Close()
	require.NoError(t, m.RunAll())
	tm := G.NewTapeMachine(g)
	defer tm.Close()
	want := G.NewF64(0)
	*want = *cost.Value().(*G.F64)
	require.NoError(t, tm.RunAll())
	require.Equal(t, bits(t, cost.Value()), bits(t, want))
}
