package layers

import (
	"fmt"
	"hash"
	"math"
	"sync"
	"unsafe"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// BatchNormOp is the lean batch normalisation: y = gamma*(x-mean)/sqrt(var+eps) + beta over
// (N, C, ...) inputs, per channel, with gamma and beta (C,) operands of the one op. gorgonia's
// BatchNorm normalises in one op, then broadcasts gamma and beta to x's shape (Repeat) and
// multiplies and adds: four more activation-sized tensors per layer than this op, and as many
// gradient tensors in the backward.
//
// In training mode (the default) the batch statistics are computed in the forward, and the
// backward computes them from x too unless it reads x at the very memory the last forward read
// it from: then it takes the forward's, the same bits. The two gradient ops (dx and dgamma) need
// the same statistics and gradient sums from the same x and dy, and the first of a step hands
// them to the second likewise (bnSums). So the result of every call depends on its operands
// only, and a VM may recompute the forward or interleave batches freely (other memory is
// computed afresh). Sums run in float64, channel by channel in a fixed order, so results are
// reproducible bit for bit.
//
// Running statistics for inference live in the op and are updated by each training-mode forward, as
// PyTorch: running = (1-momentum)*running + momentum*batch, with the unbiased batch variance, and
// momentum 0.1 by default; they start at mean 0, variance 1. They are the only state, and it is
// never read in training mode. Because the update happens in the forward, a VM that recomputes a
// BN forward (to save memory) advances the running statistics twice in that step; training
// results are unaffected. After SetTraining(false) the op normalises with the running statistics
// and leaves them unchanged.
type BatchNormOp struct {
	pure
	shapeMemo
	eps      float64
	momentum float64
	dims     int
	serial   uint64 // keeps this op's beta gradient apart from other BNs' (see channelSumOp.owner)

	mu       sync.Mutex
	training bool
	runMean  []float64
	runVar   []float64
	// handoff is what the first of this op's two gradient ops of a step computed, for the
	// second (see bnSums); spare is a used one kept for the next step, so a step allocates
	// nothing. fwd is the last training forward's mean and 1/std (its key that forward's x),
	// for the first gradient op.
	handoff, spare, fwd *bnSums
}

// NewBatchNormOp makes a batch-norm op for inputs of the given rank (4 for NCHW) and channel count.
func NewBatchNormOp(dims, channels int, momentum, eps float64) (*BatchNormOp, error) {
	if dims < 2 || channels < 1 {
		return nil, fmt.Errorf("layers: batch norm needs (N,C,...) inputs with C >= 1, got %d dims, %d channels", dims, channels)
	}
	if !(eps > 0) || momentum < 0 || momentum > 1 {
		return nil, fmt.Errorf("layers: batch norm needs eps > 0 and momentum in [0,1], got %v, %v", eps, momentum)
	}
	op := &BatchNormOp{eps: eps, momentum: momentum, dims: dims, training: true, serial: serials.Add(1),
		runMean: make([]float64, channels), runVar: make([]float64, channels)}
	op.ResetRunningStats()
	return op, nil
}

// SetTraining switches between batch statistics (true) and running statistics (false). It is
// gorgonia's TrainModeOp, so a TapeMachine calls it on creation; unlike gorgonia's BatchNormOp it
// does not reset the running statistics.
func (op *BatchNormOp) SetTraining(training bool) error {
	op.mu.Lock()
	op.training = training
	op.dropHandoffLocked()
	op.mu.Unlock()
	return nil
}

// Training reports the current mode.
func (op *BatchNormOp) Training() bool {
	op.mu.Lock()
	defer op.mu.Unlock()
	return op.training
}

// RunningStats returns copies of the running mean and (unbiased) variance.
func (op *BatchNormOp) RunningStats() (mean, variance []float64) {
	op.mu.Lock()
	defer op.mu.Unlock()
	return append([]float64(nil), op.runMean...), append([]float64(nil), op.runVar...)
}

// SetRunningStats replaces the running statistics (e.g. from a checkpoint).
func (op *BatchNormOp) SetRunningStats(mean, variance []float64) error {
	op.mu.Lock()
	defer op.mu.Unlock()
	if len(mean) != len(op.runMean) || len(variance) != len(op.runVar) {
		return fmt.Errorf("layers: running stats for %d channels, got %d and %d", len(op.runMean), len(mean), len(variance))
	}
	copy(op.runMean, mean)
	copy(op.runVar, variance)
	op.dropHandoffLocked()
	return nil
}

// ResetRunningStats sets the running mean to 0 and variance to 1.
func (op *BatchNormOp) ResetRunningStats() {
	op.mu.Lock()
	defer op.mu.Unlock()
	for i := range op.runMean {
		op.runMean[i], op.runVar[i] = 0, 1
	}
}

// Momentum is the new batch's weight in the running statistics.
func (op *BatchNormOp) Momentum() float64 { return op.momentum }

// Epsilon is added to the variance before the square root.
func (op *BatchNormOp) Epsilon() float64 { return op.eps }

// mode snapshots the mode and, for inference, the running statistics, so one call sees one mode.
func (op *BatchNormOp) mode() (training bool, mean, variance []float64) {
	op.mu.Lock()
	defer op.mu.Unlock()
	if op.training {
		return true, nil, nil
	}
	return false, append([]float64(nil), op.runMean...), append([]float64(nil), op.runVar...)
}

func (op *BatchNormOp) Arity() int    { return 3 }
func (op *BatchNormOp) Type() hm.Type { return fnType(op.dims, 1, 1, op.dims) }

// bnShape validates x (N,C,...) against the op and returns N, C and the per-channel plane size.
func bnShape(op *BatchNormOp, x tensor.Shape) (N, C, plane int, err error) {
	if x.Dims() != op.dims {
		return 0, 0, 0, fmt.Errorf("layers: batch norm built for %d-D input, got %v", op.dims, x)
	}
	if x[1] != len(op.runMean) {
		return 0, 0, 0, fmt.Errorf("layers: batch norm built for %d channels, got %v", len(op.runMean), x)
	}
	N, C = x[0], x[1]
	if N < 1 || x.TotalSize() == 0 {
		return 0, 0, 0, fmt.Errorf("layers: batch norm of empty input %v", x)
	}
	return N, C, x.TotalSize() / (N * C), nil
}

func wantVec(name string, s tensor.Shape, c int) error {
	if s.Dims() != 1 || s[0] != c {
		return fmt.Errorf("layers: %s has shape %v, want (%d)", name, s, c)
	}
	return nil
}

func (op *BatchNormOp) outShape(in []tensor.Shape) (tensor.Shape, error) {
	if len(in) != 3 {
		return nil, fmt.Errorf("layers: %v takes (x, gamma, beta)", op)
	}
	_, C, _, err := bnShape(op, in[0])
	if err != nil {
		return nil, err
	}
	if err := wantVec("gamma", in[1], C); err != nil {
		return nil, err
	}
	if err := wantVec("beta", in[2], C); err != nil {
		return nil, err
	}
	return in[0].Clone(), nil
}

func (op *BatchNormOp) InferShape(ds ...G.DimSizer) (tensor.Shape, error) {
	in, err := dimSizersToShapes(ds)
	if err != nil {
		return nil, err
	}
	return op.outShape(in)
}

// wsBytes: the per-channel mean and 1/std, in float64 whatever the dtype.
func (op *BatchNormOp) wsBytes(_ tensor.Dtype, in []tensor.Shape) int64 {
	if len(in) < 1 || in[0].Dims() < 2 {
		return 0
	}
	return wsBytes(tensor.Float64, in[0][1], in[0][1])
}

// WorkspaceBytes is two float64s per channel (mean and 1/std).
func (op *BatchNormOp) WorkspaceBytes(dt tensor.Dtype, in []tensor.Shape) int64 {
	return op.wsBytes(dt, in)
}

// FLOPs: two statistics passes (add; subtract, multiply, add) and the affine (subtract, multiply, add).
func (op *BatchNormOp) FLOPs(in []tensor.Shape) int64 {
	if len(in) < 1 {
		return 0
	}
	return 7 * int64(in[0].TotalSize())
}

func (op *BatchNormOp) Do(in ...G.Value) (G.Value, error) { return doAlloc(op, in) }
func (op *BatchNormOp) UsePreallocDo(p G.Value, in ...G.Value) (G.Value, error) {
	return doPrealloc(op, p, in)
}
func (op *BatchNormOp) DoWorkspace(out G.Value, ws []byte, in ...G.Value) error {
	return doWorkspace(op, out, ws, in, false)
}
func (op *BatchNormOp) exec(dt tensor.Dtype, out G.Value, ws []byte, in []G.Value) error {
	if dt == tensor.Float32 {
		return bnForward[float32](op, out, ws, in, false)
	}
	return bnForward[float64](op, out, ws, in, false)
}

func (op *BatchNormOp) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "layers.BatchNorm{%d %d %v %v}", op.dims, len(op.runMean), op.momentum, op.eps)
}
func (op *BatchNormOp) Hashcode() uint32 { return hashOf(op) }
func (op *BatchNormOp) String() string {
	return fmt.Sprintf("BatchNorm{C=%d momentum=%v eps=%v}", len(op.runMean), op.momentum, op.eps)
}

