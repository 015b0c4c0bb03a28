package layers

import (
	"runtime"
	"sync"
	"unsafe"

	"github.com/gorgonia-ooc/outofcore/blas"
	"github.com/gorgonia-ooc/outofcore/internal/workpool"
	G "gorgonia.org/gorgonia"
)

// How a convolution runs on the CPU. Each output element gets exactly the arithmetic it got when
// every image was its own multi-threaded GEMM (convold_test.go keeps that code as the reference):
// the same products summed in the same k blocks, the same order of col2im's adds, images added
// into the weight gradient one after another. What changed is how the work is laid out:
//
//   - the weights are packed for the GEMM once per call (blas.PackedA), not once per image;
//   - one fork-join per call (per chunk of small images for the two gradients), on
//     internal/workpool's long-lived goroutines, instead of several per image: each goroutine
//     runs serial GEMMs on its own part, and its own part of im2col and col2im;
//   - the forward splits output pixels (columns of the product: independent), the data gradient
//     splits input channels (rows of Wᵀ·dy, and col2im's targets: independent), the weight
//     gradient splits its columns (input channels again), each part running through the images
//     in order, so the sum over images keeps its order;
//   - nothing is allocated per call once the scratch below exists.

// convRun is one call's state, shared by its goroutines; they write disjoint parts of it.
type convRun[T blas.Float] struct {
	op               *convOp
	d                convDims
	p                ConvParams
	a, b, bias, y    []T
	col, stage       []T
	P, K, O, KK      int
	xSize, ySize     int
	B, tile, L       int // images per chunk, pixels per tile (chunk of one), column stride of col and stage
	parts, partWidth int // forward: column slices; gradients: channel groups of partWidth channels
	n0, nb           int // the chunk being run, when a call forks per chunk
	phase            convPhase
	beta             T
	pw               *blas.PackedA[T]   // forward: W; data gradient: Wᵀ; chunked weight gradient: the chunk's dy
	pg               []*blas.PackedA[T] // weight gradient, per part: the image's dy
	errMu            sync.Mutex
	err              error
}

type convPhase uint8

const (
	phaseForward convPhase = iota
	phaseData
	phaseDataChunk
	phaseFilter
	phaseFilterChunk
)

// convScratch caches convRuns (with their packed buffers) across calls: a training step runs the
// same convolutions every time, so after the first the packing buffers are the right size.
type convScratch[T blas.Float] struct {
	mu   sync.Mutex
	free []*convRun[T]
}

var (
	convScratch32 convScratch[float32]
	convScratch64 convScratch[float64]
)

func getConvRun[T blas.Float]() *convRun[T] {
	s, ok := any(&convScratch32).(*convScratch[T])
	if !ok {
		s = any(&convScratch64).(*convScratch[T])
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.free); n > 0 {
		r := s.free[n-1]
		s.free = s.free[:n-1]
		return r
	}
	return &convRun[T]{pw: new(blas.PackedA[T])}
}

func putConvRun[T blas.Float](r *convRun[T]) {
	s, ok := any(&convScratch32).(*convScratch[T])
	if !ok {
		s = any(&convScratch64).(*convScratch[T])
	}
	// Drop the references to this call's tensors; keep the packed buffers.
	*r = convRun[T]{pw: r.pw, pg: r.pg[:0]}
	s.mu.Lock()
	s.free = append(s.free, r)
	s.mu.Unlock()
}

// convSerialBelow is the multiply-adds under which a convolution runs on the calling goroutine.
const convSerialBelow = 1 << 18

func convExec[T blas.Float](op *convOp, d convDims, out G.Value, ws []byte, in []G.Value) error {
	s := shapesOf(in)
	a, err := denseData[T](in[0], s[0])
	if err != nil {
		return err
	}
	b, err := denseData[T](in[1], s[1])
	if err != nil {
		return err
	}
	var bias []T
	if op.bias && op.kind != convFilter {
		if bias, err = denseData[T](in[2], s[2]); err != nil {
			return err
		}
	}
	os, _ := op.outShape(s)
	y, err := outData[T](out, os)
	if err != nil {
		return err
	}
	r := getConvRun[T]()
	defer putConvRun(r)
	if err := r.setup(op, d, ws, a, b, bias, y); err != nil {
		return err
	}
	workers := min(runtime.NumCPU(), blas.Workers())
	if prod(d.N, d.O, d.colRows(), d.outPix()) < convSerialBelow {
		workers = 1
	}
	switch op.kind {
	case convForward:
		err = r.forward(workers)
	case convData:
		err = r.data(workers)
	default:
		err = r.filter(workers)
	}
	if err != nil {
		return err
	}
	return r.err
}

