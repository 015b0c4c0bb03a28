package prealloc

import (
	"fmt"
	"reflect"
	"slices"
	"sync/atomic"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Ops whose own UsePreallocDo does the work. What differs between them is
// what out must hold first for the result to equal Do's: nothing (the
// method overwrites every element), zeros (Do hands it a fresh tensor), or
// a copy of the first input (Do hands it a clone).

func preallocDoer(op gorgonia.Op) (gorgonia.UsePreallocDoer, error) {
	pd, ok := op.(gorgonia.UsePreallocDoer)
	if !ok {
		return nil, fmt.Errorf("%T has no UsePreallocDo", op)
	}
	return pd, nil
}

// runPrealloc calls UsePreallocDo and leaves out with the shape it came
// with: tensor's reuse handling reshapes the tensor it writes to.
func runPrealloc(pd gorgonia.UsePreallocDoer, out *tensor.Dense, inputs []gorgonia.Value) error {
	var ks keepShape
	ks.save(out)
	res, err := pd.UsePreallocDo(out, inputs...)
	ks.restore(out)
	if err != nil {
		return err
	}
	return settle(out, res)
}

// usePrealloc is for ops whose UsePreallocDo overwrites every element of
// out. check, if not nil, vets the call first.
func usePrealloc(check func(op gorgonia.Op, out *tensor.Dense, inputs []gorgonia.Value) error) func(gorgonia.Op) (Func, error) {
	return func(op gorgonia.Op) (Func, error) {
		pd, err := preallocDoer(op)
		if err != nil {
			return nil, err
		}
		var sized sizeMemo
		return func(out *tensor.Dense, inputs ...gorgonia.Value) error {
			if err := arity(inputs, op.Arity()); err != nil {
				return err
			}
			if _, err := contiguousBytes(out); err != nil {
				return fmt.Errorf("out: %w", err)
			}
			if len(inputs) > 0 && inputs[0] != nil && out.Dtype() != inputs[0].Dtype() {
				return fmt.Errorf("out is %v, the input %v", out.Dtype(), inputs[0].Dtype())
			}
			if !sized.holds(out, inputs) {
				if err := inferredSize(op, out, inputs); err != nil {
					return err
				}
				sized.remember(out, inputs)
			}
			if check != nil {
				if err := check(op, out, inputs); err != nil {
					return err
				}
			}
			return runPrealloc(pd, out, inputs)
		}, nil
	}
}

// sizeMemo remembers the operand and output shapes inferredSize last
// passed, which a training step gives every time: gorgonia's InferShape and
// the DimSizer list for it were allocations per call. A stored entry is
// never changed, and entries are swapped atomically.
type sizeMemo struct{ last atomic.Pointer[sizedShapes] }

type sizedShapes struct {
	out tensor.Shape
	in  []tensor.Shape // nil for a scalar operand
}

func (m *sizeMemo) holds(out *tensor.Dense, inputs []gorgonia.Value) bool {
	c := m.last.Load()
	if c == nil || len(c.in) != len(inputs) || !slices.Equal(c.out, out.Shape()) {
		return false
	}
	for i, in := range inputs {
		if in == nil {
			return false
		}
		if _, ok := in.(gorgonia.Scalar); ok {
			if c.in[i] != nil {
				return false
			}
			continue
		}
		if c.in[i] == nil || !slices.Equal(c.in[i], in.Shape()) {
			return false
		}
	}
	return true
}

func (m *sizeMemo) remember(out *tensor.Dense, inputs []gorgonia.Value) {
	c := &sizedShapes{out: slices.Clone(out.Shape()), in: make([]tensor.Shape, len(inputs))}
	for i, in := range inputs {
		if _, ok := in.(gorgonia.Scalar); !ok {
			c.in[i] = append(tensor.Shape{}, in.Shape()...)
		}
	}
	m.last.Store(c)
}

// inferredSize compares out with the shape the op infers from the
// inputs' shapes, where it can infer one from shapes alone.
func inferredSize(op gorgonia.Op, out *tensor.Dense, inputs []gorgonia.Value) error {
	ds := make([]gorgonia.DimSizer, len(inputs))
	for i, in := range inputs {
		if in == nil {
			return fmt.Errorf("input %d is nil", i)
		}
		if _, ok := in.(gorgonia.Scalar); ok {
			return nil // repeatOp's count: its shape says nothing
		}
		ds[i] = in.Shape()
	}
	want, err := op.InferShape(ds...)
	if err != nil {
		return err
	}
	if want.TotalSize() != out.Shape().TotalSize() {
		return fmt.Errorf("out has shape %v, the result %v", out.Shape(), want)
	}
	return nil
}

// checkConvType: dtConvOp's result has the op's target dtype and its
// recorded shape.
func checkConvType(op gorgonia.Op, out *tensor.Dense, inputs []gorgonia.Value) error {
	p, typ, err := fieldAddr(op, "to", reflect.Struct)
	if err != nil {
		return err
	}
	if typ != reflect.TypeOf(tensor.Dtype{}) {
		return fmt.Errorf("%T.to is a %v", op, typ)
	}
	if to := *(*tensor.Dtype)(p); out.Dtype() != to {
		return fmt.Errorf("out is %v, the conversion gives %v", out.Dtype(), to)
	}
	return inferredSize(op, out, inputs)
}

// im2colGeometry is an im2colOp's (or col2imOp's embedded one) kernel,
// padding, stride and dilation.
type im2colGeometry struct {
	h, w, padH, padW, strideH, strideW, dilationH, dilationW int
}

func readIm2col(op gorgonia.Op) (g im2colGeometry, err error) {
	for _, f := range []struct {
		name string
		to   *int
	}{{"h", &g.h}, {"w", &g.w}, {"padH", &g.padH}, {"padW", &g.padW}, {"strideH", &g.strideH},
		{"strideW", &g.strideW}, {"dilationH", &g.dilationH}, {"dilationW", &g.dilationW}} {
		if *f.to, err = intField(op, f.name); err != nil {
			return g, err
		}
	}
	if g.strideH <= 0 || g.strideW <= 0 {
		return g, fmt.Errorf("im2col strides %d, %d", g.strideH, g.strideW)
	}
	return g, nil
}

// cols is im2col's output shape for an image batch of shape (b, c, h, w).
func (g im2colGeometry) cols(b, c, h, w int) tensor.Shape {
	rh := (h+2*g.padH-(g.dilationH*(g.h-1)+1))/g.strideH + 1
	rw := (w+2*g.padW-(g.dilationW*(g.w-1)+1))/g.strideW + 1
	return tensor.Shape{b, rh, rw, c * g.w * g.h}
}

// checkIm2Col: im2col's kernel walks out by its strides and the image by
// its shape, one goroutine per image, so both must be exactly as the op
// expects.
func checkIm2Col(op gorgonia.Op, out *tensor.Dense, inputs []gorgonia.Value) error {
	if err := likeInput(0, false)(op, out, inputs); err != nil {
		return err
	}
	x, _ := denseArg(inputs, 0)
	g, err := readIm2col(op)
	if err != nil {
		return err
	}
	s := x.Shape()
	if s.Dims() != 4 {
		return fmt.Errorf("im2col of shape %v, want (b, c, h, w)", s)
	}
	if want := g.cols(s[0], s[1], s[2], s[3]); !sameShape(out.Shape(), want) {
		return fmt.Errorf("out has shape %v, im2col of %v gives %v", out.Shape(), s, want)
	}
	return nil
}

// checkCol2Im: col2im's kernel takes the image's size from the op and the
// columns' from its input, one goroutine per image.
func checkCol2Im(op gorgonia.Op, out *tensor.Dense, inputs []gorgonia.Value) error {
	if err := likeInput(0, false)(op, out, inputs); err != nil {
		return err
	}
	x, _ := denseArg(inputs, 0)
	g, err := readIm2col(op)
	if err != nil {
		return err
	}
	var im [4]int
	for i, name := range []string{"unpaddedB", "unpaddedC", "unpaddedH", "unpaddedW"} {
		if im[i], err = intField(op, name); err != nil {
			return err
		}
	}
	if !sameShape(out.Shape(), im[:]) {
		return fmt.Errorf("out has shape %v, col2im gives %v", out.Shape(), im)
	}
	if want := g.cols(im[0], im[1], im[2], im[3]); !sameShape(x.Shape(), want) {
		return fmt.Errorf("columns of shape %v, want %v", x.Shape(), want)
	}
	return nil
}

func sameShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// zeroThenPrealloc is for ops whose Do is UsePreallocDo on a fresh zeroed
// tensor. check, if not nil, vets the call first: several of these
// kernels index out from goroutines, where a panic cannot be recovered.
func zeroThenPrealloc(check func(op gorgonia.Op, out *tensor.Dense, inputs []gorgonia.Value) error) func(gorgonia.Op) (Func, error) {
	return func(op gorgonia.Op) (Func, error) {
		pd, err := preallocDoer(op)
		if err != nil {
			return nil, err
		}
		return func(out *tensor.Dense, inputs ...gorgonia.Value) error {
			if err := arity(inputs, op.Arity()); err != nil {
				return err
			}
			ob, err := contiguousBytes(out)
			if err != nil {
				return fmt.Errorf("out: %w", err)
			}
			if check != nil {
				if err := check(op, out, inputs); err != nil {
					return err
				}
			}
			zero(ob)
			return runPrealloc(pd, out, inputs)
		}, nil
	}
}

// likeInput requires out to have input i's dtype and, if sameSize, its
// element count; inputs must be contiguous tensors.
func likeInput(i int, sameSize bool) func(gorgonia.Op, *tensor.Dense, []gorgonia.Value) error {
	return func(_ gorgonia.Op, out *tensor.Dense, inputs []gorgonia.Value) error {
		x, err := denseArg(inputs, i)
		if err != nil {
			return err
		}
		if x.Dtype() != out.Dtype() {
			return fmt.Errorf("out is %v, input %d is %v", out.Dtype(), i, x.Dtype())
		}
		if sameSize && x.Shape().TotalSize() != out.Shape().TotalSize() {
			return fmt.Errorf("out has shape %v, input %d %v", out.Shape(), i, x.Shape())
		}
		for j, in := range inputs {
			if t, ok := in.(*tensor.Dense); ok {
				if _, err := contiguousBytes(t); err != nil {
					return fmt.Errorf("input %d: %w", j, err)
				}
			}
		}
		return nil
	}
}

// copyThenPrealloc is for ops whose Do is UsePreallocDo on a clone of the
// first input.
func copyThenPrealloc(check func(op gorgonia.Op, out *tensor.Dense, inputs []gorgonia.Value) error) func(gorgonia.Op) (Func, error) {
	return func(op gorgonia.Op) (Func, error) {
		pd, err := preallocDoer(op)
		if err != nil {
			return nil, err
		}
		return func(out *tensor.Dense, inputs ...gorgonia.Value) error {
			if err := arity(inputs, op.Arity()); err != nil {
				return err
			}
			x, err := denseArg(inputs, 0)
			if err != nil {
				return err
			}
			if err := check(op, out, inputs); err != nil {
				return err
			}
			if err := copyDenseInto(out, x); err != nil {
				return err
			}
			return runPrealloc(pd, out, inputs)
		}, nil
	}
}

// allLike requires every input to be a contiguous tensor of out's dtype
// and element count.
func allLike(op gorgonia.Op, out *tensor.Dense, inputs []gorgonia.Value) error {
	for i := range inputs {
		if err := likeInput(i, true)(op, out, inputs); err != nil {
			return err
		}
	}
	return nil
}

// sliceIncrOp's Do adds the increment into a zeroed tensor shaped like
// its first input, which it reads nothing else from.
func buildSliceIncr(op gorgonia.Op) (Func, error) {
	pd, err := preallocDoer(op)
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
		if !x.Shape().Eq(out.Shape()) || x.Dims() != out.Dims() {
			return fmt.Errorf("out has shape %v, the input %v", out.Shape(), x.Shape())
		}
		ob, err := outBytes(out, x.Dtype(), x.Shape().TotalSize())
		if err != nil {
			return err
		}
		zero(ob)
		return runPrealloc(pd, out, inputs)
	}, nil
}

