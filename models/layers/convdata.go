package layers

import (
	"math"
	"unsafe"

	"github.com/gorgonia-ooc/outofcore/blas"
)

// The data gradient of a stride-1 convolution on the "wide" grid.
//
// col2im adds each tap's row onto dx one output row at a time: OW values per call (28 in
// smallcnn), so its loop overhead costs more than its arithmetic. On the padded grid, Wp = W+2*PadW
// wide, a tap shifts all of an image's output pixels by one offset: with dy laid out Wp wide
// (OW values, then Wp-OW zeros per row), tap (c,i,j) of the product colw = Wᵀ·dyw adds onto the
// padded gradient dxp[c] as ONE contiguous vector add at offset i*DilH*Wp + j*DilW.
//
// The bits are col2im's. The GEMM gives each valid column the products it gave before (same k,
// same blocks: only the columns are laid out differently); a zero column of dyw gives exactly +0
// (the micro-kernel's sum starts from +0 and every weight is finite, which planWide checks), and
// adding +0 to a partial sum that is never -0 (a sum of kernel outputs, none of them -0) changes
// nothing. Each element of dxp gets its taps in ascending order within a tile of wide pixels, and
// the tiles run from the last to the first, so it gets its terms in descending output pixel
// order, as col2im's callers give them. The interior of dxp is then dx.
//
// Each goroutine works in its own region of the workspace: the padded gradient of its channels
// (none when the convolution is unpadded: dx is its own padded grid) and a tile of wide pixels
// of dyw and of colw. The regions must fit in the workspace the op declares (WorkspaceBytes, or
// less as given); where they do not, or the grid wastes too much (OW/Wp under 3/4), or the
// stride is not 1, the data gradient runs as before (convexec.go).

// wideGrid is one call's layout on the wide grid.
type wideGrid struct {
	wp, hp, q  int // padded width and height; wide pixels per image, (OH-1)*Wp+OW
	plane      int // a channel of dxp: Hp*Wp
	cg, groups int // channels per item (a multiple of the packing's row unit, or C); items per image
	tq         int // wide pixels per tile of colw
	dywOff     int // offsets in a goroutine's region: dxp at 0, a tile of dyw, a tile of colw
	colwOff    int
	region     int // elements of a goroutine's region
	padded     bool
	wholeDy    bool // dyw holds the whole image (O x Q), not a tile (O x tq)
	workers    int  // goroutines: the call's, or one where only one region fits
}

// Tuning of the wide grid; none of it changes a result.
const (
	wideMinFill   = 0.75      // fewest valid pixels per wide pixel (OW/Wp)
	wideMinPixels = 64        // fewest wide pixels per image: smaller images run as chunks
	wideTileBytes = 128 << 10 // a tile of colw, read back by the adds while it is in L2
	wideDxpBytes  = 256 << 10 // a group's dxp, which every tap's add goes over
	wideMinRows   = 16        // fewest rows of colw per item
	wideMinTile   = 64        // fewest wide pixels per tile (a narrower GEMM is mostly overhead)
	wideAlign     = 16        // elements between regions (64 bytes for float32)
)

// convDataWide switches the wide grid on; BenchmarkConvDataWide turns it off to time the path
// the data gradient took before, in the same run.
var convDataWide = true

// planWide lays out the data gradient on the wide grid, reporting false where it does not
// apply. r.pw holds Wᵀ packed; unit is the channels a group's rows must be a multiple of.
func (r *convRun[T]) planWide(workers, unit int) bool {
	d, p := r.d, r.p
	if !convDataWide || p.StrideH != 1 || p.StrideW != 1 {
		return false
	}
	g := &r.wide
	*g = wideGrid{wp: d.W + 2*p.PadW, hp: d.H + 2*p.PadH}
	g.q = (d.OH-1)*g.wp + d.OW
	g.plane = g.hp * g.wp
	g.padded = p.PadH != 0 || p.PadW != 0
	if float64(d.OW) < wideMinFill*float64(g.wp) || g.q < wideMinPixels {
		return false
	}
	var zero T
	sz := int(unsafe.Sizeof(zero))
	nCol, nStage := r.op.workspace(d)
	budget := min(len(r.ws)/sz, nCol+nStage)
	// Groups have at least wideMinRows rows of colw: with fewer, widening dy costs more than the
	// adds save (smallcnn's first layer, one channel, runs faster as before).
	least := min(d.C, alignUp((wideMinRows+r.KK-1)/r.KK, unit))
	if least*r.KK < wideMinRows {
		return false
	}
	// The first group size to try: the channels whose dxp fits in L2 next to a tile of colw
	// (the adds go over it once per tap), fewer when there are too few images to give every
	// goroutine a few items.
	cgCache := min(d.C, max(least, wideDxpBytes/(g.plane*sz)/unit*unit))
	cg := cgCache
	if want := 4 * workers; d.N < want {
		groups := (want + d.N - 1) / d.N
		cg = min(cg, max(least, alignUp((d.C+groups-1)/groups, unit)))
	}
	switch {
	case g.fit(budget/workers, cg, least, unit, r.O, r.KK, sz, d.C):
		g.workers = workers
	case workers > 1 && g.fit(budget, cgCache, least, unit, r.O, r.KK, sz, d.C):
		g.workers = 1
	default:
		return false
	}
	// +0 in the zero columns needs finite weights (Inf·0 is NaN): weights that are not run as before.
	for _, v := range r.a[:r.O*r.K] {
		if f := float64(v); math.IsInf(f, 0) || math.IsNaN(f) {
			return false
		}
	}
	r.wbuf = unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(r.ws))), budget)
	return true
}

