package layers

import (
	"fmt"
	"hash"
	"slices"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// poolGeom is a pooling window: kernel, stride and symmetric zero padding.
type poolGeom struct{ kh, kw, sh, sw, ph, pw int }

func (g poolGeom) validate() error {
	if g.kh < 1 || g.kw < 1 || g.sh < 1 || g.sw < 1 {
		return fmt.Errorf("layers: pool kernel and stride must be positive: %+v", g)
	}
	// As PyTorch: a window never lies wholly in the padding, so every output has an input.
	if g.ph < 0 || g.pw < 0 || 2*g.ph > g.kh || 2*g.pw > g.kw {
		return fmt.Errorf("layers: pool padding must be between 0 and half the kernel: %+v", g)
	}
	return nil
}

func (g poolGeom) String() string {
	return fmt.Sprintf("k(%d,%d) s(%d,%d) p(%d,%d)", g.kh, g.kw, g.sh, g.sw, g.ph, g.pw)
}

// out returns the pooled shape of an (N,C,H,W) input.
func (g poolGeom) out(x tensor.Shape) (tensor.Shape, error) {
	d, err := g.outDims(x)
	if err != nil {
		return nil, err
	}
	return d[:], nil
}

// outDims is out as an array, which a caller can keep on its stack.
func (g poolGeom) outDims(x tensor.Shape) ([4]int, error) {
	if err := want4D("pool input", x); err != nil {
		return [4]int{}, err
	}
	oh := (x[2]+2*g.ph-g.kh)/g.sh + 1
	ow := (x[3]+2*g.pw-g.kw)/g.sw + 1
	if x[2]+2*g.ph < g.kh || x[3]+2*g.pw < g.kw {
		return [4]int{}, fmt.Errorf("layers: pool window %v does not fit input %v", g, slices.Clone(x))
	}
	return [4]int{x[0], x[1], oh, ow}, nil
}

// window clips output position (oh, ow)'s window to the image.
func (g poolGeom) window(oh, ow, H, W int) (h0, h1, w0, w1 int) {
	h0, w0 = oh*g.sh-g.ph, ow*g.sw-g.pw
	h1, w1 = min(h0+g.kh, H), min(w0+g.kw, W)
	return max(h0, 0), h1, max(w0, 0), w1
}

// ---- max pooling ----

// maxPoolOp keeps no argmax: gorgonia's MaxPool2D allocates an int per output element when the
// graph is built and fills it in the forward, which is both build-time memory (gigabytes at paper
// batch sizes) and hidden state. The backward finds the argmax again from x.
type maxPoolOp struct {
	pure
	shapeMemo
	g poolGeom
}

func (op *maxPoolOp) Arity() int    { return 1 }
func (op *maxPoolOp) Type() hm.Type { return fnType(4, 4) }
func (op *maxPoolOp) outShape(in []tensor.Shape) (tensor.Shape, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("layers: %v takes 1 input", op)
	}
	return op.g.out(in[0])
}
func (op *maxPoolOp) InferShape(ds ...G.DimSizer) (tensor.Shape, error) {
	in, err := dimSizersToShapes(ds)
	if err != nil {
		return nil, err
	}
	return op.outShape(in)
}
func (op *maxPoolOp) wsBytes(tensor.Dtype, []tensor.Shape) int64        { return 0 }
func (op *maxPoolOp) WorkspaceBytes(tensor.Dtype, []tensor.Shape) int64 { return 0 }

// FLOPs counts one comparison per window element.
func (op *maxPoolOp) FLOPs(in []tensor.Shape) int64 {
	s, err := op.outShape(in)
	if err != nil {
		return 0
	}
	return int64(s.TotalSize()) * int64(op.g.kh*op.g.kw)
}
func (op *maxPoolOp) Do(in ...G.Value) (G.Value, error) { return doAlloc(op, in) }
func (op *maxPoolOp) UsePreallocDo(p G.Value, in ...G.Value) (G.Value, error) {
	return doPrealloc(op, p, in)
}
func (op *maxPoolOp) DoWorkspace(out G.Value, ws []byte, in ...G.Value) error {
	return doWorkspace(op, out, ws, in, false)
}
func (op *maxPoolOp) exec(dt tensor.Dtype, out G.Value, _ []byte, in []G.Value) error {
	if dt == tensor.Float32 {
		return maxPoolExec[float32](op.g, out, in[0], nil)
	}
	return maxPoolExec[float64](op.g, out, in[0], nil)
}
func (op *maxPoolOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "layers.MaxPool2D{%v}", op.g) }
func (op *maxPoolOp) Hashcode() uint32      { return hashOf(op) }
func (op *maxPoolOp) String() string        { return fmt.Sprintf("MaxPool2D{%v}", op.g) }
func (op *maxPoolOp) DiffWRT(int) []bool    { return []bool{true} }
func (op *maxPoolOp) SymDiff(inputs G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	dx, err := G.ApplyOp(&maxPoolGradOp{g: op.g}, inputs[0], grad)
	if err != nil {
		return nil, err
	}
	return G.Nodes{dx}, nil
}

