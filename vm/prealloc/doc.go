// Package prealloc runs gorgonia's ops into memory the caller owns.
//
// gorgonia's Do returns its result in a tensor it allocates on the Go heap.
// The out-of-core VM keeps every activation in device memory under a byte
// budget, so a result made by Do costs Go memory the size of the
// activation, outside the budget, on every step, and a copy. For(op) gives
// a Func that writes the result straight into a tensor over the caller's
// memory instead: the same bits as Do, and the same side effects on the op
// (batch-norm's statistics, a pooling mask, a dropout generator's draws).
//
// # Why not UsePreallocDo
//
// gorgonia's UsePreallocDo is not a drop-in for Do. Some add into the
// tensor they are given where Do's starts zeroed (sliceIncrOp), batch-norm
// normalises what it is given instead of its input, dropout's always panics, and elemBinOp's uses
// other tensor kernels than Do for ÷ and ^ (vecf64.Div makes any x/0 +Inf,
// vecf64.Pow squares by multiplying; UsePreallocDo's kernels are IEEE
// division and math.Pow). Each op type therefore gets the strategy that
// makes it equal Do, chosen by reading Do's code and checked by tests that
// compare bits on output memory filled with 0xFF:
//
//   - the op's own UsePreallocDo, where it overwrites every element;
//   - zero out, then UsePreallocDo, where Do is UsePreallocDo on a new tensor;
//   - copy the first input into out, then UsePreallocDo, where Do is
//     UsePreallocDo on a clone of it;
//   - a copy of the input, then UnsafeDo on it (elementwise unary ops);
//   - a strided copy, for ops that only move elements (any order of copying
//     gives the same bits);
//   - Do's arithmetic rewritten to write into out, operation for operation
//     (softmax's kernels run row after row, without tensor's goroutine per
//     row and its allocations: no row reads what another writes, so the
//     order changes no bit).
//
// # Reductions
//
// Sum, Max (and Mean, which is a Sum) go through tensor's StdEng.reduce,
// which takes no output tensor: it reduces one axis at a time into new
// tensors. The Func replays the same kernels in the same order without the
// intermediates, and with tensor's bug: its kernel for an axis that is
// neither first nor last reads the wrong elements unless that axis has
// length 2, so gorgonia's Sum over the spatial axes of an NCHW tensor is
// not the sum. The Func returns Do's numbers. Where tensor's loop runs past
// its slice (a middle axis of length 1 after more than one block) Do panics
// and the Func returns an error. Do also sorts the op's axes in place, and
// so does the Func. Without intermediates a reduction over several axes
// re-reads its input along strided paths: on a 4 MiB tensor Sum over
// (0, 2, 3) ran 4 to 10 times slower than Do here, over (2, 3) up to 1.4
// times, over one axis up to 1.6 times (BenchmarkFuncVsDo).
//
// # In place
//
// For the elementwise ops (elemUnaryOp, elemBinOp) out may be the memory of
// one operand, with a shape of its own. tensor's same-type comparisons copy
// the left operand into the result before reading the right one, so with
// the result over the right operand the Func computes the mirrored
// comparison (b < a for a > b), which is true and false on the same
// elements, NaNs included. No other op may be given out over an input.
//
// # Limits
//
// Bits are Do's for every value with one exception: when both operands of
// an addition or multiplication are NaNs, which NaN survives is decided by
// the order the compiler gave the operands, and Go may swap them. The
// rewritten kernels keep the one tensor's compiled kernels keep on amd64
// (the accumulator's); under the race detector tensor is compiled
// differently and keeps the other one.
//
// A Func allocates headers, not data, except: gorgonia's GroupNorm and the
// CTC loss gradient allocate scratch inside, in Do as well (GroupNorm
// about a sixth of the tensor's bytes per call, the CTC gradient a
// transposed copy of its input); gorgonia's batch-norm starts a goroutine
// per channel; a non-contiguous view
// handed to Sum or Max is materialised first, as Do does.
//
// A Func does not panic: bad inputs give errors, and inputs that would
// make gorgonia's kernels index out of range from their own goroutines
// (where no one can recover the panic) are refused before the call, as far
// as the checks here reach (tests feed every Func wrong shapes, sizes and
// dtypes). Inputs are expected to be plain tensors, as the VM makes them:
// views are copied in their logical order by the data-movement Funcs and
// refused where Do's kernel reads a view's raw backing. Scalar results
// are not For's: ScalarFor computes the scalar ops a loss is made of
// (arithmetic of two float scalars, a unary function of one, a tensor's
// size along an axis, a float tensor's sum over all its axes) into caller
// memory, and the caller runs Do for the other scalar nodes.
//
// # Ops
//
// Every op type with a Do in gorgonia v0.9.18 (Strategies lists the same):
//
// Computed into out:
//
//   - *gorgonia.BatchNormOp: copy x into out, own UsePreallocDo (which normalises out in place
//     and updates the saved and running statistics, as Do does)
//   - *gorgonia.GroupNormOp: zero out, own UsePreallocDo (also sets the op's saved mean and
//     rstd, as Do does); gorgonia allocates small scratch vectors per 128 elements inside
//   - *gorgonia.avgPoolDiffOp: zero out, own UsePreallocDo
//   - *gorgonia.avgPoolOp: zero out, own UsePreallocDo (also fills the op's mask, as Do does)
//   - *gorgonia.batchnormDiffOp: copy x into out, own UsePreallocDo
//   - *gorgonia.byIndicesOp: tensor's selection loop (its stride arithmetic included) copying
//     into out
//   - *gorgonia.byIndicesOpDiffOp: zero out, tensor.ByIndicesB with out as its reuse tensor
//   - *gorgonia.ctcLossDiffOp: zero out, own UsePreallocDo (reads the forward's saved alphas,
//     as Do does); gorgonia allocates scratch inside
//   - *gorgonia.dropoutDiffOp: copy x into out, own UsePreallocDo
//   - *gorgonia.dropoutOp: Do's loop into zeroed out, drawing from the op's own generator
//     (read from its unexported field); copy of x when not training or probability 0. Its
//     UsePreallocDo always panics in v0.9.18
//   - *gorgonia.dtConvOp: zero out, own UsePreallocDo
//   - *gorgonia.globalAveragePoolOp: Do's loop (sum over h then w, one divide) into out
//   - *gorgonia.groupNormDiffOp: copy x into out, own UsePreallocDo (gorgonia logs the whole
//     output gradient from inside, as Do does)
//   - *gorgonia.maxOp: as sumOp, with the max kernels
//   - *gorgonia.maxPoolDiffOp: own UsePreallocDo
//   - *gorgonia.maxPoolOp: own UsePreallocDo (also fills the op's argmax mask, as Do does)
//   - *gorgonia.repeatOp: own UsePreallocDo, replayed on out's bytes (tensor's repeat copier
//     and its stride choices) for plain float tensors on tensor's engine
//   - *gorgonia.sliceOp: a range of step 1 within the axis copied into out from a layout made
//     here; any other slice: the input's tensor.Slice view copied into out
//   - *gorgonia.softmaxDiffOp: tensor's softmax gradient kernels run row after row in the
//     caller's goroutine; zero out and own UsePreallocDo off tensor's StdEng
//   - *gorgonia.softmaxOp: tensor's softmax kernels run row after row in the caller's
//     goroutine, without the goroutine per row (its first-row maximum included); zero out and
//     own UsePreallocDo off tensor's StdEng
//   - *gorgonia.upsampleDiffOp: Do's loop (float64 sums in Do's order) into out
//   - *gorgonia.upsampleOp: each input element copied to its (s+1)x(s+1) block
//   - gorgonia.Iop: copy
//   - gorgonia.col2imOp: own UsePreallocDo
//   - gorgonia.concatOp: each input copied into its block of out
//   - gorgonia.diagFlatOp: zero out, input on the diagonal
//   - gorgonia.elemBinOp: blas.Add for + of two float tensors of one shape, out over a or its
//     own memory (a first, as tensor's kernel); Do's vecf32/vecf64 kernels rewritten for the
//     other + and for - and ⊙ of two float tensors of one shape and for arithmetic of a float
//     tensor with a scalar right operand (the left operand's NaN kept; tensor's vec kernels
//     for a one-element tensor, its *VS loops otherwise), where UsePreallocDo boxes its
//     options and operands every call, and for ÷ and ^ of two tensors and for any arithmetic
//     with a scalar left operand, where UsePreallocDo's kernels give other results; own
//     UsePreallocDo for the other two-tensor +, -, ⊙ (other dtypes or shapes), the comparisons
//     (a same-type comparison written over its right operand runs mirrored: b < a for a > b)
//     and other operands
//   - gorgonia.elemUnaryOp: copy x into out (nothing to copy when out is x), own UnsafeDo on
//     out
//   - gorgonia.im2colOp: own UsePreallocDo
//   - gorgonia.linAlgBinOp: the GEMM call of tensor's MatMul made here, with its arguments, for a
//     matrix product of plain row-major operands; own UsePreallocDo for the other products and
//     operands (vector dot products are scalars: not handled)
//   - gorgonia.maxBetween: own UsePreallocDo
//   - gorgonia.minBetween: own UsePreallocDo
//   - gorgonia.reshapeOp: copy in row-major order
//   - gorgonia.sliceIncrOp: zero out, own UsePreallocDo
//   - gorgonia.sumOp: tensor v0.9.24's reduction kernels replayed axis by axis without
//     intermediates, its middle-axis indexing bug included
//   - gorgonia.tensordotOp: matrix product into out, when neither operand needs transposing
//     (the contracted axes are a's last and b's first, in order); declined otherwise: Do
//     transposes copies of both operands
//   - gorgonia.transposeOp: strided copy through the permuted strides
//
// Declined (For returns false):
//
//   - *gorgonia.ExternalOp: declined: a wrapper for external devices
//   - *gorgonia.clampOp: declined: Do returns nil (no result at all)
//   - *gorgonia.ctcLossOp: declined: the result is a scalar
//   - *gorgonia.sparsemaxDiffOp: declined: Do is a chain of allocating tensor calls
//   - *gorgonia.sparsemaxOp: declined: Do builds its result in slices it allocates itself
//   - *gorgonia.yoloOp: declined: Do allocates and keeps training state
//   - gorgonia.atOp: declined: the result is a scalar
//   - gorgonia.constantScalar: declined: a constant is a leaf
//   - gorgonia.constantTensor: declined: a constant is a leaf
//   - gorgonia.devTrans: declined: a device transfer (Do panics)
//   - gorgonia.letOp: declined: a statement, no value
//   - gorgonia.randomOp: declined: Do seeds a new generator from the clock on every call, so
//     no two runs agree
//   - gorgonia.readOp: declined: a statement, no value
//   - gorgonia.sizeOp: declined: the result is a scalar
package prealloc