// statsOp is what batch-norm ops expose of their per-channel state.
type statsOp interface {
	Stats() (runningMean, runningVariance tensor.Tensor)
}

// checkBatchNormInput refuses inputs gorgonia's batch-norm kernels would
// index past their per-channel state with: they do so from goroutines,
// where a panic takes the whole process down.
func checkBatchNormInput(op gorgonia.Op, x *tensor.Dense) error {
	so, ok := op.(statsOp)
	if !ok {
		return fmt.Errorf("%T has no Stats", op)
	}
	mean, _ := so.Stats()
	if mean == nil {
		return fmt.Errorf("batch-norm op has no statistics")
	}
	if x.Dims() < 2 {
		return fmt.Errorf("batch-norm input of shape %v: want (batch, channels, ...)", x.Shape())
	}
	if c := x.Shape()[1]; c != mean.Shape().TotalSize() {
		return fmt.Errorf("input has %d channels, the op %d", c, mean.Shape().TotalSize())
	}
	if x.Dtype() != mean.Dtype() {
		return fmt.Errorf("input is %v, the op's statistics %v", x.Dtype(), mean.Dtype())
	}
	if x.Dtype() != tensor.Float32 && x.Dtype() != tensor.Float64 {
		return fmt.Errorf("batch-norm of %v", x.Dtype())
	}
	if _, err := contiguousBytes(x); err != nil {
		return err
	}
	return nil
}

