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