// maxPoolGradOp: (x, dy) -> dx. It takes x, not the pooled y: the argmax is found from x alone,
// and not reading y lets the VM free y as soon as its forward consumers are done.
type maxPoolGradOp struct {
	pure
	shapeMemo
	noDiff
	g poolGeom
}

func (op *maxPoolGradOp) Arity() int    { return 2 }
func (op *maxPoolGradOp) Type() hm.Type { return fnType(4, 4, 4) }
func (op *maxPoolGradOp) outShape(in []tensor.Shape) (tensor.Shape, error) {
	if len(in) != 2 {
		return nil, fmt.Errorf("layers: %v takes 2 inputs", op)
	}
	ys, err := op.g.out(in[0])
	if err != nil {
		return nil, err
	}
	if !ys.Eq(in[1]) {
		return nil, fmt.Errorf("layers: %v: gradient %v does not match pooled shape %v", op, in[1], ys)
	}
	return in[0].Clone(), nil
}
func (op *maxPoolGradOp) InferShape(ds ...G.DimSizer) (tensor.Shape, error) {
	in, err := dimSizersToShapes(ds)
	if err != nil {
		return nil, err
	}
	return op.outShape(in)
}
func (op *maxPoolGradOp) wsBytes(tensor.Dtype, []tensor.Shape) int64        { return 0 }
func (op *maxPoolGradOp) WorkspaceBytes(tensor.Dtype, []tensor.Shape) int64 { return 0 }
func (op *maxPoolGradOp) FLOPs(in []tensor.Shape) int64 {
	if len(in) != 2 {
		return 0
	}
	return int64(in[1].TotalSize())*int64(op.g.kh*op.g.kw) + int64(in[0].TotalSize())
}
func (op *maxPoolGradOp) Do(in ...G.Value) (G.Value, error) { return doAlloc(op, in) }
func (op *maxPoolGradOp) UsePreallocDo(p G.Value, in ...G.Value) (G.Value, error) {
	return doPrealloc(op, p, in)
}
func (op *maxPoolGradOp) DoWorkspace(out G.Value, ws []byte, in ...G.Value) error {
	return doWorkspace(op, out, ws, in, false)
}
func (op *maxPoolGradOp) exec(dt tensor.Dtype, out G.Value, _ []byte, in []G.Value) error {
	if dt == tensor.Float32 {
		return maxPoolExec[float32](op.g, out, in[0], in[1])
	}
	return maxPoolExec[float64](op.g, out, in[0], in[1])
}
func (op *maxPoolGradOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "layers.MaxPool2DGrad{%v}", op.g) }
func (op *maxPoolGradOp) Hashcode() uint32      { return hashOf(op) }
func (op *maxPoolGradOp) String() string        { return fmt.Sprintf("MaxPool2DGrad{%v}", op.g) }

// maxPoolExec pools x into out, or, when dyv is given, routes dy to each window's argmax in out
// (which then has x's shape). The argmax is the first maximum in row-major window order, as
// gorgonia's (strict > from the window start); a NaN wins and stays, so NaNs propagate.
func maxPoolExec[T float](g poolGeom, out, xv, dyv G.Value) error {
	xs := xv.Shape()
	yd, err := g.outDims(xs)
	if err != nil {
		return err
	}
	ys := tensor.Shape(yd[:])
	x, err := denseData[T](xv, xs)
	if err != nil {
		return err
	}
	var dy, res []T
	if dyv != nil {
		if dy, err = denseData[T](dyv, ys); err != nil {
			return err
		}
		res, err = outData[T](out, xs)
	} else {
		res, err = outData[T](out, ys)
	}
	if err != nil {
		return err
	}
	jobs := jobsFor[T, maxPoolJob[T]](&maxPoolJobs32, &maxPoolJobs64)
	j := jobs.get()
	*j = maxPoolJob[T]{g: g, x: x, dy: dy, res: res, H: xs[2], W: xs[3], OH: ys[2], OW: ys[3]}
	parallelChunks(xs[0]*xs[1], int64(len(x)), j)
	jobs.put(j)
	return nil
}

