package kernelcheck

import (
	"math/rand"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

// strides of a dense row-major shape, in elements.
func strides(shape []int) [kernels.MaxDims]int64 {
	var s [kernels.MaxDims]int64
	acc := int64(1)
	for d := len(shape) - 1; d >= 0; d-- {
		s[d] = acc
		acc *= int64(shape[d])
	}
	return s
}

func dims(shape []int) (d [kernels.MaxDims]int64) {
	for i, v := range shape {
		d[i] = int64(v)
	}
	return d
}

func prod(shape []int) int {
	n := 1
	for _, v := range shape {
		n *= v
	}
	return n
}

func testTranspose[T float32 | float64](t TB, m *Mem) {
	rng := rand.New(rand.NewSource(4))
	shape := []int{2, 3, 5, 7}
	perm := []int{0, 2, 3, 1}
	x := randn[T](rng, prod(shape), 1)
	g := G.NewGraph()
	node := must(t)(G.Transpose(input[T](g, "x", shape...), perm...))
	want := data[T](t, do(t, node.Op(), dense(x, shape...)))
	// Walk the output shape; read the input through its permuted strides.
	out := make([]int, 4)
	for i, a := range perm {
		out[i] = shape[a]
	}
	in := strides(shape)
	l := kernels.Layout{Rank: 4, Dim: dims(out), Out: strides(out)}
	for i, a := range perm {
		l.A[i] = in[a]
	}
	y := newOut[T](m, len(x))
	m.launch("copy_"+suffix[T](), p(y), p(put(m, x)), kernels.Int(int64(len(x))), kernels.LayoutArg(l))
	compare(t, m, "copy_"+suffix[T]()+" transpose", get[T](y), want, false)
}

func testConcatSlice[T float32 | float64](t TB, m *Mem) {
	rng := rand.New(rand.NewSource(5))
	N, H, W := 2, 3, 5
	chans := []int{4, 1, 3}
	g := G.NewGraph()
	var nodes []*G.Node
	var vals []G.Value
	var xs [][]T
	for i, c := range chans {
		nodes = append(nodes, input[T](g, string(rune('a'+i)), N, c, H, W))
		x := randn[T](rng, N*c*H*W, 1)
		xs = append(xs, x)
		vals = append(vals, dense(x, N, c, H, W))
	}
	cat := must(t)(G.Concat(1, nodes...))
	want := data[T](t, do(t, cat.Op(), vals...))
	Ct := 8
	y := newOut[T](m, N*Ct*H*W)
	off := 0
	for i, c := range chans {
		// Output block: (N, c, H*W) with the output's strides, based at channel off.
		l := kernels.Layout{Rank: 3, Dim: [6]int64{int64(N), int64(c), int64(H * W)},
			Out: [6]int64{int64(Ct * H * W), int64(H * W), 1}, A: strides([]int{N, c, H * W})}
		base := kernels.Ptr(y.addr + uintptr(off*H*W)*uintptr(sizeOf[T]()))
		m.launch("copy_"+suffix[T](), base, p(put(m, xs[i])), kernels.Int(int64(N*c*H*W)), kernels.LayoutArg(l))
		off += c
	}
	compare(t, m, "copy_"+suffix[T]()+" concat", get[T](y), want, false)

	// Slice channels [4,5) back out, as concat's gradient does.
	sl := must(t)(G.Slice(cat, nil, G.S(4, 5)))
	wantS := data[T](t, do(t, sl.Op(), dense(want, N, Ct, H, W)))
	z := newOut[T](m, N*H*W)
	l := kernels.Layout{Rank: 3, Dim: [6]int64{int64(N), 1, int64(H * W)}, Out: strides([]int{N, 1, H * W}),
		A: [6]int64{int64(Ct * H * W), int64(H * W), 1}}
	src := kernels.Ptr(y.addr + uintptr(4*H*W)*uintptr(sizeOf[T]()))
	m.launch("copy_"+suffix[T](), p(z), src, kernels.Int(int64(N*H*W)), kernels.LayoutArg(l))
	compare(t, m, "copy_"+suffix[T]()+" slice", get[T](z), wantS, false)
}

func sizeOf[T float32 | float64]() int {
	if dtOf[T]() == tensor.Float32 {
		return 4
	}
	return 8
}

func testRepeat[T float32 | float64](t TB, m *Mem) {
	rng := rand.New(rand.NewSource(6))
	for _, c := range []struct {
		shape     []int
		axis, rep int
	}{{[]int{1, 5}, 0, 3}, {[]int{2, 1}, 1, 5}, {[]int{2, 3, 4}, 1, 2}, {[]int{3, 2}, 1, 3}} {
		x := randn[T](rng, prod(c.shape), 1)
		r, err := tensor.Repeat(dense(x, c.shape...), c.axis, c.rep)
		if err != nil {
			t.Fatal(err)
		}
		want := data[T](t, r)
		out := append([]int(nil), c.shape...)
		out[c.axis] *= c.rep
		l := kernels.Layout{Rank: len(out), Dim: dims(out), Out: strides(out), A: strides(c.shape)}
		l.Rep[c.axis] = int64(c.rep)
		y := newOut[T](m, len(want))
		m.launch("copy_"+suffix[T](), p(y), p(put(m, x)), kernels.Int(int64(len(want))), kernels.LayoutArg(l))
		compare(t, m, "copy_"+suffix[T]()+" repeat", get[T](y), want, false)
	}
}

// binaryBroadcast: a (2,5) + (5) bias as BroadcastAdd computes it (Repeat then +),
// in one launch with a stride-0 axis.
func binaryBroadcast(t TB, m *Mem) {
	rng := rand.New(rand.NewSource(7))
	a, b := randn[float32](rng, 10, 1), randn[float32](rng, 5, 1)
	g := G.NewGraph()
	rep, err := tensor.Repeat(dense(b, 1, 5), 0, 2) // repeatOp's Do
	if err != nil {
		t.Fatal(err)
	}
	br := data[float32](t, rep)
	sum := must(t)(G.Add(input[float32](g, "a", 2, 5), input[float32](g, "r", 2, 5)))
	want := data[float32](t, do(t, sum.Op(), dense(a, 2, 5), dense(br, 2, 5)))
	y := newOut[float32](m, 10)
	l := kernels.Layout{Rank: 2, Dim: [6]int64{2, 5}, Out: [6]int64{5, 1}, A: [6]int64{5, 1}, B: [6]int64{0, 1}}
	m.launch("binary_f32", kernels.Int(int64(kernels.BinaryAdd)), p(y), p(put(m, a)), p(put(m, b)), kernels.Int(10), kernels.LayoutArg(l))
	compare(t, m, "binary_f32 add broadcast", get[float32](y), want, false)
}
