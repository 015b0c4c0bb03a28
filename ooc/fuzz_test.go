package ooc_test

import (
	"errors"
	"fmt"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/ooc"
)

// randomDAG builds a small training graph from fuzz bytes: each new node
// combines one or two earlier nodes (tanh, add, mul by a learnable), so
// skips of every length appear.
func randomDAG(data []byte) (*net, bool) {
	if len(data) < 4 {
		return nil, false
	}
	next := func(i int) int { return int(data[i%len(data)]) }
	g := G.NewGraph()
	const r, c = 8, 16
	val := func(seed int, scale float64, shape ...int) *tensor.Dense {
		d := make([]float64, shape[0]*shape[1])
		for i := range d {
			d[i] = scale * float64((i*7+seed*13)%17-8) / 8
		}
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(d))
	}
	x := G.NewMatrix(g, tensor.Float64, G.WithShape(r, c), G.WithName("x"), G.WithValue(val(1, 1, r, c)))
	nodes := []*G.Node{x}
	var ps G.Nodes
	steps := 3 + next(0)%14
	for i := 0; i < steps; i++ {
		a := nodes[next(i*3+1)%len(nodes)]
		b := nodes[next(i*3+2)%len(nodes)]
		var n *G.Node
		switch next(i*3+3) % 3 {
		case 0:
			n = G.Must(G.Tanh(a))
		case 1:
			n = G.Must(G.Add(a, b))
		default:
			w := G.NewMatrix(g, tensor.Float64, G.WithShape(c, c), G.WithName(fmt.Sprintf("w%d", i)), G.WithValue(val(i, 0.2, c, c)))
			ps = append(ps, w)
			n = G.Must(G.Tanh(G.Must(G.Mul(a, w))))
		}
		nodes = append(nodes, n)
	}
	if len(ps) == 0 {
		return nil, false
	}
	// The cost reads every node, so none is dead.
	sum := nodes[1]
	for _, n := range nodes[2:] {
		sum = G.Must(G.Add(sum, n))
	}
	cost := G.Must(G.Mean(G.Must(G.Sum(G.Must(G.Square(sum)), 1))))
	if _, err := G.Grad(cost, ps...); err != nil {
		return nil, false
	}
	return &net{g: g, x: x, cost: cost, params: ps}, true
}

// FuzzWindow: for random graphs, budgets and windows, every tape the
// verifier accepts runs within the budget and gives the baseline's loss and
// gradients bit for bit; a refused budget is a BudgetError.
func FuzzWindow(f *testing.F) {
	f.Add([]byte{9, 0, 0, 2, 1, 0, 1, 2, 3, 0, 2, 1, 4, 5}, uint8(50), uint8(3))
	f.Add([]byte{15, 1, 2, 2, 3, 4, 0, 5, 1, 1, 7, 3, 2, 2, 9, 9, 1}, uint8(25), uint8(1))
	f.Add([]byte{4, 0, 0, 2, 0, 1, 1}, uint8(100), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, percent uint8, windowActs uint8) {
		build := func() *net { n, _ := randomDAG(data); return n }
		if n := build(); n == nil {
			t.Skip("bytes make no trainable graph")
		}
		ref := build()
		bm, err := ooc.Compile(ref.g, ooc.Baseline())
		if err != nil {
			t.Fatalf("baseline: %v", err)
		}
		defer bm.Close()
		wantL, wantG, _ := trainSteps(t, ref, bm, 1)
		budget := bm.Program().Peak * int64(percent%101+1) / 100
		window := int64(windowActs%8) * 8 * 16 * 8

		got := build()
		m, err := ooc.Compile(got.g, ooc.WithBudget(budget), ooc.WithWindow(window), ooc.WithChunkSize(2<<20), ooc.WithPoison())
		if err != nil {
			var be *ooc.BudgetError
			if !errors.As(err, &be) {
				t.Fatalf("refused with %v, not a BudgetError", err)
			}
			return
		}
		defer m.Close()
		gotL, gotG, _ := trainSteps(t, got, m, 1)
		if fmt.Sprint(wantL) != fmt.Sprint(gotL) || fmt.Sprint(wantG) != fmt.Sprint(gotG) {
			t.Fatalf("budget %d window %d: results differ from the baseline", budget, window)
		}
		if st := m.Stats(); st.PeakDeviceBytes > budget {
			t.Fatalf("device peak %d over budget %d", st.PeakDeviceBytes, budget)
		}
	})
}
