// Package layers holds the custom gorgonia ops and the layer builders the model zoo shares.
//
// # Why these ops exist
//
// gorgonia v0.9.18 (with tensor v0.9.24) lacks some ops the models need, gets others wrong, and
// builds the rest out of nodes that keep far more memory alive than the frameworks the out-of-core
// papers measure. Each claim below is checked by TestGorgoniaFactsInDoc.
//
//   - GlobalAveragePool2D has no gradient: gorgonia.Grad through it panics (index out of range).
//     GlobalAvgPool2D here is differentiable and returns the (N,C) matrix a classifier head wants.
//   - AveragePool2D gives wrong values: on a 2x3x6x6 input, 2x2 windows at stride 2 differ from the
//     definition by 0.46. AvgPool2D here is correct forward and backward.
//   - Sum and Mean over several axes at once are wrong for ordinary 4-D shapes, so the losses here
//     reduce one axis at a time from the last.
//   - There is no transposed convolution (U-Net's up-convolution) and no convolution bias (VGG and
//     U-Net have one): ConvTranspose2D and the bias operand of Conv2D.
//   - Conv2d is six nodes: im2col, two reshapes, a matmul, a reshape and a transpose. The im2col
//     node is (N, OH, OW, C*KH*KW), nine times the input for a 3x3 stride-1 conv, and the matmul
//     reads it again for the weight gradient, so it stays alive from forward to backward next to
//     the matmul output and its transposed copy. Conv2D here is one node; its backward reads x, w
//     and dy only, and im2col lives in a workspace the op declares: one image's worth, or for
//     images under 256 output pixels as many as make 256 (one small image would be a slow GEMV).
//     Given less, down to MinWorkspaceBytes (256 output pixels' worth), it runs each image in
//     tiles of multiples of 256 pixels and gets the same bits (the GEMM cuts its sums every 256
//     terms, and col2im adds tiles in a fixed order): ooc.WithWorkspaceLimit uses that to bound a
//     convolution's resident need by its input, its output and a small tile, and without it
//     ooc's planner shrinks the workspaces of the convolutions a tight budget cannot hold.
//   - BatchNorm is a normalising op followed by gamma and beta broadcast with Repeat to the full
//     activation shape, a product and a sum: six nodes of x's shape where one would do. The op also
//     saves the batch mean and variance for its backward (hidden state: recomputing the forward or
//     interleaving two batches corrupts the gradient), and creating a training TapeMachine resets
//     its running statistics. BatchNorm here is one node with gamma and beta as (C) operands, and
//     its backward recomputes the statistics from x, unless it reads x at the memory the forward
//     read it from, or its sibling (dx, dgamma) already did from the same memory of x and dy: then
//     it takes theirs, the same bits, and a forward drops what the last step left.
//   - MaxPool2D allocates an int (8 bytes) argmax per output element when the graph is built (25.7
//     MB for a 16x64x112x112 input; gigabytes for ResNet-50 at batch 1440) and fills it in the forward
//     for the backward to read, the same hidden state. MaxPool2D here allocates nothing at build time
//     and its backward finds the argmax again from x.
//   - Rectify is x ⊙ (x ≥ 0): a mask node and a product node, and its gradient needs x. ReLU here is
//     one node whose gradient reads its own output, which the next layer keeps anyway.
//   - For the segmentation, GAN and sequence models gorgonia lacks instance norm, a leaky ReLU, a
//     pad op (Pix2PixHD's reflection padding), bilinear resizing (DeepLab's upsampling), an average
//     pool that does not count its padding, a stop-gradient (one-graph GAN steps), an embedding
//     lookup and the LSTM cell; its Tanh has no path into caller-owned memory. InstanceNorm,
//     LeakyReLU, Tanh, ReflectionPad2D, ResizeBilinear, AvgPool2DExcludePad, StopGradient,
//     MSEToConstant and L1Loss (the LSGAN and feature-matching losses as one scalar node each),
//     Embedding, SequenceStep and StackSequence, and LSTMGates, LSTMCell and LSTMHidden are here.
//     Each is one node; each backward reads only what it needs (the activations' gradients their
//     outputs, instance norm and the LSTM cell their inputs, the linear ops only dy). Dilated
//     (atrous) convolution is Conv2D with ConvParams.Dilation. These ops are specs on one frame
//     (frame.go) that supplies the contracts below, so each file is only the op's semantics.
//
// # Contracts every op here meets
//
// Each op implements gorgonia.Op and gorgonia.SDOp (gradients are other ops of this package, so
// gorgonia.Grad works and a TapeMachine runs the result), for float32 and float64. Each also
// implements gorgonia.UsePreallocDoer (writing into memory the caller owns, whatever it held), the
// WorkspaceOp interface (scratch memory declared up front so a VM can count it against its budget;
// ops without scratch declare 0) and FLOPser (multiply-adds count 2). Do, UsePreallocDo and
// DoWorkspace run the same code and give bit-identical results. A convolution's SymDiff makes
// its filter gradient before its data gradient, so gorgonia's order runs it first: it is often the
// last read of the layer's input, which can then leave memory before dx takes its place (a budget
// holds dy and x, or dy and dx, never all three; TestConvFilterGradientRunsFirst).
//
// Results are reproducible bit for bit: work is split across at most runtime.NumCPU goroutines
// only where each goroutine writes its own elements (channels, planes, GEMM blocks), every sum is
// taken in an order fixed by the shapes alone, and the convolution weight gradient adds images
// (or chunks of small images) one after another. A convolution packs its weights for the GEMM once
// per call and hands its images to internal/workpool's goroutines, each working in its own region
// of the workspace (convexec.go). Where it pays, no im2col matrix is written: at stride 1 the
// forward zero-pads each image and blas.GemmPackedRows reads the matrix's rows straight from it
// (convforward.go); the data gradient adds each tap's products onto a padded dx as one vector, in
// col2im's order (convdata.go); the weight gradient computes its k blocks (256 pixels of an image
// or chunk) in parallel into slots of the workspace and adds them to dw in order, its operands
// packed straight from the image and dy by blas.GemmSlivers (convfilter.go; the float32 AVX2
// interleaves in interleave_amd64.s only move values). The layout changed for speed (issue 28),
// never a sum, and TestConvExecSameBitsAsOld holds the former code as the reference.
// Reductions over activations (BN statistics, channel sums, plane means) accumulate in float64.
// Batch norm's float32 loops (lane sums, normalisation, dx) and ReLU's have AVX2 versions
// (simd_amd64.s) that round every operation as the Go loops do, with no fused multiply-add, so
// they give the same bits; the purego build tag leaves them out.
// A batch norm and the ReLU after it run as one pass where the out-of-core VM finds that nothing
// can tell (BatchNormOp.FuseNext, vm.Fuser: the ReLU writes over the batch norm's output and
// nothing else reads it): each plane is rectified right after it is normalised, while in cache,
// by the same loops as the two ops apart, so the bits are theirs. The graph keeps both nodes.
// (The backward counterpart, a ReLU gradient computing dgamma's sums in its pass, gave the same
// bits but measured no faster: its ReLU gradient, walked channel by channel, cost more than
// re-reading dz saved. It is in the history, commit "ReLU gradient readies".)
// GEMMs go through package blas, which importing this package also makes gorgonia's BLAS, so a
// TapeMachine running these ops and gorgonia's matmuls agrees with any other engine bit for bit.
//
// # Semantics worth knowing
//
//   - ReLU's gradient at exactly 0 is 0 (PyTorch); gorgonia's Rectify passes it through.
//   - Max pooling takes the first maximum in row-major window order, as gorgonia; a NaN wins.
//     Padding is at most half the kernel (as PyTorch), so no window is all padding.
//   - Average pooling counts padding as zeros (PyTorch's count_include_pad=True).
//   - BatchNorm normalises with the biased batch variance and eps 1e-5; in the forward it updates
//     running statistics held in the op as PyTorch does (momentum 0.1 is the new batch's weight,
//     unbiased variance, starting from mean 0 and variance 1). That update is the op's only state
//     and is never read in training mode; a VM that recomputes a BN forward advances it twice.
//     SetTraining(false) (gorgonia's TrainModeOp, also via Builder.SetTraining) switches to the
//     running statistics; unlike gorgonia's op, SetTraining(true) does not reset them.
//   - gorgonia.Grad asks every differentiable op for the gradient of all its operands, so the first
//     convolution also gets a data-gradient node for the image; an engine that prunes to what the
//     loss and the learnables' gradients need (as the project's VM does) never runs it.
//
// # Builders
//
// Builder creates weights deterministically from the caller's *rand.Rand (Kaiming normal convs as
// torchvision, BN gamma 1 and beta 0, PyTorch's nn.Linear initialisation), names them
// "<layer>.weight" and "<layer>.bias", refuses duplicate names (gorgonia would merge the nodes) and
// records learnables in creation order. Building allocates only the weights: a ResNet-50 for batch
// 1440 at 224x224 builds, backward included, with the heap growing by its 97.5 MiB of weights.
package layers
