package kernelcheck

import (
	"math/rand"

	G "gorgonia.org/gorgonia"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

// caseGorgoniaSparsemax: g_sparsemax and g_sparsemax_grad against
// gorgonia's sparsemaxOp and sparsemaxDiffOp, bit for bit, rows with ties
// and rows where one value dominates.
func caseGorgoniaSparsemax[T float32 | float64](t TB, m *Mem) {
	testGSparsemax[T](t, m)
}

func testGSparsemax[T float32 | float64](t TB, m *Mem) {
	s := suffix[T]()
	rng := rand.New(rand.NewSource(34))
	rows, n := 6, 9
	x := randn[T](rng, rows*n, 1)
	x[3], x[5] = x[4], x[4] // ties
	x[n] = 40               // a dominant value: one nonzero
	g := G.NewGraph()
	xn := input[T](g, "x", rows, n)
	y := must(t)(G.Sparsemax(xn))
	dyn := input[T](g, "dy", rows, n)
	grads, err := y.Op().(G.SDOp).SymDiff(G.Nodes{xn}, y, dyn)
	if err != nil {
		t.Fatal(err)
	}
	dy := randn[T](rng, rows*n, 1)
	yv := do(t, y.Op(), dense(x, rows, n))
	want := data[T](t, yv)
	wantDX := data[T](t, do(t, grads[0].Op(), yv, dense(dy, rows, n)))
	yb := newOut[T](m, len(x))
	m.launch("g_sparsemax_"+s, p(yb), p(put(m, x)), kernels.Int(int64(rows)), kernels.Int(int64(n)))
	sameBits(t, m, "g_sparsemax_"+s, get[T](yb), want)
	dx := newOut[T](m, len(x))
	m.launch("g_sparsemax_grad_"+s, p(dx), p(yb), p(put(m, dy)), kernels.Int(int64(rows)), kernels.Int(int64(n)))
	sameBits(t, m, "g_sparsemax_grad_"+s, get[T](dx), wantDX)
}

// caseGorgoniaGlobalAvgPool: g_gap against gorgonia's globalAveragePoolOp.
func caseGorgoniaGlobalAvgPool[T float32 | float64](t TB, m *Mem) {
	testGGAP[T](t, m)
}

func testGGAP[T float32 | float64](t TB, m *Mem) {
	s := suffix[T]()
	rng := rand.New(rand.NewSource(35))
	shape := []int{3, 4, 5, 7}
	x := randn[T](rng, prod(shape), 1)
	g := G.NewGraph()
	y := must(t)(G.GlobalAveragePool2D(input[T](g, "x", shape...)))
	want := data[T](t, do(t, y.Op(), dense(x, shape...)))
	yb := newOut[T](m, len(want))
	m.launch("g_gap_"+s, p(yb), p(put(m, x)), kernels.Int(12), kernels.Int(35))
	sameBits(t, m, "g_gap_"+s, get[T](yb), want)
}