func (op *BatchNormOp) DiffWRT(int) []bool { return []bool{true, true, true} }

// SymDiff: dx from (x, gamma, dy), dgamma from (x, dy), dbeta from dy; none reads y or saved stats.
func (op *BatchNormOp) SymDiff(inputs G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	x, gamma := inputs[0], inputs[1]
	// The per-channel gradients are made first: gorgonia's order then runs
	// them before dx, so dx reads x and dy for the last time and the VM can
	// write it in place of one of them (3 activations at once become 2).
	dgamma, err := G.ApplyOp(&bnGradOp{bn: op, wrtGamma: true}, x, grad)
	if err != nil {
		return nil, err
	}
	dbeta, err := G.ApplyOp(&channelSumOp{dims: op.dims, owner: op.serial}, grad)
	if err != nil {
		return nil, err
	}
	dx, err := G.ApplyOp(&bnGradOp{bn: op, wrtGamma: false}, x, gamma, grad)
	if err != nil {
		return nil, err
	}
	return G.Nodes{dx, dgamma, dbeta}, nil
}

// channelStats is the biased mean and variance of channel c, two-pass in float64, each pass a
// lane sum in s (whose earlier contents do not matter). buf is scratch for gathering small
// planes (gatherPlanes).
func channelStats[T float](s *lanes, buf, x []T, N, C, plane, c int) (mean, variance float64) {
	m := N * plane
	if plane < gatherBelow && m <= len(buf) {
		// The whole channel fits: gathered once, both passes are one run each.
		k, _ := gatherPlanes(buf, x, N, C, plane, c, 0)
		s.reset(m)
		laneSum(s, 0, buf[:k])
		mean = s.totalN(m) / float64(m)
		s.reset(m)
		laneSumSq(s, 0, buf[:k], mean)
		return mean, s.totalN(m) / float64(m)
	}
	s.reset(m)
	l := 0
	for n := 0; n < N; {
		var run []T
		run, n = channelRun(buf, x, N, C, plane, c, n)
		l = laneSum(s, l, run)
	}
	mean = s.totalN(m) / float64(m)
	s.reset(m)
	l = 0
	for n := 0; n < N; {
		var run []T
		run, n = channelRun(buf, x, N, C, plane, c, n)
		l = laneSumSq(s, l, run, mean)
	}
	return mean, s.totalN(m) / float64(m)
}

