package prealloc

import (
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// zoo is one graph node per op type For handles, with inputs Do accepts.
func zoo(t *testing.T) map[string]*G.Node {
	t.Helper()
	dt := tensor.Float64
	g := G.NewGraph()
	x := input(g, dt, "x", 2, 4, 6, 6)
	m := input(g, dt, "m", 4, 5)
	v := input(g, dt, "v", 5)
	idx := G.NewVector(g, tensor.Int, G.WithShape(3), G.WithName("i"), G.WithValue(tensor.New(tensor.WithBacking([]int{2, 0, 1}))))
	var nodes []*G.Node
	add := func(n *G.Node, err error) *G.Node {
		require.NoError(t, err)
		nodes = append(nodes, n)
		return n
	}
	add(G.Transpose(x, 0, 2, 3, 1))
	add(G.Tanh(x))
	add(G.Add(x, x))
	add(G.HadamardDiv(m, m))
	add(G.Gt(m, m, true))
	sm := add(G.SoftMax(m))
	add(G.Sum(x, 2, 3))
	add(G.Max(x, 1))
	add(G.Concat(1, x, x))
	add(G.Slice(x, nil, G.S(1, 3)))
	add(G.Reshape(x, tensor.Shape{2, 144}))
	bn, _, _, _, err := G.BatchNorm(x, nil, nil, 0.9, 1e-5)
	require.NoError(t, err)
	add(G.Dropout(x, 0.5))
	up := add(G.Upsample2D(x, 2))
	ap := add(G.AveragePool2D(x, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}))
	mp := add(G.MaxPool2D(x, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}))
	add(G.GlobalAveragePool2D(x))
	add(G.DiagFlat(v))
	add(G.ByIndices(m, idx, 0))
	add(G.Tensordot([]int{1}, []int{0}, m, v))
	add(G.MinBetween(m, m))
	add(G.Mul(m, v))
	add(G.ConvType(m, dt, tensor.Int))
	im := add(G.Im2Col(x, tensor.Shape{3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}))
	scale := G.NewTensor(g, dt, 4, G.WithShape(1, 4, 1, 1), G.WithName("s"), G.WithInit(G.Ones()))
	bias := G.NewTensor(g, dt, 4, G.WithShape(1, 4, 1, 1), G.WithName("b"), G.WithInit(G.Zeroes()))
	gn, err := G.GroupNorm(x, scale, bias, 2, 4, 1e-5)
	require.NoError(t, err)
	sl := add(G.Slice(x, nil, G.S(1, 3)))
	dr := findOps(g, "*gorgonia.dropoutOp")[0]
	cost := G.Must(G.Sum(G.Must(G.Concat(0,
		G.Must(G.Reshape(sm, tensor.Shape{20})), G.Must(G.Reshape(bn, tensor.Shape{288})), G.Must(G.Reshape(dr, tensor.Shape{288})),
		G.Must(G.Reshape(up, tensor.Shape{up.Shape().TotalSize()})), G.Must(G.Reshape(ap, tensor.Shape{72})),
		G.Must(G.Reshape(mp, tensor.Shape{72})), G.Must(G.Reshape(im, tensor.Shape{im.Shape().TotalSize()})),
		G.Must(G.Reshape(gn, tensor.Shape{288})), G.Must(G.Reshape(sl, tensor.Shape{144})),
	))))
	_, err = G.Grad(cost, x, m)
	require.NoError(t, err)
	byType := map[string]*G.Node{}
	for _, n := range g.AllNodes() {
		if n.Op() == nil || n.IsScalar() {
			continue
		}
		typ := fmt.Sprintf("%T", n.Op())
		if _, ok := For(n.Op()); ok {
			if _, seen := byType[typ]; !seen {
				byType[typ] = n
			}
		}
	}
	return byType
}

// TestBadInputsFail feeds every Func wrong outputs and inputs: each call
// must return (an error or not) without panicking. Kernels that index
// from goroutines would take the test binary down if not vetted first.
func TestBadInputsFail(t *testing.T) {
	defer log.SetOutput(log.Writer())
	log.SetOutput(io.Discard)
	nodes := zoo(t)
	require.GreaterOrEqual(t, len(nodes), 25)
	for typ, n := range nodes {
		t.Run(typ, func(t *testing.T) {
			f, _ := For(n.Op())
			ins := inputsOf(n, 1)
			dt, shape := n.Dtype(), n.Shape()
			require.Error(t, f(nil, ins...), "nil out")
			require.Error(t, f(poisoned(dt, shape.TotalSize()+1), ins...), "out one element too big")
			if shape.TotalSize() > 1 {
				require.Error(t, f(poisoned(dt, shape.TotalSize()-1), ins...), "out one element short")
			}
			other := tensor.Float32
			if dt == tensor.Float32 {
				other = tensor.Float64
			}
			if !strings.Contains(typ, "dtConv") {
				require.Error(t, f(poisoned(other, shape...), ins...), "out of another dtype")
			}
			if shape.Dims() == 2 && shape[0] > 1 && shape[1] > 1 {
				view := poisoned(dt, shape[1], shape[0])
				require.NoError(t, view.T())
				require.Error(t, f(view, ins...), "a transposed view as out")
			}
			require.Error(t, f(poisoned(dt, shape...)), "no inputs")
			for i := range ins {
				bad := cloneAll(t, ins)
				bad[i] = scalarOf(dt, 2)
				_ = f(poisoned(dt, shape...), bad...) // may be legal; must not panic
				if d, ok := ins[i].(*tensor.Dense); ok && d.Shape().TotalSize() > 1 {
					s := d.Shape().Clone()
					s[0]--
					if s[0] == 0 {
						s[0] = 2
					}
					bad[i] = filled(d.Dtype(), 3, s...)
					_ = f(poisoned(dt, shape...), bad...)
					bad[i] = filled(d.Dtype(), 3, d.Shape().TotalSize()+7)
					_ = f(poisoned(dt, shape...), bad...)
				}
			}
		})
	}
}

// Every op type with a Do in gorgonia v0.9.18 is in the table, and the
// package documentation shows the table.
func TestStrategiesDocumented(t *testing.T) {
	raw, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	// The comment's text, its lines joined.
	var words []string
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimPrefix(strings.TrimSpace(line), "//")
		line = strings.TrimPrefix(strings.TrimSpace(line), "- ")
		words = append(words, strings.Fields(line)...)
	}
	doc := strings.Join(words, " ")
	for _, s := range Strategies() {
		require.Contains(t, doc, s.Op+": "+strings.Join(strings.Fields(s.How), " "), "doc.go's table differs from Strategies for %s", s.Op)
	}
	nodes := zoo(t)
	for typ := range nodes {
		found := false
		for _, s := range Strategies() {
			found = found || s.Op == typ
		}
		require.True(t, found, typ)
	}
}

func TestDeclined(t *testing.T) {
	g := G.NewGraph()
	x := input(g, tensor.Float64, "x", 3, 4)
	for _, n := range []*G.Node{
		G.Must(G.Sparsemax(x)),
		G.Must(G.At(x, 1, 2)),
		G.Must(G.SizeOf(1, x)),
	} {
		_, ok := For(n.Op())
		require.False(t, ok, "%T", n.Op())
	}
	_, ok := For(nil)
	require.False(t, ok)
}
