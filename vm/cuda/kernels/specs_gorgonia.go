package kernels

// gorgoniaSpecs are the kernels added for gorgonia's own ops beyond the
// elementwise ones (issue 26): reductions over any set of axes.
func gorgoniaSpecs(d dtype) []*Spec {
	return append(reduceAxesSpecs(d), ctcSpecs(d)...)
}

// ctcSpecs are gorgonia's CTCLoss and its gradient: one thread per batch
// element (alpha, then beta and the gradient), one for the loss.
func ctcSpecs(d dtype) []*Spec {
	s := d.size
	B := arg("B")
	geo := []Param{i64("Tn"), i64("B"), i64("C"), i64("tdims"), i64("S")}
	all := func(c Call) int64 { return c.Int("Tn") * c.Int("B") * c.Int("C") }
	table := func(c Call) int64 { return c.Int("Tn") * c.Int("B") * (2*c.Int("S") + 1) }
	return []*Spec{
		{Name: "ctc_alpha_" + d.suffix, Mirrors: "gorgonia ctcLossOp's alpha recursion and per-element losses",
			Params: append([]Param{ptr(d.ptr, "nll"), ptr(d.ptr, "alpha"), in(d.ptr, "lp"), in(I64Ptr, "targets"), in(I64Ptr, "inLen"), in(I64Ptr, "tgtLen")}, geo...),
			shape:  perElement(B), cost: func(c Call) (int64, int64) { return s * (all(c) + table(c)), 8 * table(c) }},
		{Name: "ctc_reduce_" + d.suffix, Mirrors: "gorgonia ctcLossOp's reduction (sum, or mean over target lengths)",
			Params: []Param{ptr(d.ptr, "loss"), in(d.ptr, "nll"), in(I64Ptr, "tgtLen"), i64("B"), i32("mean")},
			shape:  perElement(func(Call) int64 { return 1 }), cost: func(c Call) (int64, int64) { return (s + 8) * c.Int("B"), 2 * c.Int("B") }},
		{Name: "ctc_grad_" + d.suffix, Mirrors: "gorgonia ctcLossDiffOp (beta recursion and the gradient)",
			Params: append([]Param{ptr(d.ptr, "grad"), ptr(d.ptr, "beta"), in(d.ptr, "alpha"), in(d.ptr, "nll"), in(d.ptr, "lp"),
				in(I64Ptr, "targets"), in(I64Ptr, "inLen"), in(I64Ptr, "tgtLen"), in(d.ptr, "gradOut")}, geo...),
			shape: perElement(B), cost: func(c Call) (int64, int64) { return s * (3*all(c) + 2*table(c)), 12 * table(c) }},
	}
}

func reduceAxesSpecs(d dtype) []*Spec {
	s := d.size
	return []*Spec{{Name: "reduce_axes_" + d.suffix, Mirrors: "gorgonia sumOp / maxOp over any set of axes, Mean (L: kept axes first, then the reduced ones)",
		Params: []Param{i32("op"), ptr(d.ptr, "out"), in(d.ptr, "x"), i64("rows"), i64("k"), i64("kept"), scalar(LayoutT, "L")},
		shape:  perElement(arg("rows")), cost: func(c Call) (int64, int64) {
			r := c.Int("rows")
			return s * (r*c.Int("k") + r), r * c.Int("k")
		}}}
}

// convertSpecs are gorgonia's dtConvOp (ConvType) kernels between a float
// type and Int (int64).
func convertSpecs() []*Spec {
	n := arg("n")
	var all []*Spec
	for _, d := range dtypes {
		cost := func(c Call) (int64, int64) { return (8 + d.size) * c.Int("n"), 0 }
		all = append(all,
			&Spec{Name: "convert_" + d.suffix + "_i64", Mirrors: "gorgonia dtConvOp " + d.suffix + " to Int (Go's int(x) on amd64)",
				Params: []Param{ptr(I64Ptr, "y"), in(d.ptr, "x"), i64("n")}, shape: perElement(n), cost: cost},
			&Spec{Name: "convert_i64_" + d.suffix, Mirrors: "gorgonia dtConvOp Int to " + d.suffix,
				Params: []Param{ptr(d.ptr, "y"), in(I64Ptr, "x"), i64("n")}, shape: perElement(n), cost: cost})
	}
	return all
}

// intSpecs are the kernels of gorgonia's ops on Int (int64), Int32 and
// Byte (uint8) tensors: elemBinOp's + - ⊙ with Go's wrap-around, ÷ as tensor's DivRecv
// (0 for a zero divisor), comparisons (same-type or bool results),
// MaxBetween and MinBetween (operator codes BinaryOp's; ^ is not planned:
// tensor refuses it on integers); Sum and Max over any axes; an Int fill.
func intSpecs() []*Spec {
	n := arg("n")
	var all []*Spec
	for _, d := range []struct {
		sfx, what string
		ptr       Type
		size      int64
	}{{"i64", "Int (and Int64)", I64Ptr, 8}, {"i32", "Int32", I32Ptr, 4}, {"byte", "Byte (Uint8)", U8Ptr, 1}} {
		cost := func(outSize int64) func(Call) (int64, int64) {
			return func(c Call) (int64, int64) {
				n, l := c.Int("n"), c.Layout()
				return n*outSize + (walked(l, l.A, n)+walked(l, l.B, n))*d.size, n
			}
		}
		all = append(all,
			&Spec{Name: "binary_" + d.sfx, Mirrors: "gorgonia elemBinOp on " + d.what + " tensors (+ - ⊙ ÷, comparisons with retSame, Max/MinBetween)",
				Params: []Param{i32("op"), ptr(d.ptr, "out"), in(d.ptr, "a"), in(d.ptr, "b"), i64("n"), scalar(LayoutT, "L")},
				shape:  perElement(n), cost: cost(d.size)},
			&Spec{Name: "compare_" + d.sfx, Mirrors: "gorgonia elemBinOp comparison of " + d.what + " tensors with a bool result",
				Params: []Param{i32("op"), ptr(U8Ptr, "out"), in(d.ptr, "a"), in(d.ptr, "b"), i64("n"), scalar(LayoutT, "L")},
				shape:  perElement(n), cost: cost(1)},
			&Spec{Name: "reduce_" + d.sfx, Mirrors: "gorgonia sumOp / maxOp of an " + d.what + " tensor over one run of axes (wrapping sums)",
				Params: []Param{i32("op"), ptr(d.ptr, "out"), in(d.ptr, "x"), i64("outer"), i64("k"), i64("inner")},
				shape:  perElement(rows), cost: func(c Call) (int64, int64) {
					r := rows(c)
					return d.size * (r*c.Int("k") + r), r * c.Int("k")
				}},
			&Spec{Name: "reduce_axes_" + d.sfx, Mirrors: "gorgonia sumOp / maxOp of an " + d.what + " tensor over any set of axes (wrapping sums)",
				Params: []Param{i32("op"), ptr(d.ptr, "out"), in(d.ptr, "x"), i64("rows"), i64("k"), i64("kept"), scalar(LayoutT, "L")},
				shape:  perElement(arg("rows")), cost: func(c Call) (int64, int64) {
					r := c.Int("rows")
					return d.size * (r*c.Int("k") + r), r * c.Int("k")
				}})
	}
	return append(all, &Spec{Name: "fill_i64", Mirrors: "gorgonia sizeOp of an Int operand (an Int constant)",
		Params: []Param{ptr(I64Ptr, "y"), i64("v"), i64("n")},
		shape:  perElement(n), cost: func(c Call) (int64, int64) { return 8 * c.Int("n"), 0 }})
}
