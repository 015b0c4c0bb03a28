package layers

import (
	"fmt"
	"math/rand"
	"runtime"
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	G "gorgonia.org/gorgonia"
)

// The convolution as it ran before it was restructured for speed (issue 28): a GEMM per image
// (or chunk, or tile) each splitting itself over the cores, im2col and col2im splitting
// themselves again. Kept here as the reference the new path must match bit for bit
// (TestConvExecSameBitsAsOld) and as the "old" side of BenchmarkConvOldNew.

// convExecOld is the former convExec.
func convExecOld[T float](op *convOp, d convDims, out G.Value, ws []byte, in []G.Value) error {
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
	nCol, nStage := op.workspace(d)
	xSize, ySize, P, K, O := d.C*d.H*d.W, d.O*d.OH*d.OW, d.outPix(), d.colRows(), d.O
	B := op.chunk(d)
	tile := P // output pixels per im2col tile when a chunk is one image
	if B == 1 && nCol > 0 {
		var zero T
		tile = op.tilePixels(d, len(ws)/int(unsafe.Sizeof(zero)))
		nCol = K * tile
	}
	c := carver{buf: ws}
	col, err := carve[T](&c, nCol)
	if err != nil {
		return err
	}
	stage, err := carve[T](&c, nStage)
	if err != nil {
		return err
	}
	for n0 := 0; n0 < d.N; n0 += B {
		nb := min(B, d.N-n0)
		cols := nb * P // this chunk's images side by side: image i owns columns [i*P, (i+1)*P)
		switch op.kind {
		case convForward:
			x, w := a, b
			yn := y[n0*ySize : (n0+nb)*ySize]
			switch {
			case col == nil: // a 1x1 stride-1 kernel on one image: the image is its own matrix
				gemm(false, false, O, P, K, 1, w, K, x[n0*xSize:(n0+1)*xSize], P, 0, yn, P)
			case nb == 1: // tiles of output pixels; a column of y does not depend on the others
				for p0 := 0; p0 < P; p0 += tile {
					t := min(tile, P-p0)
					im2colOld(x[n0*xSize:(n0+1)*xSize], col, t, d, op.p, p0, p0+t)
					gemm(false, false, O, t, K, 1, w, K, col, t, 0, yn[p0:], P)
				}
			default:
				for i := 0; i < nb; i++ {
					im2colOld(x[(n0+i)*xSize:(n0+i+1)*xSize], col[i*P:], cols, d, op.p, 0, P)
				}
				gemm(false, false, O, cols, K, 1, w, K, col, cols, 0, stage, cols)
				unstage(stage, yn, O, P, nb)
			}
			for i := 0; i < nb; i++ {
				addChannelBias(y[(n0+i)*ySize:(n0+i+1)*ySize], bias, P)
			}
		case convData:
			w, dy := a, b
			g := dy[n0*ySize : (n0+nb)*ySize]
			dx := y[n0*xSize : (n0+nb)*xSize]
			switch {
			case col == nil:
				gemm(true, false, K, P, O, 1, w, K, g, P, 0, dx, P)
			case nb == 1: // tiles from the last: see col2im
				clear(dx)
				for p0 := (P - 1) / tile * tile; p0 >= 0; p0 -= tile {
					t := min(tile, P-p0)
					gemm(true, false, K, t, O, 1, w, K, g[p0:], P, 0, col, t)
					col2imOld(col, t, dx, d, op.p, p0, p0+t)
				}
			default:
				restage(g, stage, O, P, nb)
				gemm(true, false, K, cols, O, 1, w, K, stage, cols, 0, col, cols)
				clear(dx)
				for i := 0; i < nb; i++ {
					col2imOld(col[i*P:], cols, dx[i*xSize:(i+1)*xSize], d, op.p, 0, P)
				}
			}
			for i := 0; i < nb; i++ {
				addChannelBias(y[(n0+i)*xSize:(n0+i+1)*xSize], bias, d.H*d.W)
			}
		case convFilter:
			x, dy := a, b
			g := dy[n0*ySize : (n0+nb)*ySize]
			// Images (or chunks) and tiles are summed into dw one after another: a fixed order, so
			// the weight gradient is reproducible. Tiles are multiples of the GEMM's k block, so
			// tiling does not move where the sum is cut: any tile size gives the same bits.
			var beta T
			if n0 > 0 {
				beta = 1
			}
			switch {
			case col == nil:
				gemm(false, true, O, K, P, 1, g, P, x[n0*xSize:(n0+1)*xSize], P, beta, y, K)
			case nb == 1:
				for p0 := 0; p0 < P; p0 += tile {
					t := min(tile, P-p0)
					im2colOld(x[n0*xSize:(n0+1)*xSize], col, t, d, op.p, p0, p0+t)
					gemm(false, true, O, K, t, 1, g[p0:], P, col, t, beta, y, K)
					beta = 1
				}
			default:
				restage(g, stage, O, P, nb)
				for i := 0; i < nb; i++ {
					im2colOld(x[(n0+i)*xSize:(n0+i+1)*xSize], col[i*P:], cols, d, op.p, 0, P)
				}
				gemm(false, true, O, K, cols, 1, stage, cols, col, cols, beta, y, K)
			}
		}
	}
	return nil
}

