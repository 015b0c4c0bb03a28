package kernelcheck

import (
	"fmt"
	"math"
	"math/rand"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

// TestIntBinary: + - ⊙ (wrapping at the int64 limits), the comparisons with
// Int and bool results, MaxBetween and MinBetween on Int tensors, against
// gorgonia's elemBinOp Do. (gorgonia has no Int tensor-scalar form: its Do
// takes only float scalars beside a tensor.)
func intBinary(t TB, m *Mem) {
	rng := rand.New(rand.NewSource(28))
	const n = 64
	a, b := make([]int, n), make([]int, n)
	for i := range a {
		a[i], b[i] = rng.Intn(7)-3, rng.Intn(7)-3 // ties
	}
	a[0], b[0] = math.MaxInt64, 1   // + wraps
	a[1], b[1] = math.MinInt64, 1   // - wraps
	a[2], b[2] = math.MaxInt64/2, 3 // ⊙ wraps
	type bf = func(x, y *G.Node) (*G.Node, error)
	cmp := func(f func(x, y *G.Node, same bool) (*G.Node, error), same bool) bf {
		return func(x, y *G.Node) (*G.Node, error) { return f(x, y, same) }
	}
	cases := []struct {
		sym   string
		build bf
		bools bool
	}{
		{"+", G.Add, false}, {"-", G.Sub, false}, {"⊙", G.HadamardProd, false},
		{"MaxBetween", G.MaxBetween, false}, {"MinBetween", G.MinBetween, false},
	}
	for _, c := range []struct {
		sym string
		f   func(x, y *G.Node, same bool) (*G.Node, error)
	}{{"<", G.Lt}, {">", G.Gt}, {"<=", G.Lte}, {">=", G.Gte}, {"==", G.Eq}, {"!=", G.Ne}} {
		cases = append(cases, struct {
			sym   string
			build bf
			bools bool
		}{c.sym, cmp(c.f, true), false}, struct {
			sym   string
			build bf
			bools bool
		}{c.sym, cmp(c.f, false), true})
	}
	for _, c := range cases {
		g := G.NewGraph()
		an := G.NewVector(g, tensor.Int, G.WithShape(n), G.WithName("a"))
		bn := G.NewVector(g, tensor.Int, G.WithShape(n), G.WithName("b"))
		node, err := c.build(an, bn)
		if err != nil {
			t.Fatal(err)
		}
		want := do(t, node.Op(), tensor.New(tensor.WithShape(n), tensor.WithBacking(append([]int(nil), a...))),
			tensor.New(tensor.WithShape(n), tensor.WithBacking(append([]int(nil), b...)))).Data()
		op, ok := kernels.BinaryOpFor(c.sym, false)
		if !ok {
			t.Fatalf("no operator for %s", c.sym)
		}
		ab, bb := m.alloc(8*n), m.alloc(8*n)
		copy(ab.Data(), fromInts(a))
		copy(bb.Data(), fromInts(b))
		l := kernels.Contiguous()
		name := fmt.Sprintf("%s %s", c.sym, node.Op())
		if c.bools {
			out := m.alloc(n)
			m.launch("compare_i64", kernels.Int(int64(op)), p(out), p(ab), p(bb), kernels.Int(n), kernels.LayoutArg(l))
			for i, v := range out.Data() {
				if (v == 1) != want.([]bool)[i] || v > 1 {
					t.Fatalf("compare_i64 %s: element %d (%d, %d) is %d, want %v", name, i, a[i], b[i], v, want.([]bool)[i])
				}
			}
			m.exactly()
			continue
		}
		out := m.alloc(8 * n)
		m.launch("binary_i64", kernels.Int(int64(op)), p(out), p(ab), p(bb), kernels.Int(n), kernels.LayoutArg(l))
		got := asInts(out.Data())
		for i, w := range want.([]int) {
			if got[i] != w {
				t.Fatalf("binary_i64 %s: element %d (%d, %d) is %d, want %d", name, i, a[i], b[i], got[i], w)
			}
		}
		m.exactly()
	}
}
