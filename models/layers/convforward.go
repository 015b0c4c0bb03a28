package layers

import (
	"unsafe"

	"github.com/gorgonia-ooc/outofcore/blas"
	"github.com/gorgonia-ooc/outofcore/internal/workpool"
)

// The forward convolution at stride 1 without an im2col matrix (the "wide grid").
//
// Copy an image into a zero-padded buffer xp of C planes of Hp rows of Wp (Hp = H+2·PadH,
// Wp = W+PadW: a row's right padding is the next row's left one, both zeros) and number the
// outputs on a grid as wide as xp: q = oh·Wp + ow. Then the im2col entry of tap k = (c,i,j) at q
// is xp[off[k] + q] with off[k] = c·Hp·Wp + i·DilH·Wp + j·DilW: every row of the column matrix is
// a run of xp, and blas.GemmPackedRows packs the GEMM's B straight from xp. A tap past a row's
// end reads the next row's left padding (at most PadW of it), so it sees the zero the im2col
// matrix holds there. Grid columns ow >= OW are computed and dropped (Wp is widened to OW where
// the padding exceeds the kernel's reach). The grid's last column is (OH-1)·Wp + OW - 1, so the
// reads end PadW past the last plane, which xp has; an unpadded image is its own xp.
//
// Each output element gets the products of the same (weight, pixel) pairs, zeros in the
// padding included, in the same tap order, cut at the same k blocks, by the same kernel: the
// bits of the im2col path. The bias is added to the product as the im2col path adds it.
//
// It applies where the wasted columns are few and the workspace holds each goroutine's xp and
// its output staging; elsewhere (strides, small images, a tight workspace) the im2col path runs.

// wideSlack weighs what the grid costs against the im2col it saves, in copied elements: it
// runs when O·K·(cols−P)/wideSlack + O·P <= K·P, cols being its columns, P the outputs and K the
// taps. The left side is the dropped columns' multiply-adds (wideSlack of them cost about one
// copied element: the im2col matrix is written, then read again to be packed) and the copy of
// the outputs out of the staging; the right side is the im2col matrix. So with O = 16 and 144
// taps (smallcnn's block) nearly any waste pays; one input channel (9 taps for 16 outputs) does
// not pay the staging; 4x4 images at O = 512 (16 outputs in 19 columns) do not pay the waste.
// Measured (cpu-ns, interleaved, median of 4-8, load 7): on the grid 7x7 and 8x8 images at
// O = 64 ran 1.4-2x faster, 8x8 at O = 256 1.14x, 4x4 at O = 128 (19 columns for 16) broke
// even; smallcnn's conv1 (C = 1) ran 5% slower, and three input channels 1.45x faster.
const wideSlack = 48

// wideStageElems bounds a piece's staging (O x its columns), so that the product's output is
// still in cache when it is copied out: 56x56 images at O = 64 (a 64 x 3246 staging, 830 KB)
// ran 1.25x faster in pieces of 128 columns (cpu-ns, interleaved, median of 5, load 6).
const wideStageElems = 8192

// wideMinStage is the fewest columns wideStageElems cuts a piece to: with many output channels
// the GEMM's own blocking keeps its panels in cache, and a piece of a few columns would end in a
// partial tile.
const wideMinStage = 128

// wideMinCols is the fewest wide columns an image must have: the im2col path chunks smaller
// images into one GEMM, which amortises the packing and the edge tiles better.
const wideMinCols = 32

// noWideForward turns the wide grid off, for benchmarks that compare it with the im2col path.
var noWideForward bool

// wideForward is one call's wide-grid state (convRun.fw). off and held keep their storage
// across calls (see putConvRun), so a call allocates nothing once warm.
type wideForward[T blas.Float] struct {
	hp, wp int   // the padded image's rows and row pitch
	cols   int   // wide columns of one image: (OH-1)·Wp + OW
	width  int   // wide columns per product (a piece of an image: the staging's width)
	pieces int   // pieces per image
	split  bool  // an item is one piece, else a whole image (its pieces one after another)
	xpLen  int   // elements of a goroutine's xp (0: unpadded, the image is read in place)
	region int   // elements of a goroutine's workspace region: xp, then O x width of staging
	buf    []T   // the workspace, as T
	off    []int // tap offsets into xp
	held   []int // the image each goroutine's xp holds (-1: none yet)
}

// keep is what a cached convRun keeps of it: the storage of off and held.
func (w *wideForward[T]) keep() wideForward[T] {
	return wideForward[T]{off: w.off[:0], held: w.held[:0]}
}

// forwardWide runs the forward on the wide grid when it applies and reports whether it did
// (the weights are packed in r.pw already); errors go to r.fail.
func (r *convRun[T]) forwardWide(workers int, ws []byte) bool {
	var zero T
	if workers = r.planForwardWide(workers, len(ws)/int(unsafe.Sizeof(zero))); workers == 0 {
		return false
	}
	w := &r.fw
	c := carver{buf: ws}
	buf, err := carve[T](&c, workers*w.region)
	if err != nil {
		return false // a workspace not aligned for T: the im2col path reports it
	}
	w.buf = buf
	w.offsets(r.d, r.p)
	w.held = w.held[:0]
	for i := 0; i < workers; i++ {
		w.held = append(w.held, -1)
	}
	r.phase = phaseForwardWide
	items := r.d.N
	if w.split {
		items *= w.pieces
	}
	workpool.Run(workers, items, r)
	return true
}

