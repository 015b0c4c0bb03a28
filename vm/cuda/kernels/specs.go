package kernels

// Specs is every kernel of the PTX module, f32 and f64 entries side by side.
// The host build generates its launchers from this table and checks each C
// signature against it at compile time; a test checks the PTX entries'
// parameter sizes against it.
var Specs = func() []*Spec {
	var all []*Spec
	for _, d := range dtypes {
		for _, f := range []func(d dtype) []*Spec{elementwiseSpecs, reduceSpecs, softmaxSpecs, convSpecs, bnSpecs, poolSpecs, reluSpecs, optimSpecs, resizeSpecs, ganSpecs, lstmSpecs, gorgoniaSpecs, gnnSpecs, gbnSpecs, gdropoutSpecs, gindexSpecs, gsparseSpecs, gnormSpecs} {
			all = append(all, f(d)...)
		}
	}
	return append(append(append(append(all, bnStatSpecs()...), convertSpecs()...), intSpecs()...), boolSpecs()...)
}()

type dtype = struct {
	suffix string
	ptr    Type
	val    Type
	size   int64
}

func arg(name string) func(Call) int64 { return func(c Call) int64 { return c.Int(name) } }

// rows is outer·inner: the (outer, k, inner) kernels' thread count.
func rows(c Call) int64 { return c.Int("outer") * c.Int("inner") }

// walked counts the distinct elements an operand with these strides reads.
func walked(l Layout, strides [MaxDims]int64, n int64) int64 {
	if l.Rank == 0 {
		return n
	}
	e := int64(1)
	for d := 0; d < l.Rank; d++ {
		if strides[d] != 0 {
			r := max(l.Rep[d], 1)
			e *= (l.Dim[d] + r - 1) / r
		}
	}
	return e
}

func elementwiseSpecs(d dtype) []*Spec {
	s := d.size
	n := arg("n")
	binCost := func(outSize int64) func(Call) (int64, int64) {
		return func(c Call) (int64, int64) {
			n, l := c.Int("n"), c.Layout()
			return n*outSize + (walked(l, l.A, n)+walked(l, l.B, n))*s, n
		}
	}
	return []*Spec{
		{Name: "unary_" + d.suffix, Mirrors: "gorgonia elemUnaryOp (tensor's or gorgonia's scalar function per operator)",
			Params: []Param{i32("op"), ptr(d.ptr, "y"), in(d.ptr, "x"), i64("n")},
			shape:  perElement(n), cost: func(c Call) (int64, int64) { return 2 * s * c.Int("n"), c.Int("n") }},
		{Name: "binary_" + d.suffix, Mirrors: "gorgonia elemBinOp with a same-type result (arithmetic; comparisons with retSame)",
			Params: []Param{i32("op"), ptr(d.ptr, "out"), in(d.ptr, "a"), in(d.ptr, "b"), i64("n"), scalar(LayoutT, "L")},
			shape:  perElement(n), cost: binCost(s)},
		{Name: "compare_" + d.suffix, Mirrors: "gorgonia elemBinOp comparison with a bool result",
			Params: []Param{i32("op"), ptr(U8Ptr, "out"), in(d.ptr, "a"), in(d.ptr, "b"), i64("n"), scalar(LayoutT, "L")},
			shape:  perElement(n), cost: binCost(1)},
		{Name: "fill_" + d.suffix, Mirrors: "tensor Memset / Zero",
			Params: []Param{ptr(d.ptr, "y"), scalar(d.val, "v"), i64("n")},
			shape:  perElement(n), cost: func(c Call) (int64, int64) { return s * c.Int("n"), 0 }},
		{Name: "copy_" + d.suffix, Mirrors: "gorgonia transposeOp, sliceOp, concatOp (per input), repeatOp, reshapeOp",
			Params: []Param{ptr(d.ptr, "out"), in(d.ptr, "in"), i64("n"), scalar(LayoutT, "L")},
			shape:  perElement(n), cost: func(c Call) (int64, int64) {
				n, l := c.Int("n"), c.Layout()
				return s * (n + walked(l, l.A, n)), 0
			}},
	}
}

