package layers

import (
	"math"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func randData(rng *rand.Rand, n int) []float64 {
	d := make([]float64, n)
	for i := range d {
		d[i] = rng.NormFloat64()
	}
	return d
}

// denseAs makes a tensor of dtype dt holding data (converted to float32 if asked).
func denseAs(dt tensor.Dtype, shape tensor.Shape, data []float64) *tensor.Dense {
	if dt == tensor.Float32 {
		d := make([]float32, len(data))
		for i, v := range data {
			d[i] = float32(v)
		}
		return tensor.New(tensor.WithShape(shape.Clone()...), tensor.WithBacking(d))
	}
	return tensor.New(tensor.WithShape(shape.Clone()...), tensor.WithBacking(append([]float64(nil), data...)))
}

// f64s reads any float tensor value as float64s (a copy).
func f64s(t testing.TB, v G.Value) []float64 {
	t.Helper()
	switch d := v.Data().(type) {
	case []float64:
		return append([]float64(nil), d[:v.Shape().TotalSize()]...)
	case []float32:
		r := make([]float64, v.Shape().TotalSize())
		for i := range r {
			r[i] = float64(d[i])
		}
		return r
	case float64:
		return []float64{d}
	case float32:
		return []float64{float64(d)}
	}
	t.Fatalf("unexpected value %T", v.Data())
	return nil
}

func maxAbsDiff(a, b []float64) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	m := 0.0
	for i := range a {
		d := math.Abs(a[i] - b[i])
		if math.IsNaN(d) {
			return math.Inf(1)
		}
		m = math.Max(m, d)
	}
	return m
}

func maxAbs(a []float64) float64 {
	m := 0.0
	for _, v := range a {
		m = math.Max(m, math.Abs(v))
	}
	return m
}

// inputNodes makes one input node per shape holding the given values.
func inputNodes(g *G.ExprGraph, dt tensor.Dtype, shapes []tensor.Shape, vals [][]float64) G.Nodes {
	ns := make(G.Nodes, len(shapes))
	for i, s := range shapes {
		ns[i] = G.NewTensor(g, dt, s.Dims(), G.WithShape(s.Clone()...), G.WithName(string(rune('a'+i))),
			G.WithValue(denseAs(dt, s, vals[i])))
	}
	return ns
}

// weightedSum is Σ out ⊙ r as a scalar node, built from a flatten and one single-axis Sum.
func weightedSum(t testing.TB, out *G.Node, r []float64) *G.Node {
	t.Helper()
	g := out.Graph()
	dt := out.Dtype()
	rn := G.NewTensor(g, dt, out.Shape().Dims(), G.WithShape(out.Shape().Clone()...), G.WithName("r"),
		G.WithValue(denseAs(dt, out.Shape(), r)))
	p, err := G.HadamardProd(out, rn)
	require.NoError(t, err)
	p, err = G.Reshape(p, tensor.Shape{out.Shape().TotalSize()})
	require.NoError(t, err)
	s, err := G.Sum(p, 0)
	require.NoError(t, err)
	return s
}

type buildFn func(ns G.Nodes) (*G.Node, error)

// runTape builds out = build(inputs), loss = Σ out ⊙ r, differentiates w.r.t. every input and
// runs a TapeMachine, returning the output and the gradients. setup runs after the machine is made
// (which puts TrainModeOps in training mode).
func runTape(t testing.TB, dt tensor.Dtype, shapes []tensor.Shape, vals [][]float64, r []float64, build buildFn, setup func(out *G.Node)) (out []float64, grads [][]float64) {
	t.Helper()
	g := G.NewGraph()
	ns := inputNodes(g, dt, shapes, vals)
	y, err := build(ns)
	require.NoError(t, err)
	loss := weightedSum(t, y, r)
	gs, err := G.Grad(loss, ns...)
	require.NoError(t, err)
	var yv G.Value
	G.Read(y, &yv)
	gv := make([]G.Value, len(gs))
	for i := range gs {
		G.Read(gs[i], &gv[i])
	}
	m := G.NewTapeMachine(g)
	defer m.Close()
	if setup != nil {
		setup(y)
	}
	require.NoError(t, m.RunAll())
	out = f64s(t, yv)
	for i := range gv {
		grads = append(grads, f64s(t, gv[i]))
	}
	return out, grads
}

// numGrads differentiates Σ f(vals) ⊙ r by central differences, element by element.
func numGrads(vals [][]float64, r []float64, f func(vals [][]float64) []float64) [][]float64 {
	const h = 1e-6
	loss := func() float64 {
		y := f(vals)
		s := 0.0
		for i := range y {
			s += y[i] * r[i]
		}
		return s
	}
	grads := make([][]float64, len(vals))
	for i := range vals {
		grads[i] = make([]float64, len(vals[i]))
		for j := range vals[i] {
			v := vals[i][j]
			vals[i][j] = v + h
			fp := loss()
			vals[i][j] = v - h
			fm := loss()
			vals[i][j] = v
			grads[i][j] = (fp - fm) / (2 * h)
		}
	}
	return grads
}

// opForward evaluates the single op at the root of build on values of dtype dt, directly through
// Do, after running setup on the built node.
func opForward(t testing.TB, dt tensor.Dtype, shapes []tensor.Shape, build buildFn, setup func(*G.Node)) func(vals [][]float64) []float64 {
	t.Helper()
	g := G.NewGraph()
	zeros := make([][]float64, len(shapes))
	for i, s := range shapes {
		zeros[i] = make([]float64, s.TotalSize())
	}
	ns := inputNodes(g, dt, shapes, zeros)
	y, err := build(ns)
	require.NoError(t, err)
	if setup != nil {
		setup(y)
	}
	idx := map[int64]int{}
	for i, n := range ns {
		idx[n.ID()] = i
	}
	var order []int
	for _, c := range children(g, y) {
		i, ok := idx[c.ID()]
		require.True(t, ok, "root of the build must read the inputs directly")
		order = append(order, i)
	}
	op := y.Op()
	return func(vals [][]float64) []float64 {
		in := make([]G.Value, len(order))
		for k, i := range order {
			in[k] = denseAs(dt, shapes[i], vals[i])
		}
		v, err := op.Do(in...)
		require.NoError(t, err)
		return f64s(t, v)
	}
}

// children lists a node's operands in order.
func children(g *G.ExprGraph, n *G.Node) G.Nodes {
	var r G.Nodes
	for it := g.From(n.ID()); it.Next(); {
		r = append(r, it.Node().(*G.Node))
	}
	return r
}
