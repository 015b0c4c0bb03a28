package kernelcheck

import (
	"math/rand"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/models/layers"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

func testGAN[T float32 | float64](t TB, m *Mem) {
	rng := rand.New(rand.NewSource(16))
	unaryGrad := ganUnaryGrad[T](t, m, rng)
	ganActivations[T](t, unaryGrad, rng)
	ganInstanceNorm[T](t, unaryGrad, rng)
	ganReflectPad[T](t, m, rng)
	ganMeanLosses[T](t, m, rng)
}

// unaryGradCheck checks y = op(x) (node y of input xn) and its gradient
// (seeded by node dy), which reads y (activations) or x (InstanceNorm,
// readsX), launching kernel name with args after the pointers.
type unaryGradCheck[T float32 | float64] func(name string, xn, y, dy *G.Node, readsX bool, x []T, args ...kernels.Arg)

func ganUnaryGrad[T float32 | float64](t TB, m *Mem, rng *rand.Rand) unaryGradCheck[T] {
	s := suffix[T]()
	return func(name string, xn, y, dy *G.Node, readsX bool, x []T, args ...kernels.Arg) {
		t.Helper()
		sh := []int(y.Shape())
		grads, err := y.Op().(G.SDOp).SymDiff(G.Nodes{xn}, y, dy)
		if err != nil {
			t.Fatal(err)
		}
		dyv := randn[T](rng, len(x), 1)
		wantY := data[T](t, do(t, y.Op(), dense(x, sh...)))
		yb := newOut[T](m, len(wantY))
		m.launch(name+"_"+s, append([]kernels.Arg{p(yb), p(put(m, x))}, args...)...)
		if name == "tanh" && s == "f64" {
			// Go's math.Tanh calls math.Exp, which on amd64 is assembly; the
			// kernel has Go's portable Exp (oocmath.h): the last bit may differ.
			compare(t, m, name+"_"+s, get[T](yb), wantY, false)
		} else {
			sameBits(t, m, name+"_"+s, get[T](yb), wantY)
		}
		gin := []G.Value{dense(wantY, sh...), dense(dyv, sh...)}
		first := p(put(m, wantY))
		if readsX {
			gin[0], first = dense(x, sh...), p(put(m, x))
		}
		wantDX := data[T](t, do(t, grads[0].Op(), gin...))
		dx := newOut[T](m, len(x))
		m.launch(name+"_grad_"+s, append([]kernels.Arg{p(dx), first, p(put(m, dyv))}, args...)...)
		sameBits(t, m, name+"_grad_"+s, get[T](dx), wantDX)
	}
}

// ganActivations: LeakyReLU and Tanh (with special values) and their gradients.
func ganActivations[T float32 | float64](t TB, unaryGrad unaryGradCheck[T], rng *rand.Rand) {
	t.Helper()
	x := append(randn[T](rng, 97, 3), specials[T]()...)
	n := len(x)
	for _, act := range []string{"leaky_relu", "tanh"} {
		g := G.NewGraph()
		xn := input[T](g, "x", n)
		var y *G.Node
		args := []kernels.Arg{kernels.Int(int64(n))}
		if act == "tanh" {
			y = must(t)(layers.Tanh(xn))
		} else {
			y = must(t)(layers.LeakyReLU(xn, 0.2))
			args = append(args, kernels.Float(0.2))
		}
		unaryGrad(act, xn, y, input[T](g, "dy", n), false, x, args...)
	}
}

// ganInstanceNorm: InstanceNorm forward and backward, planes of fewer and
// more pixels than a block has threads.
func ganInstanceNorm[T float32 | float64](t TB, unaryGrad unaryGradCheck[T], rng *rand.Rand) {
	t.Helper()
	for _, sh := range [][]int{{2, 3, 5, 7}, {1, 2, 19, 23}} {
		g := G.NewGraph()
		xn := input[T](g, "x", sh...)
		y := must(t)(layers.InstanceNorm(xn, 1e-5))
		xv := randn[T](rng, prod(sh), 2)
		unaryGrad("instnorm", xn, y, input[T](g, "dy", sh...), true, xv,
			kernels.Int(int64(sh[0]*sh[1])), kernels.Int(int64(sh[2]*sh[3])), kernels.Float(1e-5))
	}
}

// ganReflectPad: ReflectionPad2D and its adjoint, pads up to size-1 (a pixel
// reflected from both sides).
func ganReflectPad[T float32 | float64](t TB, m *Mem, rng *rand.Rand) {
	t.Helper()
	s := suffix[T]()
	for _, c := range []struct{ H, W, pad int }{{5, 7, 2}, {4, 4, 3}, {6, 3, 1}} {
		func() {
			g := G.NewGraph()
			sh := []int{2, 3, c.H, c.W}
			xn := input[T](g, "x", sh...)
			y := must(t)(layers.ReflectionPad2D(xn, c.pad))
			ys := []int(y.Shape())
			grads, err := y.Op().(G.SDOp).SymDiff(G.Nodes{xn}, y, input[T](g, "dy", ys...))
			if err != nil {
				t.Fatal(err)
			}
			xv, dyv := randn[T](rng, prod(sh), 1), randn[T](rng, prod(ys), 1)
			geo := []kernels.Arg{kernels.Int(6), kernels.Int(int64(c.H)), kernels.Int(int64(c.W)), kernels.Int(int64(c.pad))}
			wantY := data[T](t, do(t, y.Op(), dense(xv, sh...)))
			yb := newOut[T](m, len(wantY))
			m.launch("reflect_pad_"+s, append([]kernels.Arg{p(yb), p(put(m, xv))}, geo...)...)
			sameBits(t, m, "reflect_pad_"+s, get[T](yb), wantY)
			wantDX := data[T](t, do(t, grads[0].Op(), dense(dyv, ys...)))
			dx := newOut[T](m, len(xv))
			m.launch("reflect_pad_grad_"+s, append([]kernels.Arg{p(dx), p(put(m, dyv))}, geo...)...)
			sameBits(t, m, "reflect_pad_grad_"+s, get[T](dx), wantDX)
		}()

	}
}

// ganMeanLosses: MSEToConstant and L1Loss and their gradients over one and
// several of the CPU op's 16384-element chunks.
func ganMeanLosses[T float32 | float64](t TB, m *Mem, rng *rand.Rand) {
	t.Helper()
	s := suffix[T]()
	for _, size := range []int{37, 2*16384 + 5} {
		for kind, mse := range []bool{true, false} {
			g := G.NewGraph()
			an, bn := input[T](g, "a", size), input[T](g, "b", size)
			var l *G.Node
			ins := G.Nodes{an}
			if mse {
				l = must(t)(layers.MSEToConstant(an, 0.9, 0.5))
			} else {
				l = must(t)(layers.L1Loss(an, bn, 10))
				ins = append(ins, bn)
			}
			dl := G.NewScalar(g, dtOf[T](), G.WithName("dl"))
			grads, err := l.Op().(G.SDOp).SymDiff(ins, l, dl)
			if err != nil {
				t.Fatal(err)
			}
			av, bv := randn[T](rng, size, 1), randn[T](rng, size, 1)
			bv[3] = av[3] // a zero difference: its L1 gradient is 0
			target, scale := 0.9, 0.5
			if !mse {
				target, scale = 0, 10
			}
			vals := []G.Value{dense(av, size), dense(bv, size)}[:len(ins)]
			want := data[T](t, do(t, l.Op(), vals...))
			lb := newOut[T](m, 1)
			pa, pb := put(m, av), put(m, bv)
			if mse {
				pb = pa
			}
			m.launch("mean_loss_"+s, p(lb), kernels.Int(int64(kind)), p(pa), p(pb), kernels.Int(int64(size)), kernels.Float(target), kernels.Float(scale))
			sameBits(t, m, "mean_loss_"+s, get[T](lb), want)
			dlv := T(0.75)
			for wrt := range ins {
				wantD := data[T](t, do(t, grads[wrt].Op(), append(append([]G.Value{}, vals...), tensor.New(tensor.FromScalar(dlv)))...))
				d := newOut[T](m, size)
				m.launch("mean_loss_grad_"+s, p(d), kernels.Int(int64(kind)), kernels.Int(int64(wrt)), p(pa), p(pb), p(put(m, []T{dlv})),
					kernels.Int(int64(size)), kernels.Float(target), kernels.Float(scale))
				sameBits(t, m, "mean_loss_grad_"+s, get[T](d), wantD)
			}
		}
	}
}
