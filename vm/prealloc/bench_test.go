package prealloc

import (
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// The Funcs against Do on a 4 MiB activation: Do's time includes its
// allocation, the Func's its copies.
func BenchmarkFuncVsDo(b *testing.B) {
	dt := tensor.Float32
	x4 := []int{32, 32, 32, 32}
	cases := map[string]func(g *G.ExprGraph) *G.Node{
		"transpose NCHW-NHWC": func(g *G.ExprGraph) *G.Node { return G.Must(G.Transpose(input(g, dt, "x", x4...), 0, 2, 3, 1)) },
		"transpose NHWC-NCHW": func(g *G.ExprGraph) *G.Node { return G.Must(G.Transpose(input(g, dt, "x", x4...), 0, 3, 1, 2)) },
		"sum axis 0":          func(g *G.ExprGraph) *G.Node { return G.Must(G.Sum(input(g, dt, "x", x4...), 0)) },
		"sum axis 3":          func(g *G.ExprGraph) *G.Node { return G.Must(G.Sum(input(g, dt, "x", x4...), 3)) },
		"max axis 1":          func(g *G.ExprGraph) *G.Node { return G.Must(G.Max(input(g, dt, "x", x4...), 1)) },
		"sum (2,3)":           func(g *G.ExprGraph) *G.Node { return G.Must(G.Sum(input(g, dt, "x", x4...), 2, 3)) },
		"sum (0,2,3)":         func(g *G.ExprGraph) *G.Node { return G.Must(G.Sum(input(g, dt, "x", x4...), 0, 2, 3)) },
		"tanh":                func(g *G.ExprGraph) *G.Node { return G.Must(G.Tanh(input(g, dt, "x", x4...))) },
		"concat": func(g *G.ExprGraph) *G.Node {
			return G.Must(G.Concat(1, input(g, dt, "a", x4...), input(g, dt, "b", x4...)))
		},
	}
	for name, build := range cases {
		g := G.NewGraph()
		n := build(g)
		ins := inputsOf(n, 1)
		f, _ := For(n.Op())
		out := poisoned(n.Dtype(), n.Shape()...)
		b.Run(name+"/Func", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if err := f(out, ins...); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/Do", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, err := n.Op().Do(ins...); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
