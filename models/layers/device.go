package layers

import (
	G "gorgonia.org/gorgonia"
)

// DeviceKind names what a layers op computes, for device backends that run
// it with kernels of their own (vm/cuda/dispatch).
type DeviceKind uint8

// The ops a backend may meet, one per op type (and convolution kind).
const (
	DevNone             DeviceKind = iota
	DevConv                        // Conv2D forward (x, w[, b]) -> y; also the data gradient of ConvTranspose2D
	DevConvData                    // (w, dy[, b]) -> dx: Conv2D's data gradient, ConvTranspose2D's forward
	DevConvFilter                  // (x, dy) -> dw
	DevChannelSum                  // (dy) -> per-channel sums: bias and BN beta gradients
	DevBatchNorm                   // (x, gamma, beta) -> y
	DevBNGradGamma                 // (x, dy) -> dgamma
	DevBNGradX                     // (x, gamma, dy) -> dx
	DevReLU                        // (x) -> y
	DevReLUGrad                    // (y, dy) -> dx
	DevMaxPool                     // (x) -> y
	DevMaxPoolGrad                 // (x, dy) -> dx
	DevAvgPool                     // (x) -> y
	DevAvgPoolGrad                 // (dy) -> dx
	DevGAP                         // (x) -> (N, C)
	DevGAPGrad                     // (dy) -> dx
	DevResize                      // (x) -> y: bilinear resize of each plane
	DevResizeGrad                  // (dy) -> dx: its adjoint
	DevLeakyReLU                   // (x) -> y
	DevLeakyReLUGrad               // (y, dy) -> dx
	DevTanh                        // (x) -> y
	DevTanhGrad                    // (y, dy) -> dx
	DevInstanceNorm                // (x) -> y
	DevInstanceNormGrad            // (x, dy) -> dx
	DevReflectPad                  // (x) -> y
	DevReflectPadGrad              // (dy) -> dx
	DevCopy                        // (x) -> a copy (StopGradient)
	DevMeanLoss                    // (a[, b]) -> scalar: MSEToConstant, L1Loss
	DevMeanLossGrad                // (a[, b], dloss) -> the gradient of operand Loss.Wrt
	DevEmbedding                   // (ids, table) -> (N,E,1,T)
	DevEmbeddingGrad               // (ids, dy) -> dtable (Vocab rows)
	DevLSTMCell                    // an LSTM cell op, Cell says which
	DevSeqStep                     // (N,C,1,T) -> (N,C): step Step
	DevSeqPlace                    // (N,C) -> (N,C,1,T): step Step, zeros elsewhere
	DevSeqStack                    // Steps x (N,C) -> (N,C,1,T)
	DevLSTMGates                   // (xw, hw, bih, bhh) -> xw + hw + bih + bhh, the biases per column
)

// MeanLoss is a mean loss: scale·mean((a-target)²) (MSEToConstant) or, with
// L1, scale·mean(|a-b|) (L1Loss); Wrt is the operand a gradient is of.
type MeanLoss struct {
	L1            bool
	Target, Scale float64
	Wrt           int
}

// ResizeGeom is a bilinear resize's planes: IH x IW on the forward's input
// side, OH x OW on its output side (for the gradient too), and whether
// corners are aligned.
type ResizeGeom struct {
	IH, IW, OH, OW int
	Align          bool
}

// PoolWindow is a pooling op's window: kernel, stride and padding per axis.
type PoolWindow struct{ KH, KW, SH, SW, PH, PW int }

// DeviceOp is what a backend needs to know of a layers op beyond its
// operands' shapes.
type DeviceOp struct {
	Kind DeviceKind
	// Conv is the geometry of a convolution (strides and dilations made
	// 1 where 0); KH, KW its kernel; H, W the data-side image (convData);
	// Bias whether it takes a bias operand.
	Conv   ConvParams
	KH, KW int
	H, W   int
	Bias   bool
	// Pool is a pooling window; ExcludePad marks an average pool that
	// divides by the unpadded window (count_include_pad=False).
	Pool       PoolWindow
	ExcludePad bool
	// BN is the batch-norm op itself (running statistics, mode, epsilon,
	// momentum), for batch norm and its gradients.
	BN *BatchNormOp
	// Resize is a bilinear resize's geometry.
	Resize ResizeGeom
	// Slope is LeakyReLU's; Eps InstanceNorm's; Pad ReflectionPad2D's.
	Slope, Eps float64
	Pad        int
	// Loss is a mean loss and, for its gradients, the operand.
	Loss MeanLoss
	// Cell is an LSTM cell op: 0 LSTMCell (pre, c) -> c', 1 LSTMHidden
	// (pre, c') -> h', 2 LSTMCellGradGates (pre, c, dc'), 3
	// LSTMCellGradState (pre, dc'), 4 LSTMHiddenGradGates (pre, c', dh'), 5
	// LSTMHiddenGradState (pre, c', dh').
	Cell int
	// Step and Steps are a sequence op's step and sequence length; Vocab is
	// an embedding gradient's table rows.
	Step, Steps, Vocab int
}

