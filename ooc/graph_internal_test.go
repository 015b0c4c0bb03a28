package ooc

import (
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// freshGraph is a forward graph on which RemoveNode never ran, so
// gorgonia's own id lookups are sound and can stand as the reference.
func freshGraph() *gorgonia.ExprGraph {
	g := gorgonia.NewGraph()
	x := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(4, 3), gorgonia.WithName("x"), gorgonia.WithInit(gorgonia.Ones()))
	w := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(3, 5), gorgonia.WithName("w"), gorgonia.WithInit(gorgonia.Ones()))
	h := gorgonia.Must(gorgonia.Mul(x, w))
	h2 := gorgonia.Must(gorgonia.Sub(h, gorgonia.Must(gorgonia.Tanh(h))))
	r := gorgonia.Must(gorgonia.Reshape(h2, tensor.Shape{20}))
	gorgonia.Must(gorgonia.Sum(gorgonia.Must(gorgonia.HadamardProd(r, r))))
	var v gorgonia.Value
	gorgonia.Read(h2, &v)
	gorgonia.Set(x, gorgonia.Must(gorgonia.Add(x, x)))
	return g
}

func TestOperandsAreGorgoniasOperandOrder(t *testing.T) {
	require.NoError(t, nodeChildrenErr)
	g := freshGraph()
	for _, n := range g.AllNodes() {
		var want gorgonia.Nodes
		for it := g.From(n.ID()); it.Next(); {
			want = append(want, it.Node().(*gorgonia.Node))
		}
		require.Equal(t, want, operands(n), n.Name())
	}
}

func TestSortGraphIsGorgoniasOrder(t *testing.T) {
	g := freshGraph()
	want, err := gorgonia.Sort(g)
	require.NoError(t, err)
	got, err := sortGraph(g)
	require.NoError(t, err)
	require.Equal(t, want, got)
}

func TestStatementsAreRecognised(t *testing.T) {
	require.NoError(t, readIntoErr)
	require.NotNil(t, readOpType)
	require.NotNil(t, letOpType)
	g := gorgonia.NewGraph()
	a := gorgonia.NewScalar(g, tensor.Float64, gorgonia.WithName("a"))
	var v gorgonia.Value
	rd := gorgonia.Read(a, &v)
	into, err := readTarget(rd.Op())
	require.NoError(t, err)
	require.Same(t, &v, into)
	require.True(t, isSet(gorgonia.Set(a, a).Op()))
	into, err = readTarget(gorgonia.Must(gorgonia.Neg(a)).Op())
	require.NoError(t, err)
	require.Nil(t, into)
}