func reduceSpecs(d dtype) []*Spec {
	s := d.size
	return []*Spec{{Name: "reduce_" + d.suffix, Mirrors: "gorgonia sumOp / maxOp over one axis, Mean (Sum then ÷ size)",
		Params: []Param{i32("op"), ptr(d.ptr, "out"), in(d.ptr, "x"), i64("outer"), i64("k"), i64("inner")},
		shape:  perElement(rows), cost: func(c Call) (int64, int64) {
			r := rows(c)
			return s * (r*c.Int("k") + r), r * c.Int("k")
		}}}
}

func softmaxSpecs(d dtype) []*Spec {
	s := d.size
	all := func(c Call) int64 { return rows(c) * c.Int("k") }
	geo := []Param{i64("outer"), i64("k"), i64("inner")}
	return []*Spec{
		{Name: "softmax_" + d.suffix, Mirrors: "gorgonia softmaxOp along the middle axis (mode bit 0: LogSoftMax; bit 1: tensor's last-axis maximum where safe)",
			Params: append([]Param{i32("mode"), ptr(d.ptr, "y"), in(d.ptr, "x")}, geo...),
			shape:  perElement(rows), cost: func(c Call) (int64, int64) { return 2 * s * all(c), 5 * all(c) }},
		{Name: "softmax_grad_" + d.suffix, Mirrors: "gorgonia softmaxDiffOp",
			Params: append([]Param{i32("lg"), ptr(d.ptr, "dx"), in(d.ptr, "y"), in(d.ptr, "dy")}, geo...),
			shape:  perElement(rows), cost: func(c Call) (int64, int64) { return 3 * s * all(c), 4 * all(c) }},
		{Name: "xent_loss_" + d.suffix, Mirrors: "layers.SoftmaxCrossEntropy / PixelSoftmaxCrossEntropy (the loss value)",
			Params: append([]Param{ptr(d.ptr, "loss"), in(d.ptr, "x"), in(d.ptr, "t")}, geo...), Barrier: true,
			shape: oneBlock, cost: func(c Call) (int64, int64) { return 2*s*all(c) + s, 7 * all(c) }},
		{Name: "xent_grad_" + d.suffix, Mirrors: "the gradient of layers.SoftmaxCrossEntropy with respect to the logits",
			Params: append(append([]Param{ptr(d.ptr, "dx"), in(d.ptr, "x"), in(d.ptr, "t")}, geo...), scalar(d.val, "scale")),
			shape:  perElement(rows), cost: func(c Call) (int64, int64) { return 3 * s * all(c), 9 * all(c) }},
	}
}