// gatherBelow is the plane size under which a channel's planes are copied together before a
// lane pass: a network's last stages have planes of 4 or 16 pixels (ResNet-18's 512 channels of
// 2x2 at 32x32 input), where a pass made a call per plane and cost as much as one over planes 64
// times larger. The elements keep their order, so every lane gets the same additions.
// gatherLen is the scratch a worker gathers into.
const (
	gatherBelow = 64
	gatherLen   = 1024
)

// gatherPlanes copies channel c's planes n0, n0+1, ... of x, in order, into buf while they fit,
// and returns the elements copied and the next plane.
func gatherPlanes[T float](buf, x []T, N, C, plane, c, n0 int) (k, n int) {
	for n = n0; n < N && k+plane <= len(buf); n++ {
		o := (n*C + c) * plane
		k += copy(buf[k:], x[o:o+plane])
	}
	return k, n
}

// channelRun is the next run of channel c's elements from plane n on, and the plane after it:
// plane n itself, or small planes gathered into buf.
func channelRun[T float](buf, x []T, N, C, plane, c, n int) ([]T, int) {
	if plane < gatherBelow && plane <= len(buf) {
		k, next := gatherPlanes(buf, x, N, C, plane, c, n)
		return buf[:k], next
	}
	o := (n*C + c) * plane
	return x[o : o+plane], n + 1
}

// sumLanes and lanes fix the order of a channel's sums (batch norm's statistics and gradient
// sums, ChannelSum): the channel's element j, counting images then pixels in order, goes to lane
// j mod sumLanes, each lane adds its elements in order in float64, and lanes.total adds the lanes
// in a halving tree (lane t += lane t+s for s = sumLanes/2, ..., 1). That is the order of the
// CUDA kernels' block reductions (one block of 256 threads per channel, vm/cuda/kernels'
// ooc_block_sum), so the CPU and CUDA devices get the same bits from the same inputs (a deep
// model amplifies last-bit differences: densenet121's float64 gradients were 3e-10 apart between
// the devices with serial sums here and a different GEMM there, 6e-11 with both matched). It is
// also more accurate than one serial sum over a large channel.
const sumLanes = 256

type lanes [sumLanes]float64