// maxPoolJob is maxPoolExec's parallel body: planes [p0, p1).
type maxPoolJob[T float] struct {
	g            poolGeom
	x, dy, res   []T
	H, W, OH, OW int
}

var (
	maxPoolJobs32 jobList[maxPoolJob[float32]]
	maxPoolJobs64 jobList[maxPoolJob[float64]]
)

func (j *maxPoolJob[T]) chunk(p0, p1 int) {
	g, x, dy, res := j.g, j.x, j.dy, j.res
	H, W, OH, OW := j.H, j.W, j.OH, j.OW
	for p := p0; p < p1; p++ {
		xp, yp := x[p*H*W:(p+1)*H*W], res[p*OH*OW:(p+1)*OH*OW]
		var dyp []T
		if dy != nil {
			dyp, yp = dy[p*OH*OW:(p+1)*OH*OW], res[p*H*W:(p+1)*H*W]
		}
		switch {
		case g.kh == 2 && g.kw == 2 && g.sh == 2 && g.sw == 2 && g.ph == 0 && g.pw == 0:
			maxPool2x2Plane(xp, yp, dyp, W, OH, OW)
		case g == stemPool && isF32(xp) && maxPool3x3s2Plane32(f32s(xp), f32s(yp), f32s(dyp), H, W, OH, OW):
		default:
			maxPoolPlane(g, xp, yp, dyp, H, W, OH, OW)
		}
	}
}

// isF32 and f32s see a generic slice as []float32 (nil stays nil).
func isF32[T float](v []T) bool     { _, ok := any(v).([]float32); return ok }
func f32s[T float](v []T) []float32 { r, _ := any(v).([]float32); return r }

// takes is the argmax rule: v replaces best if greater, or if v is the first NaN.
func takes[T float](v, best T) bool { return v > best || (v != v && best == best) }

// maxPoolPlane pools one (H,W) plane xp into yp, or with dyp routes dyp to the argmaxes in yp
// (then H x W): the definition, for any window.
func maxPoolPlane[T float](g poolGeom, xp, yp, dyp []T, H, W, OH, OW int) {
	if dyp != nil {
		clear(yp)
	}
	for oh := 0; oh < OH; oh++ {
		for ow := 0; ow < OW; ow++ {
			poolWindow(g, xp, yp, dyp, H, W, OW, oh, ow)
		}
	}
}

// poolWindow is maxPoolPlane's work for output (oh, ow): its max into yp, or its gradient added
// at its argmax.
func poolWindow[T float](g poolGeom, xp, yp, dyp []T, H, W, OW, oh, ow int) {
	h0, h1, w0, w1 := g.window(oh, ow, H, W)
	bi := h0*W + w0
	best := xp[bi]
	for h := h0; h < h1; h++ {
		for w := w0; w < w1; w++ {
			i := h*W + w
			if v := xp[i]; takes(v, best) {
				best, bi = v, i
			}
		}
	}
	if dyp != nil {
		yp[bi] += dyp[oh*OW+ow]
	} else {
		yp[oh*OW+ow] = best
	}
}

// stemPool is the 3x3 window of stride 2 and padding 1: ResNet's and DenseNet's stem pool.
var stemPool = poolGeom{3, 3, 2, 2, 1, 1}

