package prealloc

import (
	"fmt"
	"strings"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
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
		if alias == 1 && aT && bT && same && mirror != nil && !sameMemory(a, b) {
			// tensor's same-type comparisons copy a into the result and
			// compare that with b: with the result over b, b is gone
			// before it is read. b OP a computes the same bits and copies
			// b onto itself.
			var ks keepShape
			ks.save(out)
			res, err := mirror(b, a, tensor.WithReuse(out), tensor.AsSameType())
			ks.restore(out)
			if err != nil {
				return err
			}
			return settle(out, res)
		}
		return runPrealloc(pd, out, inputs)
	}, nil
}

func sameMemory(a, b *tensor.Dense) bool {
	return sameStart(a.Raw, b.Raw)
}