// laneSum adds xs to s, element j to lane (l+j) mod sumLanes, and returns the next lane. It walks
// lane-aligned runs so the inner loop has no modulo and no bounds checks.
func laneSum[T float](s *lanes, l int, xs []T) int {
	for len(xs) > 0 {
		n := min(len(xs), sumLanes-l)
		dst, run := s[l:l+n], xs[:n]
		if x32, ok := any(run).([]float32); ok {
			k := addF32Fast(dst, x32)
			dst, run = dst[k:], run[k:]
		}
		for j, v := range run {
			dst[j] += float64(v)
		}
		xs, l = xs[n:], (l+n)%sumLanes
	}
	return l
}

// laneSumSq is laneSum of the squared deviations of xs from mean.
func laneSumSq[T float](s *lanes, l int, xs []T, mean float64) int {
	for len(xs) > 0 {
		n := min(len(xs), sumLanes-l)
		dst, run := s[l:l+n], xs[:n]
		if x32, ok := any(run).([]float32); ok {
			k := sqF32Fast(dst, x32, mean)
			dst, run = dst[k:], run[k:]
		}
		for j, v := range run {
			d := float64(v) - mean
			dst[j] += d * d
		}
		xs, l = xs[n:], (l+n)%sumLanes
	}
	return l
}

// laneGradSums adds dy to a and dy·(x-mean) to b, lane by lane as laneSum.
func laneGradSums[T float](a, b *lanes, l int, dy, x []T, mean float64) int {
	x = x[:len(dy)]
	for len(dy) > 0 {
		n := min(len(dy), sumLanes-l)
		da, db, xr, run := a[l:l+n], b[l:l+n], x[:n], dy[:n]
		if g32, ok := any(run).([]float32); ok {
			k := gradF32Fast(da, db, g32, any(xr).([]float32), mean)
			da, db, xr, run = da[k:], db[k:], xr[k:], run[k:]
		}
		for j, g := range run {
			da[j] += float64(g)
			db[j] += float64(g) * (float64(xr[j]) - mean)
		}
		dy, x, l = dy[n:], x[n:], (l+n)%sumLanes
	}
	return l
}

func (l *lanes) total() float64 { return l.totalN(sumLanes) }

// reset zeroes the lanes a sum of count elements uses (the first min(count, sumLanes)); the
// others are never read by totalN(count).
func (l *lanes) reset(count int) { clear(l[:min(count, sumLanes)]) }

// totalN is total for lanes that received count elements in all. The lanes from count on hold
// +0 (they got no element), and the tree skips adding them: x + (+0) is x bit for bit, since no
// lane is ever -0 (lanes start at +0, and a sum is -0 only when both terms are). That saves most
// of the 255 additions on the small channels of a network's last stages (ResNet-18's 512
// channels of 2x2 pixels at batch 32 have 128 elements each).
func (l *lanes) totalN(count int) float64 {
	used := min(count, sumLanes)
	for s := sumLanes / 2; s > 0; s >>= 1 {
		// Lane j < s can be nonzero only if j < used.
		n := min(s, used-s)
		if n <= 0 {
			continue
		}
		dst, src := l[:n], l[s:s+n]
		k := foldFast(dst, src)
		for t := k; t < n; t++ {
			dst[t] += src[t]
		}
	}
	return l[0]
}

// channelMoments is channel c's mean and 1/std, from the batch (training, with the biased batch
// variance too) or from the running statistics.
func channelMoments[T float](s *lanes, buf []T, training bool, rm, rv []float64, eps float64, x []T, N, C, plane, c int) (mean, invStd, variance float64) {
	if !training {
		return rm[c], 1 / math.Sqrt(rv[c]+eps), 0
	}
	mean, variance = channelStats(s, buf, x, N, C, plane, c)
	return mean, 1 / math.Sqrt(variance+eps), variance
}

// bnForwardJob is bnForward's parallel body: channels [c0, c1).
type bnForwardJob[T float] struct {
	training             bool
	rm, rv, mean, invStd []float64
	eps                  float64
	x, y, gamma, beta    []T
	fwd                  *bnSums
	relu                 bool // rectify each plane once normalised: bnReLUOp
	N, C, plane          int
}

var (
	bnForwardJobs32 jobList[bnForwardJob[float32]]
	bnForwardJobs64 jobList[bnForwardJob[float64]]
)

