package layers

import (
	"fmt"
	"hash"
	"sync/atomic"

	"github.com/chewxy/hm"
	"github.com/gorgonia-ooc/outofcore/blas"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// ConvParams is the geometry of a 2-D convolution. Zero strides and dilations mean 1, so the zero
// value is a stride-1, unpadded convolution.
type ConvParams struct {
	StrideH, StrideW     int
	PadH, PadW           int
	DilationH, DilationW int
	// OutPadH and OutPadW only matter for ConvTranspose2D: a strided convolution maps several
	// input sizes to the same output size, and these pick the larger ones (as PyTorch's output_padding).
	OutPadH, OutPadW int
}

// Square is the common case: the same stride and padding in both directions, no dilation.
func Square(stride, pad int) ConvParams {
	return ConvParams{StrideH: stride, StrideW: stride, PadH: pad, PadW: pad}
}

func (p ConvParams) norm() ConvParams {
	if p.StrideH == 0 {
		p.StrideH = 1
	}
	if p.StrideW == 0 {
		p.StrideW = 1
	}
	if p.DilationH == 0 {
		p.DilationH = 1
	}
	if p.DilationW == 0 {
		p.DilationW = 1
	}
	return p
}

func (p ConvParams) validate() error {
	if p.StrideH < 1 || p.StrideW < 1 || p.DilationH < 1 || p.DilationW < 1 {
		return fmt.Errorf("layers: strides and dilations must be positive: %+v", p)
	}
	if p.PadH < 0 || p.PadW < 0 || p.OutPadH < 0 || p.OutPadW < 0 {
		return fmt.Errorf("layers: paddings must not be negative: %+v", p)
	}
	return nil
}

// convOutSize is the output length of a convolution along one axis.
func convOutSize(in, k, stride, pad, dil int) int {
	return (in+2*pad-dil*(k-1)-1)/stride + 1
}

type convKind uint8

const (
	// convForward: (x, w[, b]) -> y. Also the data gradient of a transposed convolution.
	convForward convKind = iota
	// convData: (w, dy[, b]) -> dx, the data gradient of a convolution. Also ConvTranspose2D's forward.
	convData
	// convFilter: (x, dy) -> dw, the weight gradient of both.
	convFilter
)

func (k convKind) String() string {
	switch k {
	case convForward:
		return "Conv2D"
	case convData:
		return "Conv2DData"
	default:
		return "Conv2DFilter"
	}
}

// convOp is the lean convolution: one node, im2col only in a workspace. The three kinds are the
// three products of the same convolution (forward, data gradient, weight gradient); each is linear in
// both operands and each one's derivatives are the other two, so the set is closed under SymDiff.
type convOp struct {
	pure
	shapeMemo
	kind   convKind
	p      ConvParams
	kh, kw int // kernel size, needed by convFilter whose operands do not carry it
	h, w   int // spatial size of the data-side tensor, needed by convData (stride makes it ambiguous)
	bias   bool
	// serial tells this layer's bias gradient apart from another layer's (see channelSumOp.owner).
	serial uint64
}

// convDims: x is (N,C,H,W), w is (O,C,KH,KW), y is (N,O,OH,OW), whatever the kind.
type convDims struct{ N, C, H, W, O, KH, KW, OH, OW int }

func (d convDims) colRows() int { return d.C * d.KH * d.KW }
func (d convDims) outPix() int  { return d.OH * d.OW }

func (op *convOp) Arity() int {
	switch {
	case op.kind == convFilter:
		return 2
	case op.bias:
		return 3
	default:
		return 2
	}
}

func (op *convOp) Type() hm.Type {
	if op.bias {
		return fnType(4, 4, 1, 4)
	}
	return fnType(4, 4, 4)
}

func (op *convOp) dims(in []tensor.Shape) (d convDims, err error) {
	if len(in) != op.Arity() {
		return d, fmt.Errorf("layers: %v takes %d inputs, got %d", op, op.Arity(), len(in))
	}
	for i := 0; i < 2; i++ {
		if !is4D(in[i]) {
			// The label is formatted here, not per call: dims runs on every step.
			return d, want4D(fmt.Sprintf("%v operand %d", op.kind, i), in[i])
		}
	}
	p := op.p
	switch op.kind {
	case convForward:
		x, w := in[0], in[1]
		d = convDims{N: x[0], C: x[1], H: x[2], W: x[3], O: w[0], KH: w[2], KW: w[3]}
		if w[1] != x[1] {
			return d, fmt.Errorf("layers: conv weight %v expects %d input channels, input is %v", w, w[1], x)
		}
		d.OH = convOutSize(d.H, d.KH, p.StrideH, p.PadH, p.DilationH)
		d.OW = convOutSize(d.W, d.KW, p.StrideW, p.PadW, p.DilationW)
	case convData:
		w, dy := in[0], in[1]
		d = convDims{N: dy[0], C: w[1], H: op.h, W: op.w, O: w[0], KH: w[2], KW: w[3], OH: dy[2], OW: dy[3]}
		if dy[1] != w[0] {
			return d, fmt.Errorf("layers: %v: weight %v has %d output channels, gradient is %v", op, w, w[0], dy)
		}
		if oh, ow := convOutSize(d.H, d.KH, p.StrideH, p.PadH, p.DilationH), convOutSize(d.W, d.KW, p.StrideW, p.PadW, p.DilationW); oh != d.OH || ow != d.OW {
			return d, fmt.Errorf("layers: %v: a %dx%d image convolves to %dx%d, not %v", op, d.H, d.W, oh, ow, dy)
		}
	case convFilter:
		x, dy := in[0], in[1]
		d = convDims{N: x[0], C: x[1], H: x[2], W: x[3], O: dy[1], KH: op.kh, KW: op.kw, OH: dy[2], OW: dy[3]}
		if dy[0] != x[0] {
			return d, fmt.Errorf("layers: %v: batch of %v and %v differ", op, x, dy)
		}
		if oh, ow := convOutSize(d.H, d.KH, p.StrideH, p.PadH, p.DilationH), convOutSize(d.W, d.KW, p.StrideW, p.PadW, p.DilationW); oh != d.OH || ow != d.OW {
			return d, fmt.Errorf("layers: %v: a %v input convolves to %dx%d, not %v", op, x, oh, ow, dy)
		}
	}
	if d.OH < 1 || d.OW < 1 {
		return d, fmt.Errorf("layers: %v: kernel %dx%d does not fit a padded %dx%d input", op, d.KH, d.KW, d.H, d.W)
	}
	if d.H < 1 || d.W < 1 {
		return d, fmt.Errorf("layers: %v: empty image", op)
	}
	if op.bias && op.kind != convFilter {
		b := in[2]
		want := d.O
		if op.kind == convData {
			want = d.C
		}
		if b.Dims() != 1 || b[0] != want {
			return d, fmt.Errorf("layers: %v: bias has shape %v, want (%d)", op, b, want)
		}
	}
	return d, nil
}

func (op *convOp) outShape(in []tensor.Shape) (tensor.Shape, error) {
	d, err := op.dims(in)
	if err != nil {
		return nil, err
	}
	return op.outShapeOf(d), nil
}

// outShapeOf is the output's shape for checked dims.
func (op *convOp) outShapeOf(d convDims) tensor.Shape {
	s := op.outDims(d)
	return s[:]
}

// outDims is outShapeOf as an array, which a caller can keep on its stack.
func (op *convOp) outDims(d convDims) [4]int {
	switch op.kind {
	case convForward:
		return [4]int{d.N, d.O, d.OH, d.OW}
	case convData:
		return [4]int{d.N, d.C, d.H, d.W}
	default:
		return [4]int{d.O, d.C, d.KH, d.KW}
	}
}

func (op *convOp) InferShape(ds ...G.DimSizer) (tensor.Shape, error) {
	in, err := dimSizersToShapes(ds)
	if err != nil {
		return nil, err
	}
	return op.outShape(in)
}

// direct reports a 1x1, stride-1, unpadded kernel: an image is then its own im2col matrix.
func (op *convOp) direct(d convDims) bool {
	return d.KH == 1 && d.KW == 1 && op.p.StrideH == 1 && op.p.StrideW == 1 && op.p.PadH == 0 && op.p.PadW == 0
}

// minGemmCols is the fewest columns (output pixels) a GEMM should have: a product over one small
// image degenerates (ResNet's last stage on 32x32 inputs has 1x1 outputs, where a per-image
// product is a GEMV whose packing costs as much as its arithmetic).
const minGemmCols = 256

// chunk is how many images share one GEMM: one for ordinary images, enough small ones to reach
// minGemmCols. It depends on the shapes only, so the summation order, and with it every result,
// is the same on every machine.
func (op *convOp) chunk(d convDims) int { return ConvChunk(d.N, d.outPix()) }

// ConvChunk is how many of n images, each of outPix output pixels, a convolution puts side by
// side in one GEMM (its weight gradient then sums over the chunk's pixels as one k, cut every
// blas.KBlock): a backend that wants the CPU op's bits chunks its images the same way.
func ConvChunk(n, outPix int) int {
	if outPix <= 0 {
		return min(n, 1)
	}
	return min(n, (minGemmCols+outPix-1)/outPix)
}

// workspace is the im2col matrix of one chunk of images (none for a direct kernel on one image) and,
// when a chunk has several images, a staging matrix that lays their outputs or gradients side by
// side. A chunk is one image unless the images are small, so this is never batch-sized.
func (op *convOp) workspace(d convDims) (col, stage int) {
	b := op.chunk(d)
	cols := b * d.outPix()
	if !(op.direct(d) && b == 1) {
		col = d.colRows() * cols
	}
	if b > 1 {
		stage = d.O * cols
	}
	return col, stage
}

// convTile is the fewest output pixels an im2col tile holds: the GEMM's k block, so that the
// weight gradient's sum over pixels is cut at the same places whatever the tile size.
const convTile = blas.KBlock

// tilePixels is how many output pixels of one image an im2col tile holds in a workspace of wsElems
// elements: the whole image when its matrix fits, else as many multiples of convTile as fit (at
// least one: doWorkspace has checked the minimum). Results do not depend on it.
func (op *convOp) tilePixels(d convDims, wsElems int) int {
	return ConvTilePixels(d.colRows(), d.outPix(), wsElems)
}

// ConvTilePixels is how many of an image's outPix output pixels a convolution whose column
// matrix has colRows rows puts in one im2col tile within a workspace of wsElems elements: all of
// them when the matrix fits or the image has at most blas.KBlock pixels, else the most multiples
// of blas.KBlock that fit (at least one). A backend that wants the CPU op's bits tiles so.
func ConvTilePixels(colRows, outPix, wsElems int) int {
	P, K := outPix, colRows
	if K*P <= wsElems || P <= convTile {
		return P
	}
	return max(convTile, wsElems/max(K, 1)/convTile*convTile)
}

// minWsBytes is the least workspace the op runs in: one tile of convTile output pixels when a
// chunk is one image, else the same as wsBytes.
func (op *convOp) minWsBytes(dt tensor.Dtype, in []tensor.Shape) int64 {
	d, err := op.dims(in)
	if err != nil {
		return 0
	}
	col, stage := op.workspace(d)
	if op.chunk(d) == 1 && col > 0 {
		col = d.colRows() * min(d.outPix(), convTile)
	}
	return wsBytes(dt, col, stage)
}

// MinWorkspaceBytes is the least workspace DoWorkspace accepts: the im2col matrix of 256 output
// pixels rather than of a whole image. Any workspace from this to WorkspaceBytes gives the same
// bits; a smaller one runs the image in more, smaller tiles.
func (op *convOp) MinWorkspaceBytes(dt tensor.Dtype, in []tensor.Shape) int64 {
	return op.minWsBytes(dt, in)
}

func (op *convOp) wsBytes(dt tensor.Dtype, in []tensor.Shape) int64 {
	d, err := op.dims(in)
	if err != nil {
		return 0
	}
	col, stage := op.workspace(d)
	return wsBytes(dt, col, stage)
}

// WorkspaceBytes is the im2col matrix of one image, C*KH*KW*OH*OW elements (0 for a 1x1 stride-1
// kernel); for images under 256 output pixels, of as many images as make 256 pixels, plus a
// staging matrix of O rows. DoWorkspace also runs in less, down to MinWorkspaceBytes.
func (op *convOp) WorkspaceBytes(dt tensor.Dtype, in []tensor.Shape) int64 { return op.wsBytes(dt, in) }

// FLOPs counts the matrix products (2 per multiply-add) plus one add per output for a bias.
func (op *convOp) FLOPs(in []tensor.Shape) int64 {
	d, err := op.dims(in)
	if err != nil {
		return 0
	}
	f := 2 * prod(d.N, d.O, d.C, d.KH, d.KW, d.OH, d.OW)
	if op.bias {
		if op.kind == convData {
			f += prod(d.N, d.C, d.H, d.W)
		} else {
			f += prod(d.N, d.O, d.OH, d.OW)
		}
	}
	return f
}

func (op *convOp) Do(in ...G.Value) (G.Value, error) { return doAlloc(op, in) }
func (op *convOp) UsePreallocDo(p G.Value, in ...G.Value) (G.Value, error) {
	return doPrealloc(op, p, in)
}
func (op *convOp) DoWorkspace(out G.Value, ws []byte, in ...G.Value) error {
	return doWorkspace(op, out, ws, in, false)
}

func (op *convOp) exec(dt tensor.Dtype, out G.Value, ws []byte, in []G.Value) error {
	var sb [4]tensor.Shape
	d, err := op.dims(shapesOf(in, sb[:]...))
	if err != nil {
		return err
	}
	if dt == tensor.Float32 {
		return convExec[float32](op, d, out, ws, in)
	}
	return convExec[float64](op, d, out, ws, in)
}

func (op *convOp) WriteHash(h hash.Hash) {
	p := op.p
	fmt.Fprintf(h, "layers.%v{k%dx%d s%d,%d p%d,%d d%d,%d hw%dx%d b%t}", op.kind, op.kh, op.kw,
		p.StrideH, p.StrideW, p.PadH, p.PadW, p.DilationH, p.DilationW, op.h, op.w, op.bias)
}
func (op *convOp) Hashcode() uint32 { return hashOf(op) }
func (op *convOp) String() string {
	p := op.p
	s := fmt.Sprintf("%v{s(%d,%d) p(%d,%d) d(%d,%d)", op.kind, p.StrideH, p.StrideW, p.PadH, p.PadW, p.DilationH, p.DilationW)
	switch op.kind {
	case convData:
		s += fmt.Sprintf(" out(%d,%d)", op.h, op.w)
	case convFilter:
		s += fmt.Sprintf(" k(%d,%d)", op.kh, op.kw)
	}
	if op.bias {
		s += " bias"
	}
	return s + "}"
}

func (op *convOp) DiffWRT(n int) []bool {
	r := make([]bool, n)
	for i := range r {
		r[i] = true
	}
	return r
}

// SymDiff: with y = conv(x, w), dx = data(w, dy), dw = filter(x, dy); the data and filter kinds
// differentiate into each other and into the forward the same way, so every kind is covered.
func (op *convOp) SymDiff(inputs G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	if len(inputs) != op.Arity() {
		return nil, fmt.Errorf("layers: %v: %d inputs", op, len(inputs))
	}
	a, b := inputs[0], inputs[1]
	var ga, gb *G.Node
	var err error
	switch op.kind {
	case convForward: // a = x, b = w
		// The filter's gradient is made first, so gorgonia's order runs it first: it is often x's
		// last read, and x may then go before dx takes its place (the other order holds x, dy
		// and dx at once).
		ws := b.Shape()
		if gb, err = G.ApplyOp(&convOp{kind: convFilter, p: op.p, kh: ws[2], kw: ws[3]}, a, grad); err != nil {
			return nil, err
		}
		xs := a.Shape()
		if ga, err = G.ApplyOp(&convOp{kind: convData, p: op.p, h: xs[2], w: xs[3]}, b, grad); err != nil {
			return nil, err
		}
	case convData: // a = w, b = dy; grad has the data side's shape
		ws := a.Shape()
		if ga, err = G.ApplyOp(&convOp{kind: convFilter, p: op.p, kh: ws[2], kw: ws[3]}, grad, b); err != nil {
			return nil, err
		}
		if gb, err = G.ApplyOp(&convOp{kind: convForward, p: op.p}, grad, a); err != nil {
			return nil, err
		}
	case convFilter: // a = x, b = dy; grad has the weight's shape
		xs := a.Shape()
		if ga, err = G.ApplyOp(&convOp{kind: convData, p: op.p, h: xs[2], w: xs[3]}, grad, b); err != nil {
			return nil, err
		}
		if gb, err = G.ApplyOp(&convOp{kind: convForward, p: op.p}, a, grad); err != nil {
			return nil, err
		}
	}
	grads := G.Nodes{ga, gb}
	if op.bias && op.kind != convFilter {
		gbias, err := G.ApplyOp(&channelSumOp{dims: grad.Dims(), owner: op.serial}, grad)
		if err != nil {
			return nil, err
		}
		grads = append(grads, gbias)
	}
	return grads, nil
}

// unstage scatters an (O, nb*P) matrix back to nb images of (O, P).
func unstage[T float](stage, y []T, O, P, nb int) {
	cols := nb * P
	for i := 0; i < nb; i++ {
		for o := 0; o < O; o++ {
			copy(y[(i*O+o)*P:(i*O+o+1)*P], stage[o*cols+i*P:o*cols+(i+1)*P])
		}
	}
}

// restage gathers nb images of (O, P) into one (O, nb*P) matrix.
func restage[T float](g, stage []T, O, P, nb int) {
	cols := nb * P
	for i := 0; i < nb; i++ {
		for o := 0; o < O; o++ {
			copy(stage[o*cols+i*P:o*cols+(i+1)*P], g[(i*O+o)*P:(i*O+o+1)*P])
		}
	}
}

func addChannelBias[T float](y, bias []T, plane int) {
	for c, bv := range bias {
		row := y[c*plane : (c+1)*plane]
		for i := range row {
			row[i] += bv
		}
	}
}

// validRange returns the output columns [lo,hi) whose input column o*stride+off lies in [0,size).
func validRange(off, stride, size, outSize int) (lo, hi int) {
	if off < 0 {
		lo = (-off + stride - 1) / stride
	}
	if size-1-off < 0 {
		return 0, 0
	}
	hi = (size-1-off)/stride + 1
	if hi > outSize {
		hi = outSize
	}
	if lo > hi {
		lo = hi
	}
	return lo, hi
}

// im2col lays output pixels [p0,p1) of channels [c0,c1) of one image out as rows of a
// (C*KH*KW) x (p1-p0) matrix with row stride ld: row (c,i,j) (at col[((c*KH+i)*KW+j)*ld]) holds
// the input pixel each output position sees through kernel tap (i,j) of channel c, or 0 in the
// padding. A stride above p1-p0 leaves room for other images of the same chunk, or for the
// columns other goroutines fill; a range short of the whole image is one tile of a bounded
// workspace. It runs on the calling goroutine: convExec splits the work.
func im2col[T blas.Float](x, col []T, ld int, d convDims, p ConvParams, p0, p1, c0, c1 int) {
	if p.StrideW == 1 && p0%d.OW == 0 && p1%d.OW == 0 {
		im2colRows(x, col, ld, d, p, p0/d.OW, p1/d.OW, c0, c1)
		return
	}
	plane := d.H * d.W
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
					// The padding is a value or two at each end: a loop, not a call to memclr.
					for k := range dst[:lo-a] {
						dst[k] = 0
					}
					for k := range dst[hi-a:] {
						dst[hi-a+k] = 0
					}
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
}

// im2colRows is im2col of whole output rows [oh0,oh1) at stride 1 across: every output row of
// a tap sees the same columns of its input row, so the valid range is found once per tap and each
// row is one copy between its padding values (the common case, with less work per row).
func im2colRows[T blas.Float](x, col []T, ld int, d convDims, p ConvParams, oh0, oh1, c0, c1 int) {
	plane, OW := d.H*d.W, d.OW
	for c := c0; c < c1; c++ {
		xc := x[c*plane : (c+1)*plane]
		for i := 0; i < d.KH; i++ {
			for j := 0; j < d.KW; j++ {
				r := (c*d.KH+i)*d.KW + j
				row := col[r*ld : r*ld+(oh1-oh0)*OW]
				offW := j*p.DilationW - p.PadW
				lo, hi := validRange(offW, 1, d.W, OW)
				for oh := oh0; oh < oh1; oh++ {
					dst := row[(oh-oh0)*OW : (oh-oh0+1)*OW]
					ih := oh*p.StrideH - p.PadH + i*p.DilationH
					if ih < 0 || ih >= d.H || lo >= hi {
						clear(dst)
						continue
					}
					for k := range dst[:lo] {
						dst[k] = 0
					}
					copy(dst[lo:hi], xc[ih*d.W+lo+offW:])
					for k := hi; k < OW; k++ {
						dst[k] = 0
					}
				}
			}
		}
	}
}

// col2im is im2col's adjoint: it adds each column entry of output pixels [p0,p1) of channels
// [c0,c1) onto the pixel it was copied from (x is not cleared first). Channels are independent,
// so goroutines given different channels keep the summation order fixed. Each input pixel gets
// its terms in descending output pixel order (taps ascending), so ranges run from the last to
// the first add up exactly as one call over the whole image.
func col2im[T blas.Float](col []T, ld int, x []T, d convDims, p ConvParams, p0, p1, c0, c1 int) {
	plane := d.H * d.W
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
						blas.Add(dst[lo+offW:hi+offW], src)
					} else {
						for k, v := range src {
							dst[(lo+k)*p.StrideW+offW] += v
						}
					}
				}
			}
		}
	}
}