// maxPool3x3s2Plane32 is maxPoolPlane for stemPool on float32. The windows whose three columns
// lie in the image go through AVX2 (maxPool3F32Row) a row of windows at a time, a window's
// rows clipped at the top or bottom given with the last one twice (visiting the same elements
// again changes neither the max nor its place: takes is strict); the others, and the
// gradient's additions in the same window order, stay as maxPoolPlane does them. It reports
// false, doing nothing, where there is no vector path.
func maxPool3x3s2Plane32(xp, yp, dyp []float32, H, W, OH, OW int) bool {
	owEnd := min(OW, W/2) // windows 1 to owEnd-1 have all three columns in the image
	if owEnd < 2 || !maxPool3F32Row(nil, nil, nil, nil, nil, 0) {
		return false
	}
	if dyp != nil {
		clear(yp)
	}
	const chunk = 64
	var idx [chunk]int32
	for oh := 0; oh < OH; oh++ {
		var hs [3]int
		h0, h1 := max(2*oh-1, 0), min(2*oh+2, H)
		for r := range hs {
			hs[r] = min(h0+r, h1-1)
		}
		poolWindow(stemPool, xp, yp, dyp, H, W, OW, oh, 0)
		for ow0 := 1; ow0 < owEnd; ow0 += chunk {
			cnt := min(chunk, owEnd-ow0)
			c0 := 2*ow0 - 1
			r0, r1, r2 := xp[hs[0]*W+c0:hs[0]*W+W], xp[hs[1]*W+c0:hs[1]*W+W], xp[hs[2]*W+c0:hs[2]*W+W]
			if dyp == nil {
				maxPool3F32Row(yp[oh*OW+ow0:oh*OW+ow0+cnt], nil, r0, r1, r2, cnt)
				continue
			}
			maxPool3F32Row(nil, idx[:cnt], r0, r1, r2, cnt)
			for j, k := range idx[:cnt] {
				yp[hs[k/3]*W+c0+2*j+int(k%3)] += dyp[oh*OW+ow0+j]
			}
		}
		for ow := owEnd; ow < OW; ow++ {
			poolWindow(stemPool, xp, yp, dyp, H, W, OW, oh, ow)
		}
	}
	return true
}

// maxPool2x2Plane is maxPoolPlane for the 2x2 window of stride 2 with no padding, the common
// pool, in one pass over the plane: two input rows per output row, the window's four elements
// in maxPoolPlane's order. Its windows do not overlap, so in the backward each window's
// elements are zeroed and its argmax gets += dy, the same additions as maxPoolPlane's (+0 + dy,
// which is +0 for dy = -0), without a separate pass clearing the plane. A last odd row or
// column belongs to no window and gets zeros. float32 rows go through AVX2 where the machine
// has it (maxPool2x2F32Fast: the same selections and additions, without the branches that
// mispredict on every other window).
func maxPool2x2Plane[T float](xp, yp, dyp []T, W, OH, OW int) {
	for oh := 0; oh < OH; oh++ {
		r0 := xp[2*oh*W : 2*oh*W+W]
		r1 := xp[(2*oh+1)*W : (2*oh+1)*W+W]
		var d0, d1, dyr []T
		if dyp != nil {
			d0 = yp[2*oh*W : 2*oh*W+W]
			d1 = yp[(2*oh+1)*W : (2*oh+1)*W+W]
			dyr = dyp[oh*OW : oh*OW+OW]
		}
		done := 0
		if r32, ok := any(r0).([]float32); ok {
			var y32 []float32
			if dyp == nil {
				y32 = any(yp[oh*OW : oh*OW+OW]).([]float32)
			}
			done = maxPool2x2F32Fast(y32, r32, any(r1).([]float32), any(dyr).([]float32), any(d0).([]float32), any(d1).([]float32), OW)
		}
		for ow := done; ow < OW; ow++ {
			w := 2 * ow
			a, b, c, d := r0[w], r0[w+1], r1[w], r1[w+1]
			best, k := a, 0
			if takes(b, best) {
				best, k = b, 1
			}
			if takes(c, best) {
				best, k = c, 2
			}
			if takes(d, best) {
				best, k = d, 3
			}
			if dyp == nil {
				yp[oh*OW+ow] = best
				continue
			}
			d0[w], d0[w+1], d1[w], d1[w+1] = 0, 0, 0, 0
			g := dyr[ow]
			switch k {
			case 0:
				d0[w] += g
			case 1:
				d0[w+1] += g
			case 2:
				d1[w] += g
			default:
				d1[w+1] += g
			}
		}
		if dyp != nil && 2*OW < W {
			d0[W-1], d1[W-1] = 0, 0
		}
	}
	if dyp != nil {
		clear(yp[2*OH*W:])
	}
}

// ---- average pooling ----

// avgPoolOp averages each window, counting padding as zeros (PyTorch's count_include_pad=True),
// or with exclude over the window's pixels inside the image only (count_include_pad=False).
// gorgonia's AveragePool2D gives wrong values forward and backward.
type avgPoolOp struct {
	pure
	shapeMemo
	g       poolGeom
	exclude bool
}

