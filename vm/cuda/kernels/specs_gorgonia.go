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

// convertSpecs are gorgonia's dtConvOp (ConvType) kernels between the two
// float types.
func convertSpecs() []*Spec {
	n := arg("n")
	return []*Spec{
		{Name: "convert_f32_f64", Mirrors: "gorgonia dtConvOp float32 to float64",
			Params: []Param{ptr(F64Ptr, "y"), in(F32Ptr, "x"), i64("n")},
			shape:  perElement(n), cost: func(c Call) (int64, int64) { return 12 * c.Int("n"), 0 }},
		{Name: "convert_f64_f32", Mirrors: "gorgonia dtConvOp float64 to float32",
			Params: []Param{ptr(F32Ptr, "y"), in(F64Ptr, "x"), i64("n")},
			shape:  perElement(n), cost: func(c Call) (int64, int64) { return 12 * c.Int("n"), 0 }},
	}
}
