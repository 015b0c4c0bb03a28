package kernels

// gnnSpecs are gorgonia's own convolution and pooling ops (src/gnn.cu), as
// the CPU device runs them: gorgonia's column layout, its max and average
// pooling rules.
func gnnSpecs(d dtype) []*Spec {
	s := d.size
	colN := func(c Call) int64 {
		g := c.Conv()
		return c.Int("N") * g.C * g.KH * g.KW * g.OH * g.OW
	}
	imgN := func(c Call) int64 { g := c.Conv(); return c.Int("N") * g.C * g.H * g.W }
	outN := func(c Call) int64 { g := c.Pool(); return g.Planes * g.OH * g.OW }
	inN := func(c Call) int64 { g := c.Pool(); return g.Planes * g.H * g.W }
	planes := func(c Call) int64 { return c.Pool().Planes }
	win := func(c Call) int64 { g := c.Pool(); return g.KH * g.KW }
	overlap := func(c Call) int64 { g := c.Pool(); return ((g.KH + g.SH - 1) / g.SH) * ((g.KW + g.SW - 1) / g.SW) }
	return []*Spec{
		{Name: "g_im2col_" + d.suffix, Mirrors: "gorgonia im2colOp (Conv2d's columns: a row per output pixel)",
			Params: []Param{ptr(d.ptr, "col"), in(d.ptr, "x"), i64("N"), scalar(ConvGeomT, "g")},
			shape:  perElement(colN), cost: func(c Call) (int64, int64) { return s * (colN(c) + imgN(c)), 0 }},
		{Name: "g_col2im_" + d.suffix, Mirrors: "gorgonia col2imOp (Conv2d's data gradient)",
			Params: []Param{ptr(d.ptr, "x"), in(d.ptr, "col"), i64("N"), scalar(ConvGeomT, "g")},
			shape:  perElement(imgN), cost: func(c Call) (int64, int64) { return s * (colN(c) + imgN(c)), colN(c) }},
		{Name: "g_maxpool_" + d.suffix, Mirrors: "gorgonia maxPoolOp (MaxPool2D)",
			Params: []Param{ptr(d.ptr, "y"), in(d.ptr, "x"), scalar(PoolGeomT, "g")},
			shape:  perElement(outN), cost: func(c Call) (int64, int64) { return s * (inN(c) + outN(c)), outN(c) * win(c) }},
		{Name: "g_maxpool_grad_" + d.suffix, Mirrors: "gorgonia maxPoolDiffOp (the argmax found again from x)",
			Params: []Param{ptr(d.ptr, "dx"), in(d.ptr, "x"), in(d.ptr, "dy"), scalar(PoolGeomT, "g")},
			shape:  perElement(inN), cost: func(c Call) (int64, int64) {
				return s * (2*inN(c) + outN(c)), inN(c) * overlap(c) * win(c)
			}},
		{Name: "g_avgpool_" + d.suffix, Mirrors: "gorgonia avgPoolOp (AveragePool2D, its arithmetic as it is)",
			Params: []Param{ptr(d.ptr, "y"), in(d.ptr, "x"), scalar(PoolGeomT, "g")},
			shape:  perElement(outN), cost: func(c Call) (int64, int64) { return s * (inN(c) + outN(c)), outN(c) * (win(c) + 1) }},
		{Name: "g_avgpool_grad_" + d.suffix, Mirrors: "gorgonia avgPoolDiffOp (sequential per plane, as the CPU op)",
			Params: []Param{ptr(d.ptr, "dx"), in(d.ptr, "dy"), scalar(PoolGeomT, "g")},
			shape:  perElement(planes), cost: func(c Call) (int64, int64) {
				return s * (3*inN(c) + outN(c)), outN(c) + inN(c)*(win(c)+1)
			}},
	}
}