// excl names the padding rule in hashes and strings (nothing for the default).
func excl(exclude bool) string {
	if exclude {
		return " excl"
	}
	return ""
}

func (op *avgPoolOp) Arity() int    { return 1 }
func (op *avgPoolOp) Type() hm.Type { return fnType(4, 4) }
func (op *avgPoolOp) outShape(in []tensor.Shape) (tensor.Shape, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("layers: %v takes 1 input", op)
	}
	return op.g.out(in[0])
}
func (op *avgPoolOp) InferShape(ds ...G.DimSizer) (tensor.Shape, error) {
	in, err := dimSizersToShapes(ds)
	if err != nil {
		return nil, err
	}
	return op.outShape(in)
}
func (op *avgPoolOp) wsBytes(tensor.Dtype, []tensor.Shape) int64        { return 0 }
func (op *avgPoolOp) WorkspaceBytes(tensor.Dtype, []tensor.Shape) int64 { return 0 }
func (op *avgPoolOp) FLOPs(in []tensor.Shape) int64 {
	s, err := op.outShape(in)
	if err != nil {
		return 0
	}
	return int64(s.TotalSize()) * int64(op.g.kh*op.g.kw+1)
}
func (op *avgPoolOp) Do(in ...G.Value) (G.Value, error) { return doAlloc(op, in) }
func (op *avgPoolOp) UsePreallocDo(p G.Value, in ...G.Value) (G.Value, error) {
	return doPrealloc(op, p, in)
}
func (op *avgPoolOp) DoWorkspace(out G.Value, ws []byte, in ...G.Value) error {
	return doWorkspace(op, out, ws, in, false)
}
func (op *avgPoolOp) exec(dt tensor.Dtype, out G.Value, _ []byte, in []G.Value) error {
	if dt == tensor.Float32 {
		return avgPoolExec[float32](op.g, op.exclude, out, in[0], nil)
	}
	return avgPoolExec[float64](op.g, op.exclude, out, in[0], nil)
}
func (op *avgPoolOp) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "layers.AvgPool2D{%v%s}", op.g, excl(op.exclude))
}
func (op *avgPoolOp) Hashcode() uint32   { return hashOf(op) }
func (op *avgPoolOp) String() string     { return fmt.Sprintf("AvgPool2D{%v%s}", op.g, excl(op.exclude)) }
func (op *avgPoolOp) DiffWRT(int) []bool { return []bool{true} }
func (op *avgPoolOp) SymDiff(inputs G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	xs := inputs[0].Shape()
	dx, err := G.ApplyOp(&avgPoolGradOp{g: op.g, h: xs[2], w: xs[3], exclude: op.exclude}, grad)
	if err != nil {
		return nil, err
	}
	return G.Nodes{dx}, nil
}

// avgPoolGradOp: dy -> dx, spreading each output's gradient evenly over its window. It reads only
// dy; the input's spatial size is recorded because a strided pool cannot recover it.
type avgPoolGradOp struct {
	pure
	shapeMemo
	noDiff
	g       poolGeom
	h, w    int
	exclude bool
}