// Describe tells a backend what a layers op computes; ok is false for ops
// of other packages (and layers ops a backend cannot be told about).
func Describe(op G.Op) (d DeviceOp, ok bool) {
	pool := func(g poolGeom) PoolWindow { return PoolWindow{g.kh, g.kw, g.sh, g.sw, g.ph, g.pw} }
	switch o := op.(type) {
	case *convOp:
		d = DeviceOp{Conv: o.p.norm(), KH: o.kh, KW: o.kw, H: o.h, W: o.w, Bias: o.bias}
		d.Kind = map[convKind]DeviceKind{convForward: DevConv, convData: DevConvData, convFilter: DevConvFilter}[o.kind]
	case *channelSumOp:
		d.Kind = DevChannelSum
	case *BatchNormOp:
		d = DeviceOp{Kind: DevBatchNorm, BN: o}
	case *bnGradOp:
		d = DeviceOp{Kind: DevBNGradX, BN: o.bn}
		if o.wrtGamma {
			d.Kind = DevBNGradGamma
		}
	case *reluOp:
		d.Kind = DevReLU
	case *reluGradOp:
		d.Kind = DevReLUGrad
	case *maxPoolOp:
		d = DeviceOp{Kind: DevMaxPool, Pool: pool(o.g)}
	case *maxPoolGradOp:
		d = DeviceOp{Kind: DevMaxPoolGrad, Pool: pool(o.g)}
	case *avgPoolOp:
		d = DeviceOp{Kind: DevAvgPool, Pool: pool(o.g), ExcludePad: o.exclude}
	case *avgPoolGradOp:
		d = DeviceOp{Kind: DevAvgPoolGrad, Pool: pool(o.g), ExcludePad: o.exclude, H: o.h, W: o.w}
	case *globalAvgPoolOp:
		d.Kind = DevGAP
	case *globalAvgPoolGradOp:
		d = DeviceOp{Kind: DevGAPGrad, H: o.h, W: o.w}
	case *frameOp:
		return describeFrame(o.s)
	default:
		return DeviceOp{}, false
	}
	return d, true
}

// describeFrame tells a backend about the ops built on frameOp that it may
// run itself.
func describeFrame(s spec) (d DeviceOp, ok bool) {
	switch s := s.(type) {
	case resizeSpec:
		d = DeviceOp{Kind: DevResize, Resize: ResizeGeom{IH: s.ih, IW: s.iw, OH: s.oh, OW: s.ow, Align: s.align}}
		if s.adjoint {
			d.Kind = DevResizeGrad
		}
	case actSpec:
		d = DeviceOp{Kind: DevLeakyReLU, Slope: s.slope}
		if s.kind == actTanh {
			d.Kind = DevTanh
		}
	case actGradSpec:
		d = DeviceOp{Kind: DevLeakyReLUGrad, Slope: s.slope}
		if s.kind == actTanh {
			d.Kind = DevTanhGrad
		}
	case instNormSpec:
		d = DeviceOp{Kind: DevInstanceNorm, Eps: s.eps}
	case instNormGradSpec:
		d = DeviceOp{Kind: DevInstanceNormGrad, Eps: s.eps}
	case padSpec:
		d = DeviceOp{Kind: DevReflectPad, Pad: s.p}
	case padGradSpec:
		d = DeviceOp{Kind: DevReflectPadGrad, Pad: s.p}
	case stopSpec:
		d.Kind = DevCopy
	case lossSpec:
		d = DeviceOp{Kind: DevMeanLoss, Loss: MeanLoss{L1: s.kind == lossL1, Target: s.target, Scale: s.scale}}
	case embedSpec:
		d.Kind = DevEmbedding
	case embedGradSpec:
		d = DeviceOp{Kind: DevEmbeddingGrad, Vocab: s.vocab}
	case gatesSpec:
		d.Kind = DevLSTMGates
	case cellSpec:
		d = DeviceOp{Kind: DevLSTMCell, Cell: int(s.kind)}
	case seqSpec:
		d = DeviceOp{Kind: [...]DeviceKind{seqStep: DevSeqStep, seqPlace: DevSeqPlace, seqStack: DevSeqStack}[s.kind], Step: s.t, Steps: s.steps}
	case lossGradSpec:
		d = DeviceOp{Kind: DevMeanLossGrad, Loss: MeanLoss{L1: s.loss.kind == lossL1, Target: s.loss.target, Scale: s.loss.scale, Wrt: s.wrt}}
	default:
		return DeviceOp{}, false
	}
	return d, true
}
