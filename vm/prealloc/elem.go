package prealloc

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"unsafe"

	"github.com/chewxy/math32"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/blas"
)

// The elementwise ops are the ones the caller may run in place: out may be
// the very memory of one operand (with a shape of its own, same bytes).

// aliasOf says which input out's memory is (-1: none) and refuses partial
// overlaps, which no elementwise kernel survives.
func aliasOf(out *tensor.Dense, inputs []gorgonia.Value) (int, error) {
	ob, err := contiguousBytes(out)
	if err != nil {
		return -1, fmt.Errorf("out: %w", err)
	}
	alias := -1
	for i, in := range inputs {
		t, ok := in.(*tensor.Dense)
		if !ok {
			continue
		}
		l, err := denseLayout(t)
		if err != nil {
			return -1, fmt.Errorf("input %d: %w", i, err)
		}
		data := l.data[:l.maxByte()]
		if !overlap(ob, data) {
			continue
		}
		if !sameStart(ob, data) || !l.contiguous() || len(data) != len(ob) {
			return -1, fmt.Errorf("out partly overlaps input %d", i)
		}
		if alias < 0 {
			alias = i
		}
	}
	return alias, nil
}

func buildElemUnary(op gorgonia.Op) (Func, error) {
	ud, ok := op.(gorgonia.UnsafeDoer)
	if !ok {
		return nil, fmt.Errorf("%T has no UnsafeDo", op)
	}
	return func(out *tensor.Dense, inputs ...gorgonia.Value) error {
		if err := arity(inputs, 1); err != nil {
			return err
		}
		if _, ok := inputs[0].(gorgonia.Scalar); ok {
			return errScalar
		}
		x, err := denseArg(inputs, 0)
		if err != nil {
			return err
		}
		if _, err := aliasOf(out, inputs); err != nil {
			return err
		}
		// Applying f to a copy of x in place is what Do does to the clone
		// it makes; when out is x there is nothing to copy.
		if err := copyDenseInto(out, x); err != nil {
			return err
		}
		res, err := ud.UnsafeDo(out)
		if err != nil {
			return err
		}
		return settle(out, res)
	}, nil
}

// mirrored gives, for a comparison, the one with swapped operands that is
// true exactly when it is (IEEE comparisons are false on NaN either way).
var mirrored = map[string]func(a, b interface{}, opts ...tensor.FuncOpt) (tensor.Tensor, error){
	">":  tensor.Lt,
	"<":  tensor.Gt,
	">=": tensor.Lte,
	"<=": tensor.Gte,
	"==": tensor.ElEq,
	"!=": tensor.ElNe,
}

// binOpSymbol is the operator and retSame flag of an elemBinOp, from its
// String ("> true").
func binOpSymbol(op gorgonia.Op) (sym string, same bool, err error) {
	f := strings.Fields(fmt.Sprint(op))
	if len(f) != 2 || (f[1] != "true" && f[1] != "false") {
		return "", false, fmt.Errorf("unexpected elemBinOp %q", fmt.Sprint(op))
	}
	return f[0], f[1] == "true", nil
}

func buildElemBin(op gorgonia.Op) (Func, error) {
	pd, err := preallocDoer(op)
	if err != nil {
		return nil, err
	}
	sym, same, err := binOpSymbol(op)
	if err != nil {
		return nil, err
	}
	mirror := mirrored[sym]
	_, arith := arithOps[sym]
	return func(out *tensor.Dense, inputs ...gorgonia.Value) error {
		if err := arity(inputs, 2); err != nil {
			return err
		}
		alias, err := aliasOf(out, inputs)
		if err != nil {
			return err
		}
		a, aT := inputs[0].(*tensor.Dense)
		b, bT := inputs[1].(*tensor.Dense)
		switch {
		case !aT && !bT:
			return errScalar
		case arith && bT && isFloat(b.Dtype()) && (!aT || sym == "÷" || sym == "^"):
			// Do's kernels here are tensor's Vec* (vecf32/vecf64), which
			// UsePreallocDo's *Recv and *SV kernels do not match: Div
			// gives +Inf for every zero divisor, Pow squares and cubes
			// by multiplying (NaN signs and payloads differ from
			// math.Pow's).
			return vecKernel(sym, out, inputs[0], b)
		case alias == 1 && aT && bT && same && mirror != nil && !sameMemory(a, b):
			// tensor's same-type comparisons copy a into the result and
			// compare that with b: with the result over b, b is gone
			// before it is read. b OP' a computes the same bits.
			var ks keepShape
			ks.save(out)
			res, err := mirror(b, a, tensor.WithReuse(out), tensor.AsSameType())
			ks.restore(out)
			if err != nil {
				return err
			}
			return settle(out, res)
		case sym == "+" && alias <= 0 && aT && bT && addVV(out, a, b):
			return nil
		case aT && bT && vvArith(sym, out, a, b):
			return nil
		case arith && aT && !bT && vsArith(sym, out, a, inputs[1]):
			return nil
		}
		return runPrealloc(pd, out, inputs)
	}, nil
}

