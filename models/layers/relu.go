package layers

import (
	"fmt"
	"hash"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// reluOp is max(x, 0) as one node. gorgonia's Rectify is x ⊙ (x ≥ 0): a comparison node and a
// product node, i.e. an extra activation-sized mask kept alive until the backward, whose gradient
// also needs x. This op's gradient needs only its own output y (which the next layer keeps anyway),
// with PyTorch's convention that the gradient at exactly 0 is 0.
type reluOp struct {
	pure
	shapeMemo
}

func (op *reluOp) Arity() int { return 1 }
func (op *reluOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(a, a)
}
func (op *reluOp) outShape(in []tensor.Shape) (tensor.Shape, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("layers: ReLU takes 1 input")
	}
	return in[0].Clone(), nil
}
func (op *reluOp) InferShape(ds ...G.DimSizer) (tensor.Shape, error) {
	in, err := dimSizersToShapes(ds)
	if err != nil {
		return nil, err
	}
	return op.outShape(in)
}
func (op *reluOp) wsBytes(tensor.Dtype, []tensor.Shape) int64        { return 0 }
func (op *reluOp) WorkspaceBytes(tensor.Dtype, []tensor.Shape) int64 { return 0 }
func (op *reluOp) FLOPs(in []tensor.Shape) int64 {
	if len(in) != 1 {
		return 0
	}
	return int64(in[0].TotalSize())
}
func (op *reluOp) Do(in ...G.Value) (G.Value, error) { return doAlloc(op, in) }
func (op *reluOp) UsePreallocDo(p G.Value, in ...G.Value) (G.Value, error) {
	return doPrealloc(op, p, in)
}
func (op *reluOp) DoWorkspace(out G.Value, ws []byte, in ...G.Value) error {
	return doWorkspace(op, out, ws, in, false)
}
func (op *reluOp) exec(dt tensor.Dtype, out G.Value, _ []byte, in []G.Value) error {
	if dt == tensor.Float32 {
		return reluExec[float32](out, in[0], nil)
	}
	return reluExec[float64](out, in[0], nil)
}
func (op *reluOp) WriteHash(h hash.Hash) { fmt.Fprint(h, "layers.ReLU") }
func (op *reluOp) Hashcode() uint32      { return hashOf(op) }
func (op *reluOp) String() string        { return "ReLU" }
func (op *reluOp) DiffWRT(int) []bool    { return []bool{true} }
func (op *reluOp) SymDiff(inputs G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	dx, err := G.ApplyOp(&reluGradOp{}, output, grad)
	if err != nil {
		return nil, err
	}
	return G.Nodes{dx}, nil
}

// reluGradOp: (y, dy) -> dy where y > 0, else 0.
type reluGradOp struct {
	pure
	shapeMemo
	noDiff
}

func (op *reluGradOp) Arity() int { return 2 }
func (op *reluGradOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(a, a, a)
}
func (op *reluGradOp) outShape(in []tensor.Shape) (tensor.Shape, error) {
	if len(in) != 2 || !in[0].Eq(in[1]) {
		return nil, fmt.Errorf("layers: ReLUGrad takes (y, dy) of one shape, got %v", in)
	}
	return in[0].Clone(), nil
}
func (op *reluGradOp) InferShape(ds ...G.DimSizer) (tensor.Shape, error) {
	in, err := dimSizersToShapes(ds)
	if err != nil {
		return nil, err
	}
	return op.outShape(in)
}
func (op *reluGradOp) wsBytes(tensor.Dtype, []tensor.Shape) int64        { return 0 }
func (op *reluGradOp) WorkspaceBytes(tensor.Dtype, []tensor.Shape) int64 { return 0 }
func (op *reluGradOp) FLOPs(in []tensor.Shape) int64 {
	if len(in) != 2 {
		return 0
	}
	return int64(in[0].TotalSize())
}
func (op *reluGradOp) Do(in ...G.Value) (G.Value, error) { return doAlloc(op, in) }
func (op *reluGradOp) UsePreallocDo(p G.Value, in ...G.Value) (G.Value, error) {
	return doPrealloc(op, p, in)
}
func (op *reluGradOp) DoWorkspace(out G.Value, ws []byte, in ...G.Value) error {
	return doWorkspace(op, out, ws, in, false)
}
func (op *reluGradOp) exec(dt tensor.Dtype, out G.Value, _ []byte, in []G.Value) error {
	if dt == tensor.Float32 {
		return reluExec[float32](out, in[0], in[1])
	}
	return reluExec[float64](out, in[0], in[1])
}
func (op *reluGradOp) WriteHash(h hash.Hash) { fmt.Fprint(h, "layers.ReLUGrad") }
func (op *reluGradOp) Hashcode() uint32      { return hashOf(op) }
func (op *reluGradOp) String() string        { return "ReLUGrad" }

