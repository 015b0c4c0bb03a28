package layers

import (
	"fmt"

	G "gorgonia.org/gorgonia"
)

// Conv2D applies the lean convolution y = conv(x, w) (+ bias per output channel) as one node.
// x is (N,C,H,W), w is (O,C,KH,KW), bias is nil or (O). The backward reads only x, w and dy.
func Conv2D(x, w, bias *G.Node, p ConvParams) (*G.Node, error) {
	p = p.norm()
	if err := p.validate(); err != nil {
		return nil, err
	}
	if p.OutPadH != 0 || p.OutPadW != 0 {
		return nil, fmt.Errorf("layers: Conv2D has no output padding (that is ConvTranspose2D's)")
	}
	ws := w.Shape()
	if ws.Dims() != 4 {
		return nil, fmt.Errorf("layers: Conv2D weight must be (O,C,KH,KW), got %v", ws)
	}
	op := &convOp{kind: convForward, p: p, kh: ws[2], kw: ws[3], bias: bias != nil, serial: serials.Add(1)}
	if bias != nil {
		return G.ApplyOp(op, x, w, bias)
	}
	return G.ApplyOp(op, x, w)
}

// ConvTranspose2D applies a transposed ("up-") convolution, the adjoint of Conv2D with the same
// parameters: x is (N,Cin,H,W), w is (Cin,Cout,KH,KW) as PyTorch, bias nil or (Cout). The output is
// (N, Cout, (H-1)*s - 2*pad + dil*(K-1) + 1 + outpad, …). Kernel 2, stride 2 doubles H and W.
func ConvTranspose2D(x, w, bias *G.Node, p ConvParams) (*G.Node, error) {
	p = p.norm()
	if err := p.validate(); err != nil {
		return nil, err
	}
	xs, ws := x.Shape(), w.Shape()
	if xs.Dims() != 4 || ws.Dims() != 4 {
		return nil, fmt.Errorf("layers: ConvTranspose2D wants 4-D x and w, got %v and %v", xs, ws)
	}
	if p.OutPadH >= p.StrideH || p.OutPadW >= p.StrideW {
		return nil, fmt.Errorf("layers: output padding must be smaller than the stride: %+v", p)
	}
	h := (xs[2]-1)*p.StrideH - 2*p.PadH + p.DilationH*(ws[2]-1) + 1 + p.OutPadH
	wd := (xs[3]-1)*p.StrideW - 2*p.PadW + p.DilationW*(ws[3]-1) + 1 + p.OutPadW
	if h < 1 || wd < 1 {
		return nil, fmt.Errorf("layers: ConvTranspose2D of %v with %v and %+v has no output", xs, ws, p)
	}
	op := &convOp{kind: convData, p: p, kh: ws[2], kw: ws[3], h: h, w: wd, bias: bias != nil, serial: serials.Add(1)}
	if bias != nil {
		return G.ApplyOp(op, w, x, bias)
	}
	return G.ApplyOp(op, w, x)
}

// BatchNorm applies lean train-mode batch normalisation with learnable gamma and beta of shape (C).
// The returned op holds the running statistics and the train/inference switch.
func BatchNorm(x, gamma, beta *G.Node, momentum, eps float64) (*G.Node, *BatchNormOp, error) {
	xs := x.Shape()
	if xs.Dims() < 2 {
		return nil, nil, fmt.Errorf("layers: BatchNorm needs (N,C,...) input, got %v", xs)
	}
	op, err := NewBatchNormOp(xs.Dims(), xs[1], momentum, eps)
	if err != nil {
		return nil, nil, err
	}
	y, err := G.ApplyOp(op, x, gamma, beta)
	if err != nil {
		return nil, nil, err
	}
	// gorgonia returns an existing node for an identical expression; its op is the one that runs.
	if o, ok := y.Op().(*BatchNormOp); ok {
		op = o
	}
	return y, op, nil
}

// ReLU is max(x, 0), one node whose gradient reads only its output.
func ReLU(x *G.Node) (*G.Node, error) { return G.ApplyOp(&reluOp{}, x) }

