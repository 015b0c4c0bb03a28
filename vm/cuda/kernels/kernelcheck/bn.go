package kernelcheck

import (
	"math/rand"

	G "gorgonia.org/gorgonia"

	"github.com/gorgonia-ooc/outofcore/models/layers"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

func testBN[T float32 | float64](t TB, m *Mem, shape []int) {
	s := suffix[T]()
	rng := rand.New(rand.NewSource(13))
	N, C := shape[0], shape[1]
	plane := prod(shape) / (N * C)
	g := G.NewGraph()
	xn, gn, bn := input[T](g, "x", shape...), input[T](g, "gamma", C), input[T](g, "beta", C)
	y, op, err := layers.BatchNorm(xn, gn, bn, 0.1, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	dyn := input[T](g, "dy", shape...)
	grads, err := op.SymDiff(G.Nodes{xn, gn, bn}, y, dyn)
	if err != nil {
		t.Fatal(err)
	}
	x := randn[T](rng, prod(shape), 2)
	for i := range x {
		x[i] += 3 // a mean well away from 0
	}
	gamma, beta, dy := randn[T](rng, C, 1), randn[T](rng, C, 1), randn[T](rng, prod(shape), 1)
	xv, gv, bv, dyv := dense(x, shape...), dense(gamma, C), dense(beta, C), dense(dy, shape...)
	geo := []kernels.Arg{kernels.Int(int64(N)), kernels.Int(int64(C)), kernels.Int(int64(plane))}
	sz := len(x)

	for _, training := range []bool{true, false} {
		op.SetTraining(training)
		rm0, rv0 := op.RunningStats()
		wantY := data[T](t, do(t, op, xv, gv, bv))
		rm1, rv1 := op.RunningStats()
		wantDX := data[T](t, do(t, grads[0].Op(), xv, gv, dyv))
		wantDG := data[T](t, do(t, grads[1].Op(), xv, dyv))
		wantDB := data[T](t, do(t, grads[2].Op(), dyv))

		mean, inv, vr := newOut[float64](m, C), newOut[float64](m, C), newOut[float64](m, C)
		if training {
			m.launch("bn_stats_"+s, append([]kernels.Arg{p(mean), p(inv), p(vr), p(put(m, x))}, append(geo, kernels.Float(1e-5))...)...)
			rm, rv := put(m, rm0), put(m, rv0)
			cnt := float64(N * plane)
			unbias := 1.0
			if cnt > 1 {
				unbias = cnt / (cnt - 1)
			}
			m.launch("bn_running", p(rm), p(rv), p(mean), p(vr), kernels.Int(int64(C)), kernels.Float(0.1), kernels.Float(unbias))
			sameBits(t, m, "bn_running mean", get[float64](rm), rm1)
			sameBits(t, m, "bn_running var", get[float64](rv), rv1)
		} else {
			m.launch("bn_infer_stats", p(mean), p(inv), p(put(m, rm0)), p(put(m, rv0)), kernels.Int(int64(C)), kernels.Float(1e-5))
		}
		yb := newOut[T](m, sz)
		m.launch("bn_apply_"+s, append([]kernels.Arg{p(yb), p(put(m, x)), p(put(m, gamma)), p(put(m, beta)), p(mean), p(inv)}, geo...)...)
		sameBits(t, m, "bn_apply_"+s, get[T](yb), wantY)

		dg, sdy, sdxh := newOut[T](m, C), newOut[float64](m, C), newOut[float64](m, C)
		m.launch("bn_grad_sums_"+s, append([]kernels.Arg{p(dg), p(sdy), p(sdxh), p(put(m, x)), p(put(m, dy)), p(mean), p(inv)}, geo...)...)
		sameBits(t, m, "bn_grad_sums_"+s+" (dgamma)", get[T](dg), wantDG)
		dx := newOut[T](m, sz)
		tr := int64(0)
		if training {
			tr = 1
		}
		m.launch("bn_grad_x_"+s, append(append([]kernels.Arg{p(dx), p(put(m, x)), p(put(m, dy)), p(put(m, gamma)), p(mean), p(inv), p(sdy), p(sdxh)}, geo...), kernels.Int(tr))...)
		sameBits(t, m, "bn_grad_x_"+s, get[T](dx), wantDX)
		db := newOut[T](m, C)
		m.launch("channel_sum_"+s, append([]kernels.Arg{p(db), p(put(m, dy))}, geo...)...)
		sameBits(t, m, "channel_sum_"+s, get[T](db), wantDB)
	}
}
