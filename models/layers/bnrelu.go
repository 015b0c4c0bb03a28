package layers

import (
	"fmt"
	"hash"

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