// BatchNormOp.Do clones x and normalises the clone in place.
func buildBatchNorm(op gorgonia.Op) (Func, error) {
	pd, err := preallocDoer(op)
	if err != nil {
		return nil, err
	}
	if _, ok := op.(statsOp); !ok {
		return nil, fmt.Errorf("%T has no Stats", op)
	}
	return func(out *tensor.Dense, inputs ...gorgonia.Value) error {
		if err := arity(inputs, 1); err != nil {
			return err
		}
		x, err := denseArg(inputs, 0)
		if err != nil {
			return err
		}
		if err := checkBatchNormInput(op, x); err != nil {
			return err
		}
		if err := copyDenseInto(out, x); err != nil {
			return err
		}
		return runPrealloc(pd, out, inputs)
	}, nil
}

// batchnormDiffOp.Do clones x and overwrites the clone with dx.
func buildBatchNormDiff(op gorgonia.Op) (Func, error) {
	pd, err := preallocDoer(op)
	if err != nil {
		return nil, err
	}
	if _, ok := op.(statsOp); !ok {
		return nil, fmt.Errorf("%T has no Stats", op)
	}
	return func(out *tensor.Dense, inputs ...gorgonia.Value) error {
		if err := arity(inputs, 2); err != nil {
			return err
		}
		x, err := denseArg(inputs, 0)
		if err != nil {
			return err
		}
		dy, err := denseArg(inputs, 1)
		if err != nil {
			return err
		}
		if err := checkBatchNormInput(op, x); err != nil {
			return err
		}
		if dy.Dtype() != x.Dtype() || dy.Shape().TotalSize() != x.Shape().TotalSize() {
			return fmt.Errorf("gradient %v %v does not match input %v %v", dy.Dtype(), dy.Shape(), x.Dtype(), x.Shape())
		}
		if _, err := contiguousBytes(dy); err != nil {
			return err
		}
		if err := copyDenseInto(out, x); err != nil {
			return err
		}
		return runPrealloc(pd, out, inputs)
	}, nil
}

