// Package dispatch makes the out-of-core machine compute on a CUDA device:
// it implements vm.Backend for *cuda.Device, so that ooc.Compile(g,
// ooc.WithDevice(cudaDevice)) gives a machine whose every op runs as the
// CUDA kernels of package kernels (loaded from the embedded PTX with
// cuModuleLoadData, launched with cuLaunchKernel on the compute stream) and
// cuBLAS calls (gemm, gemmBatched, gemv, ger and dot, cublasS* / cublasD*,
// dlopened, on the same stream). Linking the package in registers the backend; package ooc and
// cmd/ooc link it in.
//
// # Dispatch at Compile
//
// When the machine is made, Bind plans every function of the tape once, from
// its op and operand shapes: which kernels and GEMMs, with which grids,
// strides and geometry. An op with no plan is an error naming the op, its
// type and its node, and Compile fails: nothing ever runs through host
// memory. The plans:
//
//	op                                   device work
//	layers Conv2D / ConvTranspose2D      per image: im2col, GEMM W·col (1x1 stride-1: no im2col); channel_bias
//	  data gradient                      per image: GEMM Wᵀ·dy, col2im; channel_bias for ConvTranspose2D
//	  filter gradient                    per image: im2col, GEMM dy·colᵀ accumulated over the images
//	layers BatchNorm (train / eval)      bn_stats, bn_running (train) or bn_infer_stats (eval), bn_apply
//	layers BN gradients                  bn_stats, bn_grad_sums (the gamma gradient), bn_grad_x
//	layers ChannelSum, ReLU(+grad), pools channel_sum, relu(_grad), maxpool/avgpool(_excl)(_grad), gap(_grad)
//	layers ResizeBilinear (+grad)        resize_bilinear(_grad)
//	layers LeakyReLU, Tanh (+grads)      leaky_relu(_grad), tanh(_grad)
//	layers InstanceNorm (+grad)          instnorm(_grad)
//	layers ReflectionPad2D (+grad)       reflect_pad(_grad)
//	layers MSEToConstant, L1Loss (+grads) mean_loss(_grad)
//	layers StopGradient                  copy
//	layers Embedding (+grad)             embedding(_grad)
//	layers LSTM cell ops, LSTMGates      lstm_cell; binary (the sum, then each bias)
//	layers sequence step/place/stack     copy with a layout (place: fill, then copy)
//
// The gorgonia ops, as planned for TestCoverage's graphs (generated: OOC_UPDATE_DOC=1 go test -run TestCoverage
// ./vm/cuda/dispatch rewrites it; the test fails when the plans and this table disagree). Kernels run in
// float32 or float64; a comparison with a bool result writes one byte per element (Go's bool), as on the host.
// Int (and Int64) tensors are Go's int, 8 bytes per element, Int32 4, Byte (Uint8) 1, and run + - ⊙ ÷,
// comparisons, Max/MinBetween, Sum and Max over any axes (the _i64, _i32 and _byte kernels), SizeOf of an Int
// operand, ConvType between Int and the float types, and the ops that move elements (copies of their bits). Integer ÷ is the CPU
// device's: between tensors tensor's preallocated Div, truncating, 0 for a zero divisor (it reports nothing),
// the minimum ÷ -1 wrapping as in Go; between two scalars Go's /, which panics on a zero divisor and fails the
// CPU device's run, so the runner reads the divisor back first (a one-element host stall) and fails the run
// there too. gorgonia builds no unary op on integers (Neg, Abs, Square... panic at graph building) and tensor
// has no integer ^ (the CPU device fails at Run): neither has a plan. Bool tensors (one byte per element) run
// == and != between them (compare_u8) and the ops that move elements (copy_u8, fill_u8, g_byindices_u8):
// tensor refuses arithmetic, ordering, Sum and SizeOf on bools. Those are gorgonia's dtypes (its
// acceptableDtypes); others are refused:
//
//	op                            device work
//	gorgonia.BatchNormOp          g_batchnorm
//	gorgonia.GroupNormOp          g_groupnorm
//	gorgonia.avgPoolDiffOp        g_avgpool_grad
//	gorgonia.avgPoolOp            g_avgpool
//	gorgonia.batchnormDiffOp      g_batchnorm_grad
//	gorgonia.byIndicesOp          fill, fill_u8, g_byindices, g_byindices_u8
//	gorgonia.byIndicesOpDiffOp    fill, g_byindices_grad
//	gorgonia.col2imOp             g_col2im
//	gorgonia.concatOp             copy, copy_u8
//	gorgonia.ctcLossDiffOp        ctc_alpha, ctc_grad, fill
//	gorgonia.ctcLossOp            ctc_alpha, ctc_reduce
//	gorgonia.diagFlatOp           copy, copy_u8, fill, fill_u8
//	gorgonia.dropoutDiffOp        g_dropout_grad
//	gorgonia.dropoutOp            copy
//	gorgonia.dtConvOp             convert
//	gorgonia.elemBinOp            binary, binary_byte, binary_i32, binary_i64, compare, compare_byte, compare_i32, compare_i64, compare_u8
//	gorgonia.elemUnaryOp          unary
//	gorgonia.globalAveragePoolOp  g_gap
//	gorgonia.groupNormDiffOp      g_groupnorm_grad
//	gorgonia.im2colOp             g_im2col
//	gorgonia.linAlgBinOp          cuBLAS dot, cuBLAS gemm, cuBLAS gemmBatched, cuBLAS gemv, cuBLAS ger, fill
//	gorgonia.maxBetween           binary, binary_i64
//	gorgonia.maxOp                reduce, reduce_axes, reduce_axes_i64, reduce_byte, reduce_i32, reduce_i64
//	gorgonia.maxPoolDiffOp        g_maxpool_grad
//	gorgonia.maxPoolOp            g_maxpool
//	gorgonia.minBetween           binary, binary_byte, binary_i32, binary_i64
//	gorgonia.repeatOp             copy
//	gorgonia.sizeOp               fill, fill_i64
//	gorgonia.sliceIncrOp          copy, fill
//	gorgonia.sliceOp              copy, copy_u8
//	gorgonia.softmaxDiffOp        softmax_grad
//	gorgonia.softmaxOp            softmax
//	gorgonia.sparsemaxDiffOp      g_sparsemax_grad
//	gorgonia.sparsemaxOp          g_sparsemax
//	gorgonia.sumOp                reduce, reduce_axes, reduce_axes_i64, reduce_byte, reduce_i32, reduce_i64
//	gorgonia.tensordotOp          copy, cuBLAS dot, cuBLAS gemm, cuBLAS gemv
//	gorgonia.transposeOp          copy, copy_u8
//	gorgonia.upsampleDiffOp       g_upsample_grad
//	gorgonia.upsampleOp           copy
//	gorgonia.clampOp              none: built by no function of gorgonia v0.9.18, and its Do returns nothing (TestClampOpIsBuiltByNothing)
//	gorgonia.yoloOp               none: ooc.Compile refuses YOLOv3 on every device, its op rewriting its operand in place (TestYOLOv3RefusedOnEveryDevice)
//
// Elementwise ops take scalar operands by a stride of 0; comparisons with
// retSame (Rectify's >=) run the binary kernel. Transposes are one strided
// copy for any permutation (axes of length 1 dropped and axes that stay
// neighbours merged: at most 6 blocks may move); sums and maxima over one run
// of neighbouring axes run reduce, over any other set of axes reduce_axes
// (at most 6 runs of kept and reduced axes); softmax takes any axis,
// a negative one counted from the last (gorgonia's default is -1). Products
// run the cuBLAS call the CPU device's BLAS call is for that shape (tensor's
// MatMul, MatVecMul, Inner, Outer): matrix-matrix gemm, matrix-vector gemv,
// the dot product dot (in device pointer mode: its result is written on the
// device, with no host synchronisation), the outer product a fill and ger
// (which adds, as gorgonia's Outer zeroes first), a batched product one
// gemmBatched (gemmStridedBatched takes 18 arguments, more than purego's
// calls pass, 15: gemmBatched reads the matrices' addresses from arrays in
// device memory, 24 bytes per matrix of the batch kept in the runner's
// segment outside the budget, uploaded when the operands' addresses change),
// and tensordotOp transposes each operand that needs it into the function's
// workspace (the backend reports it to the trace, vm.WorkspaceBackend, so the
// budget counts it; a program traced without the backend gets the runner's
// scratch, outside the budget, instead), then calls
// what tensor's TensorMul calls for the two matrices: dot or gemv when one
// side is a vector, gemm otherwise. CTCLoss runs a thread per batch
// element; its gradient recomputes the forward's alpha table (the CPU op keeps
// it inside the op), the tables in the function's workspace too. Reshapes are
// views and need nothing.
// gorgonia v0.9.18 has no argmax or argmin op (tensor.Argmax is called on
// values outside the graph). Its clampOp is built by no function (the type is
// unexported and no file of gorgonia makes one) and its Do returns nothing,
// and yoloOp never reaches a backend: ooc.Compile refuses YOLOv3 on every
// device (its op writes its activations into its operand and returns it);
// the table's "none" rows say so and a test each keeps it true. Every op not
// listed is refused at Compile (the error names it, its type and node). gorgonia's own
// ops of the conv, pooling, norm, dropout, random, index and sparsemax
// families (plans in one file per family: conv.go, pool.go, norm.go,
// dropout.go, random.go, indices.go, sparsemax.go, hooked in by families.go)
// compute what the CPU device computes for them, gorgonia's Do, bugs included
// (AveragePool2D's division by the input width, Dropout's gradient scale,
// ByIndices' strides, GroupNorm's moments of rows over 256 elements); their
// kernels (the g_ kernels) are the CPU op's bits on the fake device. Dropout's
// mask is drawn on the host from the op's own generator and uploaded, and a
// random node runs its Do on the host and is uploaded, so both give the CPU
// device's values for the same op state. A convolution's column matrix is one image's,
// within the workspace the op declares to the planner, so the budget counts
// it. cuBLAS works in a workspace of the runner's (cuda.Device.
// BLASWorkspaceBytes, set with cublasSetWorkspace_v2), taken from the
// device's memory: the backend reports it as its reserve
// (vm.Reserver), and ooc plans the tape for the budget less it
// (vm.Program.Reserve), so it is inside the budget. Batch norm's
// per-channel statistics use a scratch segment of the runner (4 float64
// and one element per channel of the widest layer, plus each layer's
// running mean and variance), also outside the budget.
//
// A convolution's weight gradient over small images sums a chunk of images
// in one GEMM, as the CPU op does (layers.ConvChunk), so the k of every GEMM
// is the CPU's; its forward and data products run one image per GEMM, which
// changes no element's sum. Block reductions add in a fixed tree that
// models/layers also sums channels and planes in (package kernels says where
// bits are the CPU's). On a real GPU cuBLAS sums in an order of its own, so
// results agree with the CPU device to rounding; on the fake device, whose
// cuBLAS does package blas's arithmetic, most ops give the CPU's bits.
//
// # State on the device
//
// The machine keeps the leaves (input batch, learnables, constants) in device
// blocks for its lifetime, uploaded at each run (an input batch handed over
// with vm.Machine.StageNext is copied in during the run before instead, from
// pinned memory: Runner implements vm.Stager); batch norm's running
// statistics go up with the first forward of a step and come back at its end
// into the op (gorgonia's API reads them there). What a script reads comes
// back to the host: the cost, the gradients, Read and WithOutputs nodes, and
// the node values ooc binds after RunAll as TapeMachine does (the scalars,
// and the forward's and backward's intermediates within ooc's node-value
// limit, WithNodeValues): each is downloaded right after the op that makes
// it, on the copy stream after the compute work queued so far, and the host
// waits for it before the next op is queued, so the copy lands before the
// memory is freed, written over in place or swapped out, without tracking
// pending copies against each block. That costs a host stall per bound node
// and step; a script that reads only the loss passes ooc.WithNodeValues(0).
// Solver moves the optimizer to
// the device: weights are uploaded once and stay, gradients are added into
// device buffers as the step computes them, and sgd, momentum, adam and rmsprop
// (also AdaGrad's update) kernels update with gorgonia's formulas and the settings of the gorgonia
// solver it wraps; SyncToHost and State bring weights and optimizer state
// back for evaluation and checkpoints. ooc train -device cuda uses it by
// default; -host-update keeps gorgonia's solver on the host. Every gorgonia
// solver also works on the host with a CUDA machine, as with any machine
// (Step after RunAll: the gradients come back to the learnables and the
// next run uploads the weights); AdamW and Barzilai-Borwein only work that
// way (no kernels yet).
//
// # Launch table
//
// Every kernel launch and GEMM of a run is recorded once per function with
// its grid, block, count per step, bytes moved and FLOPs (LaunchesOf,
// WriteLaunchTable; ooc train -launch-table FILE), so that kernel times of a
// GPU run can be read against the simulator's roofline.
//
// # What is proven, and what is not
//
// No GPU has run this package: no machine of the project has one, and no
// GPU result exists. The tests run it on the fake driver of vm/cuda with the
// kernels' host builds behind cuLaunchKernel (real argument packing, grids
// and parameter sizes) and a fake cuBLAS (host products with cuBLAS's
// column-major contract and argument checks, ordered on the stream, doing the
// per-element arithmetic of the CPU device's BLAS: package blas's GEMM,
// TestFakeCuBLASIsPackageBLAS; gonum's gemv, ger and dot,
// TestFakeCuBLASLevel2IsGonum): smallcnn and lstm,
// and with OOC_CUDA_ZOO=1 every other bundled model (resnet18, 34, 50, 101
// and 152, densenet121, 169 and 201, vgg16, unet, inceptionv3 with and
// without its auxiliary classifier, deeplabv3plus and pix2pixhd, the deep
// ones narrowed), train on it at 100%, 50% and the least budget
// with the VA allocator and swapping, and match the CPU device per step:
// float64 within 1e-12, float32 within 1e-5 normwise relative per tensor, or,
// where a deep model amplifies the last-bit differences that remain
// (float32 exp and log: math32's assembly on the CPU), no more than twice as
// far from the model run in float64 as the CPU device (TestZooOnFakeDevice
// says what is compared and why; docs/results.md has the numbers). In
// float64 the kernels' host build computes exp and log as Go's amd64
// assembly and softmax takes tensor's last-axis maximum, so densenet121's
// float64 step is the CPU device's bits. That proves the
// planning, the argument and layout arithmetic, the machine's device-memory
// protocol and the kernels' results; it cannot prove the real driver's JIT of the PTX, cuBLAS's behaviour,
// timing, or anything about a GPU's speed.
package dispatch