// setup carves the workspace: an im2col tile of one image (tile pixels, or the whole image when
// it fits), or the matrices of a chunk of small images side by side.
func (r *convRun[T]) setup(op *convOp, d convDims, ws []byte, a, b, bias, y []T) error {
	nCol, nStage := op.workspace(d)
	r.op, r.d, r.p, r.a, r.b, r.bias, r.y = op, d, op.p, a, b, bias, y
	r.P, r.K, r.O, r.KK = d.outPix(), d.colRows(), d.O, d.KH*d.KW
	r.xSize, r.ySize = d.C*d.H*d.W, d.O*d.OH*d.OW
	r.B = op.chunk(d)
	r.tile = r.P
	if r.B == 1 && nCol > 0 {
		var zero T
		r.tile = op.tilePixels(d, len(ws)/int(unsafe.Sizeof(zero)))
		nCol = r.K * r.tile
	}
	r.L = r.tile
	if r.B > 1 {
		r.L = r.B * r.P
	}
	c := carver{buf: ws}
	var err error
	if r.col, err = carve[T](&c, nCol); err != nil {
		return err
	}
	r.stage, err = carve[T](&c, nStage)
	return err
}

func (r *convRun[T]) fail(err error) {
	if err == nil {
		return
	}
	r.errMu.Lock()
	if r.err == nil {
		r.err = err
	}
	r.errMu.Unlock()
}

// Run is one part of the current phase (workpool.Job).
func (r *convRun[T]) Run(part, _ int) {
	switch r.phase {
	case phaseForward:
		r.forwardPart(part)
	case phaseData:
		r.dataPart(part)
	case phaseDataChunk:
		r.dataChunkPart(part)
	case phaseFilter:
		r.filterPart(part)
	case phaseFilterChunk:
		r.filterChunkPart(part)
	}
}

// channelGroups splits C channels into at most want groups of a multiple of unit channels.
// convExec asks for one part per goroutine: more parts would balance better under load, but
// each part of a gradient packs its own copy of its GEMM's shared operand, and that copying
// measured costlier (issue 28's benchmarks) than the imbalance.
func (r *convRun[T]) channelGroups(want, unit int) {
	units := (r.d.C + unit - 1) / unit
	r.parts = max(1, min(want, units))
	r.partWidth = (units + r.parts - 1) / r.parts * unit
	r.parts = (r.d.C + r.partWidth - 1) / r.partWidth
}

func (r *convRun[T]) channels(part int) (c0, c1 int) {
	return part * r.partWidth, min(r.d.C, (part+1)*r.partWidth)
}

// ---- forward: y = W·col (+ bias) ----

// minSliceCols keeps a goroutine's share of a product's columns wide enough for the GEMM's
// micro-tiles; a multiple of every kernel's NR.
const minSliceCols = 64

func (r *convRun[T]) forward(workers int) error {
	if err := r.pw.Pack(false, r.O, r.K, r.b, r.K); err != nil {
		return err
	}
	r.parts = 1
	if workers > 1 {
		r.parts = max(1, min(workers, r.L/minSliceCols))
	}
	r.partWidth = ((r.L+r.parts-1)/r.parts + 31) / 32 * 32
	r.parts = (r.L + r.partWidth - 1) / r.partWidth
	r.phase = phaseForward
	workpool.Run(workers, r.parts, r)
	return nil
}