func (j *bnForwardJob[T]) chunk(c0, c1 int) {
	x, y, N, C, plane := j.x, j.y, j.N, j.C, j.plane
	var s lanes
	var buf [gatherLen]T
	for c := c0; c < c1; c++ {
		mc, is, v := channelMoments(&s, buf[:], j.training, j.rm, j.rv, j.eps, x, N, C, plane, c)
		j.fwd.mean[c], j.fwd.invStd[c] = mc, is
		m, a, b := T(mc), T(float64(j.gamma[c])*is), j.beta[c]
		for n := 0; n < N; n++ {
			o := (n*C + c) * plane
			xr, yr := x[o:o+plane], y[o:o+plane]
			if x32, ok := any(xr).([]float32); ok {
				k := affineF32Fast(any(yr).([]float32), x32, float32(m), float32(a), float32(b))
				xr, yr = xr[k:], yr[k:]
			}
			for i, v := range xr {
				yr[i] = (v-m)*a + b
			}
			if j.relu {
				reluPlane(y[o : o+plane])
			}
		}
		j.mean[c], j.invStd[c] = mc, v
	}
}

// bnForward writes the batch norm of in into out, each plane rectified right after it is
// normalised (as reluMask does it) when relu is set: bnReLUOp.
func bnForward[T float](op *BatchNormOp, out G.Value, ws []byte, in []G.Value, relu bool) error {
	xs := in[0].Shape()
	N, C, plane, err := bnShape(op, xs)
	if err != nil {
		return err
	}
	x, err := denseData[T](in[0], xs)
	if err != nil {
		return err
	}
	gamma, err := denseData[T](in[1], tensor.Shape{C})
	if err != nil {
		return err
	}
	beta, err := denseData[T](in[2], tensor.Shape{C})
	if err != nil {
		return err
	}
	y, err := outData[T](out, xs)
	if err != nil {
		return err
	}
	// A forward starts a new step: no statistics or gradient sums of an earlier one may be used
	// again.
	fwd := op.takeForwardStats()
	cv := carver{buf: ws}
	mean, err := carve[float64](&cv, C)
	if err != nil {
		return err
	}
	invStd, err := carve[float64](&cv, C)
	if err != nil {
		return err
	}
	training, rm, rv := op.mode()
	// One pass over the channels does each channel's statistics and its normalisation while the
	// channel is still in cache; the batch variance then takes invStd's place in the workspace
	// (the channel is done with it) for the running statistics.
	jobs := jobsFor[T, bnForwardJob[T]](&bnForwardJobs32, &bnForwardJobs64)
	j := jobs.get()
	*j = bnForwardJob[T]{training: training, rm: rm, rv: rv, eps: op.eps, x: x, y: y, gamma: gamma, beta: beta,
		fwd: fwd, relu: relu, mean: mean, invStd: invStd, N: N, C: C, plane: plane}
	parallelChunks(C, int64(len(x)), j)
	jobs.put(j)
	// Only a training forward's statistics are the backward's; y written over x leaves no x to
	// match them to.
	var k bnKey
	if training && unsafe.Pointer(&y[0]) != unsafe.Pointer(&x[0]) {
		k = bnKey{x: unsafe.Pointer(&x[0]), bytes: len(x) * int(unsafe.Sizeof(x[0])), N: N, C: C, plane: plane}
	}
	op.putForwardStats(fwd, k)
	if training {
		batchVar := invStd
		cnt := float64(N * plane)
		unbias := 1.0
		if cnt > 1 {
			unbias = cnt / (cnt - 1)
		}
		mom := op.momentum
		op.mu.Lock()
		for c := 0; c < C; c++ {
			op.runMean[c] = (1-mom)*op.runMean[c] + mom*mean[c]
			op.runVar[c] = (1-mom)*op.runVar[c] + mom*batchVar[c]*unbias
		}
		op.mu.Unlock()
	}
	return nil
}

// bnGradOp is BN's backward: (x, gamma, dy) -> dx, or with wrtGamma (x, dy) -> dgamma. Both
// recompute the statistics from x, or take them from the forward or the first of the two
// (bnSums). They read the parent op for its mode and constants, and for those handoffs.
type bnGradOp struct {
	pure
	shapeMemo
	noDiff
	bn       *BatchNormOp
	wrtGamma bool
}

func (op *bnGradOp) Arity() int {
	if op.wrtGamma {
		return 2
	}
	return 3
}

func (op *bnGradOp) Type() hm.Type {
	d := op.bn.dims
	if op.wrtGamma {
		return fnType(d, d, 1)
	}
	return fnType(d, 1, d, d)
}

func (op *bnGradOp) outShape(in []tensor.Shape) (tensor.Shape, error) {
	if len(in) != op.Arity() {
		return nil, fmt.Errorf("layers: %v takes %d inputs", op, op.Arity())
	}
	_, C, _, err := bnShape(op.bn, in[0])
	if err != nil {
		return nil, err
	}
	dy := in[len(in)-1]
	if !dy.Eq(in[0]) {
		return nil, fmt.Errorf("layers: %v: gradient %v does not match input %v", op, dy, in[0])
	}
	if op.wrtGamma {
		return tensor.Shape{C}, nil
	}
	if err := wantVec("gamma", in[1], C); err != nil {
		return nil, err
	}
	return in[0].Clone(), nil
}

