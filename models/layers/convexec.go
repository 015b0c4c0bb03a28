package layers

import (
	"runtime"
	"sync"
	"unsafe"

	"github.com/gorgonia-ooc/outofcore/blas"
	"github.com/gorgonia-ooc/outofcore/internal/workpool"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// How a convolution runs on the CPU. Each output element gets exactly the arithmetic it got when
// every image was its own multi-threaded GEMM (convold_test.go keeps that code as the reference):
// the same products summed in the same k blocks, the same order of col2im's adds, images added
// into the weight gradient one after another. What changed is how the work is laid out:
//
//   - the weights are packed for the GEMM once per call (blas.PackedA), not once per image;
//   - the goroutines are internal/workpool's long-lived ones, each running serial GEMMs, im2col
//     and col2im on its own item, instead of every GEMM, im2col and col2im forking on its own;
//   - the forward and the data gradient hand out whole images (tiles, chunks) as items: one fork
//     per call, and a core busy elsewhere costs only its share. Each goroutine has its own
//     region of the workspace (columns of col for the forward, rows for the data gradient);
//   - the weight gradient computes its k blocks in parallel and adds them in order
//     (convfilter.go); where their slots do not fit the workspace it forks per image (tile,
//     chunk) over groups of input channels (its columns), with that image's dy packed once;
//   - the data gradient of a stride-1 convolution runs on the padded ("wide") grid where its
//     regions fit the workspace (convdata.go): each tap's row of the product is one vector add,
//     not one per output row, in col2im's order;
//   - at stride 1 the forward runs without im2col where that pays (convforward.go);
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
	region, pieces   int // forward: a goroutine's columns of col; data: its channels' rows. pieces: items per image (tile, chunk)
	n0, nb           int // the image (or chunk) being run, when a call forks per image or chunk
	p0, t            int // the weight gradient's tile being run
	phase            convPhase
	beta             T
	pw               *blas.PackedA[T] // forward: W; data gradient: Wᵀ; weight gradient: the image's (or chunk's) dy
	errMu            sync.Mutex
	err              error

	// The data gradient on the wide grid (convdata.go): the call's workspace, its layout and
	// the goroutines' regions in it.
	ws   []byte
	wide wideGrid
	wbuf []T

	// The weight gradient by k blocks (convfilter.go).
	fb filterBlocks[T]

	// The forward on the wide grid, without im2col (convforward.go).
	fw wideForward[T]
}

type convPhase uint8

const (
	phaseForward convPhase = iota
	phaseData
	phaseDataChunk
	phaseDataWide
	phaseFilter
	phaseFilterChunk
	phaseFilterBlock
	phaseFilterSum
	phaseForwardWide // convforward.go
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
	// Drop the references to this call's tensors; keep the packed buffer and the per-worker
	// operands' storage and the forward's wide-grid tables.
	*r = convRun[T]{pw: r.pw, fb: r.fb.keep(), fw: r.fw.keep()}
	s.mu.Lock()
	s.free = append(s.free, r)
	s.mu.Unlock()
}

// convSerialBelow is the multiply-adds under which a convolution runs on the calling goroutine.
const convSerialBelow = 1 << 18