func convSpecs(d dtype) []*Spec {
	s := d.size
	colN := func(c Call) int64 {
		g := c.Conv()
		return g.C * g.KH * g.KW * c.Int("nb") * g.OH * g.OW
	}
	imgN := func(c Call) int64 { g := c.Conv(); return c.Int("nb") * g.C * g.H * g.W }
	planeN := func(c Call) int64 { return c.Int("N") * c.Int("C") * c.Int("plane") }
	tileN := func(c Call) int64 { g := c.Conv(); return g.C * g.KH * g.KW * c.Int("t") }
	oneImg := func(c Call) int64 { g := c.Conv(); return g.C * g.H * g.W }
	return []*Spec{
		{Name: "im2col_" + d.suffix, Mirrors: "models/layers convOp's im2col (Conv2D forward and filter gradient)",
			Params: []Param{ptr(d.ptr, "col"), in(d.ptr, "x"), i64("nb"), scalar(ConvGeomT, "g"), i64("ld")},
			shape:  perElement(colN), cost: func(c Call) (int64, int64) { return s * (colN(c) + imgN(c)), 0 }},
		{Name: "col2im_" + d.suffix, Mirrors: "models/layers convOp's col2im (Conv2D data gradient, ConvTranspose2D forward)",
			Params: []Param{ptr(d.ptr, "x"), in(d.ptr, "col"), i64("nb"), scalar(ConvGeomT, "g"), i64("ld")},
			shape:  perElement(imgN), cost: func(c Call) (int64, int64) { return s * (colN(c) + imgN(c)), colN(c) }},
		{Name: "im2col_tile_" + d.suffix, Mirrors: "models/layers convOp's im2col of one tile of output pixels",
			Params: []Param{ptr(d.ptr, "col"), in(d.ptr, "x"), scalar(ConvGeomT, "g"), i64("ld"), i64("p0"), i64("t")},
			shape:  perElement(tileN), cost: func(c Call) (int64, int64) { return 2 * s * tileN(c), 0 }},
		{Name: "col2im_tile_" + d.suffix, Mirrors: "models/layers convOp's col2im of one tile, added onto x (tiles from the last)",
			Params: []Param{ptr(d.ptr, "x"), in(d.ptr, "col"), scalar(ConvGeomT, "g"), i64("ld"), i64("p0"), i64("t")},
			shape:  perElement(oneImg), cost: func(c Call) (int64, int64) { return s * (tileN(c) + 2*oneImg(c)), tileN(c) }},
		{Name: "channel_bias_" + d.suffix, Mirrors: "models/layers convOp's bias (addChannelBias)",
			Params: []Param{ptr(d.ptr, "y"), in(d.ptr, "bias"), i64("N"), i64("C"), i64("plane")},
			shape:  perElement(planeN), cost: func(c Call) (int64, int64) { return s * (2*planeN(c) + c.Int("C")), planeN(c) }},
		{Name: "channel_sum_" + d.suffix, Mirrors: "models/layers channelSumOp (conv bias and BN beta gradients)",
			Params: []Param{ptr(d.ptr, "out"), in(d.ptr, "x"), i64("N"), i64("C"), i64("plane")}, Barrier: true,
			shape: perChannel, cost: func(c Call) (int64, int64) { return s * (planeN(c) + c.Int("C")), planeN(c) }},
	}
}

func bnSpecs(d dtype) []*Spec {
	s := d.size
	n := func(c Call) int64 { return c.Int("N") * c.Int("C") * c.Int("plane") }
	geo := []Param{i64("N"), i64("C"), i64("plane")}
	return []*Spec{
		{Name: "bn_stats_" + d.suffix, Mirrors: "models/layers BatchNormOp's batch statistics (mean, 1/std, biased variance; float64)",
			Params: append([]Param{ptr(F64Ptr, "mean"), ptr(F64Ptr, "invstd"), ptr(F64Ptr, "var"), in(d.ptr, "x")},
				append(geo, scalar(F64, "eps"))...), Barrier: true,
			shape: perChannel, cost: func(c Call) (int64, int64) { return 2*s*n(c) + 24*c.Int("C"), 4 * n(c) }},
		{Name: "bn_apply_" + d.suffix, Mirrors: "models/layers BatchNormOp's normalisation (training and inference)",
			Params: append([]Param{ptr(d.ptr, "y"), in(d.ptr, "x"), in(d.ptr, "gamma"), in(d.ptr, "beta"),
				in(F64Ptr, "mean"), in(F64Ptr, "invstd")}, geo...),
			shape: perElement(n), cost: func(c Call) (int64, int64) { return 2*s*n(c) + (2*s+16)*c.Int("C"), 3 * n(c) }},
		{Name: "bn_grad_sums_" + d.suffix, Mirrors: "models/layers bnGradOp's channel sums; writes the gamma gradient",
			Params: append([]Param{ptr(d.ptr, "dgamma"), ptr(F64Ptr, "sdy"), ptr(F64Ptr, "sdxh"), in(d.ptr, "x"), in(d.ptr, "dy"),
				in(F64Ptr, "mean"), in(F64Ptr, "invstd")}, geo...), Barrier: true,
			shape: perChannel, cost: func(c Call) (int64, int64) { return 2*s*n(c) + (s+32)*c.Int("C"), 4 * n(c) }},
		{Name: "bn_grad_x_" + d.suffix, Mirrors: "models/layers bnGradOp (the x gradient)",
			Params: append(append([]Param{ptr(d.ptr, "dx"), in(d.ptr, "x"), in(d.ptr, "dy"), in(d.ptr, "gamma"),
				in(F64Ptr, "mean"), in(F64Ptr, "invstd"), in(F64Ptr, "sdy"), in(F64Ptr, "sdxh")}, geo...), i32("training")),
			shape: perElement(n), cost: func(c Call) (int64, int64) { return 3*s*n(c) + (s+32)*c.Int("C"), 5 * n(c) }},
	}
}