// im2colOld and col2imOld are the former im2col and col2im.
// stride ld: row (c,i,j) holds the input pixel each output position sees through kernel tap (i,j)
// of channel c, or 0 in the padding. A stride above p1-p0 leaves room for other images of the
// same chunk; a range short of the whole image is one tile of a bounded workspace.
func im2colOld[T float](x, col []T, ld int, d convDims, p ConvParams, p0, p1 int) {
	plane := d.H * d.W
	parallelFor(d.C, int64(d.colRows()*(p1-p0)), func(c0, c1 int) {
		for c := c0; c < c1; c++ {
			xc := x[c*plane : (c+1)*plane]
			for i := 0; i < d.KH; i++ {
				for j := 0; j < d.KW; j++ {
					r := (c*d.KH+i)*d.KW + j
					row := col[r*ld : r*ld+p1-p0]
					offW := j*p.DilationW - p.PadW
					vlo, vhi := validRange(offW, p.StrideW, d.W, d.OW)
					// Output row oh covers columns [a,b) of the range, starting at row[at].
					for oh, at := p0/d.OW, 0; oh*d.OW < p1; oh++ {
						a, b := max(0, p0-oh*d.OW), min(d.OW, p1-oh*d.OW)
						dst := row[at : at+b-a]
						at += b - a
						ih := oh*p.StrideH - p.PadH + i*p.DilationH
						if ih < 0 || ih >= d.H {
							clear(dst)
							continue
						}
						lo, hi := min(max(vlo, a), b), min(max(vhi, a), b)
						src := xc[ih*d.W : (ih+1)*d.W]
						clear(dst[:lo-a])
						clear(dst[hi-a:])
						if lo >= hi { // an atrous tap wider than the image may see none of it
							continue
						}
						if p.StrideW == 1 {
							copy(dst[lo-a:hi-a], src[lo+offW:hi+offW])
						} else {
							for ow := lo; ow < hi; ow++ {
								dst[ow-a] = src[ow*p.StrideW+offW]
							}
						}
					}
				}
			}
		}
	})
}