func convExec[T blas.Float](op *convOp, d convDims, out G.Value, ws []byte, in []G.Value) error {
	var sb [4]tensor.Shape
	s := shapesOf(in, sb[:]...)
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
	od := op.outDims(d)
	y, err := outData[T](out, od[:])
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
		err = r.forward(workers, ws)
	case convData:
		err = r.data(workers)
	default:
		var done bool
		if done, err = r.filterBlocks(workers, ws); err == nil && !done {
			err = r.filter(workers)
		}
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
	r.op, r.d, r.p, r.a, r.b, r.bias, r.y, r.ws = op, d, op.p, a, b, bias, y, ws
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

// Run is one item of the current phase (workpool.Job).
func (r *convRun[T]) Run(item, worker int) {
	switch r.phase {
	case phaseForward:
		r.forwardItem(item, worker)
	case phaseData:
		r.dataItem(item, worker)
	case phaseDataChunk:
		r.dataChunkPart(item)
	case phaseDataWide:
		r.dataWideItem(item, worker)
	case phaseFilter:
		r.filterPart(item)
	case phaseFilterChunk:
		r.filterChunkPart(item)
	case phaseFilterBlock:
		r.filterBlockItem(item, worker)
	case phaseFilterSum:
		r.filterSumItem(item)
	case phaseForwardWide:
		r.forwardWideItem(item, worker)
	}
}

// channelGroups splits C channels into at most want groups of a multiple of unit channels.
func (r *convRun[T]) channelGroups(want, unit int) {
	units := (r.d.C + unit - 1) / unit
	r.parts = max(1, min(want, units))
	r.partWidth = (units + r.parts - 1) / r.parts * unit
	r.parts = (r.d.C + r.partWidth - 1) / r.partWidth
}

func (r *convRun[T]) channels(part int) (c0, c1 int) {
	return part * r.partWidth, min(r.d.C, (part+1)*r.partWidth)
}

// Items of the forward and the data gradient are whole images (or tiles, or chunks of small
// images), handed out as goroutines ask for them, so that a core taken by something else (a
// copy, another process) slows the call by its share only. Each goroutine works in its own
// region of the workspace: columns [worker*partWidth, ...) for the forward, rows of partWidth
// channels' taps for the data gradient.

// ---- forward: y = W·col (+ bias) ----

func (r *convRun[T]) forward(workers int, ws []byte) error {
	if err := r.pw.Pack(false, r.O, r.K, r.b, r.K); err != nil {
		return err
	}
	if r.forwardWide(workers, ws) {
		return nil
	}
	units := (r.d.N + r.B - 1) / r.B // chunks, or images times tiles
	if r.B == 1 {
		units = r.d.N * ((r.P + r.tile - 1) / r.tile)
	}
	// Each goroutine's columns of col: an equal share, a multiple of 32 (every kernel's NR)
	// where the share allows. Items are pieces of that width, narrower when there are too few
	// units to go round (few large images), but not below minPieceCols.
	r.region = r.L / workers
	if r.region >= 32 {
		r.region = r.region / 32 * 32
	}
	r.region = max(1, r.region)
	r.partWidth = r.region
	if want := 4 * workers; units < want {
		w := ((r.L*units+want-1)/want + 31) / 32 * 32
		r.partWidth = min(r.region, max(w, minPieceCols))
	}
	r.pieces = (r.L + r.partWidth - 1) / r.partWidth
	r.phase = phaseForward
	workpool.Run(workers, units*r.pieces, r)
	return nil
}

// minPieceCols keeps a product's columns wide enough for the GEMM's micro-tiles.
const minPieceCols = 64

// forwardItem computes one piece of columns of one tile of one image (or of one chunk of
// images) through the worker's columns of col.
func (r *convRun[T]) forwardItem(item, worker int) {
	s0 := worker * r.region
	unit, q := item/r.pieces, (item%r.pieces)*r.partWidth
	x, P := r.a, r.P
	if r.B == 1 {
		tiles := (P + r.tile - 1) / r.tile
		n, p0 := unit/tiles, (unit%tiles)*r.tile
		t := min(r.tile, P-p0)
		if q >= t {
			return
		}
		xn, yn := x[n*r.xSize:(n+1)*r.xSize], r.y[n*r.ySize:(n+1)*r.ySize]
		lo, hi := p0+q, p0+min(t, q+r.partWidth)
		src, ld := xn[lo:], P // a 1x1 stride-1 kernel: the image is its own matrix
		if r.col != nil {
			im2col(xn, r.col[s0:], r.tile, r.d, r.p, lo, hi, 0, r.d.C)
			src, ld = r.col[s0:], r.tile
		}
		r.fail(blas.GemmPacked(r.pw, 0, r.O, false, hi-lo, 1, src, ld, 0, yn[lo:], P))
		addBiasCols(yn, r.bias, P, lo, hi)
		return
	}
	n0 := unit * r.B
	cols := min(r.B, r.d.N-n0) * P
	if q >= cols {
		return
	}
	qe := min(cols, q+r.partWidth)
	// The chunk's columns [q,qe) go to the worker's columns [s0, s0+qe-q): image i's pixels
	// [q0,q1) at s0+i*P+q0-q.
	for c := q; c < qe; {
		i := c / P
		q0, q1 := c-i*P, min(P, qe-i*P)
		im2col(x[(n0+i)*r.xSize:(n0+i+1)*r.xSize], r.col[s0+c-q:], r.L, r.d, r.p, q0, q1, 0, r.d.C)
		c += q1 - q0
	}
	r.fail(blas.GemmPacked(r.pw, 0, r.O, false, qe-q, 1, r.col[s0:], r.L, 0, r.stage[s0:], r.L))
	for c := q; c < qe; {
		i := c / P
		q0, q1 := c-i*P, min(P, qe-i*P)
		yi := r.y[(n0+i)*r.ySize : (n0+i+1)*r.ySize]
		for o := 0; o < r.O; o++ {
			copy(yi[o*P+q0:o*P+q1], r.stage[o*r.L+s0+c-q:])
		}
		addBiasCols(yi, r.bias, P, q0, q1)
		c += q1 - q0
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
	unit := align / gcd(r.KK, align)
	if r.planWide(workers, unit) {
		r.phase = phaseDataWide
		workpool.Run(r.wide.workers, r.d.N*r.wide.groups, r)
		return nil
	}
	if r.B > 1 {
		r.channelGroups(workers, unit)
		r.phase = phaseDataChunk
		for r.n0 = 0; r.n0 < r.d.N; r.n0 += r.B {
			r.nb = min(r.B, r.d.N-r.n0)
			restage(r.b[r.n0*r.ySize:(r.n0+r.nb)*r.ySize], r.stage, r.O, r.P, r.nb)
			workpool.Run(workers, r.parts, r)
		}
		return nil
	}
	// Items are groups of partWidth channels of one image; each goroutine computes them in its
	// own rows of col (region channels' worth). Groups are narrower than a region when there are
	// too few images to go round; each group repacks the image's dy, so not narrower than that.
	r.region = r.d.C
	if r.col != nil {
		r.region = r.d.C / workers / unit * unit
		if r.region == 0 { // too few channels to give each goroutine its rows
			workers, r.region = 1, r.d.C
		}
	} else if workers > 1 {
		r.region = max(unit, r.d.C/workers/unit*unit)
	}
	r.partWidth = r.region
	if want := 4 * workers; r.d.N < want {
		groups := (want + r.d.N - 1) / r.d.N
		w := ((r.d.C+groups-1)/groups + unit - 1) / unit * unit
		r.partWidth = min(r.region, max(w, unit))
	}
	r.pieces = (r.d.C + r.partWidth - 1) / r.partWidth
	r.phase = phaseData
	workpool.Run(workers, r.d.N*r.pieces, r)
	return nil
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// dataItem computes dx of one group of channels of one image, tiles from the last (see col2im).
func (r *convRun[T]) dataItem(item, worker int) {
	n := item / r.pieces
	c0 := (item % r.pieces) * r.partWidth
	c1 := min(r.d.C, c0+r.partWidth)
	P, plane := r.P, r.d.H*r.d.W
	g, dx := r.b[n*r.ySize:(n+1)*r.ySize], r.y[n*r.xSize:(n+1)*r.xSize]
	if r.col == nil { // 1x1 stride 1: dx's rows are the product's
		r.fail(blas.GemmPacked(r.pw, c0, c1, false, P, 1, g, P, 0, dx[c0*plane:], P))
	} else {
		// rows[(c-c0)*KK+tap)*tile] is the row of channel c, tap tap: col2im addresses rows by
		// channel, so it is given the group's channels counted from 0.
		rows := r.col[worker*r.region*r.KK*r.tile:]
		clear(dx[c0*plane : c1*plane])
		for p0 := (P - 1) / r.tile * r.tile; p0 >= 0; p0 -= r.tile {
			t := min(r.tile, P-p0)
			r.fail(blas.GemmPacked(r.pw, c0*r.KK, c1*r.KK, false, t, 1, g[p0:], P, 0, rows, r.tile))
			col2im(rows, r.tile, dx[c0*plane:], r.d, r.p, p0, p0+t, 0, c1-c0)
		}
	}
	addChannelBias(dx[c0*plane:c1*plane], r.bias[min(c0, len(r.bias)):min(c1, len(r.bias))], plane)
}

// dataChunkPart computes its channels of dx for the chunk's images from the restaged dy.
func (r *convRun[T]) dataChunkPart(part int) {
	c0, c1 := r.channels(part)
	d, P, plane, cols := r.d, r.P, r.d.H*r.d.W, r.nb*r.P
	r.fail(blas.GemmPacked(r.pw, c0*r.KK, c1*r.KK, false, cols, 1, r.stage, cols, 0, r.col[c0*r.KK*cols:], cols))
	for i := 0; i < r.nb; i++ {
		dx := r.y[(r.n0+i)*r.xSize : (r.n0+i+1)*r.xSize]
		clear(dx[c0*plane : c1*plane])
		col2im(r.col[i*P:], cols, dx, d, r.p, 0, P, c0, c1)
		addChannelBias(dx[c0*plane:c1*plane], r.bias[min(c0, len(r.bias)):min(c1, len(r.bias))], plane)
	}
}

// ---- weight gradient: dw = Σ over images (and tiles) of dy·colᵀ ----

// The channel-grouped path, for where convfilter.go's k blocks do not fit the workspace.
// The images are summed into dw one after another, so they cannot be split among goroutines;
// dw's columns (input channels) can. Each image (or tile, or chunk) is one fork: its dy packed
// once, then groups of channels handed out as goroutines ask, each running im2col of its
// channels and its columns of the product.

func (r *convRun[T]) filter(workers int) error {
	r.channelGroups(4*workers, 1)
	r.phase = phaseFilter
	if r.B == 1 {
		for n := 0; n < r.d.N; n++ {
			r.n0 = n
			g := r.b[n*r.ySize : (n+1)*r.ySize]
			for r.p0 = 0; r.p0 < r.P; r.p0 += r.tile {
				r.t = min(r.tile, r.P-r.p0)
				if err := r.pw.Pack(false, r.O, r.t, g[r.p0:], r.P); err != nil {
					return err
				}
				workpool.Run(workers, r.parts, r)
				r.beta = 1
			}
		}
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
		workpool.Run(workers, r.parts, r)
		r.beta = 1
	}
	return nil
}

// filterPart adds tile [p0, p0+t) of image n0 to its channels' columns of dw. The tiles are
// multiples of the GEMM's k block (see convTile), so the sum is cut where one call cuts it.
func (r *convRun[T]) filterPart(part int) {
	c0, c1 := r.channels(part)
	r0, r1 := c0*r.KK, c1*r.KK
	xn := r.a[r.n0*r.xSize : (r.n0+1)*r.xSize]
	var src []T
	ld := r.tile
	if r.col == nil { // 1x1 stride 1: x's rows are colᵀ's columns
		src, ld = xn[r0*r.P:], r.P
	} else {
		im2col(xn, r.col, r.tile, r.d, r.p, r.p0, r.p0+r.t, c0, c1)
		src = r.col[r0*r.tile:]
	}
	r.fail(blas.GemmPacked(r.pw, 0, r.O, true, r1-r0, 1, src, ld, r.beta, r.y[r0:], r.K))
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