// bnStatSpecs are the dtype-free kernels on BN's float64 statistics.
func bnStatSpecs() []*Spec {
	C := arg("C")
	return []*Spec{
		{Name: "bn_infer_stats", Mirrors: "models/layers BatchNormOp in inference mode (running statistics)",
			Params: []Param{ptr(F64Ptr, "mean"), ptr(F64Ptr, "invstd"), in(F64Ptr, "runMean"), in(F64Ptr, "runVar"), i64("C"), scalar(F64, "eps")},
			shape:  perElement(C), cost: func(c Call) (int64, int64) { return 32 * c.Int("C"), 3 * c.Int("C") }},
		{Name: "bn_running", Mirrors: "models/layers BatchNormOp's running statistics update (training forward)",
			Params: []Param{ptr(F64Ptr, "runMean"), ptr(F64Ptr, "runVar"), in(F64Ptr, "mean"), in(F64Ptr, "var"), i64("C"),
				scalar(F64, "momentum"), scalar(F64, "unbias")},
			shape: perElement(C), cost: func(c Call) (int64, int64) { return 48 * c.Int("C"), 8 * c.Int("C") }},
	}
}

func poolSpecs(d dtype) []*Spec {
	s := d.size
	outN := func(c Call) int64 { g := c.Pool(); return g.Planes * g.OH * g.OW }
	inN := func(c Call) int64 { g := c.Pool(); return g.Planes * g.H * g.W }
	// overlap is how many windows cover a pixel at most.
	overlap := func(c Call) int64 { g := c.Pool(); return ((g.KH + g.SH - 1) / g.SH) * ((g.KW + g.SW - 1) / g.SW) }
	win := func(c Call) int64 { g := c.Pool(); return g.KH * g.KW }
	return []*Spec{
		{Name: "maxpool_" + d.suffix, Mirrors: "models/layers maxPoolOp",
			Params: []Param{ptr(d.ptr, "y"), in(d.ptr, "x"), scalar(PoolGeomT, "g")},
			shape:  perElement(outN), cost: func(c Call) (int64, int64) { return s * (inN(c) + outN(c)), outN(c) * win(c) }},
		{Name: "maxpool_grad_" + d.suffix, Mirrors: "models/layers maxPoolGradOp (the argmax found again from x)",
			Params: []Param{ptr(d.ptr, "dx"), in(d.ptr, "x"), in(d.ptr, "dy"), scalar(PoolGeomT, "g")},
			shape:  perElement(inN), cost: func(c Call) (int64, int64) {
				return s * (2*inN(c) + outN(c)), inN(c) * overlap(c) * win(c)
			}},
		{Name: "avgpool_" + d.suffix, Mirrors: "models/layers avgPoolOp",
			Params: []Param{ptr(d.ptr, "y"), in(d.ptr, "x"), scalar(PoolGeomT, "g")},
			shape:  perElement(outN), cost: func(c Call) (int64, int64) { return s * (inN(c) + outN(c)), outN(c) * (win(c) + 1) }},
		{Name: "avgpool_grad_" + d.suffix, Mirrors: "models/layers avgPoolGradOp",
			Params: []Param{ptr(d.ptr, "dx"), in(d.ptr, "dy"), scalar(PoolGeomT, "g")},
			shape:  perElement(inN), cost: func(c Call) (int64, int64) { return s * (inN(c) + outN(c)), 2 * inN(c) * overlap(c) }},
		{Name: "avgpool_excl_" + d.suffix, Mirrors: "models/layers avgPoolOp with count_include_pad=False",
			Params: []Param{ptr(d.ptr, "y"), in(d.ptr, "x"), scalar(PoolGeomT, "g")},
			shape:  perElement(outN), cost: func(c Call) (int64, int64) { return s * (inN(c) + outN(c)), outN(c) * (win(c) + 1) }},
		{Name: "avgpool_excl_grad_" + d.suffix, Mirrors: "models/layers avgPoolGradOp with count_include_pad=False",
			Params: []Param{ptr(d.ptr, "dx"), in(d.ptr, "dy"), scalar(PoolGeomT, "g")},
			shape:  perElement(inN), cost: func(c Call) (int64, int64) { return s * (inN(c) + outN(c)), 2 * inN(c) * overlap(c) }},
		{Name: "gap_" + d.suffix, Mirrors: "models/layers globalAvgPoolOp",
			Params: []Param{ptr(d.ptr, "y"), in(d.ptr, "x"), i64("planes"), i64("plane")},
			shape:  perElement(arg("planes")), cost: func(c Call) (int64, int64) {
				p := c.Int("planes")
				return s * (p*c.Int("plane") + p), p * c.Int("plane")
			}},
		{Name: "gap_grad_" + d.suffix, Mirrors: "models/layers globalAvgPoolGradOp",
			Params: []Param{ptr(d.ptr, "dx"), in(d.ptr, "dy"), i64("planes"), i64("plane")},
			shape:  perElement(func(c Call) int64 { return c.Int("planes") * c.Int("plane") }), cost: func(c Call) (int64, int64) {
				p := c.Int("planes")
				return s * (p*c.Int("plane") + p), p * c.Int("plane")
			}},
	}
}

