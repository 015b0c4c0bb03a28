package kernelcheck

import (
	"math/rand"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

// caseGorgoniaBatchNorm: g_batchnorm and g_batchnorm_grad against
// gorgonia's BatchNormOp and batchnormDiffOp, bit for bit, in training and
// inference, for NCHW and (N, C) inputs (the op's two code paths): the
// output, the running statistics it advances, and the x gradient.
func caseGorgoniaBatchNorm[T float32 | float64](t TB, m *Mem) {
	for _, shape := range [][]int{{3, 4, 5, 6}, {7, 5}} {
		for _, training := range []bool{true, false} {
			testGBN[T](t, m, shape, training)
		}
	}
}

func testGBN[T float32 | float64](t TB, m *Mem, shape []int, training bool) {
	s := suffix[T]()
	rng := rand.New(rand.NewSource(28))
	C := shape[1]
	plane := prod(shape) / (shape[0] * C)
	x := randn[T](rng, prod(shape), 2)
	for i := range x {
		x[i] += 0.5
	}
	dy := randn[T](rng, len(x), 1)
	rm, rv := randn[T](rng, C, 1), randn[T](rng, C, 1)
	for i := range rv {
		rv[i] = rv[i]*rv[i] + 0.1
	}
	g := G.NewGraph()
	xn := input[T](g, "x", shape...)
	y, _, _, op, err := G.BatchNorm(xn, nil, nil, 0.9, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	if err := op.SetStats(dense(rm, C), dense(rv, C)); err != nil {
		t.Fatal(err)
	}
	mean0, variance0 := op.Stats()
	bm, bv := put(m, widen[T](t, mean0)), put(m, widen[T](t, variance0))
	geo := []kernels.Arg{kernels.Int(int64(shape[0])), kernels.Int(int64(C)), kernels.Int(int64(plane))}
	// The variance the op saves in a training forward, which its float32
	// inference gradient reads: inference runs after one training forward.
	saved := put(m, make([]float64, C))
	if !training {
		x0 := randn[T](rng, len(x), 1)
		do(t, op, dense(x0, shape...))
		m.launch("g_batchnorm_"+s, append(append([]kernels.Arg{p(newOut[T](m, len(x))), p(put(m, x0)), p(bm), p(bv), p(saved)}, geo...),
			kernels.Float(0.9), kernels.Float(1e-5), kernels.Int(1))...)
		if err := op.SetTraining(false); err != nil {
			t.Fatal(err)
		}
	}
	dyn := input[T](g, "dy", shape...)
	grads, err := op.SymDiff(G.Nodes{xn}, y, dyn)
	if err != nil {
		t.Fatal(err)
	}
	wantY := data[T](t, do(t, op, dense(x, shape...)))
	mean, variance := op.Stats()
	wantDX := data[T](t, do(t, grads[0].Op(), dense(x, shape...), dense(dy, shape...)))
	tr := int64(0)
	if training {
		tr = 1
	}
	yb := newOut[T](m, len(x))
	m.launch("g_batchnorm_"+s, append(append([]kernels.Arg{p(yb), p(put(m, x)), p(bm), p(bv), p(saved)}, geo...),
		kernels.Float(0.9), kernels.Float(1e-5), kernels.Int(tr))...)
	name := "g_batchnorm_" + s
	sameBits(t, m, name, get[T](yb), wantY)
	sameBits(t, m, name+" running mean", narrow[T](get[float64](bm)), data[T](t, mean))
	sameBits(t, m, name+" running variance", narrow[T](get[float64](bv)), data[T](t, variance))
	dx := newOut[T](m, len(x))
	m.launch("g_batchnorm_grad_"+s, append(append([]kernels.Arg{p(dx), p(put(m, x)), p(put(m, dy)), p(bv), p(saved)}, geo...),
		kernels.Float(1e-5), kernels.Int(tr))...)
	sameBits(t, m, "g_batchnorm_grad_"+s, get[T](dx), wantDX)
}

func widen[T float32 | float64](t TB, v tensor.Tensor) []float64 {
	var out []float64
	for _, f := range data[T](t, v.(*tensor.Dense)) {
		out = append(out, float64(f))
	}
	return out
}

func narrow[T float32 | float64](v []float64) []T {
	out := make([]T, len(v))
	for i, f := range v {
		out[i] = T(f)
	}
	return out
}