// gbnSpecs are gorgonia's BatchNormOp and batchnormDiffOp (src/gbn.cu): one
// thread per channel, serial sums in the element type, as the CPU op.
func gbnSpecs(d dtype) []*Spec {
	s := d.size
	n := func(c Call) int64 { return c.Int("N") * c.Int("C") * c.Int("plane") }
	geo := []Param{i64("N"), i64("C"), i64("plane")}
	return []*Spec{
		{Name: "g_batchnorm_" + d.suffix, Mirrors: "gorgonia BatchNormOp (training: batch statistics, running ones advanced; inference: running ones)",
			Params: append(append([]Param{ptr(d.ptr, "y"), in(d.ptr, "x"), ptr(F64Ptr, "runMean"), ptr(F64Ptr, "runVar"), ptr(F64Ptr, "saved")}, geo...),
				scalar(F64, "momentum"), scalar(F64, "eps"), i64("training")),
			shape: perElement(arg("C")), cost: func(c Call) (int64, int64) { return 3*s*n(c) + 32*c.Int("C"), 6 * n(c) }},
		{Name: "g_batchnorm_grad_" + d.suffix, Mirrors: "gorgonia batchnormDiffOp (the x gradient)",
			Params: append(append([]Param{ptr(d.ptr, "dx"), in(d.ptr, "x"), in(d.ptr, "dy"), in(F64Ptr, "runVar"), in(F64Ptr, "saved")}, geo...),
				scalar(F64, "eps"), i64("training")),
			shape: perElement(arg("C")), cost: func(c Call) (int64, int64) { return 4*s*n(c) + 8*c.Int("C"), 10 * n(c) }},
	}
}

// gdropoutSpecs are gorgonia's dropoutOp and dropoutDiffOp (src/gdropout.cu).
func gdropoutSpecs(d dtype) []*Spec {
	s := d.size
	n := arg("n")
	return []*Spec{
		{Name: "g_dropout_" + d.suffix, Mirrors: "gorgonia dropoutOp (y holds the host-drawn mask: 1 kept, 0 dropped)",
			Params: []Param{ptr(d.ptr, "y"), in(d.ptr, "x"), i64("n"), scalar(F64, "keep")},
			shape:  perElement(n), cost: func(c Call) (int64, int64) { return 3 * s * c.Int("n"), c.Int("n") }},
		{Name: "g_dropout_grad_" + d.suffix, Mirrors: "gorgonia dropoutDiffOp (dy / p where y is not 0, as the CPU op)",
			Params: []Param{ptr(d.ptr, "dx"), in(d.ptr, "y"), in(d.ptr, "dy"), i64("n"), scalar(F64, "p")},
			shape:  perElement(n), cost: func(c Call) (int64, int64) { return 3 * s * c.Int("n"), c.Int("n") }},
	}
}

// gindexSpecs are gorgonia's Upsample2D gradient and ByIndices with its
// gradient (src/gindex.cu).
func gindexSpecs(d dtype) []*Spec {
	s := d.size
	by := []Param{in(I64Ptr, "idx"), i64("nidx"), i64("outer"), i64("L"), i64("idxStride"), i64("idxLimit"), i64("idxStep"),
		i64("iStride"), i64("iLimit"), i64("iStep"), i64("nIdxSide"), i64("nISide")}
	moved := func(c Call) int64 { return c.Int("nidx") * c.Int("outer") * c.Int("L") }
	gradThreads := func(c Call) int64 {
		if c.Int("L") > 1 {
			return c.Int("L")
		}
		return c.Int("outer")
	}
	upN := func(c Call) int64 { return c.Int("planes") * c.Int("H") * c.Int("W") }
	return []*Spec{
		{Name: "g_upsample_grad_" + d.suffix, Mirrors: "gorgonia upsampleDiffOp (float64 sums of each pixel's copies)",
			Params: []Param{ptr(d.ptr, "dx"), in(d.ptr, "dy"), i64("planes"), i64("H"), i64("W"), i64("s")},
			shape:  perElement(upN), cost: func(c Call) (int64, int64) {
				f := (c.Int("s") + 1) * (c.Int("s") + 1)
				return s * upN(c) * (f + 1), upN(c) * f
			}},
		{Name: "g_byindices_" + d.suffix, Mirrors: "gorgonia byIndicesOp (tensor's SelectByIndices, its strides as they are)",
			Params: append([]Param{ptr(d.ptr, "out"), in(d.ptr, "x")}, by...),
			shape:  perElement(moved), cost: func(c Call) (int64, int64) { return 2*s*moved(c) + 8*c.Int("nidx"), 0 }},
		{Name: "g_byindices_grad_" + d.suffix, Mirrors: "gorgonia byIndicesOpDiffOp (tensor's SelectByIndicesB, in its order)",
			Params: append([]Param{ptr(d.ptr, "dx"), in(d.ptr, "g")}, by...),
			shape:  perElement(gradThreads), cost: func(c Call) (int64, int64) { return 3*s*moved(c) + 8*c.Int("nidx"), moved(c) }},
	}
}

