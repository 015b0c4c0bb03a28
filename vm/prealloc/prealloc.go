package prealloc

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Func computes an op's result into out: a *tensor.Dense over caller-owned
// memory with the node's shape and dtype. out's bytes hold garbage on entry.
// The result equals op.Do(inputs...) bit for bit, and the op's side effects
// (hidden state such as batch-norm's saved statistics, an RNG's advance) are
// the same as Do's.
type Func func(out *tensor.Dense, inputs ...gorgonia.Value) error

// For returns how to run op into caller-owned memory, or false when there is
// no such path (the caller then runs Do and copies).
func For(op gorgonia.Op) (f Func, ok bool) {
	if op == nil {
		return nil, false
	}
	// The table describes gorgonia.org/gorgonia's ops, not ones elsewhere
	// that happen to share a name.
	t := reflect.TypeOf(op)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.PkgPath() != "gorgonia.org/gorgonia" {
		return nil, false
	}
	name := fmt.Sprintf("%T", op)
	s, known := strategies[name]
	if !known || s.build == nil {
		return nil, false
	}
	defer func() {
		// Reading a gorgonia op that is not what this package expects
		// must decline, not crash the caller.
		if recover() != nil {
			f, ok = nil, false
		}
	}()
	fn, err := s.build(op)
	if err != nil || fn == nil {
		return nil, false
	}
	return guard(name, fn), true
}

// Strategy says how For runs one gorgonia op type.
type Strategy struct {
	Op  string // the op's Go type as %T prints it, e.g. "*gorgonia.softmaxOp"
	How string // how For computes it into out, or why it declines
	OK  bool   // whether For returns a Func for it (possibly only for some instances)
}

// Strategies lists every gorgonia v0.9.18 op type with a Do method, sorted
// by type name.
func Strategies() []Strategy {
	out := make([]Strategy, 0, len(strategies))
	for name, s := range strategies {
		out = append(out, Strategy{Op: name, How: s.how, OK: s.build != nil})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Op < out[j].Op })
	return out
}

type strategy struct {
	how   string
	build func(op gorgonia.Op) (Func, error) // nil: always declined
}