func (op *bnGradOp) InferShape(ds ...G.DimSizer) (tensor.Shape, error) {
	in, err := dimSizersToShapes(ds)
	if err != nil {
		return nil, err
	}
	return op.outShape(in)
}

func (op *bnGradOp) wsBytes(dt tensor.Dtype, in []tensor.Shape) int64 { return op.bn.wsBytes(dt, in) }

// WorkspaceBytes is two float64s per channel (mean and 1/std).
func (op *bnGradOp) WorkspaceBytes(dt tensor.Dtype, in []tensor.Shape) int64 {
	return op.wsBytes(dt, in)
}

// FLOPs: the statistics again (4 per element), then the sums and, for dx, the output (about 6).
func (op *bnGradOp) FLOPs(in []tensor.Shape) int64 {
	if len(in) < 1 {
		return 0
	}
	if op.wrtGamma {
		return 7 * int64(in[0].TotalSize())
	}
	return 11 * int64(in[0].TotalSize())
}

func (op *bnGradOp) Do(in ...G.Value) (G.Value, error) { return doAlloc(op, in) }
func (op *bnGradOp) UsePreallocDo(p G.Value, in ...G.Value) (G.Value, error) {
	return doPrealloc(op, p, in)
}
func (op *bnGradOp) DoWorkspace(out G.Value, ws []byte, in ...G.Value) error {
	return doWorkspace(op, out, ws, in, false)
}
func (op *bnGradOp) exec(dt tensor.Dtype, out G.Value, ws []byte, in []G.Value) error {
	if dt == tensor.Float32 {
		return bnBackward[float32](op, out, ws, in)
	}
	return bnBackward[float64](op, out, ws, in)
}

func (op *bnGradOp) name() string {
	if op.wrtGamma {
		return "BatchNormGradGamma"
	}
	return "BatchNormGradX"
}
func (op *bnGradOp) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "layers.%s{%d %d %v %v}#%d", op.name(), op.bn.dims, len(op.bn.runMean), op.bn.momentum, op.bn.eps, op.bn.serial)
}
func (op *bnGradOp) Hashcode() uint32 { return hashOf(op) }
func (op *bnGradOp) String() string {
	return fmt.Sprintf("%s{C=%d eps=%v}", op.name(), len(op.bn.runMean), op.bn.eps)
}

// bnBackwardJob is bnBackward's parallel body: channels [c0, c1).
type bnBackwardJob[T float] struct {
	have, haveStats, training, wrtGamma bool
	sums                                *bnSums
	rm, rv, mean, invStd                []float64
	eps, cnt                            float64
	x, dy, res, gamma                   []T
	N, C, plane                         int
}

var (
	bnBackwardJobs32 jobList[bnBackwardJob[float32]]
	bnBackwardJobs64 jobList[bnBackwardJob[float64]]
)

func (j *bnBackwardJob[T]) chunk(c0, c1 int) {
	x, dy, sums, N, C, plane := j.x, j.dy, j.sums, j.N, j.C, j.plane
	var a, b lanes
	var bx, bdy [gatherLen]T
	for c := c0; c < c1; c++ {
		var m, is, sdy, sdxh float64
		if j.have {
			m, is, sdy, sdxh = sums.mean[c], sums.invStd[c], sums.sdy[c], sums.sdxh[c]
		} else {
			if j.haveStats {
				m, is = sums.mean[c], sums.invStd[c]
			} else {
				m, is, _ = channelMoments(&a, bx[:], j.training, j.rm, j.rv, j.eps, x, N, C, plane, c)
			}
			// sdy = Σdy, sdxh = Σdy·x̂ with x̂ = (x-mean)/std.
			if j.training || j.wrtGamma {
				M := N * plane
				a.reset(M)
				b.reset(M)
				l := 0
				for n := 0; n < N; {
					var xr, dr []T
					xr, _ = channelRun(bx[:], x, N, C, plane, c, n)
					dr, n = channelRun(bdy[:], dy, N, C, plane, c, n)
					l = laneGradSums(&a, &b, l, dr, xr, m)
				}
				sdy, sdxh = a.totalN(M), b.totalN(M)*is
			}
			if sums != nil {
				sums.mean[c], sums.invStd[c], sums.sdy[c], sums.sdxh[c] = m, is, sdy, sdxh
			}
		}
		j.mean[c], j.invStd[c] = m, is
		if j.wrtGamma {
			j.res[c] = T(sdxh)
			continue
		}
		bnDxChannel(j.res, x, dy, j.gamma[c], j.training, m, is, sdy, sdxh, j.cnt, N, C, plane, c)
	}
}