// gsparseSpecs are gorgonia's sparsemaxOp and sparsemaxDiffOp
// (src/gsparse.cu), and globalAveragePoolOp (src/gnn.cu).
func gsparseSpecs(d dtype) []*Spec {
	s := d.size
	all := func(c Call) int64 { return c.Int("rows") * c.Int("n") }
	return []*Spec{
		{Name: "g_sparsemax_" + d.suffix, Mirrors: "gorgonia sparsemaxOp along the last axis (a thread per row; the row sorted in y)",
			Params: []Param{ptr(d.ptr, "y"), in(d.ptr, "x"), i64("rows"), i64("n")},
			shape:  perElement(arg("rows")), cost: func(c Call) (int64, int64) { return 4 * s * all(c), all(c) * (c.Int("n") + 6) }},
		{Name: "g_sparsemax_grad_" + d.suffix, Mirrors: "gorgonia sparsemaxDiffOp (2-D)",
			Params: []Param{ptr(d.ptr, "dx"), in(d.ptr, "y"), in(d.ptr, "dy"), i64("rows"), i64("n")},
			shape:  perElement(arg("rows")), cost: func(c Call) (int64, int64) { return 5 * s * all(c), 6 * all(c) }},
		{Name: "g_gap_" + d.suffix, Mirrors: "gorgonia globalAveragePoolOp (GlobalAveragePool2D)",
			Params: []Param{ptr(d.ptr, "y"), in(d.ptr, "x"), i64("planes"), i64("plane")},
			shape:  perElement(arg("planes")), cost: func(c Call) (int64, int64) {
				return s * (c.Int("planes")*c.Int("plane") + c.Int("planes")), c.Int("planes") * (c.Int("plane") + 1)
			}},
	}
}

// gnormSpecs are gorgonia's GroupNormOp and groupNormDiffOp
// (src/gnorm.cu): a thread per (image, group) row.
func gnormSpecs(d dtype) []*Spec {
	s := d.size
	all := func(c Call) int64 { return c.Int("rows") * c.Int("d") * c.Int("plane") }
	geo := []Param{i64("rows"), i64("d"), i64("plane"), scalar(F64, "eps")}
	return []*Spec{
		{Name: "g_groupnorm_" + d.suffix, Mirrors: "gorgonia GroupNormOp (the op's chunked Welford moments)",
			Params: append([]Param{ptr(d.ptr, "y"), in(d.ptr, "x")}, geo...),
			shape:  perElement(arg("rows")), cost: func(c Call) (int64, int64) { return 3 * s * all(c), 8 * all(c) }},
		{Name: "g_groupnorm_grad_" + d.suffix, Mirrors: "gorgonia groupNormDiffOp (the moments recomputed from x)",
			Params: append([]Param{ptr(d.ptr, "dx"), in(d.ptr, "x"), in(d.ptr, "dy")}, geo...),
			shape:  perElement(arg("rows")), cost: func(c Call) (int64, int64) { return 5 * s * all(c), 14 * all(c) }},
	}
}