func (op *avgPoolGradOp) Arity() int    { return 1 }
func (op *avgPoolGradOp) Type() hm.Type { return fnType(4, 4) }
func (op *avgPoolGradOp) outShape(in []tensor.Shape) (tensor.Shape, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("layers: %v takes 1 input", op)
	}
	if err := want4D("pool gradient", in[0]); err != nil {
		return nil, err
	}
	xs := tensor.Shape{in[0][0], in[0][1], op.h, op.w}
	ys, err := op.g.out(xs)
	if err != nil {
		return nil, err
	}
	if !ys.Eq(in[0]) {
		return nil, fmt.Errorf("layers: %v: gradient %v does not match pooled shape %v", op, in[0], ys)
	}
	return xs, nil
}
func (op *avgPoolGradOp) InferShape(ds ...G.DimSizer) (tensor.Shape, error) {
	in, err := dimSizersToShapes(ds)
	if err != nil {
		return nil, err
	}
	return op.outShape(in)
}
func (op *avgPoolGradOp) wsBytes(tensor.Dtype, []tensor.Shape) int64        { return 0 }
func (op *avgPoolGradOp) WorkspaceBytes(tensor.Dtype, []tensor.Shape) int64 { return 0 }
func (op *avgPoolGradOp) FLOPs(in []tensor.Shape) int64 {
	if len(in) != 1 {
		return 0
	}
	return int64(in[0].TotalSize()) * int64(op.g.kh*op.g.kw+1)
}
func (op *avgPoolGradOp) Do(in ...G.Value) (G.Value, error) { return doAlloc(op, in) }
func (op *avgPoolGradOp) UsePreallocDo(p G.Value, in ...G.Value) (G.Value, error) {
	return doPrealloc(op, p, in)
}
func (op *avgPoolGradOp) DoWorkspace(out G.Value, ws []byte, in ...G.Value) error {
	return doWorkspace(op, out, ws, in, false)
}
func (op *avgPoolGradOp) exec(dt tensor.Dtype, out G.Value, _ []byte, in []G.Value) error {
	if dt == tensor.Float32 {
		return avgPoolExec[float32](op.g, op.exclude, out, nil, in[0])
	}
	return avgPoolExec[float64](op.g, op.exclude, out, nil, in[0])
}
func (op *avgPoolGradOp) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "layers.AvgPool2DGrad{%v %dx%d%s}", op.g, op.h, op.w, excl(op.exclude))
}
func (op *avgPoolGradOp) Hashcode() uint32 { return hashOf(op) }
func (op *avgPoolGradOp) String() string {
	return fmt.Sprintf("AvgPool2DGrad{%v out(%d,%d)%s}", op.g, op.h, op.w, excl(op.exclude))
}

// avgPoolExec averages x into out, or, with xv == nil, spreads dy back over out (x's shape).
// With exclude a window is divided by its pixels inside the image instead of by k*k.
func avgPoolExec[T float](g poolGeom, exclude bool, out, xv, dyv G.Value) error {
	var xs, ys tensor.Shape
	var x, dy, res []T
	var err error
	var yd [4]int // the output shape, on the stack
	if xv != nil {
		xs = xv.Shape()
		if yd, err = g.outDims(xs); err != nil {
			return err
		}
		ys = yd[:]
		if x, err = denseData[T](xv, xs); err != nil {
			return err
		}
		res, err = outData[T](out, ys)
	} else {
		ys = dyv.Shape()
		xs = out.Shape()
		if d, e := g.outDims(xs); e != nil || !tensor.Shape(d[:]).Eq(ys) {
			return fmt.Errorf("layers: avg pool gradient %v does not fit output %v", slices.Clone(ys), slices.Clone(xs))
		}
		if dy, err = denseData[T](dyv, ys); err != nil {
			return err
		}
		res, err = outData[T](out, xs)
	}
	if err != nil {
		return err
	}
	jobs := jobsFor[T, avgPoolJob[T]](&avgPoolJobs32, &avgPoolJobs64)
	j := jobs.get()
	*j = avgPoolJob[T]{g: g, exclude: exclude, x: x, dy: dy, res: res, H: xs[2], W: xs[3], OH: ys[2], OW: ys[3]}
	parallelChunks(xs[0]*xs[1], int64(xs.TotalSize()), j)
	jobs.put(j)
	return nil
}

// avgPoolJob is avgPoolExec's parallel body: planes [p0, p1), forward (x set) or gradient. A
// struct from a free list, not a closure: a closure handed to parallelFor escapes, an
// allocation per call.
type avgPoolJob[T float] struct {
	g            poolGeom
	exclude      bool
	x, dy, res   []T
	H, W, OH, OW int
}

var (
	avgPoolJobs32 jobList[avgPoolJob[float32]]
	avgPoolJobs64 jobList[avgPoolJob[float64]]
)

