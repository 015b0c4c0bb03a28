package prealloc

import (
	"fmt"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Ops that only move elements. Any copy that puts the same bits in the
// same places equals Do, so these are plain strided copies over views of
// the operands' memory.

// rowMajor is a contiguous layout over b with the given shape.
func rowMajor(b []byte, es int, shape []int, strides *[maxDims]int) layout {
	return layout{data: b, es: es, shape: shape, strides: rowMajorStrides(shape, strides[:len(shape)])}
}

func buildTranspose(op gorgonia.Op) (Func, error) {
	pattern, err := intsField(op, "pattern")
	if err != nil {
		return nil, err
	}
	if len(pattern) > maxDims {
		return nil, fmt.Errorf("transpose of %d dimensions", len(pattern))
	}
	seen := make([]bool, len(pattern))
	for _, p := range pattern {
		if p < 0 || p >= len(pattern) || seen[p] {
			return nil, fmt.Errorf("transpose pattern %v is not a permutation", pattern)
		}
		seen[p] = true
	}
	return func(out *tensor.Dense, inputs ...gorgonia.Value) error {
		if err := arity(inputs, 1); err != nil {
			return err
		}
		x, err := denseArg(inputs, 0)
		if err != nil {
			return err
		}
		xl, err := denseLayout(x)
		if err != nil {
			return err
		}
		if len(xl.shape) != len(pattern) {
			return fmt.Errorf("input of shape %v for transpose pattern %v", x.Shape(), pattern)
		}
		ob, err := outBytes(out, x.Dtype(), xl.size())
		if err != nil {
			return err
		}
		// Output axis i runs along input axis pattern[i].
		var shp, str, ost [maxDims]int
		for i, p := range pattern {
			shp[i] = xl.shape[p]
			str[i] = xl.strides[p]
		}
		n := len(pattern)
		src := layout{data: xl.data, es: xl.es, shape: shp[:n], strides: str[:n]}
		return copyLayout(rowMajor(ob, xl.es, shp[:n], &ost), src)
	}, nil
}

func buildConcat(op gorgonia.Op) (Func, error) {
	axis, err := intField(op, "axis")
	if err != nil {
		return nil, err
	}
	return func(out *tensor.Dense, inputs ...gorgonia.Value) error {
		if len(inputs) == 0 {
			return fmt.Errorf("no inputs")
		}
		first, err := denseArg(inputs, 0)
		if err != nil {
			return err
		}
		if len(inputs) == 1 {
			return copyDenseInto(out, first) // Do returns its only input
		}
		fs := first.Shape()
		if axis < 0 || axis >= len(fs) {
			return fmt.Errorf("concat along axis %d of shape %v", axis, fs)
		}
		total := 0
		for i := range inputs {
			t, err := denseArg(inputs, i)
			if err != nil {
				return err
			}
			s := t.Shape()
			if t.Dtype() != first.Dtype() || len(s) != len(fs) {
				return fmt.Errorf("cannot concat %v %v with %v %v", t.Dtype(), s, first.Dtype(), fs)
			}
			for d := range s {
				if d != axis && s[d] != fs[d] {
					return fmt.Errorf("cannot concat shape %v with %v along axis %d", s, fs, axis)
				}
			}
			total += s[axis]
		}
		var oshp, ost [maxDims]int
		n := copy(oshp[:], fs)
		oshp[axis] = total
		size := 1
		for _, d := range oshp[:n] {
			size *= d
		}
		ob, err := outBytes(out, first.Dtype(), size)
		if err != nil {
			return err
		}
		es := int(first.Dtype().Size())
		dst := rowMajor(ob, es, oshp[:n], &ost)
		at := 0
		for i := range inputs {
			t := inputs[i].(*tensor.Dense)
			tl, err := denseLayout(t)
			if err != nil {
				return err
			}
			if overlap(ob, tl.data[:tl.maxByte()]) {
				return fmt.Errorf("out overlaps input %d", i)
			}
			// Input i fills out[..., at:at+len, ...] along the axis.
			block := layout{data: dst.data[at*dst.strides[axis]*es:], es: es, shape: tl.shape, strides: dst.strides}
			if err := copyLayout(block, tl); err != nil {
				return err
			}
			at += tl.shape[axis]
		}
		return nil
	}, nil
}

// copyRange copies the elements of x in [start, end) along axis along (the plain slice
// s: step 1, within the axis) into out, in row-major order, as the copy of Do's view would:
// the same elements in the same order, without building the view (tensor's Slice makes a
// header and clones shapes and strides, a handful of heap allocations a call). It reports
// false for any other slice, which then goes through tensor's own Slice.
func copyRange(out, x *tensor.Dense, along int, s tensor.Slice, all bool) (bool, error) {
	if all || s == nil || s.Step() != 1 {
		return false, nil
	}
	xl, err := denseLayout(x)
	if err != nil || along < 0 || along >= len(xl.shape) || xl.es <= 0 {
		return false, nil
	}
	start, end := s.Start(), s.End()
	if start < 0 || end > xl.shape[along] || start >= end {
		return false, nil
	}
	var shp, str, ost [maxDims]int
	n := copy(shp[:], xl.shape)
	copy(str[:], xl.strides)
	shp[along] = end - start
	view := layout{data: xl.data[start*xl.strides[along]*xl.es:], es: xl.es, shape: shp[:n], strides: str[:n]}
	ob, err := outBytes(out, x.Dtype(), view.size())
	if err != nil {
		return true, err
	}
	if overlap(ob, xl.data) {
		return true, fmt.Errorf("out overlaps its input")
	}
	dst := layout{data: ob, es: xl.es, shape: view.shape, strides: rowMajorStrides(view.shape, ost[:n])}
	return true, copyLayout(dst, view)
}

// slicer is what *sliceOp tells of itself.
type slicer interface {
	IsSlice() tensor.Slice
}

func buildSlice(op gorgonia.Op) (Func, error) {
	along, err := intField(op, "along")
	if err != nil {
		return nil, err
	}
	sl, ok := op.(slicer)
	if !ok {
		return nil, fmt.Errorf("%T does not tell its slice", op)
	}
	asSlice, ok := op.(tensor.Slice)
	if !ok {
		return nil, fmt.Errorf("%T is not a tensor.Slice", op)
	}
	s := sl.IsSlice()
	all := s == nil || s.End() <= s.Start()
	return func(out *tensor.Dense, inputs ...gorgonia.Value) error {
		if err := arity(inputs, 1); err != nil {
			return err
		}
		x, err := denseArg(inputs, 0)
		if err != nil {
			return err
		}
		if done, err := copyRange(out, x, along, s, all); done {
			return err
		}
		// The same slicing call as Do's, so the same view (or error).
		var buf [maxDims]tensor.Slice
		slices := buf[:x.Dims()]
		if !all {
			if along < 0 || along >= len(slices) {
				return fmt.Errorf("slice along axis %d of shape %v", along, x.Shape())
			}
			slices[along] = asSlice
		}
		v, err := x.Slice(slices...)
		if err != nil {
			return err
		}
		vd, ok := v.(*tensor.Dense)
		if !ok {
			return fmt.Errorf("slice of %T", v)
		}
		if vd.IsScalar() {
			return errScalar
		}
		return copyDenseInto(out, vd)
	}, nil
}

func buildReshape(op gorgonia.Op) (Func, error) {
	return func(out *tensor.Dense, inputs ...gorgonia.Value) error {
		if err := arity(inputs, 1); err != nil {
			return err
		}
		return copyValueInto(out, inputs[0])
	}, nil
}

func buildIdentity(op gorgonia.Op) (Func, error) {
	return buildReshape(op)
}

// copyValueInto copies a tensor's elements in row-major order, or a
// scalar, into out.
func copyValueInto(out *tensor.Dense, v gorgonia.Value) error {
	if t, ok := v.(*tensor.Dense); ok {
		return copyDenseInto(out, t)
	}
	if _, ok := v.(gorgonia.Scalar); !ok {
		return fmt.Errorf("input is %T", v)
	}
	l, err := valueLayout(v)
	if err != nil {
		return err
	}
	ob, err := outBytes(out, v.Dtype(), 1)
	if err != nil {
		return err
	}
	copy(ob, l.data)
	return nil
}

func buildUpsample(op gorgonia.Op) (Func, error) {
	stride, err := intField(op, "stride")
	if err != nil {
		return nil, err
	}
	if stride < 0 {
		return nil, fmt.Errorf("upsample stride %d", stride)
	}
	return func(out *tensor.Dense, inputs ...gorgonia.Value) error {
		if err := arity(inputs, 1); err != nil {
			return err
		}
		x, err := denseArg(inputs, 0)
		if err != nil {
			return err
		}
		xl, err := denseLayout(x)
		if err != nil {
			return err
		}
		if len(xl.shape) != 4 {
			return fmt.Errorf("upsample input of shape %v, want 4 dimensions", x.Shape())
		}
		f := stride + 1
		b, c, h, w := xl.shape[0], xl.shape[1], xl.shape[2], xl.shape[3]
		oh, ow := h*f, w*f
		ob, err := outBytes(out, x.Dtype(), b*c*oh*ow)
		if err != nil {
			return err
		}
		if overlap(ob, xl.data[:xl.maxByte()]) {
			return fmt.Errorf("out overlaps the input")
		}
		// out[b, c, h*f+i, w*f+j] = x[b, c, h, w]: one strided copy of x
		// per (i, j).
		es := xl.es
		ostr := [4]int{c * oh * ow, oh * ow, f * ow, f}
		for i := 0; i < f; i++ {
			for j := 0; j < f; j++ {
				dst := layout{data: ob[(i*ow+j)*es:], es: es, shape: xl.shape, strides: ostr[:]}
				if err := copyLayout(dst, xl); err != nil {
					return err
				}
			}
		}
		return nil
	}, nil
}

// diagFlatOp's Do puts the input's backing slice on the diagonal of an
// n×n zero matrix (tensor.AsDenseDiag).
func buildDiagFlat(op gorgonia.Op) (Func, error) {
	return func(out *tensor.Dense, inputs ...gorgonia.Value) error {
		if err := arity(inputs, 1); err != nil {
			return err
		}
		x, err := denseArg(inputs, 0)
		if err != nil {
			return err
		}
		xb, err := contiguousBytes(x)
		if err != nil {
			return err // Do reads the raw backing of a view: not reproduced
		}
		n := x.Shape().TotalSize()
		ob, err := outBytes(out, x.Dtype(), n*n)
		if err != nil {
			return err
		}
		if overlap(ob, xb) {
			return fmt.Errorf("out overlaps the input")
		}
		es := int(x.Dtype().Size())
		zero(ob)
		for i := 0; i < n; i++ {
			copy(ob[(i*n+i)*es:(i*n+i+1)*es], xb[i*es:(i+1)*es])
		}
		return nil
	}, nil
}

// byIndicesOp's Do is tensor's SelectByIndices, whose copy loop is
// reproduced as written: for an axis that is neither the first nor the
// last it steps through the input by twice the axis stride, which is
// right only when that axis has length 2.
func buildByIndices(op gorgonia.Op) (Func, error) {
	axis, err := intField(op, "axis")
	if err != nil {
		return nil, err
	}
	return func(out *tensor.Dense, inputs ...gorgonia.Value) error {
		if err := arity(inputs, 2); err != nil {
			return err
		}
		x, err := denseArg(inputs, 0)
		if err != nil {
			return err
		}
		idxT, err := denseArg(inputs, 1)
		if err != nil {
			return err
		}
		if idxT.Dtype() != tensor.Int || !idxT.Shape().IsVectorLike() {
			return fmt.Errorf("indices must be a vector of Int, got %v %v", idxT.Dtype(), idxT.Shape())
		}
		xs := x.Shape()
		if axis >= xs.Dims() {
			return fmt.Errorf("cannot select by indices on axis %d of shape %v", axis, xs)
		}
		if xs.IsScalarEquiv() {
			// Do slices out the one element the first index names.
			var buf [maxDims]tensor.Slice
			slices := buf[:xs.Dims()]
			slices[axis] = sliceAt(idxT.Ints()[0])
			v, err := x.Slice(slices...)
			if err != nil {
				return err
			}
			return copyDenseInto(out, v.(*tensor.Dense))
		}
		xb, err := contiguousBytes(x)
		if err != nil {
			return err // Do panics on views ("not yet implemented")
		}
		if _, err := contiguousBytes(idxT); err != nil {
			return err
		}
		indices := idxT.Ints()
		var rshape, xst, rst [maxDims]int
		n := copy(rshape[:], xs)
		rshape[axis] = len(indices)
		size := 1
		for _, d := range rshape[:n] {
			size *= d
		}
		ob, err := outBytes(out, x.Dtype(), size)
		if err != nil {
			return err
		}
		if overlap(ob, xb) {
			return fmt.Errorf("out overlaps the input")
		}
		rowMajorStrides(xs, xst[:n])
		rowMajorStrides(rshape[:n], rst[:n])
		zero(ob) // Do's result starts as a fresh tensor
		es := int(x.Dtype().Size())
		cp := func(ds, de, ss, se int) {
			copy(ob[ds*es:de*es], xb[ss*es:se*es])
		}
		outer := 1
		for _, d := range xs[:axis] {
			outer *= d
		}
		axStride, retStride := xst[axis], rst[axis]
		start0 := func(idx int) int {
			if idx >= xs[axis] {
				return 0 // tensor.Ltoi fails and Do ignores it
			}
			return idx * axStride
		}
		if axis == n-1 {
			prev := max(axis-1, 0)
			prevStride, retPrevStride := xst[prev], rst[prev]
			for i, idx := range indices {
				start, dstStart := start0(idx), i*retStride
				for o := 0; o < outer; o++ {
					cp(dstStart, dstStart+retStride, start, start+axStride)
					start += prevStride
					dstStart += retPrevStride
				}
			}
			return nil
		}
		outerRetStride := rst[axis] * 2
		if axis > 0 {
			outerRetStride = rst[axis-1]
		}
		for i, idx := range indices {
			start, dstStart := start0(idx), i*retStride
			for o := 0; o < outer; o++ {
				end, dstEnd := start+axStride, dstStart+retStride
				cp(dstStart, dstEnd, start, end)
				start = end + axStride
				dstStart = dstEnd + (outerRetStride - retStride)
			}
		}
		return nil
	}, nil
}

// sliceAt is tensor's single-index slice (ss), which is unexported.
type sliceAt int

func (s sliceAt) Start() int { return int(s) }
func (s sliceAt) End() int   { return int(s) + 1 }
func (s sliceAt) Step() int  { return 0 }

// tensordotOp's Do (tensor.Contract) transposes copies of both operands so
// that the contracted axes are a's last and b's first, then multiplies
// them as matrices. When they already are, the copies are the operands
// themselves and the product can go straight into out; otherwise the
// transposed copies are scratch the size of the operands, and For
// declines the op.
func buildTensordot(op gorgonia.Op) (Func, error) {
	aAxes, err := intsField(op, "aAxes")
	if err != nil {
		return nil, err
	}
	bAxes, err := intsField(op, "bAxes")
	if err != nil {
		return nil, err
	}
	aDims, err := intField(op, "aDims")
	if err != nil {
		return nil, err
	}
	if len(aAxes) != len(bAxes) || len(aAxes) == 0 || len(aAxes) > aDims {
		return nil, fmt.Errorf("tensordot over axes %v and %v", aAxes, bAxes)
	}
	for i := range aAxes {
		if aAxes[i] != aDims-len(aAxes)+i || bAxes[i] != i {
			return nil, fmt.Errorf("tensordot over axes %v and %v transposes its operands", aAxes, bAxes)
		}
	}
	return func(out *tensor.Dense, inputs ...gorgonia.Value) error {
		if err := arity(inputs, 2); err != nil {
			return err
		}
		a, err := denseArg(inputs, 0)
		if err != nil {
			return err
		}
		b, err := denseArg(inputs, 1)
		if err != nil {
			return err
		}
		as, bs := a.Shape(), b.Shape()
		na := len(aAxes)
		if as.Dims() != aDims || bs.Dims() < na {
			return fmt.Errorf("tensordot of shapes %v and %v over axes %v and %v", as, bs, aAxes, bAxes)
		}
		n2 := 1
		for i := range aAxes {
			if as[aAxes[i]] != bs[bAxes[i]] {
				return fmt.Errorf("tensordot of shapes %v and %v over axes %v and %v", as, bs, aAxes, bAxes)
			}
			n2 *= as[aAxes[i]]
		}
		if n2 == 0 || a.Dtype() != b.Dtype() {
			return fmt.Errorf("tensordot of %v %v and %v %v", a.Dtype(), as, b.Dtype(), bs)
		}
		ab, err := contiguousBytes(a)
		if err != nil {
			return err
		}
		bb, err := contiguousBytes(b)
		if err != nil {
			return err
		}
		m, n := as.TotalSize()/n2, bs.TotalSize()/n2
		ob, err := outBytes(out, a.Dtype(), m*n)
		if err != nil {
			return err
		}
		if overlap(ob, ab) || overlap(ob, bb) {
			return fmt.Errorf("out overlaps an operand")
		}
		// Headers over the operands' memory, shaped as Do's reshaped copies.
		av, bv := a.ShallowClone(), b.ShallowClone()
		if err := av.Reshape(m, n2); err != nil {
			return err
		}
		if err := bv.Reshape(n2, n); err != nil {
			return err
		}
		var ks keepShape
		ks.save(out)
		res, err := tensor.Dot(av, bv, tensor.WithReuse(out))
		ks.restore(out)
		if err != nil {
			return err
		}
		return settle(out, res)
	}, nil
}

// byIndicesOpDiffOp's Do is tensor.ByIndicesB into a fresh zeroed tensor,
// which it accumulates the gradient into; given out, zeroed, it does the
// same there.
func buildByIndicesDiff(op gorgonia.Op) (Func, error) {
	axis, err := intField(op, "axis")
	if err != nil {
		return nil, err
	}
	return func(out *tensor.Dense, inputs ...gorgonia.Value) error {
		if err := arity(inputs, 3); err != nil {
			return err
		}
		x, err := denseArg(inputs, 0)
		if err != nil {
			return err
		}
		grad, err := denseArg(inputs, 1)
		if err != nil {
			return err
		}
		idx, err := denseArg(inputs, 2)
		if err != nil {
			return err
		}
		if idx.Dtype() != tensor.Int {
			return fmt.Errorf("indices are %v, not Int", idx.Dtype())
		}
		if grad.Dtype() != x.Dtype() {
			return fmt.Errorf("gradient is %v, input %v", grad.Dtype(), x.Dtype())
		}
		ob, err := outBytes(out, x.Dtype(), x.Shape().TotalSize())
		if err != nil {
			return err
		}
		for _, t := range []*tensor.Dense{x, grad, idx} {
			b, err := contiguousBytes(t)
			if err != nil {
				return err
			}
			if overlap(ob, b) {
				return fmt.Errorf("out overlaps an input")
			}
		}
		zero(ob)
		var ks keepShape
		ks.save(out)
		res, err := tensor.ByIndicesB(x, grad, idx, axis, tensor.WithReuse(out))
		ks.restore(out)
		if err != nil {
			return err
		}
		return settle(out, res)
	}, nil
}
