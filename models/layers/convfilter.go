package layers

import (
	"unsafe"

	"github.com/gorgonia-ooc/outofcore/blas"
	"github.com/gorgonia-ooc/outofcore/internal/workpool"
)

// The weight gradient by k blocks: dw = Σ over images (chunks) of dy·colᵀ, where the GEMM cuts
// each image's (chunk's) sum over pixels every blas.KBlock pixels and adds the blocks to dw one
// after another. A block's product starts from +0 whatever came before it, so blocks can be
// computed anywhere, by any goroutine, and added in order afterwards: dw = S for the very first
// block, dw + S for each next (the kernel's fma(1, dw, acc), one rounding; acc is never -0).
// Same bits as the channel-grouped path (convexec.go), but
//
//   - every core works on the whole product, images in parallel, not on slices of dw's columns
//     one image at a time (conv1's single channel was one core's work);
//   - the im2col matrix is never written out: blas.GemmSlivers packs it straight from the image
//     (colSlivers), one pass instead of im2col plus the GEMM's transposing pack;
//   - the product is dwᵀ = col·dyᵀ, taps as rows (slivers of the kernel's 6 rows) and output
//     channels as columns (slivers of 16 float32 or 8 float64 with AVX2): a convolution's O is
//     usually a multiple of those, where as rows O=16 padded to 18, and as columns a group of
//     two channels' 18 taps padded to 32.
//
// The blocks' products go to slots in the workspace, a round of them at a time: one slot is the
// running sum dwᵀ, the others hold one block each; a round computes its blocks, then adds them
// to the running sum in order (split by element ranges over the goroutines), and the last round
// transposes the sum into dw. Where the workspace holds fewer than two slots (a 1x1 convolution
// has none, ResNet's 512-channel layers' dw is larger than their im2col) the channel-grouped
// path runs.

// filterBlocks is the k-block weight gradient's state in a convRun.
type filterBlocks[T blas.Float] struct {
	slots        []T // the workspace as slots of K*O: slot 0 the running sum dwᵀ, then a round's blocks
	slot         int // K*O
	perUnit      int // blocks per full unit (an image, or a chunk of B images)
	total        int // blocks of the whole call
	g0, nr       int // the round's first block and its count
	parts, width int // a block's rows (taps) in parts of width rows, when a round has too few blocks
	spans, span  int // the reduction's element ranges of the sum
	srcs         []filterSrcs[T]
	taps         []colLane // colTaps, kept across calls
}

// filterSrcs is one worker's operands: the im2col matrix and dyᵀ of the block it computes.
type filterSrcs[T blas.Float] struct {
	col colSlivers[T]
	dy  dySlivers[T]
}

// keep is the state a cached convRun keeps: the per-worker operands' storage, emptied of the
// call's tensors.
func (f *filterBlocks[T]) keep() filterBlocks[T] {
	for i := range f.srcs {
		f.srcs[i] = filterSrcs[T]{col: colSlivers[T]{buf: f.srcs[i].col.buf}}
	}
	return filterBlocks[T]{srcs: f.srcs[:0], taps: f.taps[:0]}
}

// filterMinRows is the fewest taps a block's part has (a multiple of every kernel's row sliver).
const filterMinRows = 48

// filterByBlocks is off only in BenchmarkConvOldNew, which times the channel-grouped path too.
var filterByBlocks = true