// forwardPart computes columns [s0,s1) of every tile (or chunk) of every image, so it owns those
// columns of col and stage throughout.
func (r *convRun[T]) forwardPart(part int) {
	s0 := part * r.partWidth
	s1 := min(r.L, s0+r.partWidth)
	x, d, P := r.a, r.d, r.P
	if r.B == 1 {
		for n := 0; n < d.N; n++ {
			xn, yn := x[n*r.xSize:(n+1)*r.xSize], r.y[n*r.ySize:(n+1)*r.ySize]
			for p0 := 0; p0 < P; p0 += r.tile {
				lo, hi := s0, min(s1, P-p0)
				if lo >= hi {
					continue
				}
				src, ld := xn[p0+lo:], P // a 1x1 stride-1 kernel: the image is its own matrix
				if r.col != nil {
					im2col(xn, r.col[lo:], r.tile, d, r.p, p0+lo, p0+hi, 0, d.C)
					src, ld = r.col[lo:], r.tile
				}
				r.fail(blas.GemmPacked(r.pw, 0, r.O, false, hi-lo, 1, src, ld, 0, yn[p0+lo:], P))
				addBiasCols(yn, r.bias, P, p0+lo, p0+hi)
			}
		}
		return
	}
	for n0 := 0; n0 < d.N; n0 += r.B {
		nb := min(r.B, d.N-n0)
		lo, hi := s0, min(s1, nb*P)
		if lo >= hi {
			continue
		}
		for i := lo / P; i*P < hi; i++ {
			q0, q1 := max(lo, i*P)-i*P, min(hi, (i+1)*P)-i*P
			im2col(x[(n0+i)*r.xSize:(n0+i+1)*r.xSize], r.col[i*P+q0:], r.L, d, r.p, q0, q1, 0, d.C)
		}
		r.fail(blas.GemmPacked(r.pw, 0, r.O, false, hi-lo, 1, r.col[lo:], r.L, 0, r.stage[lo:], r.L))
		for i := lo / P; i*P < hi; i++ {
			q0, q1 := max(lo, i*P)-i*P, min(hi, (i+1)*P)-i*P
			yi := r.y[(n0+i)*r.ySize : (n0+i+1)*r.ySize]
			for o := 0; o < r.O; o++ {
				copy(yi[o*P+q0:o*P+q1], r.stage[o*r.L+i*P+q0:])
			}
			addBiasCols(yi, r.bias, P, q0, q1)
		}
	}
}

// addBiasCols adds bias[o] to columns [q0,q1) of row o of an (O, P) image.
func addBiasCols[T blas.Float](y, bias []T, P, q0, q1 int) {
	for o, bv := range bias {
		row := y[o*P+q0 : o*P+q1]
		for i := range row {
			row[i] += bv
		}
	}
}

// ---- data gradient: col = Wᵀ·dy, col2im onto dx (+ bias) ----

