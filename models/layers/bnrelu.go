package layers

import (
	"fmt"
	"hash"
	"unsafe"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// bnReLUOp is a batch norm and the ReLU after it in one pass: each plane of a channel is
// normalised, then rectified while it is still in cache, with exactly the arithmetic of
// BatchNormOp and reluOp run one after the other (NaN kept, -0 made +0, as reluMask does), so
// it gives their bits. It is never a node of a graph: the out-of-core VM runs it in place of the
// batch norm's function, on the CPU device, where the ReLU writes over the batch norm's output
// and nothing else reads that output (vm.Fuser). Everything but the pass is the batch norm's:
// operands, shape, workspace, running statistics and the statistics handed to the backward.
type bnReLUOp struct{ *BatchNormOp }

// FuseNext implements vm.Fuser: a ReLU after the batch norm runs in its pass (bnReLUOp). Other
// ops are not fused (nil).
func (op *BatchNormOp) FuseNext(next G.Op) G.Op {
	if _, ok := next.(*reluOp); !ok {
		return nil
	}
	return bnReLUOp{op}
}

func (op bnReLUOp) exec(dt tensor.Dtype, out G.Value, ws []byte, in []G.Value) error {
	if dt == tensor.Float32 {
		return bnForward[float32](op.BatchNormOp, out, ws, in, true)
	}
	return bnForward[float64](op.BatchNormOp, out, ws, in, true)
}

// Do, UsePreallocDo and DoWorkspace run the fused pass (the embedded op's would run the batch
// norm alone).
func (op bnReLUOp) Do(in ...G.Value) (G.Value, error) { return doAlloc(op, in) }
func (op bnReLUOp) UsePreallocDo(p G.Value, in ...G.Value) (G.Value, error) {
	return doPrealloc(op, p, in)
}
func (op bnReLUOp) DoWorkspace(out G.Value, ws []byte, in ...G.Value) error {
	return doWorkspace(op, out, ws, in, false)
}

func (op bnReLUOp) WriteHash(h hash.Hash) {
	op.BatchNormOp.WriteHash(h)
	fmt.Fprint(h, "+layers.ReLU")
}
func (op bnReLUOp) Hashcode() uint32 { return hashOf(op) }
func (op bnReLUOp) String() string   { return op.BatchNormOp.String() + "+ReLU" }

// reluPlane rectifies p in place, as reluOp's forward does.
func reluPlane[T float](p []T) {
	switch p := any(p).(type) {
	case []float32:
		reluMask32(p, p, nil)
	case []float64:
		reluMask64(p, p, nil)
	}
}

// reluGradBNOp is ReLU's gradient dz = (y > 0 ? dy : +0) and, in the same pass over each channel
// while it is in cache, the batch-norm gradient sums the dgamma op after it computes from x and
// dz (channelGradSums, on the forward's statistics or x's, as bnBackward takes them). Its operands
// are (y, dy, x), its output dz. It writes dz with reluOp's gradient arithmetic and hands the
// sums to the batch norm's dgamma op (BatchNormOp.primeSums), which finds them keyed on x and dz
// at the same memory and only writes dgamma from them, then hands them on to dx: every result
// has the bits of the ops run apart. In inference mode it writes dz only (the gradient ops then
// compute as they do unfused). It is never a node of a graph: the out-of-core VM runs it in place
// of the ReLU gradient's function, on the CPU device, where the dgamma op is the next to run
// and nothing between touches x (vm.Fuser).
type reluGradBNOp struct {
	reluGradOp
	bn *BatchNormOp
}

// FuseNext implements vm.Fuser: the dgamma op of a batch norm after the ReLU gradient gets its
// sums from the gradient's pass (reluGradBNOp). Other ops are not fused (nil).
func (op *reluGradOp) FuseNext(next G.Op) G.Op {
	g, ok := next.(*bnGradOp)
	if !ok || !g.wrtGamma {
		return nil
	}
	return &reluGradBNOp{bn: g.bn}
}

// PrimesNext tells the VM that the op after this one still runs (vm.Primer), with its
// operands other than this one's output passed here after this one's own: x.
func (op *reluGradBNOp) PrimesNext() bool { return true }

func (op *reluGradBNOp) Arity() int { return 3 }
func (op *reluGradBNOp) outShape(in []tensor.Shape) (tensor.Shape, error) {
	if len(in) != 3 || !in[2].Eq(in[0]) {
		return nil, fmt.Errorf("layers: %v takes (y, dy, x) of one shape, got %v", op, in)
	}
	return op.reluGradOp.outShape(in[:2])
}
func (op *reluGradBNOp) wsBytes(tensor.Dtype, []tensor.Shape) int64        { return 0 }
func (op *reluGradBNOp) WorkspaceBytes(tensor.Dtype, []tensor.Shape) int64 { return 0 }
func (op *reluGradBNOp) exec(dt tensor.Dtype, out G.Value, _ []byte, in []G.Value) error {
	if dt == tensor.Float32 {
		return reluGradBN[float32](op.bn, out, in)
	}
	return reluGradBN[float64](op.bn, out, in)
}
func (op *reluGradBNOp) Do(in ...G.Value) (G.Value, error) { return doAlloc(op, in) }
func (op *reluGradBNOp) UsePreallocDo(p G.Value, in ...G.Value) (G.Value, error) {
	return doPrealloc(op, p, in)
}
func (op *reluGradBNOp) DoWorkspace(out G.Value, ws []byte, in ...G.Value) error {
	return doWorkspace(op, out, ws, in, false)
}
func (op *reluGradBNOp) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "layers.ReLUGrad+BatchNormGradSums#%d", op.bn.serial)
}
func (op *reluGradBNOp) Hashcode() uint32 { return hashOf(op) }
func (op *reluGradBNOp) String() string {
	return "ReLUGrad+" + (&bnGradOp{bn: op.bn, wrtGamma: true}).String()
}