// filterBlocks runs the weight gradient by k blocks when the workspace holds the running sum and
// at least one block; it reports false, having done nothing, where it does not.
func (r *convRun[T]) filterBlocks(workers int, ws []byte) (bool, error) {
	f := &r.fb
	var zero T
	f.slot = r.K * r.O
	nSlots := len(ws) / int(unsafe.Sizeof(zero)) / max(f.slot, 1)
	if f.slot == 0 || nSlots < 2 || r.d.N == 0 || r.P == 0 || !filterByBlocks {
		return false, nil
	}
	c := carver{buf: ws}
	var err error
	if f.slots, err = carve[T](&c, nSlots*f.slot); err != nil {
		return false, err
	}
	units := (r.d.N + r.B - 1) / r.B
	f.perUnit = (r.B*r.P + blas.KBlock - 1) / blas.KBlock
	f.total = (units - 1) * f.perUnit
	last := r.d.N - (units-1)*r.B // images in the last unit
	f.total += (last*r.P + blas.KBlock - 1) / blas.KBlock
	if cap(f.srcs) < workers {
		f.srcs = make([]filterSrcs[T], workers)
	}
	f.srcs = f.srcs[:workers]
	f.taps = colTaps(f.taps, r.d, r.p)

	rounds := (f.total + nSlots - 2) / (nSlots - 1)
	per := (f.total + rounds - 1) / rounds
	// Items of a round are its blocks, each in parts of taps when there are too few blocks to
	// keep every goroutine busy; the reduction's items are element ranges of the sum.
	f.parts, f.width = 1, r.K
	if want := 2 * workers; per < want && r.K >= 2*filterMinRows {
		f.parts = min((want+per-1)/per, r.K/filterMinRows)
		f.width = (r.K + f.parts - 1) / f.parts
		f.width = (f.width + filterMinRows - 1) / filterMinRows * filterMinRows
		f.parts = (r.K + f.width - 1) / f.width
	}
	f.spans = max(1, min(2*workers, f.slot/1024))
	f.span = (f.slot + f.spans - 1) / f.spans
	f.spans = (f.slot + f.span - 1) / f.span
	for f.g0 = 0; f.g0 < f.total; f.g0 += per {
		f.nr = min(per, f.total-f.g0)
		r.phase = phaseFilterBlock
		workpool.Run(workers, f.nr*f.parts, r)
		r.phase = phaseFilterSum
		workpool.Run(workers, f.spans, r)
	}
	sum, y := f.slots[:f.slot], r.y
	for k := 0; k < r.K; k++ {
		for o, v := range sum[k*r.O : (k+1)*r.O] {
			y[o*r.K+k] = v
		}
	}
	return true, nil
}

// filterBlockItem computes one part of one block of the round into the block's slot.
func (r *convRun[T]) filterBlockItem(item, worker int) {
	f := &r.fb
	g := f.g0 + item/f.parts
	t0 := (item % f.parts) * f.width
	t1 := min(r.K, t0+f.width)
	u, b := g/f.perUnit, g%f.perUnit
	n0 := u * r.B
	nb := min(r.B, r.d.N-n0)
	q0 := b * blas.KBlock
	kc := min(blas.KBlock, nb*r.P-q0)
	s := &f.srcs[worker]
	s.col = colSlivers[T]{x: r.a[n0*r.xSize:], d: r.d, p: r.p, q0: q0, t0: t0, xSize: r.xSize, taps: f.taps, buf: s.col.buf}
	s.dy = dySlivers[T]{dy: r.b[n0*r.ySize:], P: r.P, q0: q0, ySize: r.ySize}
	slot := f.slots[(1+item/f.parts)*f.slot:]
	r.fail(blas.GemmSlivers(t1-t0, r.O, kc, 1, &s.col, &s.dy, 0, slot[t0*r.O:], r.O))
}

// filterSumItem adds the round's blocks, in order, to one element range of the running sum.
func (r *convRun[T]) filterSumItem(item int) {
	f := &r.fb
	lo, hi := item*f.span, min(f.slot, (item+1)*f.span)
	sum := f.slots[lo:hi]
	for i := 0; i < f.nr; i++ {
		blk := f.slots[(1+i)*f.slot+lo : (1+i)*f.slot+hi]
		if f.g0+i == 0 {
			copy(sum, blk)
		} else {
			blas.Add(sum, blk)
		}
	}
}

// colSlivers is a block of the im2col matrix as a blas.SliverSource: rows are taps (c, i, j)
// from t0, k is the block's pixels from q0 of its unit's pixel sequence (image after image).
type colSlivers[T blas.Float] struct {
	x      []T // the unit's first image onwards
	d      convDims
	p      ConvParams
	q0, t0 int
	xSize  int
	taps   []colLane // colTaps
	buf    []T       // kept across calls: a zero row, then a row per lane for taps that need a copy
}