// planForwardWide sizes the wide grid for a workspace of elems elements and returns the goroutines
// to run it on, or 0 where it does not apply.
func (r *convRun[T]) planForwardWide(workers, elems int) int {
	d, p, w := r.d, r.p, &r.fw
	if noWideForward || p.StrideH != 1 || p.StrideW != 1 || (r.col == nil && r.B == 1) {
		return 0 // a stride, or a direct kernel that already runs without im2col
	}
	w.hp, w.wp = d.H+2*p.PadH, max(d.W+p.PadW, d.OW)
	w.cols = (d.OH-1)*w.wp + d.OW
	waste, saved := d.O*r.K*(w.cols-r.P)+wideSlack*d.O*r.P, wideSlack*r.K*r.P
	if w.cols < wideMinCols || waste > saved {
		return 0
	}
	w.xpLen = 0
	if p.PadH > 0 || p.PadW > 0 {
		w.xpLen = alignUp(d.C*w.hp*w.wp+p.PadW, 16) // each region on its own cache lines
	}
	return w.fit(workers, d.N, d.O, elems)
}

// fit chooses the goroutines and the items: whole images when there are enough to go round,
// else pieces of at least minPieceCols; as many goroutines as the workspace holds a region for,
// the pieces narrowed (to a multiple of 32, every kernel's NR) to fit the staging if need be. An
// item that is a whole image runs its pieces one after another, through one xp.
// It returns 0 when not even one goroutine's region fits.
func (w *wideForward[T]) fit(workers, n, o, elems int) int {
	w.width = min(w.cols, max(wideMinStage, wideStageElems/o/32*32))
	w.split = n < 4*workers
	if want := 4 * workers; w.split {
		pieces := (want + n - 1) / n
		w.width = min(w.width, max(alignUp((w.cols+pieces-1)/pieces, 32), minPieceCols))
	}
	for ; workers >= 1; workers-- {
		cols := (elems/workers - w.xpLen) / o
		if cols >= w.width {
			break
		}
		if cols >= minPieceCols {
			w.width = cols / 32 * 32
			break
		}
	}
	if workers == 0 {
		return 0
	}
	w.pieces = (w.cols + w.width - 1) / w.width
	w.region = w.xpLen + alignUp(o*w.width, 16)
	return workers
}

// offsets fills off[k] for the taps k = (c,i,j) in the weights' order.
func (w *wideForward[T]) offsets(d convDims, p ConvParams) {
	w.off = w.off[:0]
	for c := 0; c < d.C; c++ {
		for i := 0; i < d.KH; i++ {
			for j := 0; j < d.KW; j++ {
				w.off = append(w.off, c*w.hp*w.wp+i*p.DilationH*w.wp+j*p.DilationW)
			}
		}
	}
}

// forwardWideItem computes one image, or one piece of wide columns of one, through the
// goroutine's region: its xp (filled once per image it sees), the product into its staging, the
// output columns copied out to y with the bias.
func (r *convRun[T]) forwardWideItem(item, worker int) {
	w := &r.fw
	n, p0, p1 := item, 0, w.pieces
	if w.split {
		n, p0 = item/w.pieces, item%w.pieces
		p1 = p0 + 1
	}
	region := w.buf[worker*w.region : (worker+1)*w.region]
	xn := r.a[n*r.xSize : (n+1)*r.xSize]
	src := xn
	if w.xpLen > 0 {
		src = region[:r.d.C*w.hp*w.wp+r.p.PadW]
		if w.held[worker] != n {
			padImage(src, xn, r.d, r.p, w.hp, w.wp)
			w.held[worker] = n
		}
	}
	stage := region[w.xpLen:]
	for piece := p0; piece < p1; piece++ {
		q0 := piece * w.width
		q1 := min(w.cols, q0+w.width)
		if err := blas.GemmPackedRows(r.pw, 0, r.O, q1-q0, 1, src[q0:], w.off, 0, stage, q1-q0); err != nil {
			r.fail(err)
			return
		}
		r.unwide(r.y[n*r.ySize:(n+1)*r.ySize], stage, q0, q1)
	}
}

// unwide copies the output columns among wide columns [q0,q1) from the staging (O rows of
// q1-q0) to y, adding the bias: y = acc + bias, the one rounding the im2col path's y = acc;
// y += bias gives.
func (r *convRun[T]) unwide(y, stage []T, q0, q1 int) {
	wp, OW, P, cols := r.fw.wp, r.d.OW, r.P, q1-q0
	for oh := q0 / wp; oh*wp < q1; oh++ {
		a, b := max(q0, oh*wp), min(q1, oh*wp+OW)
		if a >= b {
			continue
		}
		ow := a - oh*wp
		for o := 0; o < r.O; o++ {
			dst := y[o*P+oh*OW+ow : o*P+oh*OW+ow+b-a]
			s := stage[o*cols+a-q0 : o*cols+b-q0]
			if r.bias == nil {
				copy(dst, s)
				continue
			}
			bv := r.bias[o]
			for i, v := range s {
				dst[i] = v + bv
			}
		}
	}
}

// padImage writes image x (C x H x W) into xp (C planes of hp rows of wp, then PadW): row h of
// channel c at c·hp·wp + (h+PadH)·wp + PadW, zeros everywhere else.
func padImage[T blas.Float](xp, x []T, d convDims, p ConvParams, hp, wp int) {
	at := 0 // xp before at is written
	for c := 0; c < d.C; c++ {
		for h := 0; h < d.H; h++ {
			start := (c*hp+h+p.PadH)*wp + p.PadW
			zero(xp[at:start])
			copy(xp[start:start+d.W], x[(c*d.H+h)*d.W:])
			at = start + d.W
		}
	}
	zero(xp[at:])
}

// zero clears s: a loop for the padding between two rows (a value or two), memclr for more.
func zero[T blas.Float](s []T) {
	if len(s) > 16 {
		clear(s)
		return
	}
	for i := range s {
		s[i] = 0
	}
}