// channelSumOp sums an (N,C,…) tensor to (C,): the gradient of a per-channel bias or BN shift.
// Each channel's sum is a lane sum (lanes: the CUDA kernels' order) in (n, spatial) order, so it
// is reproducible.
type channelSumOp struct {
	pure
	noDiff
	shapeMemo
	dims int
	// owner is the serial number of the layer whose bias or shift this is the gradient of. Two
	// layers fed the same gradient node (the two branches of a residual add) would otherwise get
	// one shared gradient node, which gorgonia's graph merges: both learnables then share one
	// gradient tensor, and a solver that zeroes it after updating the first updates the second
	// with zeros (and the ooc trace refuses the graph).
	owner uint64
}

// serials numbers the layers that own a channelSumOp gradient.
var serials atomic.Uint64

func (*channelSumOp) Arity() int       { return 1 }
func (op *channelSumOp) Type() hm.Type { return fnType(op.dims, 1) }

func (op *channelSumOp) outShape(in []tensor.Shape) (tensor.Shape, error) {
	if len(in) != 1 || in[0].Dims() != op.dims || in[0].Dims() < 2 {
		return nil, fmt.Errorf("layers: ChannelSum needs one (N,C,...) input, got %v", in)
	}
	return tensor.Shape{in[0][1]}, nil
}
func (op *channelSumOp) InferShape(ds ...G.DimSizer) (tensor.Shape, error) {
	in, err := dimSizersToShapes(ds)
	if err != nil {
		return nil, err
	}
	return op.outShape(in)
}
func (*channelSumOp) wsBytes(tensor.Dtype, []tensor.Shape) int64        { return 0 }
func (*channelSumOp) WorkspaceBytes(tensor.Dtype, []tensor.Shape) int64 { return 0 }
func (*channelSumOp) FLOPs(in []tensor.Shape) int64 {
	if len(in) != 1 {
		return 0
	}
	return int64(in[0].TotalSize())
}
func (op *channelSumOp) Do(in ...G.Value) (G.Value, error) { return doAlloc(op, in) }
func (op *channelSumOp) UsePreallocDo(p G.Value, in ...G.Value) (G.Value, error) {
	return doPrealloc(op, p, in)
}
func (op *channelSumOp) DoWorkspace(out G.Value, ws []byte, in ...G.Value) error {
	return doWorkspace(op, out, ws, in, false)
}
func (op *channelSumOp) exec(dt tensor.Dtype, out G.Value, _ []byte, in []G.Value) error {
	if dt == tensor.Float32 {
		return channelSumExec[float32](out, in[0])
	}
	return channelSumExec[float64](out, in[0])
}
func (op *channelSumOp) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "layers.ChannelSum%d#%d", op.dims, op.owner)
}
func (op *channelSumOp) Hashcode() uint32 { return hashOf(op) }
func (*channelSumOp) String() string      { return "ChannelSum" }