// strategies is keyed by %T of the op. The How texts are the package
// documentation's table.
var strategies = map[string]strategy{
	// The op's own UsePreallocDo writes the whole result whatever out holds.
	"gorgonia.linAlgBinOp":    {"the GEMM call of tensor's MatMul made here, with its arguments, for a matrix product of plain row-major operands; own UsePreallocDo for the other products and operands (vector dot products are scalars: not handled)", buildLinAlg},
	"gorgonia.im2colOp":       {"own UsePreallocDo", usePrealloc(checkIm2Col)},
	"gorgonia.col2imOp":       {"own UsePreallocDo", usePrealloc(checkCol2Im)},
	"*gorgonia.maxPoolOp":     {"own UsePreallocDo (also fills the op's argmax mask, as Do does)", usePrealloc(nil)},
	"*gorgonia.maxPoolDiffOp": {"own UsePreallocDo", usePrealloc(nil)},
	"*gorgonia.repeatOp":      {"own UsePreallocDo, replayed on out's bytes (tensor's repeat copier and its stride choices) for plain float tensors on tensor's engine", buildRepeat},
	"gorgonia.minBetween":     {"own UsePreallocDo", usePrealloc(nil)},
	"gorgonia.maxBetween":     {"own UsePreallocDo", usePrealloc(nil)},

	// Do is UsePreallocDo on a freshly zeroed tensor: zero out, then the same.
	"gorgonia.sliceIncrOp":    {"zero out, own UsePreallocDo", buildSliceIncr},
	"*gorgonia.avgPoolOp":     {"zero out, own UsePreallocDo (also fills the op's mask, as Do does)", zeroThenPrealloc(likeInput(0, false))},
	"*gorgonia.avgPoolDiffOp": {"zero out, own UsePreallocDo", zeroThenPrealloc(likeInput(0, true))},
	"*gorgonia.GroupNormOp":   {"zero out, own UsePreallocDo (also sets the op's saved mean and rstd, as Do does); gorgonia allocates small scratch vectors per 128 elements inside", zeroThenPrealloc(checkGroupNorm)},
	"*gorgonia.ctcLossDiffOp": {"zero out, own UsePreallocDo (reads the forward's saved alphas, as Do does); gorgonia allocates scratch inside", zeroThenPrealloc(checkCTCLossDiff)},
	"*gorgonia.dtConvOp":      {"zero out, own UsePreallocDo", zeroThenPrealloc(checkConvType)},

	// Do is UsePreallocDo on a clone of the first input: copy it, then the same.
	"*gorgonia.BatchNormOp":     {"copy x into out, own UsePreallocDo (which normalises out in place and updates the saved and running statistics, as Do does)", buildBatchNorm},
	"*gorgonia.batchnormDiffOp": {"copy x into out, own UsePreallocDo", buildBatchNormDiff},
	"*gorgonia.dropoutDiffOp":   {"copy x into out, own UsePreallocDo", copyThenPrealloc(allLike)},
	"*gorgonia.groupNormDiffOp": {"copy x into out, own UsePreallocDo (gorgonia logs the whole output gradient from inside, as Do does)", copyThenPrealloc(checkGroupNorm)},

	// Elementwise: out may be an operand's own memory.
	"gorgonia.elemBinOp": {"blas.Add for + of two float tensors of one shape, out over a or its own memory (a first, as tensor's kernel); Do's vecf32/vecf64 kernels rewritten for the other + and for - and ⊙ of two float tensors of one shape and for arithmetic of a float tensor with a scalar right operand (the left operand's NaN kept; tensor's vec kernels for a one-element tensor, its *VS loops otherwise)," +
		" where UsePreallocDo boxes its options and operands every call, and for ÷ and ^ of two tensors and for any arithmetic with a scalar left operand, where UsePreallocDo's kernels give other results; own UsePreallocDo for the other two-tensor +, -, ⊙ (other dtypes or shapes), the comparisons (a same-type comparison written over its right operand runs mirrored: b < a for a > b) and other operands", buildElemBin},
	"gorgonia.elemUnaryOp": {"copy x into out (nothing to copy when out is x), own UnsafeDo on out", buildElemUnary},

	// Data movement: every element copied as bits, no arithmetic.
	"gorgonia.transposeOp":          {"strided copy through the permuted strides", buildTranspose},
	"gorgonia.concatOp":             {"each input copied into its block of out", buildConcat},
	"*gorgonia.sliceOp":             {"a range of step 1 within the axis copied into out from a layout made here; any other slice: the input's tensor.Slice view copied into out", buildSlice},
	"gorgonia.reshapeOp":            {"copy in row-major order", buildReshape},
	"gorgonia.Iop":                  {"copy", buildIdentity},
	"*gorgonia.upsampleOp":          {"each input element copied to its (s+1)x(s+1) block", buildUpsample},
	"gorgonia.diagFlatOp":           {"zero out, input on the diagonal", buildDiagFlat},
	"*gorgonia.byIndicesOp":         {"tensor's selection loop (its stride arithmetic included) copying into out", buildByIndices},
	"*gorgonia.byIndicesOpDiffOp":   {"zero out, tensor.ByIndicesB with out as its reuse tensor", buildByIndicesDiff},
	"gorgonia.tensordotOp":          {"matrix product into out, when neither operand needs transposing (the contracted axes are a's last and b's first, in order); declined otherwise: Do transposes copies of both operands", buildTensordot},
	"*gorgonia.globalAveragePoolOp": {"Do's loop (sum over h then w, one divide) into out", buildGlobalAvgPool},

	// Arithmetic reproduced here, in Do's order.
	"gorgonia.sumOp":           {"tensor v0.9.24's reduction kernels replayed axis by axis without intermediates, its middle-axis indexing bug included", buildSum},
	"*gorgonia.maxOp":          {"as sumOp, with the max kernels", buildMax},
	"*gorgonia.upsampleDiffOp": {"Do's loop (float64 sums in Do's order) into out", buildUpsampleDiff},
	"*gorgonia.softmaxOp":      {"tensor's softmax kernels run row after row in the caller's goroutine, without the goroutine per row (its first-row maximum included); zero out and own UsePreallocDo off tensor's StdEng", buildSoftmax},
	"*gorgonia.softmaxDiffOp":  {"tensor's softmax gradient kernels run row after row in the caller's goroutine; zero out and own UsePreallocDo off tensor's StdEng", buildSoftmaxDiff},
	"*gorgonia.dropoutOp": {"Do's loop into zeroed out, drawing from the op's own generator (read from its unexported field); copy of x when not training or probability 0. " +
		"Its UsePreallocDo always panics in v0.9.18", buildDropout},

	// Declined.
	"*gorgonia.sparsemaxOp":     {"declined: Do builds its result in slices it allocates itself", nil},
	"*gorgonia.sparsemaxDiffOp": {"declined: Do is a chain of allocating tensor calls", nil},
	"*gorgonia.yoloOp":          {"declined: Do allocates and keeps training state", nil},
	"*gorgonia.clampOp":         {"declined: Do returns nil (no result at all)", nil},
	"gorgonia.randomOp":         {"declined: Do seeds a new generator from the clock on every call, so no two runs agree", nil},
	"gorgonia.atOp":             {"declined: the result is a scalar", nil},
	"gorgonia.sizeOp":           {"declined: the result is a scalar", nil},
	"*gorgonia.ctcLossOp":       {"declined: the result is a scalar", nil},

	"*gorgonia.ExternalOp":    {"declined: a wrapper for external devices", nil},
	"gorgonia.constantScalar": {"declined: a constant is a leaf", nil},
	"gorgonia.constantTensor": {"declined: a constant is a leaf", nil},
	"gorgonia.letOp":          {"declined: a statement, no value", nil},
	"gorgonia.readOp":         {"declined: a statement, no value", nil},
	"gorgonia.devTrans":       {"declined: a device transfer (Do panics)", nil},
}

