package kernelcheck

import (
	"math"
	"math/rand"
	"runtime"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/models/layers"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

// split views shape as (outer, k, inner) around axis.
func split(shape []int, axis int) (outer, k, inner int64) {
	outer, inner = 1, 1
	for i, v := range shape {
		switch {
		case i < axis:
			outer *= int64(v)
		case i > axis:
			inner *= int64(v)
		}
	}
	return outer, int64(shape[axis]), inner
}

func testReduce[T float32 | float64](t TB, m *Mem) {
	rng := rand.New(rand.NewSource(8))
	name := "reduce_" + suffix[T]()
	run := func(op kernels.ReduceOp, x []T, shape []int, axis int) []T {
		o, k, in := split(shape, axis)
		y := newOut[T](m, int(o*in))
		m.launch(name, kernels.Int(int64(op)), p(y), p(put(m, x)), kernels.Int(o), kernels.Int(k), kernels.Int(in))
		return get[T](y)
	}
	for _, c := range []struct {
		shape []int
		axis  int
	}{{[]int{7}, 0}, {[]int{3, 5}, 0}, {[]int{3, 5}, 1}, {[]int{2, 3, 4}, 0}, {[]int{2, 3, 4}, 2}, {[]int{3, 2, 5}, 1}, {[]int{2, 5, 3, 3}, 3}} {
		x := randn[T](rng, prod(c.shape), 2)
		x[1] = T(math.Inf(1))
		if len(x) > 4 && c.axis == len(c.shape)-1 { // NaN rules differ by axis: see reduce.cu
			x[4] = T(math.NaN())
		}
		g := G.NewGraph()
		sum := must(t)(G.Sum(input[T](g, "x", c.shape...), c.axis))
		mx := must(t)(G.Max(input[T](g, "y", c.shape...), c.axis))
		wantSum := data[T](t, do(t, sum.Op(), dense(x, c.shape...)))
		compare(t, m, name+" sum", run(kernels.ReduceSum, x, c.shape, c.axis), wantSum, true)
		wantMax := data[T](t, do(t, mx.Op(), dense(x, c.shape...)))
		compare(t, m, name+" max", run(kernels.ReduceMax, x, c.shape, c.axis), wantMax, false)
		_, k, _ := split(c.shape, c.axis)
		wantMean := make([]T, len(wantSum))
		for i, s := range wantSum {
			wantMean[i] = s / T(k)
		}
		compare(t, m, name+" mean", run(kernels.ReduceMean, x, c.shape, c.axis), wantMean, true)
	}
	// A middle axis of length 3, against a plain reference.
	shape := []int{2, 3, 4}
	x := randn[T](rng, 24, 1)
	want := make([]T, 8)
	for o := 0; o < 2; o++ {
		for in := 0; in < 4; in++ {
			var s T
			for j := 0; j < 3; j++ {
				s += x[(o*3+j)*4+in]
			}
			want[o*4+in] = s
		}
	}
	compare(t, m, name+" sum", run(kernels.ReduceSum, x, shape, 1), want, true)
}

func testSoftmax[T float32 | float64](t TB, m *Mem) {
	rng := rand.New(rand.NewSource(9))
	bits := runtime.GOARCH == "amd64" && suffix[T]() == "f64"
	for _, shape := range [][]int{{6, 5}, {1, 1}, {2, 4, 3, 5}, {3, 7}} {
		o, k, in := split(shape, 1)
		n := prod(shape)
		x := randn[T](rng, n, 3)
		dy := randn[T](rng, n, 1)
		last := 0
		if len(shape) == 2 {
			last = 2
		}
		check := func(name string, got, want []T, norm bool) {
			if bits {
				sameBits(t, m, name, got, want)
			} else {
				compare(t, m, name, got, want, norm)
			}
		}
		for _, lg := range []int{1, 0} {
			var yT, dxT tensor.Tensor
			var err error
			if lg == 1 {
				yT, err = tensor.LogSoftMax(dense(x, shape...), 1)
			} else {
				yT, err = tensor.SoftMax(dense(x, shape...), 1)
			}
			if err != nil {
				t.Fatal(err)
			}
			want := data[T](t, yT)
			y := newOut[T](m, n)
			name := "softmax_" + suffix[T]()
			m.launch(name, kernels.Int(int64(lg|last)), p(y), p(put(m, x)), kernels.Int(o), kernels.Int(k), kernels.Int(in))
			check(name, get[T](y), want, false)

			if lg == 1 {
				dxT, err = tensor.LogSoftMaxB(dense(want, shape...), dense(dy, shape...), 1)
			} else {
				dxT, err = tensor.SoftMaxB(dense(want, shape...), dense(dy, shape...), 1)
			}
			if err != nil {
				t.Fatal(err)
			}
			dx := newOut[T](m, n)
			gname := "softmax_grad_" + suffix[T]()
			m.launch(gname, kernels.Int(int64(lg)), p(dx), p(put(m, want)), p(put(m, dy)), kernels.Int(o), kernels.Int(k), kernels.Int(in))
			check(gname, get[T](dx), data[T](t, dxT), true)
		}
	}
}

// softmaxLastAxisBug: tensor's last-axis softmax takes row r's maximum
// as max(x[0], x[r][1:]). With mode 2 the kernel takes that maximum where it
// is within 16 of the row's own and gives tensor's bits (rows 1 and 2:
// x[0] above the row; the row's first element, left out, above the rest);
// in row 3, 1100 below x[0], tensor underflows to log(0) and gives +Inf,
// and the kernel takes the row's own maximum and is right.
func softmaxLastAxisBug(t TB, m *Mem) {
	x := []float64{100, 0, 97.5, 91.25, 103, 99.5, -1000, -1001}
	yT, err := tensor.LogSoftMax(dense(x, 4, 2), 1)
	if err != nil {
		t.Fatal(err)
	}
	cpu := data[float64](t, yT)
	y := newOut[float64](m, 8)
	m.launch("softmax_f64", kernels.Int(3), p(y), p(put(m, x)), kernels.Int(4), kernels.Int(2), kernels.Int(1))
	got := get[float64](y)
	if !math.IsInf(cpu[6], 1) || math.Abs(got[6]-(-0.31326168751822286)) > 1e-15 {
		t.Fatalf("CPU row 3 %v, kernel %v: the documented difference changed", cpu[6:], got[6:])
	}
	for i := range 6 {
		if (runtime.GOARCH == "amd64" && math.Float64bits(got[i]) != math.Float64bits(cpu[i])) || math.Abs(got[i]-cpu[i]) > 1e-13 {
			t.Fatalf("element %d: kernel %v, CPU %v (bit for bit on amd64)", i, got[i], cpu[i])
		}
	}
	m.launch("softmax_f64", kernels.Int(1), p(y), p(put(m, x)), kernels.Int(4), kernels.Int(2), kernels.Int(1))
	own, differ := get[float64](y), false
	for i := 2; i < 6; i++ {
		differ = differ || math.Float64bits(own[i]) != math.Float64bits(cpu[i])
	}
	if !differ {
		t.Fatalf("rows 1 and 2 give tensor's bits with the rows' own maxima too: they test nothing")
	}
}

func testXent[T float32 | float64](t TB, m *Mem) {
	rng := rand.New(rand.NewSource(10))
	for _, shape := range [][]int{{4, 5}, {300, 3}, {2, 3, 4, 4}} {
		n := prod(shape)
		x := randn[T](rng, n, 2)
		o, k, in := split(shape, 1)
		tg := make([]T, n) // one-hot along axis 1
		for r := int64(0); r < o*in; r++ {
			c := rng.Int63n(k)
			tg[(r/in)*k*in+c*in+r%in] = 1
		}
		g := G.NewGraph()
		xn, tn := input[T](g, "logits", shape...), input[T](g, "t", shape...)
		var loss *G.Node
		if len(shape) == 2 {
			loss = must(t)(layers.SoftmaxCrossEntropy(xn, tn))
		} else {
			loss = must(t)(layers.PixelSoftmaxCrossEntropy(xn, tn))
		}
		if _, err := G.Grad(loss, xn); err != nil {
			t.Fatal(err)
		}
		G.Let(xn, dense(x, shape...))
		G.Let(tn, dense(tg, shape...))
		vm := G.NewTapeMachine(g)
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		wantLoss := []T{loss.Value().Data().(T)}
		grad, err := xn.Grad()
		if err != nil {
			t.Fatal(err)
		}
		wantGrad := data[T](t, grad)
		vm.Close()

		l := newOut[T](m, 1)
		m.launch("xent_loss_"+suffix[T](), p(l), p(put(m, x)), p(put(m, tg)), kernels.Int(o), kernels.Int(k), kernels.Int(in))
		compare(t, m, "xent_loss_"+suffix[T](), get[T](l), wantLoss, false)
		dx := newOut[T](m, n)
		m.launch("xent_grad_"+suffix[T](), p(dx), p(put(m, x)), p(put(m, tg)), kernels.Int(o), kernels.Int(k), kernels.Int(in),
			kernels.Float(float64(T(1)/T(o*in))))
		compare(t, m, "xent_grad_"+suffix[T](), get[T](dx), wantGrad, true)
	}
}
