package kernelcheck

import (
	"math"
	"math/rand"

	G "gorgonia.org/gorgonia"

	"github.com/gorgonia-ooc/outofcore/models/layers"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

func testLSTM[T float32 | float64](t TB, m *Mem) {
	s := suffix[T]()
	rng := rand.New(rand.NewSource(17))
	N, Tn, V, E := 3, 5, 4, 6
	g := G.NewGraph()
	idn, tabn := input[T](g, "ids", N, 1, 1, Tn), input[T](g, "table", V, E)
	y := must(t)(layers.Embedding(idn, tabn))
	ys := []int(y.Shape())
	grads, err := y.Op().(G.SDOp).SymDiff(G.Nodes{idn, tabn}, y, input[T](g, "dy", ys...))
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]T, N*Tn)
	for i := range ids {
		ids[i] = T(rng.Intn(V))
	}
	table, dy := randn[T](rng, V*E, 1), randn[T](rng, prod(ys), 1)
	geo := []kernels.Arg{kernels.Int(int64(N)), kernels.Int(int64(Tn)), kernels.Int(int64(V)), kernels.Int(int64(E))}
	want := data[T](t, do(t, y.Op(), dense(ids, N, 1, 1, Tn), dense(table, V, E)))
	out := newOut[T](m, len(want))
	m.launch("embedding_"+s, append([]kernels.Arg{p(out), p(put(m, ids)), p(put(m, table))}, geo...)...)
	sameBits(t, m, "embedding_"+s, get[T](out), want)
	wantD := data[T](t, do(t, grads[1].Op(), dense(ids, N, 1, 1, Tn), dense(dy, ys...)))
	dt := newOut[T](m, V*E)
	m.launch("embedding_grad_"+s, append([]kernels.Arg{p(dt), p(put(m, ids)), p(put(m, dy))}, geo...)...)
	sameBits(t, m, "embedding_grad_"+s, get[T](dt), wantD)
	bad := append([]T(nil), ids...)
	bad[2] = 1.5
	m.launch("embedding_"+s, append([]kernels.Arg{p(out), p(put(m, bad)), p(put(m, table))}, geo...)...)
	if v := get[T](out)[2]; !math.IsNaN(float64(v)) { // element (n 0, e 0, t 2)
		t.Errorf("embedding_%s of id 1.5: %v, want NaN", s, v)
	}
	m.exactly() // the NaN check is exact: the LSTM's comparisons below are not embedding's

	H := 7
	pre, c, dn := randn[T](rng, N*4*H, 2), randn[T](rng, N*H, 1), randn[T](rng, N*H, 1)
	gc := G.NewGraph()
	pn, cn := input[T](gc, "pre", N, 4*H), input[T](gc, "c", N, H)
	for kind, build := range []func(pre, c *G.Node) (*G.Node, error){layers.LSTMCell, layers.LSTMHidden} {
		y := must(t)(build(pn, cn))
		gr, err := y.Op().(G.SDOp).SymDiff(G.Nodes{pn, cn}, y, input[T](gc, "d", N, H))
		if err != nil {
			t.Fatal(err)
		}
		pv, cv, dv := dense(pre, N, 4*H), dense(c, N, H), dense(dn, N, H)
		check := func(k int, op G.Op, ins []G.Value, x, d []T) {
			t.Helper()
			want := data[T](t, do(t, op, ins...))
			res := newOut[T](m, len(want))
			m.launch("lstm_cell_"+s, kernels.Int(int64(k)), p(res), p(put(m, pre)), p(put(m, x)), p(put(m, d)), kernels.Int(int64(N)), kernels.Int(int64(H)))
			compare(t, m, "lstm_cell_"+s, get[T](res), want, false)
		}
		check(kind, y.Op(), []G.Value{pv, cv}, c, c) // c' or h'
		if kind == 0 {
			check(2, gr[0].Op(), []G.Value{pv, cv, dv}, c, dn) // dpre from (pre, c, dc')
			check(3, gr[1].Op(), []G.Value{pv, dv}, dn, dn)    // dc from (pre, dc')
		} else {
			check(4, gr[0].Op(), []G.Value{pv, cv, dv}, c, dn) // dpre from (pre, c', dh')
			check(5, gr[1].Op(), []G.Value{pv, cv, dv}, c, dn) // dc' from (pre, c', dh')
		}
	}
}