func reluSpecs(d dtype) []*Spec {
	s := d.size
	n := arg("n")
	return []*Spec{
		{Name: "relu_" + d.suffix, Mirrors: "models/layers reluOp",
			Params: []Param{ptr(d.ptr, "y"), in(d.ptr, "x"), i64("n")},
			shape:  perElement(n), cost: func(c Call) (int64, int64) { return 2 * s * c.Int("n"), c.Int("n") }},
		{Name: "relu_grad_" + d.suffix, Mirrors: "models/layers reluGradOp",
			Params: []Param{ptr(d.ptr, "dx"), in(d.ptr, "y"), in(d.ptr, "dy"), i64("n")},
			shape:  perElement(n), cost: func(c Call) (int64, int64) { return 3 * s * c.Int("n"), c.Int("n") }},
	}
}

func optimSpecs(d dtype) []*Spec {
	s := d.size
	n := arg("n")
	v := func(names ...string) []Param {
		ps := make([]Param, len(names))
		for i, nm := range names {
			ps[i] = scalar(d.val, nm)
		}
		return ps
	}
	reg := v("l1reg", "l2reg", "onePerBatch", "negClip", "clip")
	cost := func(arrays, flops int64) func(Call) (int64, int64) {
		return func(c Call) (int64, int64) { return 2 * arrays * s * c.Int("n"), flops * c.Int("n") }
	}
	return []*Spec{
		{Name: "sgd_" + d.suffix, Mirrors: "gorgonia VanillaSolver.Step",
			Params: append(append([]Param{ptr(d.ptr, "w"), ptr(d.ptr, "g"), i64("n"), i32("flags")}, reg...), v("negEta")...),
			shape:  perElement(n), cost: cost(2, 2)},
		{Name: "momentum_" + d.suffix, Mirrors: "gorgonia Momentum.Step",
			Params: append(append([]Param{ptr(d.ptr, "w"), ptr(d.ptr, "g"), ptr(d.ptr, "cw"), i64("n"), i32("flags")}, reg...), v("negEta", "momentum")...),
			shape:  perElement(n), cost: cost(3, 4)},
		{Name: "adam_" + d.suffix, Mirrors: "gorgonia AdamSolver.Step",
			Params: append(append([]Param{ptr(d.ptr, "w"), ptr(d.ptr, "g"), ptr(d.ptr, "m"), ptr(d.ptr, "v"), i64("n"), i32("flags")}, reg...),
				v("omBeta1", "omBeta2", "beta1", "beta2", "eps", "negEta", "corr1", "corr2")...),
			shape: perElement(n), cost: cost(4, 14)},
		{Name: "rmsprop_" + d.suffix, Mirrors: "gorgonia RMSPropSolver.Step",
			Params: append([]Param{ptr(d.ptr, "w"), ptr(d.ptr, "g"), ptr(d.ptr, "cache"), i64("n"), i32("flags")},
				v("decay", "omDecay", "eps", "l2reg", "negClip", "clip", "negEta")...),
			shape: perElement(n), cost: cost(3, 10)},
	}
}