func (j *avgPoolJob[T]) chunk(p0, p1 int) {
	g, exclude, x, dy, res := j.g, j.exclude, j.x, j.dy, j.res
	H, W, OH, OW := j.H, j.W, j.OH, j.OW
	count := T(g.kh * g.kw)
	for p := p0; p < p1; p++ {
		var xp, dxp []T
		if x != nil {
			xp = x[p*H*W : (p+1)*H*W]
		} else {
			dxp = res[p*H*W : (p+1)*H*W]
			clear(dxp)
		}
		for oh := 0; oh < OH; oh++ {
			for ow := 0; ow < OW; ow++ {
				h0, h1, w0, w1 := g.window(oh, ow, H, W)
				o := p*OH*OW + oh*OW + ow
				count := count
				if exclude {
					count = T((h1 - h0) * (w1 - w0))
				}
				if x != nil {
					var s T
					for h := h0; h < h1; h++ {
						for _, v := range xp[h*W+w0 : h*W+w1] {
							s += v
						}
					}
					res[o] = s / count
				} else {
					gv := dy[o] / count
					for h := h0; h < h1; h++ {
						row := dxp[h*W+w0 : h*W+w1]
						for i := range row {
							row[i] += gv
						}
					}
				}
			}
		}
	}
}

// ---- global average pooling ----

// globalAvgPoolOp: (N,C,H,W) -> (N,C). gorgonia's GlobalAveragePool2D has no gradient and keeps
// the 4-D shape; a classifier head wants the (N,C) matrix anyway.
type globalAvgPoolOp struct {
	pure
	shapeMemo
}

func (op *globalAvgPoolOp) Arity() int    { return 1 }
func (op *globalAvgPoolOp) Type() hm.Type { return fnType(4, 2) }
func (op *globalAvgPoolOp) outShape(in []tensor.Shape) (tensor.Shape, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("layers: %v takes 1 input", op)
	}
	if err := want4D("global pool input", in[0]); err != nil {
		return nil, err
	}
	return tensor.Shape{in[0][0], in[0][1]}, nil
}
func (op *globalAvgPoolOp) InferShape(ds ...G.DimSizer) (tensor.Shape, error) {
	in, err := dimSizersToShapes(ds)
	if err != nil {
		return nil, err
	}
	return op.outShape(in)
}
func (op *globalAvgPoolOp) wsBytes(tensor.Dtype, []tensor.Shape) int64        { return 0 }
func (op *globalAvgPoolOp) WorkspaceBytes(tensor.Dtype, []tensor.Shape) int64 { return 0 }
func (op *globalAvgPoolOp) FLOPs(in []tensor.Shape) int64 {
	if len(in) != 1 {
		return 0
	}
	return int64(in[0].TotalSize())
}
func (op *globalAvgPoolOp) Do(in ...G.Value) (G.Value, error) { return doAlloc(op, in) }
func (op *globalAvgPoolOp) UsePreallocDo(p G.Value, in ...G.Value) (G.Value, error) {
	return doPrealloc(op, p, in)
}
func (op *globalAvgPoolOp) DoWorkspace(out G.Value, ws []byte, in ...G.Value) error {
	return doWorkspace(op, out, ws, in, false)
}
func (op *globalAvgPoolOp) exec(dt tensor.Dtype, out G.Value, _ []byte, in []G.Value) error {
	if dt == tensor.Float32 {
		return gapExec[float32](out, in[0], nil)
	}
	return gapExec[float64](out, in[0], nil)
}
func (op *globalAvgPoolOp) WriteHash(h hash.Hash) { fmt.Fprint(h, "layers.GlobalAvgPool2D") }
func (op *globalAvgPoolOp) Hashcode() uint32      { return hashOf(op) }
func (op *globalAvgPoolOp) String() string        { return "GlobalAvgPool2D" }
func (op *globalAvgPoolOp) DiffWRT(int) []bool    { return []bool{true} }
func (op *globalAvgPoolOp) SymDiff(inputs G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	xs := inputs[0].Shape()
	dx, err := G.ApplyOp(&globalAvgPoolGradOp{h: xs[2], w: xs[3]}, grad)
	if err != nil {
		return nil, err
	}
	return G.Nodes{dx}, nil
}

// globalAvgPoolGradOp: dy (N,C) -> dx (N,C,H,W) = dy/(H*W) everywhere in the plane.
type globalAvgPoolGradOp struct {
	pure
	shapeMemo
	noDiff
	h, w int
}