var denseType = reflect.TypeOf((*tensor.Dense)(nil))

// denseField reads an unexported *tensor.Dense field of a pointer op.
func denseField(op any, name string) (*tensor.Dense, error) {
	p, typ, err := fieldAddr(op, name, reflect.Pointer)
	if err != nil {
		return nil, err
	}
	if typ != denseType {
		return nil, fmt.Errorf("%T.%s is a %v", op, name, typ)
	}
	return *(**tensor.Dense)(p), nil
}

// checkGroupNorm vets GroupNorm and its diff: both walk batch*groups
// goroutines that index the op's saved mean and rstd.
func checkGroupNorm(op gorgonia.Op, out *tensor.Dense, inputs []gorgonia.Value) error {
	if err := likeInput(0, true)(op, out, inputs); err != nil {
		return err
	}
	x, _ := denseArg(inputs, 0)
	if x.Dtype() != tensor.Float32 && x.Dtype() != tensor.Float64 {
		return fmt.Errorf("group norm of %v", x.Dtype())
	}
	groups, err := intField(op, "numGroups")
	if err != nil {
		return err
	}
	mean, err := denseField(op, "mean")
	if err != nil {
		return err
	}
	rstd, err := denseField(op, "rstd")
	if err != nil {
		return err
	}
	if mean == nil || rstd == nil {
		return fmt.Errorf("group norm op has no statistics")
	}
	if x.Dims() < 2 || groups <= 0 {
		return fmt.Errorf("group norm of shape %v in %d groups", x.Shape(), groups)
	}
	n := x.Shape()[0] * groups
	if mean.Dtype() != x.Dtype() || rstd.Dtype() != x.Dtype() || mean.Shape().TotalSize() < n || rstd.Shape().TotalSize() < n {
		return fmt.Errorf("group norm input %v %v does not match the op's statistics", x.Dtype(), x.Shape())
	}
	for i := 1; i < len(inputs); i++ {
		t, err := denseArg(inputs, i)
		if err != nil {
			return err
		}
		if t.Dtype() != x.Dtype() || t.Shape().TotalSize() != x.Shape().TotalSize() {
			return fmt.Errorf("input %d is %v %v, input 0 %v %v", i, t.Dtype(), t.Shape(), x.Dtype(), x.Shape())
		}
	}
	return nil
}