// colLane is what a sliver's lane (one tap) reads, found once per PackSliver.
type colLane struct {
	off, ih0, offW int  // the channel's plane in the image; the input row and column of output (0, 0)
	lo, hi         int  // the output columns that see the image (validRange)
	vlo, vhi       int  // the output rows that do
	on             bool // a tap, not a lane past the sliver's last row
}

// colTaps is what each tap of a convolution reads, for colSlivers.
func colTaps(taps []colLane, d convDims, p ConvParams) []colLane {
	taps = taps[:0]
	for c := 0; c < d.C; c++ {
		for i := 0; i < d.KH; i++ {
			for j := 0; j < d.KW; j++ {
				l := colLane{off: c * d.H * d.W, ih0: i*p.DilationH - p.PadH, offW: j*p.DilationW - p.PadW, on: true}
				l.lo, l.hi = validRange(l.offW, p.StrideW, d.W, d.OW)
				l.vlo, l.vhi = validRange(l.ih0, p.StrideH, d.H, d.OH)
				taps = append(taps, l)
			}
		}
	}
	return taps
}

// colMaxLanes bounds the sliver width packed by interleaving (every kernel's row sliver fits).
const colMaxLanes = 8

// PackSliver writes taps [i0, i0+rows) of pixels [p0, p0+kc) as kc groups of g: each lane (a
// tap) is a slice, of the image where it can be, of zeros or of a copy where not, and the lanes
// are interleaved into the groups, the padding zeroed after. At stride 1 along rows, when an
// output row is an input row's width (a "same" convolution), a tap reads the image's pixels in
// one contiguous run (packRuns); otherwise one output row at a time (packRows).
func (s *colSlivers[T]) PackSliver(dst []T, i0, rows, p0, kc, g int) {
	if g > colMaxLanes {
		s.packByTap(dst, i0, rows, p0, kc, g)
		return
	}
	d, p := s.d, s.p
	var lanes [colMaxLanes]colLane
	copy(lanes[:rows], s.taps[s.t0+i0:s.t0+i0+rows])
	w := max(d.OW, kc) // the longest lane a copy holds
	if need := (1 + g) * w; len(s.buf) < need {
		s.buf = make([]T, need)
	}
	clear(s.buf[:w]) // the zero lane; the buffer served other shapes too
	if p.StrideW == 1 && p.StrideH*d.W == d.OW {
		s.packRuns(dst, &lanes, rows, p0, kc, g, w)
	} else {
		s.packRows(dst, &lanes, p0, kc, g, w)
	}
}

// packRuns packs a block a run of one image at a time. At stride 1 with OW = StrideH*W, output
// pixel pix of a tap reads the image at the tap's offset + pix, so a lane is one slice of the
// image (a copy where the run would start before it or end after it, which only the padding
// reads), and the padding is zeroed after the interleave: rows above and below the image, and
// the columns beside it.
func (s *colSlivers[T]) packRuns(dst []T, lanes *[colMaxLanes]colLane, rows, p0, kc, g, w int) {
	d := s.d
	P, OW := d.outPix(), d.OW
	var src [colMaxLanes][]T
	for q, e := s.q0+p0, s.q0+p0+kc; q < e; {
		n, pix := q/P, q%P
		run := min(P-pix, e-q)
		xn := s.x[n*s.xSize : (n+1)*s.xSize]
		for r := range g {
			l := &lanes[r]
			at := l.off + l.ih0*d.W + l.offW + pix
			switch {
			case !l.on:
				src[r] = s.buf[:run]
			case at >= 0 && at+run <= len(xn):
				src[r] = xn[at : at+run]
			default:
				tmp := s.buf[(1+r)*w : (1+r)*w+run]
				clear(tmp)
				lo, hi := max(at, 0), min(at+run, len(xn))
				if lo < hi {
					copy(tmp[lo-at:hi-at], xn[lo:hi])
				}
				src[r] = tmp
			}
		}
		out := dst[(q-s.q0-p0)*g : (q-s.q0-p0+run)*g]
		interleave(out, &src, g, run)
		for r := 0; r < rows; r++ {
			l := &lanes[r]
			// The run's pixels of rows that see the image: those above and below are zeroed
			// whole, in those the columns that see the padding.
			rs, re := max(pix, l.vlo*OW), min(pix+run, l.vhi*OW)
			zeroLane(out, g, r, pix, pix, min(rs, pix+run))
			zeroLane(out, g, r, pix, max(re, rs, pix), pix+run)
			for c := 0; c < OW; c++ {
				if c == l.lo {
					c = max(c, l.hi)
					if c >= OW {
						break
					}
				}
				first := rs/OW*OW + c // column c's first pixel in [rs, re)
				if first < rs {
					first += OW
				}
				for px := first; px < re; px += OW {
					out[(px-pix)*g+r] = 0
				}
			}
		}
		q += run
	}
}

