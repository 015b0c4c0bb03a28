package kernelcheck

import (
	"github.com/gorgonia-ooc/outofcore/internal/checkrun"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

// TB is what a check needs of a test (checkrun.TB: *testing.T has it).
type TB = checkrun.TB

// Case is one group of checks for one dtype: the kernels' tests run each
// group as a test (TestUnary runs "unary" f32 and f64), and "ooc doctor"
// runs every case on the GPU.
type Case struct {
	// Group names the check (its test is Test plus the group in CamelCase).
	Group string
	// Dtype is "f32" or "f64": the case launches that dtype's kernels (and
	// the float64-only ones).
	Dtype string
	Run   func(TB, *Mem)
}

// Name is the case's group and dtype, "unary f32".
func (c Case) Name() string { return c.Group + " " + c.Dtype }

// Cases are every check of every kernel of kernels.Specs, each on random
// inputs of odd sizes (and special values: NaN, ±Inf, ±0, ties) against the
// CPU op the kernel reproduces (Spec.Mirrors). What each group checks:
//
//   - unary, binary, compare: every operator (tensor OP tensor, tensor OP
//     scalar, scalar OP tensor for binary; gorgonia's bool results for
//     compare) against the elementwise ops' Do; fill: constant fills.
//   - batchnorm: training and inference forward, running statistics, and the
//     x, gamma and beta gradients against models/layers' BatchNormOp, on NCHW
//     and (N, C) inputs, channels of fewer and more elements than a block
//     has threads (bit for bit: the block reductions sum in the CPU op's
//     order).
//   - gan: LeakyReLU, Tanh, InstanceNorm, ReflectionPad2D, the mean losses
//     and their gradients against models/layers.
//   - conv: Conv2D forward with bias, data, filter and bias gradients,
//     assembled as the VM does (im2col, GEMM, col2im, channel_bias,
//     channel_sum) with a host GEMM, against models/layers' convOp;
//     convtiles: one image's forward and data gradient in tiles of output
//     pixels (im2col_tile, col2im_tile), as a convolution whose workspace
//     is below one image's column matrix runs.
//   - lstm: Embedding and its gradient, an invalid id giving NaN, and the six
//     LSTM cell kernels.
//   - transpose, concat, repeat, broadcast: gorgonia's Transpose, DenseNet's
//     channel concat and its slice, tensor.Repeat, a bias broadcast, as
//     strided copies and one stride-0 binary launch.
//   - solvers: three steps of SGD, momentum, Adam and RMSProp with L1, L2,
//     batch and clip settings against gorgonia's solvers.
//   - pool, gap, relu: max and average pooling (with and without the padding
//     in the count), global average pooling, ReLU, and their gradients.
//   - reduce: Sum, Max and Mean over first, middle and last axes; softmax:
//     (log) softmax forward and backward against tensor's; xent: the fused
//     softmax cross-entropy loss and gradient against the zoo's loss graph.
//   - resize: ResizeBilinear and its gradient, up and down, with and without
//     align_corners.
//   - reduceaxes: Sum, Mean and Max over several (not necessarily adjacent)
//     axes in one launch; convert: float to Int and back as Go converts;
//     int: + - ⊙ ÷, comparisons, MaxBetween and MinBetween, Sum and Max
//     over axes on Int, Int32 and Byte tensors, and the Int fill, against
//     gorgonia's Do (÷ against its preallocated path, the CPU device's);
//     bool: transposes, == and !=, fills, DiagFlat and ByIndices on Bool
//     tensors; ctc: CTCLoss (sum and mean) and its gradient against
//     gorgonia's ctcLossOp and ctcLossDiffOp.
//   - gbatchnorm, gdropout, gupsample, gbyindices, gim2col, gpool,
//     ggroupnorm, gsparsemax, ggap: the g_ kernels against gorgonia's own
//     ops' Do (BatchNormOp, dropoutOp with its generator seeded,
//     upsampleDiffOp, byIndicesOp, im2colOp/col2imOp, max and average
//     pooling, GroupNormOp, sparsemaxOp, globalAveragePoolOp), bit for bit
//     on the host build.
var Cases = cases()

func cases() []Case {
	var cs []Case
	add := func(group string, f32, f64 func(TB, *Mem)) {
		if f32 != nil {
			cs = append(cs, Case{group, "f32", f32})
		}
		if f64 != nil {
			cs = append(cs, Case{group, "f64", f64})
		}
	}
	add("unary", testUnary[float32], testUnary[float64])
	add("binary", testBinary[float32], testBinary[float64])
	add("compare", testCompare[float32], testCompare[float64])
	add("fill", fill32, fill64)
	add("batchnorm", batchNorms[float32], batchNorms[float64])
	add("gan", testGAN[float32], testGAN[float64])
	add("conv", convs[float32], convs[float64])
	add("convtiles", convTiles[float32], convTiles[float64])
	add("lstm", testLSTM[float32], testLSTM[float64])
	add("transpose", testTranspose[float32], testTranspose[float64])
	add("concat", testConcatSlice[float32], testConcatSlice[float64])
	add("repeat", testRepeat[float32], testRepeat[float64])
	add("broadcast", binaryBroadcast, nil)
	add("solvers", solvers[float32], solvers[float64])
	add("pool", pools[float32], pools[float64])
	add("gap", testGAP[float32], testGAP[float64])
	add("relu", testReLU[float32], testReLU[float64])
	add("reduce", testReduce[float32], testReduce[float64])
	add("softmax", testSoftmax[float32], testSoftmax[float64])
	add("xent", testXent[float32], testXent[float64])
	add("resize", resizes[float32], resizes[float64])
	add("reduceaxes", testReduceAxes[float32], testReduceAxes[float64])
	add("convert", testConvert[float32], testConvert[float64])
	add("int", intBinary, nil)
	add("bool", boolOps, nil)
	add("ctc", testCTC[float32], testCTC[float64])
	add("gbatchnorm", caseGorgoniaBatchNorm[float32], caseGorgoniaBatchNorm[float64])
	add("gdropout", caseGorgoniaDropout[float32], caseGorgoniaDropout[float64])
	add("gupsample", caseGorgoniaUpsampleGrad[float32], caseGorgoniaUpsampleGrad[float64])
	add("gbyindices", caseGorgoniaByIndices[float32], caseGorgoniaByIndices[float64])
	add("gim2col", caseGorgoniaIm2col[float32], caseGorgoniaIm2col[float64])
	add("gpool", caseGorgoniaPool[float32], caseGorgoniaPool[float64])
	add("ggroupnorm", caseGorgoniaGroupNorm[float32], caseGorgoniaGroupNorm[float64])
	add("gsparsemax", caseGorgoniaSparsemax[float32], caseGorgoniaSparsemax[float64])
	add("ggap", caseGorgoniaGlobalAvgPool[float32], caseGorgoniaGlobalAvgPool[float64])
	return cs
}

// Group is the cases of one group, for its test.
func Group(name string) []Case {
	var out []Case
	for _, c := range Cases {
		if c.Group == name {
			out = append(out, c)
		}
	}
	return out
}

func batchNorms[T float32 | float64](t TB, m *Mem) {
	for _, shape := range [][]int{{2, 3, 5, 3}, {1, 2, 1, 1}, {5, 3}, {3, 4, 17, 13}} {
		testBN[T](t, m, shape)
	}
}

func convs[T float32 | float64](t TB, m *Mem) {
	for _, c := range convCases {
		testConv[T](t, m, c)
	}
}

func convTiles[T float32 | float64](t TB, m *Mem) {
	for i, c := range convCases {
		testConvTiles[T](t, m, c, 3+2*i) // odd tiles, a last one shorter
	}
}

func solvers[T float32 | float64](t TB, m *Mem) {
	for _, c := range solverCfgs {
		testSolvers[T](t, m, c)
	}
}

func pools[T float32 | float64](t TB, m *Mem) {
	for _, c := range []struct{ H, W, k, s, pad int }{{9, 7, 3, 2, 1}, {8, 8, 2, 2, 0}, {5, 6, 3, 1, 1}, {4, 4, 4, 4, 2}} {
		testPool[T](t, m, c.H, c.W, c.k, c.s, c.pad)
	}
}

func resizes[T float32 | float64](t TB, m *Mem) {
	for _, c := range []struct{ ih, iw, oh, ow int }{{5, 7, 11, 13}, {9, 8, 4, 3}, {1, 1, 3, 3}, {3, 4, 12, 17}, {6, 2, 6, 5}, {4, 4, 1, 1}} {
		for _, align := range []bool{true, false} {
			testResize[T](t, m, c.ih, c.iw, c.oh, c.ow, align)
		}
	}
}

func fill32(t TB, m *Mem) {
	t.Helper()
	y := newOut[float32](m, 1000)
	m.launch("fill_f32", p(y), kernels.Float(-2.5), kernels.Int(1000))
	for _, v := range get[float32](y) {
		if v != -2.5 {
			t.Fatalf("fill_f32 wrote %v", v)
		}
	}
	m.exactly()
}

func fill64(t TB, m *Mem) {
	t.Helper()
	z := newOut[float64](m, 3)
	m.launch("fill_f64", p(z), kernels.Float(0), kernels.Int(3))
	compare(t, m, "fill_f64", get[float64](z), []float64{0, 0, 0}, false)
}

// Col2imBitExact: col2im alone against the CPU op's col2im, through a
// 1x1-channel identity product so no GEMM rounding enters: the data gradient
// of a conv whose weight is the identity on one channel is col2im(dy spread).
// The host build's fact, not a GPU check (not in Cases).
func Col2imBitExact(t TB, m *Mem) { col2imBitExact(t, m) }

// SoftmaxLastAxisBug: tensor's last-axis softmax takes row r's maximum
// as max(x[0], x[r][1:]). With mode 2 the kernel takes that maximum where it
// is within 16 of the row's own and gives tensor's bits (rows 1 and 2:
// x[0] above the row; the row's first element, left out, above the rest);
// in row 3, 1100 below x[0], tensor underflows to log(0) and gives +Inf,
// and the kernel takes the row's own maximum and is right. The host build's
// fact (bit for bit on amd64), not a GPU check (not in Cases).
func SoftmaxLastAxisBug(t TB, m *Mem) { softmaxLastAxisBug(t, m) }