// col2im is im2col's adjoint: it adds each column entry of output pixels [p0,p1) onto the pixel
// it was copied from (x is not cleared first). Channels are independent, so splitting them across
// goroutines keeps the summation order fixed. Each input pixel gets its terms in descending output
// pixel order (taps ascending), so ranges run from the last to the first add up exactly as one
// call over the whole image.
func col2imOld[T float](col []T, ld int, x []T, d convDims, p ConvParams, p0, p1 int) {
	plane := d.H * d.W
	parallelFor(d.C, int64(d.colRows()*(p1-p0)), func(c0, c1 int) {
		for c := c0; c < c1; c++ {
			xc := x[c*plane : (c+1)*plane]
			for i := 0; i < d.KH; i++ {
				for j := 0; j < d.KW; j++ {
					r := (c*d.KH+i)*d.KW + j
					row := col[r*ld : r*ld+p1-p0]
					offW := j*p.DilationW - p.PadW
					vlo, vhi := validRange(offW, p.StrideW, d.W, d.OW)
					for oh, at := p0/d.OW, 0; oh*d.OW < p1; oh++ {
						a, b := max(0, p0-oh*d.OW), min(d.OW, p1-oh*d.OW)
						seg := at - a // row[seg+ow] is output column ow of this row
						at += b - a
						ih := oh*p.StrideH - p.PadH + i*p.DilationH
						lo, hi := min(max(vlo, a), b), min(max(vhi, a), b)
						if ih < 0 || ih >= d.H || lo >= hi {
							continue
						}
						src := row[seg+lo : seg+hi]
						dst := xc[ih*d.W : (ih+1)*d.W]
						if p.StrideW == 1 {
							dst := dst[lo+offW : hi+offW]
							for k, v := range src {
								dst[k] += v
							}
						} else {
							for k, v := range src {
								dst[(lo+k)*p.StrideW+offW] += v
							}
						}
					}
				}
			}
		}
	})
}

