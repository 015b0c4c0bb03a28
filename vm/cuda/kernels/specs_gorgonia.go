package kernels

// gorgoniaSpecs are the kernels added for gorgonia's own ops beyond the
// elementwise ones (issue 26): reductions over any set of axes.
func gorgoniaSpecs(d dtype) []*Spec {
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