func resizeSpecs(d dtype) []*Spec {
	s := d.size
	small := func(c Call) int64 { return c.Int("planes") * c.Int("ih") * c.Int("iw") }
	big := func(c Call) int64 { return c.Int("planes") * c.Int("oh") * c.Int("ow") }
	geo := []Param{i64("planes"), i64("ih"), i64("iw"), i64("oh"), i64("ow"), i32("align")}
	return []*Spec{
		{Name: "resize_bilinear_" + d.suffix, Mirrors: "models/layers ResizeBilinear",
			Params: append([]Param{ptr(d.ptr, "y"), in(d.ptr, "x")}, geo...),
			shape:  perElement(big), cost: func(c Call) (int64, int64) { return s * (small(c) + big(c)), 8 * big(c) }},
		{Name: "resize_bilinear_grad_" + d.suffix, Mirrors: "models/layers ResizeBilinearGrad (gathered per input pixel in the CPU scatter's order)",
			Params: append([]Param{ptr(d.ptr, "dx"), in(d.ptr, "dy")}, geo...),
			shape:  perElement(small), cost: func(c Call) (int64, int64) { return s * (small(c) + big(c)), 8 * big(c) }},
	}
}

func ganSpecs(d dtype) []*Spec {
	s := d.size
	n := arg("n")
	elem := func(operands int64) func(Call) (int64, int64) {
		return func(c Call) (int64, int64) { return operands * s * c.Int("n"), c.Int("n") }
	}
	planes := func(c Call) (uint32, uint32) { return uint32(min(c.Int("planes"), maxGrid)), threads }
	all := func(c Call) int64 { return c.Int("planes") * c.Int("plane") }
	small := func(c Call) int64 { return c.Int("planes") * c.Int("H") * c.Int("W") }
	big := func(c Call) int64 {
		p := c.Int("p")
		return c.Int("planes") * (c.Int("H") + 2*p) * (c.Int("W") + 2*p)
	}
	pad := []Param{i64("planes"), i64("H"), i64("W"), i64("p")}
	return []*Spec{
		{Name: "leaky_relu_" + d.suffix, Mirrors: "models/layers LeakyReLU",
			Params: []Param{ptr(d.ptr, "y"), in(d.ptr, "x"), i64("n"), scalar(F64, "slope")},
			shape:  perElement(n), cost: elem(2)},
		{Name: "leaky_relu_grad_" + d.suffix, Mirrors: "models/layers LeakyReLUGrad (from the output)",
			Params: []Param{ptr(d.ptr, "dx"), in(d.ptr, "y"), in(d.ptr, "dy"), i64("n"), scalar(F64, "slope")},
			shape:  perElement(n), cost: elem(3)},
		{Name: "tanh_" + d.suffix, Mirrors: "models/layers Tanh (Go's math.Tanh in float64)",
			Params: []Param{ptr(d.ptr, "y"), in(d.ptr, "x"), i64("n")},
			shape:  perElement(n), cost: func(c Call) (int64, int64) { return 2 * s * c.Int("n"), 20 * c.Int("n") }},
		{Name: "tanh_grad_" + d.suffix, Mirrors: "models/layers TanhGrad (from the output)",
			Params: []Param{ptr(d.ptr, "dx"), in(d.ptr, "y"), in(d.ptr, "dy"), i64("n")},
			shape:  perElement(n), cost: elem(3)},
		{Name: "instnorm_" + d.suffix, Mirrors: "models/layers InstanceNorm (one block per plane)",
			Params: []Param{ptr(d.ptr, "y"), in(d.ptr, "x"), i64("planes"), i64("plane"), scalar(F64, "eps")}, Barrier: true,
			shape: planes, cost: func(c Call) (int64, int64) { return 3 * s * all(c), 6 * all(c) }},
		{Name: "instnorm_grad_" + d.suffix, Mirrors: "models/layers InstanceNormGrad (one block per plane)",
			Params: []Param{ptr(d.ptr, "dx"), in(d.ptr, "x"), in(d.ptr, "dy"), i64("planes"), i64("plane"), scalar(F64, "eps")}, Barrier: true,
			shape: planes, cost: func(c Call) (int64, int64) { return 5 * s * all(c), 12 * all(c) }},
		{Name: "reflect_pad_" + d.suffix, Mirrors: "models/layers ReflectionPad2D",
			Params: append([]Param{ptr(d.ptr, "y"), in(d.ptr, "x")}, pad...),
			shape:  perElement(big), cost: func(c Call) (int64, int64) { return s * (small(c) + big(c)), 0 }},
		{Name: "reflect_pad_grad_" + d.suffix, Mirrors: "models/layers ReflectionPad2DGrad (gathered in the CPU scatter's order)",
			Params: append([]Param{ptr(d.ptr, "dx"), in(d.ptr, "dy")}, pad...),
			shape:  perElement(small), cost: func(c Call) (int64, int64) { return s * (small(c) + big(c)), big(c) }},
		{Name: "mean_loss_" + d.suffix, Mirrors: "models/layers MSEToConstant (kind 0) and L1Loss (kind 1), chunked as the CPU op",
			Params: []Param{ptr(d.ptr, "loss"), i32("kind"), in(d.ptr, "a"), in(d.ptr, "b"), i64("n"), scalar(F64, "target"), scalar(F64, "scale")}, Barrier: true,
			shape: oneBlock, cost: func(c Call) (int64, int64) {
				return (1+c.Int("kind"))*s*c.Int("n") + s, 3 * c.Int("n")
			}},
		{Name: "mean_loss_grad_" + d.suffix, Mirrors: "the gradients of models/layers MSEToConstant and L1Loss",
			Params: []Param{ptr(d.ptr, "d"), i32("kind"), i32("wrt"), in(d.ptr, "a"), in(d.ptr, "b"), in(d.ptr, "dloss"), i64("n"), scalar(F64, "target"), scalar(F64, "scale")},
			shape:  perElement(n), cost: func(c Call) (int64, int64) { return (2+c.Int("kind"))*s*c.Int("n") + s, 3 * c.Int("n") }},
	}
}