// TestConvExecSameBitsAsOld: the restructured convolution gives the former one's bits for every
// kind, with and without bias, in whole-image, tiled and chunked workspaces, whatever the number of
// goroutines (which changes how the work is split, never a sum).
func TestConvExecSameBitsAsOld(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	type geom struct {
		n, c, h, w, o, k int
		p                ConvParams
	}
	geoms := []geom{
		{3, 3, 20, 19, 5, 3, Square(1, 1)},  // 380 pixels: tiles in the least workspace
		{7, 7, 9, 9, 33, 3, Square(1, 1)},   // 81 pixels: chunks of 4 images, the last short
		{9, 4, 8, 8, 6, 3, Square(1, 1)},    // 64 pixels: three chunks, the last of one image
		{5, 16, 4, 4, 8, 3, Square(2, 1)},   // 4 pixels: one chunk
		{2, 13, 24, 24, 6, 1, Square(1, 0)}, // direct
		{3, 12, 6, 6, 10, 1, Square(1, 0)},  // 1x1 on small images: chunked
		{2, 2, 33, 35, 4, 3, ConvParams{PadH: 2, PadW: 2, DilationH: 2, DilationW: 2}},
		{1, 3, 30, 30, 2, 5, ConvParams{StrideH: 1, StrideW: 2, PadH: 2, PadW: 1}},
		{2, 1, 28, 28, 16, 3, Square(1, 1)}, // one input channel
		{2, 64, 7, 7, 20, 7, Square(1, 3)},  // 49 taps per channel
		{1, 9, 40, 41, 3, 2, Square(2, 0)},
		// The data gradient on the wide grid (convdata.go): smallcnn's block and conv2 (chunks of
		// two), unpadded (dx is its own grid), odd widths, dilated and asymmetric padding, 1x1 to
		// 7x7 kernels, and O > 256 (the sum over o in two blocks).
		{2, 16, 28, 28, 16, 3, Square(1, 1)},
		{3, 16, 14, 14, 16, 3, Square(1, 1)},
		{2, 6, 20, 20, 8, 3, Square(1, 0)},
		{2, 5, 19, 21, 7, 3, Square(1, 0)},
		{2, 3, 25, 26, 4, 3, ConvParams{PadH: 2, PadW: 2, DilationH: 2, DilationW: 2}},
		{2, 3, 17, 23, 5, 5, ConvParams{PadH: 1, PadW: 3, DilationH: 2}},
		{2, 24, 9, 11, 4, 1, Square(1, 1)},
		{1, 4, 30, 31, 6, 7, Square(1, 3)},
		{1, 16, 16, 16, 260, 3, Square(1, 1)},
		// The weight gradient by k blocks (convfilter.go):
		{2, 5, 20, 20, 7, 3, Square(1, 1)},  // K=45, O=7: slivers and micro-tiles short of their width
		{2, 2, 40, 40, 40, 3, Square(1, 1)}, // 14 blocks in 3 rounds in the least workspace
		{2, 64, 1, 1, 64, 3, Square(1, 1)},  // dw larger than the workspace: the channel-grouped path
		// The forward's wide grid (convforward.go): smallcnn's block and conv2 (chunked by the
		// im2col path), kernels 5 and 7, dilation, no padding, three k blocks, one image in
		// pieces, an xp too large for the least workspace (the im2col path then), odd widths.
		{2, 3, 17, 23, 5, 5, Square(1, 2)},
		{1, 4, 15, 13, 3, 7, Square(1, 3)},
		{2, 5, 19, 21, 7, 3, ConvParams{PadH: 1, PadW: 3, DilationW: 3}},
		{2, 6, 12, 11, 4, 3, Square(1, 0)},
		{2, 64, 10, 10, 8, 3, Square(1, 1)},
		{1, 3, 40, 37, 5, 3, Square(1, 1)},
		{1, 2, 50, 50, 3, 3, Square(1, 1)},
		// Padding past the kernel's reach (the grid's pitch is then OW) and on one side only.
		{2, 3, 12, 13, 2, 1, Square(1, 1)},
		{2, 4, 11, 9, 3, 3, ConvParams{PadW: 2}},
		{2, 4, 11, 9, 3, 3, ConvParams{PadH: 2}},
	}
	rng := rand.New(rand.NewSource(5))
	for gi, g := range geoms {
		p := g.p.norm()
		xs, ws := sh(g.n, g.c, g.h, g.w), sh(g.o, g.c, g.k, g.k)
		fwd := &convOp{kind: convForward, p: p}
		ys, err := fwd.outShape([]tensor.Shape{xs, ws})
		require.NoError(t, err)
		cases := []struct {
			op     *convOp
			shapes []tensor.Shape
		}{
			{fwd, []tensor.Shape{xs, ws}},
			{&convOp{kind: convForward, p: p, bias: true}, []tensor.Shape{xs, ws, sh(g.o)}},
			{&convOp{kind: convData, p: p, h: g.h, w: g.w}, []tensor.Shape{ws, ys}},
			{&convOp{kind: convData, p: p, h: g.h, w: g.w, bias: true}, []tensor.Shape{ws, ys, sh(g.c)}},
			{&convOp{kind: convFilter, p: p, kh: g.k, kw: g.k}, []tensor.Shape{xs, ys}},
		}
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			for _, c := range cases {
				var in []G.Value
				for _, s := range c.shapes {
					in = append(in, denseAs(dt, s, randData(rng, s.TotalSize())))
				}
				full, least := c.op.wsBytes(dt, c.shapes), c.op.MinWorkspaceBytes(dt, c.shapes)
				d, err := c.op.dims(c.shapes)
				require.NoError(t, err)
				os, err := c.op.outShape(c.shapes)
				require.NoError(t, err)
				for _, n := range []int64{full, least, (full + least) / 2} {
					want := newDense(dt, os)
					runtime.GOMAXPROCS(2)
					if dt == tensor.Float32 {
						require.NoError(t, convExecOld[float32](c.op, d, want, alignedNaNBytes(n), in))
					} else {
						require.NoError(t, convExecOld[float64](c.op, d, want, alignedNaNBytes(n), in))
					}
					for _, procs := range []int{1, 2, 3} {
						runtime.GOMAXPROCS(procs)
						got := newDense(dt, os)
						require.NoError(t, c.op.DoWorkspace(got, alignedNaNBytes(n), in...))
						requireSameBits(t, want, got, fmt.Sprintf("geometry %d %v %v, workspace %d of %d bytes, GOMAXPROCS %d", gi, c.op, dt, n, full, procs))
					}
				}
			}
		}
	}
}