func (op *globalAvgPoolGradOp) Arity() int    { return 1 }
func (op *globalAvgPoolGradOp) Type() hm.Type { return fnType(2, 4) }
func (op *globalAvgPoolGradOp) outShape(in []tensor.Shape) (tensor.Shape, error) {
	if len(in) != 1 || in[0].Dims() != 2 {
		return nil, fmt.Errorf("layers: %v takes one (N,C) input, got %v", op, in)
	}
	return tensor.Shape{in[0][0], in[0][1], op.h, op.w}, nil
}
func (op *globalAvgPoolGradOp) InferShape(ds ...G.DimSizer) (tensor.Shape, error) {
	in, err := dimSizersToShapes(ds)
	if err != nil {
		return nil, err
	}
	return op.outShape(in)
}
func (op *globalAvgPoolGradOp) wsBytes(tensor.Dtype, []tensor.Shape) int64        { return 0 }
func (op *globalAvgPoolGradOp) WorkspaceBytes(tensor.Dtype, []tensor.Shape) int64 { return 0 }
func (op *globalAvgPoolGradOp) FLOPs(in []tensor.Shape) int64 {
	if len(in) != 1 {
		return 0
	}
	return int64(in[0].TotalSize()) * int64(op.h*op.w)
}
func (op *globalAvgPoolGradOp) Do(in ...G.Value) (G.Value, error) { return doAlloc(op, in) }
func (op *globalAvgPoolGradOp) UsePreallocDo(p G.Value, in ...G.Value) (G.Value, error) {
	return doPrealloc(op, p, in)
}
func (op *globalAvgPoolGradOp) DoWorkspace(out G.Value, ws []byte, in ...G.Value) error {
	return doWorkspace(op, out, ws, in, false)
}
func (op *globalAvgPoolGradOp) exec(dt tensor.Dtype, out G.Value, _ []byte, in []G.Value) error {
	if dt == tensor.Float32 {
		return gapExec[float32](out, nil, in[0])
	}
	return gapExec[float64](out, nil, in[0])
}
func (op *globalAvgPoolGradOp) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "layers.GlobalAvgPool2DGrad{%dx%d}", op.h, op.w)
}
func (op *globalAvgPoolGradOp) Hashcode() uint32 { return hashOf(op) }
func (op *globalAvgPoolGradOp) String() string {
	return fmt.Sprintf("GlobalAvgPool2DGrad{%dx%d}", op.h, op.w)
}

// gapExec averages each plane of x into out (N,C), or with xv == nil fills out's planes from dy.
// Plane sums accumulate in float64 so float32 results do not drift with the plane size.
func gapExec[T float](out, xv, dyv G.Value) error {
	if xv != nil {
		xs := xv.Shape()
		x, err := denseData[T](xv, xs)
		if err != nil {
			return err
		}
		y, err := outData[T](out, tensor.Shape{xs[0], xs[1]})
		if err != nil {
			return err
		}
		runGAP(gapJob[T]{fwd: true, x: x, y: y, plane: xs[2] * xs[3]}, len(y), int64(len(x)))
		return nil
	}
	xs := out.Shape()
	dy, err := denseData[T](dyv, tensor.Shape{xs[0], xs[1]})
	if err != nil {
		return err
	}
	dx, err := outData[T](out, xs)
	if err != nil {
		return err
	}
	runGAP(gapJob[T]{dy: dy, dx: dx, plane: xs[2] * xs[3]}, len(dy), int64(len(dx)))
	return nil
}

// gapJob is gapExec's parallel body over planes [p0, p1): forward, x's planes averaged into y;
// backward, dx's planes filled from dy. A struct from a free list, not a closure: a closure
// handed to parallelFor escapes, an allocation per call.
type gapJob[T float] struct {
	fwd          bool
	x, y, dy, dx []T
	plane        int
}

var (
	gapJobs32 jobList[gapJob[float32]]
	gapJobs64 jobList[gapJob[float64]]
)

// runGAP runs job over n planes (work: the elements touched) with a job struct from the free list.
func runGAP[T float](job gapJob[T], n int, work int64) {
	jobs := jobsFor[T, gapJob[T]](&gapJobs32, &gapJobs64)
	j := jobs.get()
	*j = job
	parallelChunks(n, work, j)
	jobs.put(j)
}

func (j *gapJob[T]) chunk(p0, p1 int) {
	plane := j.plane
	if j.fwd {
		for p := p0; p < p1; p++ {
			var s float64
			for _, v := range j.x[p*plane : (p+1)*plane] {
				s += float64(v)
			}
			j.y[p] = T(s / float64(plane))
		}
		return
	}
	for p := p0; p < p1; p++ {
		g := j.dy[p] / T(plane)
		row := j.dx[p*plane : (p+1)*plane]
		for i := range row {
			row[i] = g
		}
	}
}