func reluGradBN[T float](bn *BatchNormOp, out G.Value, in []G.Value) error {
	y, dy, dz, err := elemIO[T](out, in[0], in[1])
	if err != nil {
		return err
	}
	xs := in[2].Shape()
	N, C, plane, err := bnShape(bn, xs)
	if err != nil {
		return err
	}
	x, err := denseData[T](in[2], xs)
	if err != nil {
		return err
	}
	training, _, _ := bn.mode()
	if !training {
		reluGradPlane(dz, y, dy)
		return nil
	}
	// The key the dgamma op will compute with: x and its dy, which is dz.
	key := bnKey{x: unsafe.Pointer(&x[0]), dy: unsafe.Pointer(&dz[0]), bytes: len(x) * int(unsafe.Sizeof(x[0])), N: N, C: C, plane: plane}
	sums := bn.freshSums()
	haveStats := bn.forwardStats(key, sums)
	parallelFor(C, int64(len(x)), func(c0, c1 int) {
		var a, b lanes
		var bx, bdy [gatherLen]T
		for c := c0; c < c1; c++ {
			for n := 0; n < N; n++ {
				o := (n*C + c) * plane
				reluGradPlane(dz[o:o+plane], y[o:o+plane], dy[o:o+plane])
			}
			m, is := sums.mean[c], sums.invStd[c]
			if !haveStats {
				m, is, _ = channelMoments(&a, bx[:], true, nil, nil, bn.eps, x, N, C, plane, c)
			}
			sdy, sdxh := channelGradSums(&a, &b, bx[:], bdy[:], x, dz, N, C, plane, c, m, is)
			sums.mean[c], sums.invStd[c], sums.sdy[c], sums.sdxh[c] = m, is, sdy, sdxh
		}
	})
	bn.primeSums(sums, key)
	return nil
}

// reluGradPlane writes ReLU's gradient of y and dy into dz, as reluGradOp does.
func reluGradPlane[T float](dz, y, dy []T) {
	switch dz := any(dz).(type) {
	case []float32:
		reluMask32(dz, any(y).([]float32), any(dy).([]float32))
	case []float64:
		reluMask64(dz, any(y).([]float64), any(dy).([]float64))
	}
}