func bnBackward[T float](op *bnGradOp, out G.Value, ws []byte, in []G.Value) error {
	xs := in[0].Shape()
	N, C, plane, err := bnShape(op.bn, xs)
	if err != nil {
		return err
	}
	x, err := denseData[T](in[0], xs)
	if err != nil {
		return err
	}
	dy, err := denseData[T](in[len(in)-1], xs)
	if err != nil {
		return err
	}
	var gamma, res []T
	if op.wrtGamma {
		res, err = outData[T](out, tensor.Shape{C})
	} else {
		if gamma, err = denseData[T](in[1], tensor.Shape{C}); err != nil {
			return err
		}
		res, err = outData[T](out, xs)
	}
	if err != nil {
		return err
	}
	cv := carver{buf: ws}
	mean, err := carve[float64](&cv, C)
	if err != nil {
		return err
	}
	invStd, err := carve[float64](&cv, C)
	if err != nil {
		return err
	}
	training, rm, rv := op.bn.mode()
	cnt := float64(N * plane)
	// In training the sibling gradient op may have left this step's sums (bnSums).
	var sums *bnSums
	have := false
	key := bnKey{x: unsafe.Pointer(&x[0]), dy: unsafe.Pointer(&dy[0]), bytes: len(x) * int(unsafe.Sizeof(x[0])), N: N, C: C, plane: plane}
	haveStats := false
	if training {
		sums, have = op.bn.takeSums(op.wrtGamma, key)
		haveStats = !have && op.bn.forwardStats(key, sums)
	}
	// Each channel's statistics, gradient sums and dx in one visit, while it is in cache.
	jobs := jobsFor[T, bnBackwardJob[T]](&bnBackwardJobs32, &bnBackwardJobs64)
	j := jobs.get()
	*j = bnBackwardJob[T]{have: have, haveStats: haveStats, training: training, wrtGamma: op.wrtGamma, sums: sums,
		rm: rm, rv: rv, mean: mean, invStd: invStd, eps: op.bn.eps, cnt: cnt, x: x, dy: dy, res: res, gamma: gamma,
		N: N, C: C, plane: plane}
	parallelChunks(C, int64(len(x)), j)
	jobs.put(j)
	if sums != nil {
		// dx written over x or dy leaves nothing for the sibling to read its sums from.
		r := unsafe.Pointer(&res[0])
		op.bn.settleSums(sums, have || r == key.x || r == key.dy, op.wrtGamma, key)
	}
	return nil
}

// bnDxChannel writes channel c of dx from the channel's statistics and gradient sums.
func bnDxChannel[T float](res, x, dy []T, gamma T, training bool, m, is, sdy, sdxh, cnt float64, N, C, plane, c int) {
	a := float64(gamma) * is
	if !training {
		// With fixed statistics BN is affine in x: dx = gamma/std · dy.
		at := T(a)
		for n := 0; n < N; n++ {
			o := (n*C + c) * plane
			dr, rr := dy[o:o+plane], res[o:o+plane]
			for i, g := range dr {
				rr[i] = g * at
			}
		}
		return
	}
	// dx = gamma/std · (dy - Σdy/M - x̂·Σ(dy·x̂)/M)
	mdy, k := T(sdy/cnt), T(sdxh/cnt*is)
	mt, at := T(m), T(a)
	for n := 0; n < N; n++ {
		o := (n*C + c) * plane
		xr, dr, rr := x[o:o+plane], dy[o:o+plane], res[o:o+plane]
		if d32, ok := any(dr).([]float32); ok {
			done := bnDxF32Fast(any(rr).([]float32), any(xr).([]float32), d32, float32(mdy), float32(mt), float32(k), float32(at))
			xr, dr, rr = xr[done:], dr[done:], rr[done:]
		}
		for i, g := range dr {
			rr[i] = at * (g - mdy - (xr[i]-mt)*k)
		}
	}
}

// bnSums is one training step's per-channel statistics and gradient sums of a batch norm: the
// mean, 1/std, Σdy and Σdy·x̂, from x and dy. Both gradient ops (dgamma and dx) need them, from
// the same x and dy: the first to run hands them to the second, which then only makes its
// output, bit for bit what it would have computed (the same function of the same operands), in
// one pass instead of four (two for the statistics, one for the sums). The forward leaves its
// mean and 1/std of x in one too (BatchNormOp.fwd), which spares the first its two statistics
// passes the same way.
//
// One is taken only for operands at the same memory, of the same size and shape, as those it
// was computed from, and no forward of the op (which starts a step) has run since (for the
// forward's, none other). That rests on what a VM guarantees anyway: an operand is not written
// while a later op still reads it, so from the forward to the gradient ops, which all read x,
// and between the gradient ops, which both read dy, x and dy keep their values (one swapped
// out and back in, or recomputed, is the same value). A caller of the ops' Do that rewrites x
// or dy in place between those calls, with no forward between, would get the earlier results.
type bnSums struct {
	key                     bnKey
	fromGamma               bool // which op computed them: the other one takes them
	mean, invStd, sdy, sdxh []float64
}