// MaxPool2D pools (N,C,H,W) with a square k x k window, stride and symmetric padding (at most k/2).
// Nothing is allocated at build time and the backward recomputes the argmax from x.
func MaxPool2D(x *G.Node, k, stride, pad int) (*G.Node, error) {
	g := poolGeom{k, k, stride, stride, pad, pad}
	if err := g.validate(); err != nil {
		return nil, err
	}
	return G.ApplyOp(&maxPoolOp{g: g}, x)
}

// AvgPool2D averages k x k windows at the given stride; padding counts as zeros (PyTorch's
// default count_include_pad). AvgPool2D(x, 2, 2, 0) is DenseNet's transition pooling.
func AvgPool2D(x *G.Node, k, stride, pad int) (*G.Node, error) {
	g := poolGeom{k, k, stride, stride, pad, pad}
	if err := g.validate(); err != nil {
		return nil, err
	}
	return G.ApplyOp(&avgPoolOp{g: g}, x)
}

// AvgPool2DExcludePad is AvgPool2D dividing each window by the number of its pixels inside the
// image (PyTorch's count_include_pad=False), as Pix2PixHD downsamples between discriminator scales.
func AvgPool2DExcludePad(x *G.Node, k, stride, pad int) (*G.Node, error) {
	g := poolGeom{k, k, stride, stride, pad, pad}
	if err := g.validate(); err != nil {
		return nil, err
	}
	return G.ApplyOp(&avgPoolOp{g: g, exclude: true}, x)
}

// GlobalAvgPool2D averages each channel over H and W: (N,C,H,W) -> (N,C).
func GlobalAvgPool2D(x *G.Node) (*G.Node, error) { return G.ApplyOp(&globalAvgPoolOp{}, x) }

// Concat joins (N,C_i,H,W) tensors along the channel axis (gorgonia's Concat is correct).
func Concat(xs ...*G.Node) (*G.Node, error) {
	if len(xs) == 0 {
		return nil, fmt.Errorf("layers: Concat of nothing")
	}
	if len(xs) == 1 {
		return xs[0], nil
	}
	return G.Concat(1, xs...)
}

// SoftmaxCrossEntropy is the mean over the batch of -Σ_k onehot·log softmax(logits), for (N,K)
// logits and one-hot (or soft) targets. It is built from gorgonia ops that are correct in v0.9.18:
// LogSoftMax, HadamardProd and single-axis reductions (its multi-axis Sum/Mean are wrong).
func SoftmaxCrossEntropy(logits, onehot *G.Node) (*G.Node, error) {
	ls, ts := logits.Shape(), onehot.Shape()
	if ls.Dims() != 2 || !ls.Eq(ts) {
		return nil, fmt.Errorf("layers: SoftmaxCrossEntropy wants (N,K) logits and targets, got %v and %v", ls, ts)
	}
	lp, err := G.LogSoftMax(logits, 1)
	if err != nil {
		return nil, err
	}
	return negMeanOfSums(lp, onehot, 1)
}

// PixelSoftmaxCrossEntropy is the per-pixel loss for segmentation: (N,K,H,W) logits and one-hot
// targets, softmax over K, averaged over N, H and W.
func PixelSoftmaxCrossEntropy(logits, onehot *G.Node) (*G.Node, error) {
	ls, ts := logits.Shape(), onehot.Shape()
	if ls.Dims() != 4 || !ls.Eq(ts) {
		return nil, fmt.Errorf("layers: PixelSoftmaxCrossEntropy wants (N,K,H,W) logits and targets, got %v and %v", ls, ts)
	}
	lp, err := G.LogSoftMax(logits, 1)
	if err != nil {
		return nil, err
	}
	return negMeanOfSums(lp, onehot, 1)
}

// negMeanOfSums returns -mean over every axis but classAxis of Σ_classAxis (lp ⊙ t), reducing one
// axis at a time from the last, since gorgonia's multi-axis reductions are broken.
func negMeanOfSums(lp, t *G.Node, classAxis int) (*G.Node, error) {
	r, err := G.HadamardProd(lp, t)
	if err != nil {
		return nil, err
	}
	for ax := r.Shape().Dims() - 1; ax >= 0; ax-- {
		if ax == classAxis {
			r, err = G.Sum(r, ax)
		} else {
			r, err = G.Mean(r, ax)
		}
		if err != nil {
			return nil, err
		}
	}
	return G.Neg(r)
}
