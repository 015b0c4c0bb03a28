package kernelcheck

import (
	"fmt"
	"math/rand"
	"reflect"
	"unsafe"

	G "gorgonia.org/gorgonia"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

// seedGenerator gives a gorgonia dropoutOp a generator drawing from
// rand.NewSource(seed), in place of its clock-seeded one.
func seedGenerator(t TB, op G.Op, seed int64) {
	t.Helper()
	f := reflect.ValueOf(op).Elem().FieldByName("rndGen")
	if !f.IsValid() {
		t.Fatalf("%T has no rndGen", op)
	}
	rng := rand.New(rand.NewSource(seed))
	gen := reflect.ValueOf(func() float64 { return rng.Float64() }).Convert(f.Type())
	reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Set(gen)
}

// caseGorgoniaDropout: g_dropout, given the mask drawn from the same
// generator, and g_dropout_grad against gorgonia's dropoutOp and
// dropoutDiffOp, bit for bit (zeros in x included: the gradient keys on y).
func caseGorgoniaDropout[T float32 | float64](t TB, m *Mem) {
	for _, prob := range []float64{0.3, 0.55} {
		testGDropout[T](t, m, prob)
	}
}

func testGDropout[T float32 | float64](t TB, m *Mem, prob float64) {
	s := suffix[T]()
	rng := rand.New(rand.NewSource(30))
	n := 257
	x := randn[T](rng, n, 1)
	x[3], x[10] = 0, 0
	dy := randn[T](rng, n, 1)
	g := G.NewGraph()
	xn := input[T](g, "x", n)
	y := must(t)(G.Dropout(xn, prob))
	seedGenerator(t, y.Op(), 5)
	dyn := input[T](g, "dy", n)
	grads, err := y.Op().(G.SDOp).SymDiff(G.Nodes{xn}, y, dyn)
	if err != nil {
		t.Fatal(err)
	}
	yv := do(t, y.Op(), dense(x, n))
	wantY := data[T](t, yv)
	wantDX := data[T](t, do(t, grads[0].Op(), dense(x, n), yv, dense(dy, n)))
	keep := 1 - prob
	draw := rand.New(rand.NewSource(5))
	mask := make([]T, n)
	for i := range mask {
		r := draw.Float64()
		if (s == "f32" && float32(r) < float32(keep)) || (s == "f64" && r < keep) {
			mask[i] = 1
		}
	}
	yb := put(m, mask)
	m.launch("g_dropout_"+s, p(yb), p(put(m, x)), kernels.Int(int64(n)), kernels.Float(keep))
	sameBits(t, m, fmt.Sprintf("g_dropout_%s p=%v", s, prob), get[T](yb), wantY)
	dx := newOut[T](m, n)
	m.launch("g_dropout_grad_"+s, p(dx), p(yb), p(put(m, dy)), kernels.Int(int64(n)), kernels.Float(prob))
	sameBits(t, m, fmt.Sprintf("g_dropout_grad_%s p=%v", s, prob), get[T](dx), wantDX)
}
