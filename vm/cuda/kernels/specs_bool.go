package kernels

// boolSpecs are the kernels of gorgonia's ops on Bool tensors (src/bool.cu,
// one byte per element): copies through a layout and zero fills for the ops
// that move elements, == and != between Bool tensors, and ByIndices'
// gather.
func boolSpecs() []*Spec {
	n := arg("n")
	bin := func(c Call) (int64, int64) {
		n, l := c.Int("n"), c.Layout()
		return n + walked(l, l.A, n) + walked(l, l.B, n), n
	}
	by := []Param{in(I64Ptr, "idx"), i64("nidx"), i64("outer"), i64("L"), i64("idxStride"), i64("idxLimit"), i64("idxStep"),
		i64("iStride"), i64("iLimit"), i64("iStep"), i64("nIdxSide"), i64("nISide")}
	moved := func(c Call) int64 { return c.Int("nidx") * c.Int("outer") * c.Int("L") }
	return []*Spec{
		{Name: "copy_u8", Mirrors: "gorgonia transposeOp, sliceOp, concatOp, diagFlatOp on Bool tensors",
			Params: []Param{ptr(U8Ptr, "out"), in(U8Ptr, "in"), i64("n"), scalar(LayoutT, "L")},
			shape:  perElement(n), cost: func(c Call) (int64, int64) {
				n, l := c.Int("n"), c.Layout()
				return n + walked(l, l.A, n), 0
			}},
		{Name: "fill_u8", Mirrors: "tensor Zero of a Bool tensor (v != 0 is true)",
			Params: []Param{ptr(U8Ptr, "y"), scalar(F64, "v"), i64("n")},
			shape:  perElement(n), cost: func(c Call) (int64, int64) { return c.Int("n"), 0 }},
		{Name: "compare_u8", Mirrors: "gorgonia elemBinOp == and != of two Bool tensors",
			Params: []Param{i32("op"), ptr(U8Ptr, "out"), in(U8Ptr, "a"), in(U8Ptr, "b"), i64("n"), scalar(LayoutT, "L")},
			shape:  perElement(n), cost: bin},
		{Name: "g_byindices_u8", Mirrors: "gorgonia byIndicesOp of a Bool tensor (tensor's SelectByIndices)",
			Params: append([]Param{ptr(U8Ptr, "out"), in(U8Ptr, "x")}, by...),
			shape:  perElement(moved), cost: func(c Call) (int64, int64) { return 2*moved(c) + 8*c.Int("nidx"), 0 }},
	}
}