// BenchmarkConvOldNew times the former and the present convolution on the same inputs, side by
// side so they share the machine's load (and, for the forward, the present one with its wide grid
// off, "im2col"): smallcnn's layers (28x28, batch 64: the README's job),
// ResNet-18's on 32x32 (batch 32) and the 56x56 3x3 of the other benchmarks.
func BenchmarkConvOldNew(b *testing.B) {
	type layer struct {
		name      string
		x, w      tensor.Shape
		p         ConvParams
		leastWork bool // run in the least workspace (256-pixel tiles)
	}
	layers := []layer{
		{"smallcnn-conv1", sh(64, 3, 28, 28), sh(16, 3, 3, 3), Square(1, 1), false},
		{"smallcnn-block", sh(64, 16, 28, 28), sh(16, 16, 3, 3), Square(1, 1), false},
		{"smallcnn-block-tiled", sh(64, 16, 28, 28), sh(16, 16, 3, 3), Square(1, 1), true},
		{"smallcnn-conv2", sh(64, 16, 14, 14), sh(16, 16, 3, 3), Square(1, 1), false},
		{"resnet18-stem", sh(32, 3, 32, 32), sh(64, 3, 7, 7), Square(2, 3), false},
		{"resnet18-layer1", sh(32, 64, 8, 8), sh(64, 64, 3, 3), Square(1, 1), false},
		{"resnet18-layer4", sh(32, 512, 1, 1), sh(512, 512, 3, 3), Square(1, 1), false},
		{"56x56-3x3", benchX, benchW, Square(1, 1), false},
	}
	for _, l := range layers {
		p := l.p.norm()
		fwd := &convOp{kind: convForward, p: p}
		ys, err := fwd.outShape([]tensor.Shape{l.x, l.w})
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range []struct {
			op     *convOp
			shapes []tensor.Shape
		}{
			{fwd, []tensor.Shape{l.x, l.w}},
			{&convOp{kind: convData, p: p, h: l.x[2], w: l.x[3]}, []tensor.Shape{l.w, ys}},
			{&convOp{kind: convFilter, p: p, kh: l.w[2], kw: l.w[3]}, []tensor.Shape{l.x, ys}},
		} {
			impls := []string{"old", "new"}
			switch c.op.kind {
			case convFilter:
				impls = []string{"old", "grouped", "new"} // grouped: the path before convfilter.go
			case convForward:
				impls = []string{"old", "im2col", "new"} // im2col: the present path, the wide grid off
			}
			for _, impl := range impls {
				b.Run(fmt.Sprintf("%s/%v/%s", l.name, c.op.kind, impl), func(b *testing.B) {
					rng := rand.New(rand.NewSource(1))
					var in []G.Value
					for _, s := range c.shapes {
						in = append(in, denseAs(tensor.Float32, s, randData(rng, s.TotalSize())))
					}
					os, _ := c.op.outShape(c.shapes)
					out := newDense(tensor.Float32, os)
					n := c.op.wsBytes(tensor.Float32, c.shapes)
					if l.leastWork {
						n = c.op.MinWorkspaceBytes(tensor.Float32, c.shapes)
					}
					ws := alignedNaNBytes(n)
					d, _ := c.op.dims(c.shapes)
					b.ReportAllocs()
					// The previous side's garbage is collected now, not on this side's CPU time.
					runtime.GC()
					cpu0 := processCPU()
					for b.Loop() {
						var err error
						filterByBlocks = impl != "grouped"
						noWideForward = impl == "im2col"
						if impl == "old" {
							err = convExecOld[float32](c.op, d, out, ws, in)
						} else {
							err = convExec[float32](c.op, d, out, ws, in)
						}
						filterByBlocks = true
						noWideForward = false
						if err != nil {
							b.Fatal(err)
						}
					}
					// Under load wall time says little; CPU time is the work done, on all cores.
					b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
				})
			}
		}
	}
}

// processCPU is the user and system CPU time this process has used, in nanoseconds.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