// bnKey is the operands a bnSums was computed from: their data (kept alive while handed over,
// so the memory is not reused under the key) and size.
type bnKey struct {
	x, dy              unsafe.Pointer
	bytes, N, C, plane int
}

// takeSums returns the sums the sibling of a gradient op (wrtGamma says which) left for these
// operands, with have; or, with have false, a bnSums to fill (the spare one when there is one).
func (op *BatchNormOp) takeSums(wrtGamma bool, k bnKey) (s *bnSums, have bool) {
	op.mu.Lock()
	if h := op.handoff; h != nil && h.fromGamma != wrtGamma && h.key == k {
		op.handoff = nil
		op.mu.Unlock()
		return h, true
	}
	s, op.spare = op.spare, nil
	op.mu.Unlock()
	if s == nil || len(s.mean) != k.C {
		s = newBNSums(k.C)
	}
	return s, false
}

// settleSums hands s, just computed by a gradient op from operands k, to its sibling; or, when
// done (taken from the sibling, or its operands overwritten), keeps it as the spare.
func (op *BatchNormOp) settleSums(s *bnSums, done, wrtGamma bool, k bnKey) {
	op.mu.Lock()
	defer op.mu.Unlock()
	if done {
		s.key = bnKey{}
		op.spare = s
		return
	}
	op.dropSumsLocked()
	s.key, s.fromGamma = k, wrtGamma
	op.handoff = s
}

// takeForwardStats starts a forward: it forgets what the last step left (the forward's
// statistics and the gradient ops' sums) and returns a bnSums for this forward's mean and 1/std,
// the last forward's reused.
func (op *BatchNormOp) takeForwardStats() *bnSums {
	op.mu.Lock()
	op.dropHandoffLocked()
	f := op.fwd
	op.fwd = nil
	op.mu.Unlock()
	if f == nil {
		f = newBNSums(len(op.runMean))
	}
	f.key = bnKey{}
	return f
}

// putForwardStats keeps a forward's statistics f of x (key k) for the gradient ops; the zero
// key matches no operands (an inference forward's).
func (op *BatchNormOp) putForwardStats(f *bnSums, k bnKey) {
	op.mu.Lock()
	f.key = k
	op.fwd = f
	op.mu.Unlock()
}

// forwardStats copies into s the mean and 1/std of the last training forward, when it read x
// at the same memory, of the same size and shape, as key k says: the statistics the gradient op
// would compute from its x, bit for bit, as bnSums explains.
func (op *BatchNormOp) forwardStats(k bnKey, s *bnSums) bool {
	op.mu.Lock()
	defer op.mu.Unlock()
	f := op.fwd
	if f == nil || f.key != (bnKey{x: k.x, bytes: k.bytes, N: k.N, C: k.C, plane: k.plane}) {
		return false
	}
	copy(s.mean, f.mean)
	copy(s.invStd, f.invStd)
	return true
}

// dropHandoffLocked forgets the sums handed over and the forward's statistics, if any (a
// forward, a new mode or new running statistics).
func (op *BatchNormOp) dropHandoffLocked() {
	op.dropSumsLocked()
	if op.fwd != nil {
		op.fwd.key = bnKey{}
	}
}

// dropSumsLocked forgets the sums handed over between the gradient ops, if any.
func (op *BatchNormOp) dropSumsLocked() {
	if h := op.handoff; h != nil {
		h.key = bnKey{}
		op.handoff, op.spare = nil, h
	}
}

func newBNSums(C int) *bnSums {
	v := make([]float64, 4*C)
	return &bnSums{mean: v[:C:C], invStd: v[C : 2*C : 2*C], sdy: v[2*C : 3*C : 3*C], sdxh: v[3*C:]}
}

// InPlaceSafe tells the out-of-core VM that dx may be written over x or dy:
// bnBackward visits each channel once, reading its statistics and sums from
// that channel's own slices of x and dy only, and only then writes that
// channel's dx, elementwise at the same indices. The gamma gradient has
// another shape and is never in place.
func (op *bnGradOp) InPlaceSafe(operand int) bool { return !op.wrtGamma }