// zeroLane zeroes lane r of pixels [from, to) of a run from pixel base, in groups of g.
func zeroLane[T blas.Float](out []T, g, r, base, from, to int) {
	for px := from; px < to; px++ {
		out[(px-base)*g+r] = 0
	}
}

// packRows packs a block an output row (a segment) at a time: in a segment a tap reads one input
// row, a slice of it at stride 1 (read as if the image went on past its edges, the padding
// zeroed after the interleave), else a copy.
func (s *colSlivers[T]) packRows(dst []T, lanes *[colMaxLanes]colLane, p0, kc, g, w int) {
	d, p := s.d, s.p
	P, OW := d.outPix(), d.OW
	zero := s.buf[:w]
	var src [colMaxLanes][]T
	var fix [colMaxLanes][2]int // output columns [a, lo) and [hi, b) a lane read but must be 0
	for q, e := s.q0+p0, s.q0+p0+kc; q < e; {
		n, pix := q/P, q%P
		oh, a := pix/OW, pix%OW
		b := min(OW, a+e-q) // this segment is output columns [a, b) of row oh
		xn := s.x[n*s.xSize : (n+1)*s.xSize]
		fixes := false
		for r := range g {
			l := &lanes[r]
			ih := oh*p.StrideH + l.ih0
			fix[r] = [2]int{a, b}
			if !l.on || ih < 0 || ih >= d.H || l.lo >= b || l.hi <= a {
				src[r] = zero[a:b]
				continue
			}
			row := l.off + ih*d.W // the input row, in xn
			lo, hi := max(l.lo, a), min(l.hi, b)
			if p.StrideW == 1 && row+a+l.offW >= 0 && row+b+l.offW <= len(xn) {
				src[r] = xn[row+a+l.offW : row+b+l.offW]
				fix[r] = [2]int{lo, hi}
				fixes = fixes || lo > a || hi < b
				continue
			}
			tmp := s.buf[(1+r)*w : (1+r)*w+OW]
			clear(tmp[a:lo])
			for ow := lo; ow < hi; ow++ {
				tmp[ow] = xn[row+ow*p.StrideW+l.offW]
			}
			clear(tmp[hi:b])
			src[r] = tmp[a:b]
		}
		out := dst[(q-s.q0-p0)*g : (q-s.q0-p0+b-a)*g]
		interleave(out, &src, g, b-a)
		if fixes {
			for r := range g {
				for ow := a; ow < fix[r][0]; ow++ {
					out[(ow-a)*g+r] = 0
				}
				for ow := fix[r][1]; ow < b; ow++ {
					out[(ow-a)*g+r] = 0
				}
			}
		}
		q += b - a
	}
}