// addVV is UsePreallocDo of a + b for two contiguous float tensors of out's shape and dtype,
// with out a's memory (alias 0) or neither's: tensor's AddRecv, recv[i] = a[i] + b[i], through
// blas.Add (dst[i] = dst[i] + src[i] in AVX with dst first, the operand order of a[i] + b[i], so
// even NaN payloads are the same) over out holding a. Out over b alone would need b + a (the
// other payload where both are NaN) and is left to tensor, as is everything else: it reports
// whether it did the sum.
func addVV(out, a, b *tensor.Dense) bool {
	dt := a.Dtype()
	if (dt != tensor.Float32 && dt != tensor.Float64) || b.Dtype() != dt || out.Dtype() != dt ||
		!a.Shape().Eq(b.Shape()) || !out.Shape().Eq(a.Shape()) {
		return false
	}
	ob, ab, bb, ok := sameSizeBytes(out, a, b)
	if !ok {
		return false
	}
	if !sameStart(ob, ab) {
		copy(ob, ab)
	}
	if dt == tensor.Float32 {
		blas.Add(elemsOf[float32](ob), elemsOf[float32](bb))
	} else {
		blas.Add(elemsOf[float64](ob), elemsOf[float64](bb))
	}
	return true
}

// sameSizeBytes are the memory of out, a and b where the three are contiguous and one size.
func sameSizeBytes(out, a, b *tensor.Dense) (ob, ab, bb []byte, ok bool) {
	ab, errA := contiguousBytes(a)
	bb, errB := contiguousBytes(b)
	ob, errO := contiguousBytes(out)
	ok = errA == nil && errB == nil && errO == nil && len(ab) == len(ob) && len(bb) == len(ob)
	return ob, ab, bb, ok
}

// vvArith is Do of a + b, a - b or a ⊙ b for two contiguous float tensors of out's shape and
// dtype: tensor's vecf32/vecf64 Add, Sub and Mul on a clone of a, a[i] = a[i] op b[i], with a's
// NaN kept where both are NaNs (addFirst, mulFirst: the operand tensor's compiled loops keep on
// amd64). UsePreallocDo gives the same numbers through tensor's *Recv kernels, but boxes its
// options and operands on every call. Each element is read before it is written, so out may
// be a's or b's memory. It reports whether it did the operation.
func vvArith(sym string, out, a, b *tensor.Dense) bool {
	if sym != "+" && sym != "-" && sym != "⊙" {
		return false
	}
	dt := a.Dtype()
	if !isFloat(dt) || b.Dtype() != dt || out.Dtype() != dt ||
		!slices.Equal(a.Shape(), b.Shape()) || !slices.Equal(out.Shape(), a.Shape()) {
		return false
	}
	ob, ab, bb, ok := sameSizeBytes(out, a, b)
	if !ok {
		return false
	}
	if dt == tensor.Float32 {
		vvApply(sym, elemsOf[float32](ob), elemsOf[float32](ab), elemsOf[float32](bb))
	} else {
		vvApply(sym, elemsOf[float64](ob), elemsOf[float64](ab), elemsOf[float64](bb))
	}
	return true
}

func vvApply[T float32 | float64](sym string, out, a, b []T) {
	a, b = a[:len(out)], b[:len(out)]
	switch sym {
	case "+":
		for i := range out {
			out[i] = addFirst(a[i], b[i])
		}
	case "-":
		for i := range out {
			out[i] = a[i] - b[i]
		}
	default:
		for i := range out {
			out[i] = mulFirst(a[i], b[i])
		}
	}
}

// vsArith is Do of a OP s for a contiguous float tensor a and a scalar s of its dtype, OP one
// of + - ⊙ ÷ ^: tensor's MulScalar and kin on a clone of a, whose kernel is chosen by the
// clone's length: one element goes through the vecf32/vecf64 kernels (÷ gives +Inf for a zero
// divisor, ^ squares by multiplying: vecApply), more through the *VS loops (a[i] OP s, IEEE
// division, math.Pow), a's NaN kept where both are NaNs. UsePreallocDo gives the same numbers
// but boxes the scalar and its options on every call. Each element is read before it is
// written, so out may be a's memory. It reports whether it did the operation.
func vsArith(sym string, out, a *tensor.Dense, s gorgonia.Value) bool {
	dt := a.Dtype()
	if !isFloat(dt) || out.Dtype() != dt || s.Dtype() != dt || !slices.Equal(out.Shape(), a.Shape()) {
		return false
	}
	if _, ok := s.(gorgonia.Scalar); !ok {
		return false
	}
	sl, err := valueLayout(s)
	if err != nil || len(sl.data) != int(dt.Size()) {
		return false
	}
	ab, errA := contiguousBytes(a)
	ob, errO := contiguousBytes(out)
	if errA != nil || errO != nil || len(ab) != len(ob) || len(ab) == 0 || len(ab) != len(a.Raw) {
		return false
	}
	if dt == tensor.Float32 {
		return vsApply(sym, elemsOf[float32](ob), elemsOf[float32](ab), elemsOf[float32](sl.data), math32.Pow)
	}
	return vsApply(sym, elemsOf[float64](ob), elemsOf[float64](ab), elemsOf[float64](sl.data), math.Pow)
}

