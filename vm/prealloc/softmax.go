package prealloc

import (
	"math"

	"github.com/chewxy/math32"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// tensor v0.9.24's softmax kernels start one goroutine per row (per lane
// in the kernels for an axis that is not the last), two heap objects
// each: at batch 64 that was a third of a training step's allocations.
// Their loops are rewritten here to run one row after another in the
// caller's goroutine. No row reads what another writes, so the order of
// the rows changes no bit; each row's arithmetic is tensor's, operation
// for operation. Where both operands of a sum or product are NaNs the
// hardware keeps its first operand's, and Go may compile a * b with
// either first, so addFirst and mulFirst pin the one tensor's compiled
// kernels keep on amd64 (read from their disassembly: the left operand,
// except in softMaxBInnerDim's y * (g - sum), which keeps g - sum's).
// Tensors on an engine other than
// tensor's StdEng, and dtypes the kernels do not take, go through the
// op's own UsePreallocDo as before.

// float is the element type of tensor's softmax kernels.
type float interface{ float32 | float64 }

// addFirst is a + b, a's NaN (quieted) when both are NaNs.
func addFirst[T float](a, b T) T {
	if a != a {
		return quiet(a)
	}
	return a + b
}

// mulFirst is a * b, a's NaN (quieted) when both are NaNs.
func mulFirst[T float](a, b T) T {
	if a != a {
		return quiet(a)
	}
	return a * b
}

// buildSoftmax runs softmaxOp's UsePreallocDo arithmetic without its
// goroutines.
func buildSoftmax(op gorgonia.Op) (Func, error) {
	axis, isLog, err := readSoftmax(op)
	if err != nil {
		return nil, err
	}
	fallback, err := zeroThenPrealloc(likeInput(0, true))(op)
	if err != nil {
		return nil, err
	}
	return func(out *tensor.Dense, inputs ...gorgonia.Value) error {
		if err := arity(inputs, 1); err != nil {
			return err
		}
		if err := likeInput(0, true)(op, out, inputs); err != nil {
			return err
		}
		x, _ := denseArg(inputs, 0)
		if !onStdEng(x) || x.Dims() == 0 {
			return fallback(out, inputs...)
		}
		// UsePreallocDo's choice of axis, then tensor's resolveAxis.
		s := x.Shape()
		a := s.Dims() - 1
		if s.IsColVec() || (s.IsVector() && !s.IsRowVec()) {
			a = 0
		}
		if axis != -1 {
			a = axis
		}
		k := splitAt(s, resolveAxis(a, s.Dims()))
		ob, _ := contiguousBytes(out)
		xb, _ := contiguousBytes(x)
		switch x.Dtype() {
		case tensor.Float32:
			softmaxRows(asSlice[float32](ob), asSlice[float32](xb), k, isLog, math32.Exp, math32.Log)
		case tensor.Float64:
			softmaxRows(asSlice[float64](ob), asSlice[float64](xb), k, isLog, math.Exp, math.Log)
		default:
			return fallback(out, inputs...) // Do's own error
		}
		return nil
	}, nil
}

// buildSoftmaxDiff runs softmaxDiffOp's UsePreallocDo arithmetic without
// its goroutines. Its inputs are x (unread), y = softmax(x) and y's
// gradient.
func buildSoftmaxDiff(op gorgonia.Op) (Func, error) {
	axis, isLog, err := readSoftmax(op)
	if err != nil {
		return nil, err
	}
	fallback, err := zeroThenPrealloc(likeInput(1, true))(op)
	if err != nil {
		return nil, err
	}
	return func(out *tensor.Dense, inputs ...gorgonia.Value) error {
		if err := arity(inputs, 3); err != nil {
			return err
		}
		if err := likeInput(1, true)(op, out, inputs); err != nil {
			return err
		}
		_, errX := denseArg(inputs, 0)
		y, _ := denseArg(inputs, 1)
		g, errG := denseArg(inputs, 2)
		if errX != nil || errG != nil || !onStdEng(y) || y.Dims() == 0 ||
			!y.Shape().Eq(g.Shape()) || y.Dtype() != g.Dtype() {
			return fallback(out, inputs...) // what Do does with these, errors included
		}
		// The diff passes the op's axis to tensor as it is (no vector rule).
		k := splitAt(y.Shape(), resolveAxis(axis, y.Dims()))
		ob, _ := contiguousBytes(out)
		yb, _ := contiguousBytes(y)
		gb, _ := contiguousBytes(g)
		switch y.Dtype() {
		case tensor.Float32:
			softmaxGradRows(asSlice[float32](ob), asSlice[float32](yb), asSlice[float32](gb), k, isLog, math32.Exp)
		case tensor.Float64:
			softmaxGradRows(asSlice[float64](ob), asSlice[float64](yb), asSlice[float64](gb), k, isLog, math.Exp)
		default:
			return fallback(out, inputs...)
		}
		return nil
	}, nil
}

// readSoftmax is a softmaxOp's (or the softmaxOp a softmaxDiffOp embeds)
// axis, -1 for the default, and whether it is the log-softmax.
func readSoftmax(op gorgonia.Op) (axis int, isLog bool, err error) {
	if axis, err = intField(op, "axis"); err != nil {
		return 0, false, err
	}
	isLog, err = boolField(op, "isLog")
	return axis, isLog, err
}

func onStdEng(t *tensor.Dense) bool {
	_, ok := t.Engine().(tensor.StdEng)
	return ok
}

// resolveAxis is tensor's: a negative axis counts from the end.
func resolveAxis(axis, dims int) int {
	res := axis % dims
	if (res < 0 && dims > 0) || (res > 0 && dims < 0) {
		return res + dims
	}
	return res
}

// softmaxAxis is a shape seen around the softmax's axis, as tensor's
// kernels see it.
type softmaxAxis struct {
	outer, dim, inner int  // elements before the axis, its length, elements after it
	last              bool // the axis is the last: tensor runs its LastDim kernels
}

func splitAt(s tensor.Shape, axis int) softmaxAxis {
	k := softmaxAxis{outer: 1, dim: s[axis], inner: 1, last: axis == s.Dims()-1}
	for _, d := range s[:axis] {
		k.outer *= d
	}
	for _, d := range s[axis+1:] {
		k.inner *= d
	}
	return k
}

// softmaxRows is tensor's softMaxLastDim or softMaxInnerDim kernel.
func softmaxRows[T float](out, x []T, k softmaxAxis, isLog bool, exp, log func(T) T) {
	if k.last {
		for ii := 0; ii < k.outer; ii++ {
			softmaxLastRow(out, x, ii, k.dim, isLog, exp, log)
		}
		return
	}
	for ii := 0; ii < k.inner*k.outer; ii++ {
		at := (ii/k.inner)*k.dim*k.inner + ii%k.inner
		softmaxLane(out[at:], x[at:], k.dim, k.inner, isLog, exp, log)
	}
}

// softmaxLastRow is the body of softMaxLastDim's goroutine for row ii.
// Every row starts its maximum from x[0], the first row's first element,
// and compares its own elements from the second on: tensor's, kept.
func softmaxLastRow[T float](out, x []T, ii, dim int, isLog bool, exp, log func(T) T) {
	maxInput := x[0]
	for j := 1; j < dim; j++ {
		i := ii*dim + j
		if x[i] > maxInput {
			maxInput = x[i]
		}
	}
	var sumExp T
	for j := 0; j < dim; j++ {
		i := ii*dim + j
		z := x[i] - maxInput
		e := exp(z)
		if isLog {
			out[i] = z
		} else {
			out[i] = e
		}
		sumExp = addFirst(sumExp, e)
	}
	if !isLog {
		sumExp = 1 / sumExp
	}
	for j := 0; j < dim; j++ {
		i := ii*dim + j
		if isLog {
			out[i] -= log(sumExp)
		} else {
			out[i] = mulFirst(out[i], sumExp)
		}
	}
}

// softmaxLane is the body of softMaxInnerDim's goroutine: one lane of
// dim elements, stride apart, from the start of in and out.
func softmaxLane[T float](out, in []T, dim, stride int, isLog bool, exp, log func(T) T) {
	maxInput := in[0]
	for j := 1; j < dim; j++ {
		i := j * stride
		if in[i] > maxInput {
			maxInput = in[i]
		}
	}
	var sumExp T
	for j := 0; j < dim; j++ {
		i := j * stride
		e := exp(in[i] - maxInput)
		if !isLog {
			out[i] = e
		}
		sumExp = addFirst(sumExp, e)
	}
	if isLog {
		sumExp = log(sumExp)
	} else {
		sumExp = 1 / sumExp
	}
	for j := 0; j < dim; j++ {
		i := j * stride
		if isLog {
			out[i] = in[i] - maxInput - sumExp
		} else {
			out[i] = mulFirst(out[i], sumExp)
		}
	}
}

// softmaxGradRows is tensor's softMaxBLastDim or softMaxBInnerDim kernel:
// dx from the forward's output y and its gradient g.
func softmaxGradRows[T float](dx, y, g []T, k softmaxAxis, isLog bool, exp func(T) T) {
	if k.last {
		for ii := 0; ii < k.outer; ii++ {
			softmaxGradLastRow(dx, y, g, ii, k.dim, isLog, exp)
		}
		return
	}
	for ii := 0; ii < k.inner*k.outer; ii++ {
		at := (ii/k.inner)*k.dim*k.inner + ii%k.inner
		softmaxGradLane(dx[at:], y[at:], g[at:], k.dim, k.inner, isLog, exp)
	}
}

// softmaxGradLastRow is the body of softMaxBLastDim's goroutine for row ii.
func softmaxGradLastRow[T float](dx, y, g []T, ii, dim int, isLog bool, exp func(T) T) {
	if isLog {
		sum := g[ii*dim]
		for j := 1; j < dim; j++ {
			i := ii*dim + j
			sum = addFirst(sum, g[i])
		}
		for j := 0; j < dim; j++ {
			i := ii*dim + j
			dx[i] = g[i] - mulFirst(exp(y[i]), sum)
		}
		return
	}
	var sum T
	for j := 0; j < dim; j++ {
		i := ii*dim + j
		sum = addFirst(sum, mulFirst(y[i], g[i]))
	}
	for j := 0; j < dim; j++ {
		i := ii*dim + j
		dx[i] = mulFirst(g[i]-sum, y[i])
	}
}

// softmaxGradLane is the body of softMaxBInnerDim's goroutine.
func softmaxGradLane[T float](dx, y, g []T, dim, stride int, isLog bool, exp func(T) T) {
	var sum T
	for j := 0; j < dim; j++ {
		i := j * stride
		if isLog {
			sum = addFirst(sum, g[i])
		} else {
			sum = addFirst(sum, mulFirst(g[i], y[i]))
		}
	}
	for j := 0; j < dim; j++ {
		i := j * stride
		if isLog {
			dx[i] = g[i] - mulFirst(exp(y[i]), sum)
		} else {
			dx[i] = mulFirst(g[i]-sum, y[i]) // tensor: y * (g - sum), compiled keeping g - sum's NaN
		}
	}
}