func reluExec[T float](out, xv, dyv G.Value) error {
	x, dy, res, err := elemIO[T](out, xv, dyv)
	if err != nil {
		return err
	}
	jobs := jobsFor[T, reluJob[T]](&reluJobs32, &reluJobs64)
	j := jobs.get()
	*j = reluJob[T]{x: x, dy: dy, res: res}
	parallelChunks((len(x)+reluChunk-1)/reluChunk, int64(len(x)), j)
	jobs.put(j)
	return nil
}

// reluChunk is the elements of one unit of reluExec's parallel work.
const reluChunk = 1 << 14

// reluJob is reluExec's parallel body: res from x (and dy), chunks [c0, c1) of reluChunk.
type reluJob[T float] struct{ x, dy, res []T }

var (
	reluJobs32 jobList[reluJob[float32]]
	reluJobs64 jobList[reluJob[float64]]
)

func (j *reluJob[T]) chunk(c0, c1 int) {
	lo, hi := c0*reluChunk, min(c1*reluChunk, len(j.x))
	xr, rr := j.x[lo:hi], j.res[lo:hi]
	var dr []T
	if j.dy != nil {
		dr = j.dy[lo:hi]
	}
	// Through bit masks rather than branches: a branch on the sign of activations is
	// mispredicted about every other element. The values are those of the branches: x (or
	// dy) where x > 0, NaN kept in the forward pass, +0 elsewhere.
	switch xr := any(xr).(type) {
	case []float32:
		reluMask32(any(rr).([]float32), xr, asF32(dr))
	case []float64:
		reluMask64(any(rr).([]float64), xr, asF64(dr))
	}
}

// InPlaceSafe tells the out-of-core VM that y may be written over x: ReLU
// is elementwise.
func (op *reluOp) InPlaceSafe(operand int) bool { return true }

// InPlaceSafe tells the out-of-core VM that dx may be written over y or dy:
// the gradient is elementwise.
func (op *reluGradOp) InPlaceSafe(operand int) bool { return true }

func asF32[T float](xs []T) []float32 { v, _ := any(xs).([]float32); return v }
func asF64[T float](xs []T) []float64 { v, _ := any(xs).([]float64); return v }

// b2u is 1 for true: the compiler makes it a SETcc, not a branch.
func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// reluMask32 is ReLU (dy nil) or its gradient on float32.
func reluMask32(res, x, dy []float32) {
	res = res[:len(x)]
	if k := reluF32Fast(res, x, dy); k > 0 {
		res, x = res[k:], x[k:]
		if dy != nil {
			dy = dy[k:]
		}
	}
	if dy == nil {
		for i, v := range x {
			keep := uint32(b2u(v > 0) | b2u(v != v))
			res[i] = math.Float32frombits(math.Float32bits(v) & -keep)
		}
		return
	}
	dy = dy[:len(x)]
	for i, v := range x {
		res[i] = math.Float32frombits(math.Float32bits(dy[i]) & -uint32(b2u(v > 0)))
	}
}

// reluMask64 is reluMask32 on float64.
func reluMask64(res, x, dy []float64) {
	res = res[:len(x)]
	if dy == nil {
		for i, v := range x {
			keep := b2u(v > 0) | b2u(v != v)
			res[i] = math.Float64frombits(math.Float64bits(v) & -keep)
		}
		return
	}
	dy = dy[:len(x)]
	for i, v := range x {
		res[i] = math.Float64frombits(math.Float64bits(dy[i]) & -b2u(v > 0))
	}
}