func lstmSpecs(d dtype) []*Spec {
	s := d.size
	geo := []Param{i64("N"), i64("Tn"), i64("V"), i64("E")}
	tokens := func(c Call) int64 { return c.Int("N") * c.Int("Tn") }
	cells := func(c Call) int64 { return c.Int("N") * c.Int("H") }
	return []*Spec{
		{Name: "embedding_" + d.suffix, Mirrors: "models/layers Embedding (NaN for an invalid id)",
			Params: append([]Param{ptr(d.ptr, "out"), in(d.ptr, "ids"), in(d.ptr, "table")}, geo...),
			shape:  perElement(func(c Call) int64 { return tokens(c) * c.Int("E") }), cost: func(c Call) (int64, int64) {
				return s * (tokens(c) + 2*tokens(c)*c.Int("E")), 0
			}},
		{Name: "embedding_grad_" + d.suffix, Mirrors: "models/layers EmbeddingGrad (one column per thread, tokens in order)",
			Params: append([]Param{ptr(d.ptr, "dtable"), in(d.ptr, "ids"), in(d.ptr, "dy")}, geo...),
			shape:  perElement(arg("E")), cost: func(c Call) (int64, int64) {
				return s * (c.Int("V")*c.Int("E") + tokens(c) + 2*tokens(c)*c.Int("E")), tokens(c) * c.Int("E")
			}},
		{Name: "lstm_cell_" + d.suffix, Mirrors: "models/layers LSTMCell, LSTMHidden and their gradient ops (kind: layers' cellKind)",
			Params: []Param{i32("kind"), ptr(d.ptr, "res"), in(d.ptr, "pre"), in(d.ptr, "x"), in(d.ptr, "d"), i64("N"), i64("H")},
			shape:  perElement(cells), cost: func(c Call) (int64, int64) { return 7 * s * cells(c), 60 * cells(c) }},
	}
}