// fit finds the widest channel group, from cg down to least (multiples of unit), whose region
// fits in per elements with a tile of at least wideMinTile wide pixels (or all of them): with
// the whole image's dyw where that fits (one forward pass over each row of dy, which the
// prefetcher follows; a tile's rows, read last tile first, it follows less well), else a tile
// of it. A wider group with a tile of dyw beats a narrower one with all of it: each group
// widens dy again.
func (g *wideGrid) fit(per, cg, least, unit, O, KK, sz, C int) bool {
	for c := cg; ; c = max(least, alignUp(c/2, unit)) {
		if g.fitGroup(per, c, true, O, KK, sz, C) || g.fitGroup(per, c, false, O, KK, sz, C) {
			return true
		}
		if c <= least {
			return false
		}
	}
}

// fitGroup lays out a region of per elements for groups of cg channels, reporting false where
// it does not fit.
func (g *wideGrid) fitGroup(per, cg int, whole bool, O, KK, sz, C int) bool {
	dxp := 0
	if g.padded {
		dxp = alignUp(cg*g.plane, wideAlign)
	}
	rows := cg * KK
	room, perPixel := per-dxp-2*wideAlign, rows // a tile's wide pixel: a column of colw
	if whole {
		room -= O * g.q
	} else {
		perPixel += O // and of dyw
	}
	if room <= 0 {
		return false
	}
	tq := min(g.q, room/perPixel, max(wideMinTile, wideTileBytes/sz/rows))
	if tq < g.q && tq >= 32 {
		tq = tq / 32 * 32 // whole slivers of every kernel's NR
	}
	dyw := O * tq
	if whole {
		dyw = O * g.q
	}
	colwOff := dxp + alignUp(dyw, wideAlign)
	region := alignUp(colwOff+rows*tq, wideAlign)
	if tq < min(g.q, wideMinTile) || region > per {
		return false
	}
	g.cg, g.tq, g.region, g.wholeDy = cg, tq, region, whole
	g.groups = (C + cg - 1) / cg
	g.dywOff, g.colwOff = dxp, colwOff
	return true
}

// dataWideItem computes dx of one group of channels of one image on the wide grid.
func (r *convRun[T]) dataWideItem(item, worker int) {
	g, d, p := &r.wide, r.d, r.p
	n, c0 := item/g.groups, (item%g.groups)*g.cg
	c1 := min(d.C, c0+g.cg)
	plane := d.H * d.W
	reg := r.wbuf[worker*g.region : (worker+1)*g.region]
	dyw, colw := reg[g.dywOff:g.colwOff], reg[g.colwOff:]
	dx := r.y[n*r.xSize+c0*plane : n*r.xSize+c1*plane]
	dxp := dx // unpadded: dx is its own wide grid
	if g.padded {
		dxp = reg[:(c1-c0)*g.plane]
	}
	dy := r.b[n*r.ySize : (n+1)*r.ySize]
	clear(dxp)
	if g.wholeDy {
		r.widen(dy, dyw, 0, g.q)
	}
	for q0 := (g.q - 1) / g.tq * g.tq; q0 >= 0; q0 -= g.tq {
		t := min(g.tq, g.q-q0)
		b, ldb := dyw, t
		if g.wholeDy {
			b, ldb = dyw[q0:], g.q
		} else {
			r.widen(dy, dyw, q0, t)
		}
		r.fail(blas.GemmPacked(r.pw, c0*r.KK, c1*r.KK, false, t, 1, b, ldb, 0, colw, t))
		for c := 0; c < c1-c0; c++ {
			for i := 0; i < d.KH; i++ {
				for j := 0; j < d.KW; j++ {
					k := (c*d.KH+i)*d.KW + j
					at := c*g.plane + i*p.DilationH*g.wp + j*p.DilationW + q0
					blas.Add(dxp[at:at+t], colw[k*t:(k+1)*t])
				}
			}
		}
	}
	if g.padded {
		for c := 0; c < c1-c0; c++ {
			for h := 0; h < d.H; h++ {
				copy(dx[c*plane+h*d.W:c*plane+(h+1)*d.W], dxp[c*g.plane+(h+p.PadH)*g.wp+p.PadW:])
			}
		}
	}
	addChannelBias(dx, r.bias[min(c0, len(r.bias)):min(c1, len(r.bias))], plane)
}

// widen lays wide pixels [q0, q0+t) of one image's dy (O, OH*OW) out as an O x t matrix: the
// grid is Wp wide, each output row followed by Wp-OW zeros.
func (r *convRun[T]) widen(dy, dyw []T, q0, t int) {
	wp, OW, P := r.wide.wp, r.d.OW, r.P
	for o := 0; o < r.O; o++ {
		src, dst := dy[o*P:(o+1)*P], dyw[o*t:(o+1)*t]
		for q := q0; q < q0+t; {
			oh, ow := q/wp, q%wp
			seg := dst[q-q0 : q-q0+min(wp-ow, q0+t-q)]
			v := max(0, min(len(seg), OW-ow)) // output pixels; the rest are the row's zeros
			if v > 0 {
				copy(seg[:v], src[oh*OW+ow:])
			}
			for k := v; k < len(seg); k++ {
				seg[k] = 0
			}
			q += len(seg)
		}
	}
}

// alignUp rounds n up to a multiple of a.
func alignUp(n, a int) int { return (n + a - 1) / a * a }
