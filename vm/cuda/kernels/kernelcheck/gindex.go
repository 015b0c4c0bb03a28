package kernelcheck

import (
	"fmt"
	"math/rand"
	"unsafe"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

// caseGorgoniaUpsampleGrad: g_upsample_grad against gorgonia's
// upsampleDiffOp, bit for bit (the forward is a copy with a layout).
func caseGorgoniaUpsampleGrad[T float32 | float64](t TB, m *Mem) {
	for _, s := range []int{1, 2} {
		testGUpsample[T](t, m, s)
	}
}

func testGUpsample[T float32 | float64](t TB, m *Mem, stride int) {
	sfx := suffix[T]()
	rng := rand.New(rand.NewSource(32))
	shape := []int{2, 3, 4, 5}
	x := randn[T](rng, prod(shape), 1)
	g := G.NewGraph()
	xn := input[T](g, "x", shape...)
	y := must(t)(G.Upsample2D(xn, stride+1)) // its op's stride is the scale less 1
	ys := y.Shape()
	dyn := input[T](g, "dy", ys...)
	grads, err := y.Op().(G.SDOp).SymDiff(G.Nodes{xn}, y, dyn)
	if err != nil {
		t.Fatal(err)
	}
	dy := randn[T](rng, ys.TotalSize(), 1)
	yv := do(t, y.Op(), dense(x, shape...))
	want := data[T](t, do(t, grads[0].Op(), dense(x, shape...), yv, dense(dy, ys...)))
	dx := newOut[T](m, len(x))
	m.launch("g_upsample_grad_"+sfx, p(dx), p(put(m, dy)), kernels.Int(6), kernels.Int(4), kernels.Int(5), kernels.Int(int64(stride)))
	sameBits(t, m, "g_upsample_grad_"+sfx, get[T](dx), want)
}

// putInts puts int64 indices in device memory.
func putInts(m *Mem, v []int) *Buffer {
	b := m.alloc(8 * len(v))
	d := unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(b.Data()))), len(v))
	for i, x := range v {
		d[i] = int64(x)
	}
	return b
}

// caseGorgoniaByIndices: g_byindices and g_byindices_grad with
// kernels.ByIndicesArgs against gorgonia's byIndicesOp and its gradient
// (tensor's SelectByIndices and SelectByIndicesB), bit for bit: rows of a
// matrix with a repeated index, the last axis, a vector, and a middle axis
// of a 3-D tensor (where tensor's strides between outer blocks are its own).
func caseGorgoniaByIndices[T float32 | float64](t TB, m *Mem) {
	for _, c := range []struct {
		shape []int
		axis  int
		idx   []int
	}{
		{[]int{5, 4}, 0, []int{3, 1, 3, 0}},
		{[]int{3, 6}, 1, []int{5, 0, 2}},
		{[]int{7}, 0, []int{6, 2, 2}},
		{[]int{2, 3, 4}, 1, []int{2, 0}},
		{[]int{2, 3, 4}, 0, []int{1, 1, 0}},
	} {
		testGByIndices[T](t, m, c.shape, c.axis, c.idx)
	}
}

func testGByIndices[T float32 | float64](t TB, m *Mem, shape []int, axis int, idx []int) {
	sfx := suffix[T]()
	name := fmt.Sprintf("%v axis %d %v %s", shape, axis, idx, sfx)
	rng := rand.New(rand.NewSource(33))
	x := randn[T](rng, prod(shape), 1)
	g := G.NewGraph()
	xn := input[T](g, "x", shape...)
	in := G.NewVector(g, tensor.Int, G.WithShape(len(idx)), G.WithName("idx"))
	y := must(t)(G.ByIndices(xn, in, axis))
	ys := y.Shape()
	dyn := input[T](g, "dy", ys...)
	grads, err := y.Op().(G.SDOp).SymDiff(G.Nodes{xn, in}, y, dyn)
	if err != nil {
		t.Fatal(err)
	}
	dy := randn[T](rng, ys.TotalSize(), 1)
	iv := tensor.New(tensor.WithShape(len(idx)), tensor.WithBacking(append([]int(nil), idx...)))
	want := data[T](t, do(t, y.Op(), dense(x, shape...), iv))
	var wantDX []T
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Logf("%s: the CPU op's gradient panics (%v): the kernel's result there is unspecified", name, r)
			}
		}()
		wantDX = data[T](t, do(t, grads[0].Op(), dense(x, shape...), dense(dy, ys...), iv))
	}()
	ib := putInts(m, idx)
	fw, err := kernels.ByIndicesArgs(shape, ys, axis, false)
	if err != nil {
		t.Fatal(err)
	}
	yb := put(m, make([]T, len(want)))
	m.launch("g_byindices_"+sfx, append([]kernels.Arg{p(yb), p(put(m, x)), p(ib)}, fw...)...)
	sameBits(t, m, "g_byindices "+name, get[T](yb), want)
	if wantDX == nil {
		return
	}
	bw, err := kernels.ByIndicesArgs(shape, ys, axis, true)
	if err != nil {
		t.Fatal(err)
	}
	dx := put(m, make([]T, len(x)))
	m.launch("g_byindices_grad_"+sfx, append([]kernels.Arg{p(dx), p(put(m, dy)), p(ib)}, bw...)...)
	sameBits(t, m, "g_byindices_grad "+name, get[T](dx), wantDX)
}