// interleave writes n groups of g: dst[k*g+r] = src[r][k].
func interleave[T blas.Float](dst []T, src *[colMaxLanes][]T, g, n int) {
	switch g {
	case 6:
		done := 0
		if d32, ok := any(dst).([]float32); ok {
			done = interleave6F32Fast(d32, any(src).(*[colMaxLanes][]float32), n)
		}
		s0, s1, s2, s3, s4, s5 := src[0][:n], src[1][:n], src[2][:n], src[3][:n], src[4][:n], src[5][:n]
		dst = dst[:n*6]
		for k := done; k < n; k++ {
			d := dst[k*6 : k*6+6 : k*6+6]
			d[0], d[1], d[2], d[3], d[4], d[5] = s0[k], s1[k], s2[k], s3[k], s4[k], s5[k]
		}
	case 4:
		s0, s1, s2, s3 := src[0][:n], src[1][:n], src[2][:n], src[3][:n]
		dst = dst[:n*4]
		for k := range s0 {
			d := dst[k*4 : k*4+4 : k*4+4]
			d[0], d[1], d[2], d[3] = s0[k], s1[k], s2[k], s3[k]
		}
	default:
		for r := range g {
			for k, v := range src[r][:n] {
				dst[k*g+r] = v
			}
		}
	}
}

// packByTap is PackSliver for slivers wider than colMaxLanes, one tap at a time.
func (s *colSlivers[T]) packByTap(dst []T, i0, rows, p0, kc, g int) {
	d, p := s.d, s.p
	P, OW, plane, KK := d.outPix(), d.OW, d.H*d.W, d.KH*d.KW
	for q, e := s.q0+p0, s.q0+p0+kc; q < e; {
		n, pix := q/P, q%P
		oh, a := pix/OW, pix%OW
		b := min(OW, a+e-q)
		seg := dst[(q-s.q0-p0)*g:]
		xn := s.x[n*s.xSize:]
		for r := 0; r < rows; r++ {
			t := s.t0 + i0 + r
			c, i, j := t/KK, t%KK/d.KW, t%d.KW
			ih := oh*p.StrideH - p.PadH + i*p.DilationH
			offW := j*p.DilationW - p.PadW
			lo, hi := validRange(offW, p.StrideW, d.W, OW)
			lo, hi = min(max(lo, a), b), min(max(hi, a), b)
			for ow := a; ow < b; ow++ {
				var v T
				if ih >= 0 && ih < d.H && ow >= lo && ow < hi {
					v = xn[c*plane+ih*d.W+ow*p.StrideW+offW]
				}
				seg[(ow-a)*g+r] = v
			}
		}
		q += b - a
	}
}

// dySlivers is a block of dyᵀ as a blas.SliverSource: rows are output channels, k the block's
// pixels from q0 of its unit's pixel sequence, image after image.
type dySlivers[T blas.Float] struct {
	dy           []T // the unit's first image onwards
	P, q0, ySize int
}

// PackSliver packs channels [i0, i0+rows) of pixels [p0, p0+kc), a run of one image at a time:
// float32 slivers of whole groups of eight channels eight channels at a time in AVX2, the rest
// as blas packs a stored matrix.
func (s *dySlivers[T]) PackSliver(dst []T, i0, rows, p0, kc, g int) {
	d32, _ := any(dst).([]float32)
	for q, e := s.q0+p0, s.q0+p0+kc; q < e; {
		n, pix := q/s.P, q%s.P
		run := min(s.P-pix, e-q)
		out := dst[(q-s.q0-p0)*g : (q-s.q0-p0+run)*g]
		done := 0
		if d32 != nil && rows == g && g%8 == 0 {
			dy := any(s.dy[n*s.ySize:]).([]float32)
			for r0 := 0; r0 < g; r0 += 8 {
				var src [8][]float32
				for r := range src {
					ch := (i0 + r0 + r) * s.P
					src[r] = dy[ch+pix : ch+pix+run]
				}
				done = interleave8F32Fast(d32[(q-s.q0-p0)*g+r0:], g, &src, run)
			}
		}
		m := blas.Stored[T]{Data: s.dy[n*s.ySize:], Ld: s.P}
		m.PackSliver(out[done*g:], i0, rows, pix+done, run-done, g)
		q += run
	}
}