func (r *convRun[T]) data(workers int) error {
	if err := r.pw.Pack(true, r.K, r.O, r.a, r.K); err != nil {
		return err
	}
	// A group's rows of Wᵀ (its channels' taps) must start on the packing's row slivers.
	align := r.pw.RowAlign()
	r.channelGroups(workers, align/gcd(r.KK, align))
	if r.B == 1 {
		r.phase = phaseData
		workpool.Run(workers, r.parts, r)
		return nil
	}
	r.phase = phaseDataChunk
	for r.n0 = 0; r.n0 < r.d.N; r.n0 += r.B {
		r.nb = min(r.B, r.d.N-r.n0)
		restage(r.b[r.n0*r.ySize:(r.n0+r.nb)*r.ySize], r.stage, r.O, r.P, r.nb)
		workpool.Run(workers, r.parts, r)
	}
	return nil
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// dataPart computes its channels of dx for every image, tiles from the last (see col2im).
func (r *convRun[T]) dataPart(part int) {
	c0, c1 := r.channels(part)
	d, P, plane := r.d, r.P, r.d.H*r.d.W
	for n := 0; n < d.N; n++ {
		g, dx := r.b[n*r.ySize:(n+1)*r.ySize], r.y[n*r.xSize:(n+1)*r.xSize]
		if r.col == nil { // 1x1 stride 1: dx's rows are the product's
			r.fail(blas.GemmPacked(r.pw, c0, c1, false, P, 1, g, P, 0, dx, P))
		} else {
			clear(dx[c0*plane : c1*plane])
			for p0 := (P - 1) / r.tile * r.tile; p0 >= 0; p0 -= r.tile {
				t := min(r.tile, P-p0)
				r.fail(blas.GemmPacked(r.pw, c0*r.KK, c1*r.KK, false, t, 1, g[p0:], P, 0, r.col, r.tile))
				col2im(r.col, r.tile, dx, d, r.p, p0, p0+t, c0, c1)
			}
		}
		addChannelBias(dx[c0*plane:c1*plane], r.bias[min(c0, len(r.bias)):min(c1, len(r.bias))], plane)
	}
}

// dataChunkPart computes its channels of dx for the chunk's images from the restaged dy.
func (r *convRun[T]) dataChunkPart(part int) {
	c0, c1 := r.channels(part)
	d, P, plane, cols := r.d, r.P, r.d.H*r.d.W, r.nb*r.P
	r.fail(blas.GemmPacked(r.pw, c0*r.KK, c1*r.KK, false, cols, 1, r.stage, cols, 0, r.col, cols))
	for i := 0; i < r.nb; i++ {
		dx := r.y[(r.n0+i)*r.xSize : (r.n0+i+1)*r.xSize]
		clear(dx[c0*plane : c1*plane])
		col2im(r.col[i*P:], cols, dx, d, r.p, 0, P, c0, c1)
		addChannelBias(dx[c0*plane:c1*plane], r.bias[min(c0, len(r.bias)):min(c1, len(r.bias))], plane)
	}
}

// ---- weight gradient: dw = Σ over images (and tiles) of dy·colᵀ ----

func (r *convRun[T]) filter(workers int) error {
	r.channelGroups(workers, 1)
	if r.B == 1 {
		for len(r.pg) < r.parts {
			r.pg = append(r.pg, new(blas.PackedA[T]))
		}
		r.pg = r.pg[:r.parts]
		r.phase = phaseFilter
		workpool.Run(workers, r.parts, r)
		return nil
	}
	r.phase = phaseFilterChunk
	for r.n0 = 0; r.n0 < r.d.N; r.n0 += r.B {
		r.nb = min(r.B, r.d.N-r.n0)
		cols := r.nb * r.P
		restage(r.b[r.n0*r.ySize:(r.n0+r.nb)*r.ySize], r.stage, r.O, r.P, r.nb)
		if err := r.pw.Pack(false, r.O, cols, r.stage, cols); err != nil {
			return err
		}
		r.beta = 0
		if r.n0 > 0 {
			r.beta = 1
		}
		workpool.Run(workers, r.parts, r)
	}
	return nil
}

// filterPart computes its channels' columns of dw: the images and tiles added in order, as
// multiples of the GEMM's k block (see convTile), so the sum is cut where one call cuts it. Each
// part packs dy itself: dy is O x tile, the part's product O x tile x its rows.
func (r *convRun[T]) filterPart(part int) {
	c0, c1 := r.channels(part)
	r0, r1 := c0*r.KK, c1*r.KK
	d, P, pg := r.d, r.P, r.pg[part]
	var beta T
	for n := 0; n < d.N; n++ {
		g, xn := r.b[n*r.ySize:(n+1)*r.ySize], r.a[n*r.xSize:(n+1)*r.xSize]
		for p0 := 0; p0 < P; p0 += r.tile {
			t := min(r.tile, P-p0)
			if err := pg.PackSerial(false, r.O, t, g[p0:], P); err != nil {
				r.fail(err)
				return
			}
			var src []T
			ld := r.tile
			if r.col == nil { // 1x1 stride 1: x's rows are colᵀ's columns
				src, ld = xn[r0*P:], P
			} else {
				im2col(xn, r.col, r.tile, d, r.p, p0, p0+t, c0, c1)
				src = r.col[r0*r.tile:]
			}
			r.fail(blas.GemmPacked(pg, 0, r.O, true, r1-r0, 1, src, ld, beta, r.y[r0:], r.K))
			beta = 1
		}
	}
}

// filterChunkPart adds the chunk's product to its channels' columns of dw.
func (r *convRun[T]) filterChunkPart(part int) {
	c0, c1 := r.channels(part)
	r0, r1 := c0*r.KK, c1*r.KK
	cols := r.nb * r.P
	for i := 0; i < r.nb; i++ {
		im2col(r.a[(r.n0+i)*r.xSize:(r.n0+i+1)*r.xSize], r.col[i*r.P:], cols, r.d, r.p, 0, r.P, c0, c1)
	}
	r.fail(blas.GemmPacked(r.pw, 0, r.O, true, r1-r0, 1, r.col[r0*cols:], cols, r.beta, r.y[r0:], r.K))
}