// checkCTCLossDiff vets the gradient of CTC loss, whose kernel indexes the
// forward's saved alphas per batch entry from goroutines.
func checkCTCLossDiff(op gorgonia.Op, out *tensor.Dense, inputs []gorgonia.Value) error {
	if err := arity(inputs, 5); err != nil {
		return err
	}
	if err := likeInput(0, true)(op, out, inputs); err != nil {
		return err
	}
	lp, _ := denseArg(inputs, 0)
	var targets, inLens, tgtLens *tensor.Dense
	var err error
	if targets, err = denseArg(inputs, 1); err != nil {
		return err
	}
	if inLens, err = denseArg(inputs, 2); err != nil {
		return err
	}
	if tgtLens, err = denseArg(inputs, 3); err != nil {
		return err
	}
	switch inputs[4].(type) {
	case *gorgonia.F64:
		if lp.Dtype() != tensor.Float64 {
			return fmt.Errorf("float64 gradient for %v log-probabilities", lp.Dtype())
		}
	case *gorgonia.F32:
		if lp.Dtype() != tensor.Float32 {
			return fmt.Errorf("float32 gradient for %v log-probabilities", lp.Dtype())
		}
	default:
		return fmt.Errorf("output gradient is %T, want a float scalar", inputs[4])
	}
	if lp.Dims() != 3 {
		return fmt.Errorf("log-probabilities of shape %v, want (time, batch, labels)", lp.Shape())
	}
	for _, t := range []*tensor.Dense{targets, inLens, tgtLens} {
		if t.Dtype() != tensor.Int {
			return fmt.Errorf("targets and lengths must be Int, got %v", t.Dtype())
		}
		if _, err := contiguousBytes(t); err != nil {
			return err
		}
	}
	alpha, err := denseField(op, "logAlpha")
	if err != nil {
		return err
	}
	nll, err := denseField(op, "negLogLikelihood")
	if err != nil {
		return err
	}
	if alpha == nil || nll == nil {
		return fmt.Errorf("CTC loss gradient before its forward pass")
	}
	T, B, L := lp.Shape()[0], lp.Shape()[1], lp.Shape()[2]
	as := alpha.Shape()
	if alpha.Dtype() != lp.Dtype() || nll.Dtype() != lp.Dtype() || len(as) != 3 || as[0] != B || as[1] != T || nll.Shape().TotalSize() < B {
		return fmt.Errorf("log-probabilities %v do not match the forward pass's %v", lp.Shape(), as)
	}
	in, tl, tg := inLens.Ints(), tgtLens.Ints(), targets.Ints()
	if len(in) < B || len(tl) < B {
		return fmt.Errorf("%d input and %d target lengths for a batch of %d", len(in), len(tl), B)
	}
	pos := 0
	for b := 0; b < B; b++ {
		if in[b] < 0 || in[b] > T || tl[b] < 0 || 2*tl[b]+1 > as[2] {
			return fmt.Errorf("batch entry %d: input length %d, target length %d out of range", b, in[b], tl[b])
		}
		var row []int
		switch targets.Dims() {
		case 1:
			if pos+tl[b] > len(tg) {
				return fmt.Errorf("targets too short for the target lengths")
			}
			row = tg[pos : pos+tl[b]]
			pos += tl[b]
		case 2:
			w := targets.Shape()[1]
			if targets.Shape()[0] < B || tl[b] > w {
				return fmt.Errorf("targets of shape %v for a batch of %d", targets.Shape(), B)
			}
			row = tg[b*w : b*w+tl[b]]
		default:
			return fmt.Errorf("targets of shape %v", targets.Shape())
		}
		for _, c := range row {
			if c < 0 || c >= L {
				return fmt.Errorf("target label %d outside [0,%d)", c, L)
			}
		}
	}
	return nil
}
