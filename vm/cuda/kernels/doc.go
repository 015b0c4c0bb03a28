// Package kernels holds the CUDA kernels of the CUDA device (issue 15, part
// 2): CUDA C sources in src/, compiled by clang to one PTX module that is
// committed and embedded (PTX), and a table (Specs) saying for each kernel
// what to pass, how to launch it and what it moves, so the VM can launch it
// through cuLaunchKernel and record each launch for the simulator's roofline.
// Matrix products are not here: the VM runs them in cuBLAS; these are the
// kernels around them.
//
// # Using it
//
//	s, _ := kernels.Lookup("relu_f32")
//	l, err := s.Prepare(kernels.Ptr(y), kernels.Ptr(x), kernels.Int(n))
//	if !l.Empty() { // CUDA refuses a zero grid: nothing to do
//		cuLaunchKernel(fn(l.Kernel), l.Grid, l.Block, l.SharedBytes, stream, l.Params().Pointer(), nil)
//	}
//	record(l.Kernel, l.Grid, l.Block, l.Bytes, l.FLOPs)
//
// Prepare checks each argument against its parameter (kind, int range,
// struct validity, no negative sizes), packs them as kernelParams (one 8-byte
// aligned slot per argument, an array of pointers to the slots) and computes
// the grid, block and cost. Every kernel has 256 threads per block; grids
// are capped at 65536 blocks, since every kernel walks its index space with
// a grid-stride loop (any grid gives the same results). Bytes counts each
// operand read or written once at its element size; FLOPs counts arithmetic
// (a multiply-add is 2, a transcendental function 1).
//
// # Kernels (each _f32 and _f64 unless noted) and the CPU op each reproduces
//
//	kernel            grid (x 256 threads)   bytes moved (s = element size)      CPU op
//	unary             ceil(n/256)            2ns                                 gorgonia elemUnaryOp (20 operators, UnaryOp)
//	binary            ceil(n/256)            ns + distinct(a)s + distinct(b)s    elemBinOp: + - ⊙ ÷ ^, comparisons with retSame; maxBetween, minBetween
//	compare           ceil(n/256)            n + distinct(a)s + distinct(b)s     elemBinOp comparisons with bool results
//	fill              ceil(n/256)            ns                                  zeroing (gradients, caches)
//	copy              ceil(n/256)            ns + distinct(in)s                  transposeOp, sliceOp, concatOp, repeatOp, reshapeOp
//	reduce            ceil(rows/256)         (rows·k + rows)s                    sumOp, maxOp over one axis; Mean
//	reduce_axes       ceil(rows/256)         (rows·k + rows)s                    sumOp, maxOp over several axes (any set); Mean
//	convert(_i64)     ceil(n/256)            (8+s)n                              dtConvOp (ConvType) between a float type and Int (int64)
//	binary, compare _i64 _i32 _byte ceil(n/256) as binary, compare (s = 8, 4, 1) elemBinOp on Int, Int32, Byte tensors: + - ⊙ (wrapping), ÷ (0 for a zero divisor), comparisons, Max/MinBetween
//	reduce(_axes) _i64 _i32 _byte ceil(rows/256) (rows·k + rows)s                sumOp (wrapping), maxOp on Int, Int32, Byte tensors
//	fill_i64          ceil(n/256)            8n                                  sizeOp of an Int operand
//	copy_u8, fill_u8  ceil(n/256)            n + distinct(in), n                 transposeOp, sliceOp, concatOp, diagFlatOp on Bool tensors
//	compare_u8        ceil(n/256)            n + distinct(a) + distinct(b)       elemBinOp == and != of Bool tensors
//	g_byindices_u8    ceil(moved/256)        2·moved + 8·nidx                    byIndicesOp of a Bool tensor
//	ctc_alpha, ctc_grad ceil(B/256)          (T·B·C + T·B·(2S+1))s (·3, ·2)     ctcLossOp, ctcLossDiffOp (a thread per batch element; the gradient recomputes alpha)
//	ctc_reduce        1                      (s+8)B                              ctcLossOp's sum or mean over the batch
//	softmax(_grad)    ceil(rows/256)         2 (3) · rows·k·s                    softmaxOp, softmaxDiffOp (log or not; tensor's last-axis maximum)
//	xent_loss         1 block                2·rows·k·s                          layers.(Pixel)SoftmaxCrossEntropy value
//	xent_grad         ceil(rows/256)         3·rows·k·s                          its gradient w.r.t. the logits
//	im2col            ceil(K·nb·P/256)       (K·nb·P + nb·C·H·W)s                convOp's im2col (K = C·KH·KW, P = OH·OW)
//	col2im            ceil(nb·C·H·W/256)     (K·nb·P + nb·C·H·W)s                convOp's col2im (data gradient, ConvTranspose2D)
//	channel_bias      ceil(N·C·plane/256)    (2·N·C·plane + C)s                  convOp's bias
//	channel_sum       C blocks (barrier)     (N·C·plane + C)s                    channelSumOp (bias and BN beta gradients)
//	bn_stats          C blocks (barrier)     2·N·C·plane·s + 24C                 BatchNormOp batch statistics (float64)
//	bn_apply          ceil(N·C·plane/256)    2·N·C·plane·s + (2s+16)C            BatchNormOp normalisation
//	bn_grad_sums      C blocks (barrier)     2·N·C·plane·s + (s+32)C             bnGradOp sums; the gamma gradient
//	bn_grad_x         ceil(N·C·plane/256)    3·N·C·plane·s + (s+32)C             bnGradOp, the x gradient
//	bn_infer_stats    ceil(C/256)            32C            (float64 only)       BatchNormOp in inference mode
//	bn_running        ceil(C/256)            48C            (float64 only)       BatchNormOp running statistics update
//	maxpool(_grad)    ceil(out (in) /256)    (in + out)s ((2in + out)s)          maxPoolOp, maxPoolGradOp
//	avgpool(_grad)    ceil(out (in) /256)    (in + out)s                         avgPoolOp, avgPoolGradOp
//	gap(_grad)        ceil(planes(·plane)/256) (planes·plane + planes)s          globalAvgPoolOp, globalAvgPoolGradOp
//	relu(_grad)       ceil(n/256)            2ns (3ns)                           reluOp, reluGradOp
//	im2col_tile       ceil(K·t/256)          2K·t·s                              convOp's im2col of one tile of t pixels
//	col2im_tile       ceil(C·H·W/256)        (K·t + 2C·H·W)s                     convOp's col2im of one tile, added on
//	avgpool_excl(_grad) ceil(out (in) /256)  (in + out)s                         avgPoolOp without the padding in the count
//	resize_bilinear(_grad) ceil(out (in)/256) (in + out)s                        ResizeBilinear and its adjoint (gathered)
//	leaky_relu, tanh (_grad) ceil(n/256)     2ns (3ns)                           LeakyReLU, Tanh and their gradients
//	instnorm(_grad)   planes blocks (barrier) 3 (5) · planes·plane·s             InstanceNorm and its gradient
//	reflect_pad(_grad) ceil(out (in) /256)   (in + out)s                         ReflectionPad2D and its adjoint (gathered)
//	mean_loss         1 block (barrier)      (1 or 2)ns                          MSEToConstant, L1Loss (chunked as the CPU op)
//	mean_loss_grad    ceil(n/256)            (2 or 3)ns                          their gradients
//	embedding(_grad)  ceil(N·T·E/256) (ceil(E/256)) (T + 2T·E)s (+ V·E·s)        Embedding and its gradient (a column per thread)
//	lstm_cell         ceil(N·H/256)          7N·H·s                              LSTMCell, LSTMHidden and their gradients
//	sgd, momentum     ceil(n/256)            4ns, 6ns                            VanillaSolver.Step, Momentum.Step
//	adam, rmsprop     ceil(n/256)            8ns, 6ns                            AdamSolver.Step, RMSPropSolver.Step
//
// gorgonia's own ops (src/gnn.cu, gbn.cu, gdropout.cu, gindex.cu, gsparse.cu,
// gnorm.cu; the g_ kernels) reproduce what the CPU device runs for
// them, gorgonia's Do, bit for bit (TestGorgonia* against the gorgonia ops):
//
//	g_im2col, g_col2im        ceil(N·P·K/256), ceil(N·C·H·W/256)  im2colOp, col2imOp (columns (N, OH, OW, K))
//	g_maxpool(_grad)          ceil(out (in) /256)     maxPoolOp, maxPoolDiffOp (gorgonia's argmax rule)
//	g_avgpool(_grad)          ceil(out/256) (planes)  avgPoolOp, avgPoolDiffOp (its arithmetic as it is)
//	g_gap                     ceil(planes/256)        globalAveragePoolOp
//	g_batchnorm(_grad)        ceil(C/256)             BatchNormOp, batchnormDiffOp (a thread per channel)
//	g_dropout(_grad)          ceil(n/256)             dropoutOp (host-drawn mask in y), dropoutDiffOp
//	g_upsample_grad           ceil(in/256)            upsampleDiffOp
//	g_byindices(_grad)        ceil(n·outer·L/256)     byIndicesOp, byIndicesOpDiffOp (Int indices: I64Ptr)
//	g_sparsemax(_grad)        ceil(rows/256)          sparsemaxOp, sparsemaxDiffOp (a thread per row)
//	g_groupnorm(_grad)        ceil(rows/256)          GroupNormOp, groupNormDiffOp (a thread per (image, group))
//
// rows is outer·inner for the (outer, k, inner) view of a tensor around the
// reduced or softmax axis. A convolution is assembled as the CPU op does it:
// forward = im2col, GEMM, channel_bias; data gradient = GEMM (Wᵀ·dy), col2im;
// filter gradient = im2col, GEMM (dy·colᵀ), images summed in order;
// ConvTranspose2D is the data gradient with its bias; the bias gradients are
// channel_sum. The column matrix may hold a chunk of nb images side by side
// (leading dimension ld), the CPU op's workspace layout. Batch norm's training
// forward is bn_stats, bn_running, bn_apply; its backward bn_stats,
// bn_grad_sums, bn_grad_x (statistics recomputed from x, as the CPU op).
//
// # Semantics, and where the CPU op is not followed
//
// Arithmetic is the CPU op's, operation for operation and in the tensor's
// type, and the PTX is made without fused multiply-adds, so wherever the
// order of operations is the CPU's the results are its bits: every
// elementwise op except transcendental functions, copies, pooling and its
// gradients (gathered per input pixel in the CPU scatter's order, no
// atomics), col2im, global average pooling, the solvers, BN's normalisation
// and gradients in float32, and single-axis sums over a first or last axis.
// Block reductions add 256 interleaved partial sums in a fixed halving tree;
// models/layers sums a channel in that same order (its lanes), so
// channel_sum, bn_stats and bn_grad_sums, and with them batch norm and its
// gradients in both types, are the CPU op's bits too. xent_loss (no CPU op
// sums in its order) is deterministic, but its float64 result differs from a
// serial sum in the last bits. Transcendental functions
// are ports of Go's math (oocmath.h) without libdevice. Go's math.Exp and
// math.Log are amd64 assembly, not the portable Go those ports follow (within
// 2 ulps and 1 ulp of it): the host build on x86-64 replaces the two by ports
// of that assembly (src/hostmath.h, with the fused multiply-adds Go's Exp
// uses when the CPU has AVX and FMA, decided at load time as Go decides,
// GODEBUG cpu.fma and cpu.avx included), so the host emulation reproduces
// Go's amd64 libm bit for bit (TestHostMathIsGos: edge cases and 1e5 random
// inputs, both FMA branches) and the fake device can be compared with the
// CPU device bit for bit, Tanh, Pow, sigmoid and softmax included. That is
// emulation of the CPU's library, not of a GPU: the PTX keeps the portable
// ports, and on a real GPU exp and log differ from the CPU's in the last
// bits. float32 exp, sin,
// cos and expm1 follow math32's float32 algorithms or ranges, which gorgonia
// calls, with their flaws (exp is +Inf above 88.376 and 0 below -87.683;
// sin(710) is 8.8e-5; expm1 is NaN between about 88.7 and 89.4).
// The image-to-image and sequence ops (resize, pad and their adjoints,
// gathered in the CPU scatter's order; instance norm, in lanes on both;
// leaky ReLU; the mean losses, chunked as the CPU op; embedding) are the CPU
// op's bits too, and so are float64 tanh and the LSTM gates in the host build
// (they call exp, Go's amd64 one there; on a GPU they agree within rounding).
// An embedding
// id that is not an integer in [0, V) gives NaN (the CPU op's error cannot
// come from a kernel). Softmax along the last axis (mode 2, which the
// dispatch sets) subtracts tensor's last-axis maximum, max(x[0], x[r][1:]) for
// row r (the tensor's first element and the row without its own first), when
// that is within 16 of the row's own maximum, and so gives the CPU op's bits;
// further apart it uses the row's own (tensor's then underflows or overflows:
// TestSoftmaxLastAxisBug). Deliberate departures: Max uses tensor's last-axis NaN rule on every axis;
// reductions over a middle axis are correct (tensor's are wrong unless the
// axis has length 2); trig arguments of 2^29 and more are not reduced as Go
// does; float32 log of a subnormal is right where math32's is not.
//
// # What the host tests prove, and what they cannot
//
// The checks themselves (inputs, the CPU op's results, the comparison) are
// package kernelcheck's, one copy that these tests run on the host build and
// "ooc doctor" runs on a GPU, there within the same tolerances where these
// tests ask for bits, as a GPU's exp and log are not Go's bit for bit.
// TestGPUToleranceOnPortableMath (OOC_KERNELS_PORTABLE=1) runs them so on a
// host build with the PTX's portable exp and log (-DOOC_PORTABLE_MATH):
// worst 7.6e-7 (float32) and 6.2e-16 (float64), against 1e-5 and 1e-12.
//
// The same sources compile with g++ into a host library (kernelstest;
// src/host.h emulates the grid: blockIdx and threadIdx are loop variables,
// kernels with __syncthreads run each block's threads as fibers (a stack
// switch of a few instructions on x86-64, ucontext elsewhere and under the
// sanitizers) that all reach a barrier before any passes it, __shared__ is a
// thread-local static). Each launch is made through purego exactly as
// cuLaunchKernel's arguments (grid, block, kernelParams from Prepare) and
// compared with the CPU op on random inputs, odd sizes and special values
// (NaN, ±Inf, ±0, ties): to relative 1e-5 (float32) and 1e-12 (float64),
// elementwise for ops computed element by element and normwise (max error
// over max magnitude) for sums. The worst errors seen are below 7e-7
// (float32) and 6e-16 (float64); go test -v prints them per kernel. Every
// launch also runs with blocks and threads in reverse order and must give
// the same bits (a race shows as order dependence), guard bytes around every
// buffer must survive, and every launch is replayed in a build with
// AddressSanitizer and UndefinedBehaviorSanitizer on exactly sized buffers.
// A static_assert per kernel checks its C signature against its Spec; a test
// checks every PTX entry's parameter sizes against it, that the PTX calls no
// external function and has no fma or approximate division, and, with clang
// installed, that the committed PTX is what the sources give.
//
// So the host tests prove the kernels' arithmetic and indexing, the launch
// ABI and the argument packing. They cannot show GPU timing, occupancy or
// coalescing, warp-level behaviour (no warps here: threads run one at a time),
// the GPU's memory model (no real concurrency, so no torn or reordered
// accesses), or that the driver's JIT accepts the PTX on a given GPU (it is
// valid PTX 5.0 for sm_60 from LLVM, not checked by ptxas here). Known
// performance limits: channel reductions use one block per channel, which
// underuses a GPU when C is small and planes are large; float32
// transcendentals are computed in float64.
//
// # Making the PTX
//
// go generate ./vm/cuda/kernels/ writes src/ops.h from the Go operator
// tables and runs Debian's clang 14 (apt-get install -y clang):
//
//	clang --cuda-device-only --cuda-gpu-arch=sm_60 -nocudainc -nocudalib -O3 -ffp-contract=off -Wall -Werror -S src/all.cu
//
// sm_60 reaches Pascal (the papers' GTX 1080 Ti, Titan X, P100); the driver
// JIT-compiles it forward to newer GPUs.
package kernels