func channelSumExec[T float](out, in G.Value) error {
	s := in.Shape()
	x, err := denseData[T](in, s)
	if err != nil {
		return err
	}
	y, err := outData[T](out, tensor.Shape{s[1]})
	if err != nil {
		return err
	}
	N, C := s[0], s[1]
	plane := s.TotalSize() / (N * C)
	jobs := jobsFor[T, channelSumJob[T]](&channelSumJobs32, &channelSumJobs64)
	j := jobs.get()
	*j = channelSumJob[T]{x: x, y: y, N: N, C: C, plane: plane}
	parallelChunks(C, int64(len(x)), j)
	jobs.put(j)
	return nil
}

// channelSumJob is channelSumExec's parallel body: y[c] for channels [c0, c1).
type channelSumJob[T float] struct {
	x, y        []T
	N, C, plane int
}

var (
	channelSumJobs32 jobList[channelSumJob[float32]]
	channelSumJobs64 jobList[channelSumJob[float64]]
)

func (j *channelSumJob[T]) chunk(c0, c1 int) {
	N, C, plane, x := j.N, j.C, j.plane, j.x
	for c := c0; c < c1; c++ {
		var acc lanes
		l := 0
		for n := 0; n < N; n++ {
			l = laneSum(&acc, l, x[(n*C+c)*plane:(n*C+c+1)*plane])
		}
		j.y[c] = T(acc.total())
	}
}
