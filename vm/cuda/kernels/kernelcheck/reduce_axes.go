package kernelcheck

import (
	"math/rand"
	"slices"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

// TestReduceAxes: sum, mean and max over several (not necessarily adjacent)
// axes in one launch, against a Go reference that walks the reduced axes in
// the same row-major order, so the bits must match.
func testReduceAxes[T float32 | float64](t TB, m *Mem) {
	rng := rand.New(rand.NewSource(26))
	name := "reduce_axes_" + suffix[T]()
	for _, c := range []struct {
		shape []int
		along []int
	}{{[]int{2, 3, 4}, []int{0, 2}}, {[]int{3, 5}, []int{0, 1}}, {[]int{2, 3, 4, 5}, []int{1, 3}}, {[]int{4, 3, 2}, []int{1}}, {[]int{2, 2, 3, 2, 2}, []int{0, 2, 4}}} {
		x := randn[T](rng, prod(c.shape), 2)
		l, rows, k := axesLayout(c.shape, c.along)
		for _, op := range []kernels.ReduceOp{kernels.ReduceSum, kernels.ReduceMean, kernels.ReduceMax} {
			y := newOut[T](m, int(rows))
			m.launch(name, kernels.Int(int64(op)), p(y), p(put(m, x)), kernels.Int(rows), kernels.Int(k),
				kernels.Int(int64(len(c.shape)-len(c.along))), kernels.LayoutArg(l))
			want := reduceRef(op, x, c.shape, c.along)
			compare(t, m, name+" "+op.String(), get[T](y), want, false)
			sameBits(t, m, name+" "+op.String(), get[T](y), want)
		}
	}
}

// axesLayout is the walk reduce_axes takes: kept axes, then reduced ones.
func axesLayout(shape, along []int) (l kernels.Layout, rows, k int64) {
	st := make([]int64, len(shape))
	acc := int64(1)
	for d := len(shape) - 1; d >= 0; d-- {
		st[d] = acc
		acc *= int64(shape[d])
	}
	rows, k = 1, 1
	var order []int
	for d := range shape {
		if !slices.Contains(along, d) {
			order = append(order, d)
			rows *= int64(shape[d])
		}
	}
	for _, d := range along {
		order = append(order, d)
		k *= int64(shape[d])
	}
	l.Rank = len(shape)
	for i, d := range order {
		l.Dim[i], l.A[i], l.Rep[i] = int64(shape[d]), st[d], 1
	}
	return l, rows, k
}

// reduceRef reduces x over along: each output element in row-major order of
// the kept axes, each folding its elements in row-major order of the reduced.
func reduceRef[T float32 | float64](op kernels.ReduceOp, x []T, shape, along []int) []T {
	idx := make([]int, len(shape))
	offset := func() int {
		o := 0
		for d := range shape {
			o = o*shape[d] + idx[d]
		}
		return o
	}
	var kept, red []int
	for d := range shape {
		if slices.Contains(along, d) {
			red = append(red, d)
		} else {
			kept = append(kept, d)
		}
	}
	// next advances idx over axes (last fastest); false when it wraps.
	next := func(axes []int) bool {
		for i := len(axes) - 1; i >= 0; i-- {
			d := axes[i]
			if idx[d]++; idx[d] < shape[d] {
				return true
			}
			idx[d] = 0
		}
		return false
	}
	var out []T
	for {
		var acc T
		n := 0
		for first := true; ; first = false {
			v := x[offset()]
			switch {
			case op == kernels.ReduceMax && first:
				acc = v
			case op == kernels.ReduceMax:
				acc = max(acc, v)
			default:
				acc += v
			}
			n++
			if !next(red) {
				break
			}
		}
		if op == kernels.ReduceMean {
			acc /= T(n)
		}
		out = append(out, acc)
		if !next(kept) {
			break
		}
	}
	return out
}