func vsApply[T float32 | float64](sym string, out, a, s []T, pow func(x, y T) T) bool {
	if len(a) == 1 {
		return vecApply(sym, out, a, s, false, pow) == nil
	}
	a, v := a[:len(out)], s[0]
	switch sym {
	case "+":
		for i := range out {
			out[i] = addFirst(a[i], v)
		}
	case "-":
		for i := range out {
			out[i] = a[i] - v
		}
	case "⊙":
		for i := range out {
			out[i] = mulFirst(a[i], v)
		}
	case "÷":
		for i := range out {
			out[i] = a[i] / v
		}
	case "^":
		for i := range out {
			out[i] = pow(a[i], v)
		}
	default:
		return false
	}
	return true
}

// elemsOf is b's elements.
func elemsOf[T float32 | float64](b []byte) []T {
	var zero T
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/int(unsafe.Sizeof(zero)))
}

// arithOps are gorgonia's arithmetic operator symbols.
var arithOps = map[string]struct{}{"+": {}, "-": {}, "⊙": {}, "÷": {}, "^": {}}

// vecKernel computes a OP b as Do does when b is a tensor: Do fills a
// clone with a (if a is a scalar) and applies tensor's Vec kernel, the
// vecf32/vecf64 function, elementwise in place. Each element is read
// before it is written, so out may be a or b.
func vecKernel(sym string, out *tensor.Dense, a gorgonia.Value, b *tensor.Dense) error {
	dt := b.Dtype()
	bb, err := contiguousBytes(b)
	if err != nil {
		return err
	}
	n := b.Shape().TotalSize()
	ob, err := outBytes(out, dt, n)
	if err != nil {
		return err
	}
	var ab []byte
	scalar := false
	switch av := a.(type) {
	case *tensor.Dense:
		if av.Dtype() != dt || av.Shape().TotalSize() != n || !av.Shape().Eq(b.Shape()) {
			return fmt.Errorf("operands %v %v and %v %v", av.Dtype(), av.Shape(), dt, b.Shape())
		}
		if ab, err = contiguousBytes(av); err != nil {
			return err
		}
	case gorgonia.Scalar:
		l, err := valueLayout(av)
		if err != nil {
			return err
		}
		if av.Dtype() != dt {
			return fmt.Errorf("operands %v and %v", av.Dtype(), dt)
		}
		ab, scalar = l.data, true
	default:
		return fmt.Errorf("operand of type %T", a)
	}
	switch dt {
	case tensor.Float64:
		return vecApply(sym, asSlice[float64](ob), asSlice[float64](ab), asSlice[float64](bb), scalar, math.Pow)
	case tensor.Float32:
		return vecApply(sym, asSlice[float32](ob), asSlice[float32](ab), asSlice[float32](bb), scalar, math32.Pow)
	}
	return fmt.Errorf("%s of %v", sym, dt)
}

func vecApply[T float32 | float64](sym string, out, a, b []T, scalar bool, pow func(x, y T) T) error {
	at := func(i int) T {
		if scalar {
			return a[0]
		}
		return a[i]
	}
	switch sym {
	case "+":
		for i := range out {
			out[i] = at(i) + b[i]
		}
	case "-":
		for i := range out {
			out[i] = at(i) - b[i]
		}
	case "⊙":
		for i := range out {
			out[i] = at(i) * b[i]
		}
	case "÷": // vecf64.Div
		inf := T(math.Inf(1))
		for i := range out {
			if b[i] == 0 {
				out[i] = inf
				continue
			}
			out[i] = at(i) / b[i]
		}
	case "^": // vecf64.Pow
		for i := range out {
			v := at(i)
			switch b[i] {
			case 0:
				out[i] = 1
			case 1:
				out[i] = v
			case 2:
				out[i] = v * v
			case 3:
				out[i] = v * v * v
			default:
				out[i] = pow(v, b[i])
			}
		}
	default:
		return fmt.Errorf("operator %s", sym)
	}
	return nil
}

func isFloat(dt tensor.Dtype) bool { return dt == tensor.Float32 || dt == tensor.Float64 }

func sameMemory(a, b *tensor.Dense) bool {
	return sameStart(a.Raw, b.Raw)
}
