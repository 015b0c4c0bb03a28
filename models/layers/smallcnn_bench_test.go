package layers

import (
	"testing"

	"gorgonia.org/tensor"
)

// The convolutions of smallcnn on Fashion-MNIST (b64, 28x28): conv1 has one input channel, the
// residual block's two and conv2 (at 14x14) have 16.
func BenchmarkSmallCNNConv(b *testing.B) {
	p := Square(1, 1).norm()
	for _, c := range []struct {
		name string
		x, w tensor.Shape
	}{
		{"conv1", sh(64, 1, 28, 28), sh(16, 1, 3, 3)},
		{"block", sh(64, 16, 28, 28), sh(16, 16, 3, 3)},
		{"conv2", sh(64, 16, 14, 14), sh(16, 16, 3, 3)},
	} {
		y := sh(c.x[0], c.w[0], c.x[2], c.x[3])
		b.Run(c.name+"/Forward", func(b *testing.B) { benchOp(b, &convOp{kind: convForward, p: p}, c.x, c.w) })
		b.Run(c.name+"/Data", func(b *testing.B) { benchOp(b, &convOp{kind: convData, p: p, h: c.x[2], w: c.x[3]}, c.w, y) })
		b.Run(c.name+"/Filter", func(b *testing.B) { benchOp(b, &convOp{kind: convFilter, p: p, kh: 3, kw: 3}, c.x, y) })
	}
}