// guard turns every failure, panics in gorgonia's code included, into an
// error naming the op.
func guard(name string, f Func) Func {
	return func(out *tensor.Dense, inputs ...gorgonia.Value) (err error) {
		if out == nil {
			return fmt.Errorf("prealloc %s: nil output tensor", name)
		}
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("prealloc %s: %v", name, r)
			}
		}()
		if err = f(out, inputs...); err != nil {
			return fmt.Errorf("prealloc %s: %w", name, err)
		}
		return nil
	}
}

var errScalar = errors.New("the result is a scalar: run Do")

// outBytes checks that out is a plain row-major tensor of dtype dt with n
// elements and returns its bytes.
func outBytes(out *tensor.Dense, dt tensor.Dtype, n int) ([]byte, error) {
	if out.Dtype() != dt {
		return nil, fmt.Errorf("out is %v, the result is %v", out.Dtype(), dt)
	}
	b, err := contiguousBytes(out)
	if err != nil {
		return nil, fmt.Errorf("out: %w", err)
	}
	if want := n * int(dt.Size()); len(b) != want {
		return nil, fmt.Errorf("out has %d elements, the result %d", len(b)/int(dt.Size()), n)
	}
	return b, nil
}

// denseArg is inputs[i] as a *tensor.Dense.
func denseArg(inputs []gorgonia.Value, i int) (*tensor.Dense, error) {
	if i >= len(inputs) {
		return nil, fmt.Errorf("%d inputs, want at least %d", len(inputs), i+1)
	}
	t, ok := inputs[i].(*tensor.Dense)
	if !ok {
		return nil, fmt.Errorf("input %d is %T, not a *tensor.Dense", i, inputs[i])
	}
	return t, nil
}

func arity(inputs []gorgonia.Value, n int) error {
	if len(inputs) != n {
		return fmt.Errorf("%d inputs, want %d", len(inputs), n)
	}
	return nil
}

func zero(b []byte) {
	clear(b)
}

// copyDenseInto puts x's elements, in row-major order, into out, which
// must have x's dtype and element count. Nothing is copied when out is x's
// own memory (the in-place case).
func copyDenseInto(out *tensor.Dense, x *tensor.Dense) error {
	xl, err := denseLayout(x)
	if err != nil {
		return err
	}
	ob, err := outBytes(out, x.Dtype(), xl.size())
	if err != nil {
		return err
	}
	if xl.contiguous() && sameStart(ob, xl.data) {
		return nil
	}
	if overlap(ob, xl.data[:min(len(xl.data), xl.maxByte())]) {
		return fmt.Errorf("out partly overlaps its input")
	}
	var st [maxDims]int
	dst := layout{data: ob, es: xl.es, shape: xl.shape, strides: rowMajorStrides(xl.shape, st[:len(xl.shape)])}
	return copyLayout(dst, xl)
}

// maxByte is one past the last byte the layout names.
func (l layout) maxByte() int {
	last := 0
	for i, d := range l.shape {
		if d == 0 {
			return 0
		}
		last += (d - 1) * l.strides[i]
	}
	return (last + 1) * l.es
}

// settle makes sure the op's result is in out: ops hand back out itself,
// but should one return something else its elements are copied in.
func settle(out *tensor.Dense, res gorgonia.Value) error {
	if res == nil {
		return fmt.Errorf("the op returned no value")
	}
	if t, ok := res.(*tensor.Dense); ok {
		if t == out {
			return nil
		}
		return copyDenseInto(out, t)
	}
	l, err := valueLayout(res)
	if err != nil {
		return err
	}
	ob, err := outBytes(out, res.Dtype(), 1)
	if err != nil {
		return err
	}
	copy(ob, l.data)
	return nil
}

// keepShape restores out's shape after calls that reshape their reuse
// tensor to the operand's shape (tensor's handleFuncOpts does).
type keepShape struct {
	buf [maxDims]int
	n   int
}

func (k *keepShape) save(out *tensor.Dense) {
	k.n = copy(k.buf[:], out.Shape())
}

func (k *keepShape) restore(out *tensor.Dense) {
	if !out.Shape().Eq(tensor.Shape(k.buf[:k.n])) || out.Dims() != k.n {
		// A copy: handing Reshape k's own array would put every keepShape on the heap,
		// reshaped or not.
		_ = out.Reshape(slices.Clone(k.buf[:k.n])...)
	}
}
