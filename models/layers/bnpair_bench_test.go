package layers

import (
	"math/rand"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// BenchmarkBatchNormBackwardPair is a step's BN backward on smallcnn's first layers: dgamma then
// dx from the same x and dy.
func BenchmarkBatchNormBackwardPair(b *testing.B) {
	xs := sh(64, 16, 28, 28)
	rng := rand.New(rand.NewSource(1))
	op, err := NewBatchNormOp(4, xs[1], 0.1, 1e-5)
	if err != nil {
		b.Fatal(err)
	}
	x := denseAs(tensor.Float32, xs, randData(rng, xs.TotalSize()))
	dy := denseAs(tensor.Float32, xs, randData(rng, xs.TotalSize()))
	gamma := denseAs(tensor.Float32, sh(xs[1]), randData(rng, xs[1]))
	gx, gg := &bnGradOp{bn: op}, &bnGradOp{bn: op, wrtGamma: true}
	dx, dg := newDense(tensor.Float32, xs), newDense(tensor.Float32, sh(xs[1]))
	ws := alignedNaNBytes(gx.wsBytes(tensor.Float32, []tensor.Shape{xs}))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := gg.exec(tensor.Float32, dg, ws, []G.Value{x, dy}); err != nil {
			b.Fatal(err)
		}
		if err := gx.exec(tensor.Float32, dx, ws, []G.Value{x, gamma, dy}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBatchNormStep is a training step's BN on smallcnn's first layers: the forward, then
// dgamma and dx from the same x.
func BenchmarkBatchNormStep(b *testing.B) {
	xs := sh(64, 16, 28, 28)
	rng := rand.New(rand.NewSource(1))
	op, err := NewBatchNormOp(4, xs[1], 0.1, 1e-5)
	if err != nil {
		b.Fatal(err)
	}
	x := denseAs(tensor.Float32, xs, randData(rng, xs.TotalSize()))
	dy := denseAs(tensor.Float32, xs, randData(rng, xs.TotalSize()))
	gamma := denseAs(tensor.Float32, sh(xs[1]), randData(rng, xs[1]))
	beta := denseAs(tensor.Float32, sh(xs[1]), randData(rng, xs[1]))
	gx, gg := &bnGradOp{bn: op}, &bnGradOp{bn: op, wrtGamma: true}
	y, dx, dg := newDense(tensor.Float32, xs), newDense(tensor.Float32, xs), newDense(tensor.Float32, sh(xs[1]))
	ws := alignedNaNBytes(gx.wsBytes(tensor.Float32, []tensor.Shape{xs}))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := op.exec(tensor.Float32, y, ws, []G.Value{x, gamma, beta}); err != nil {
			b.Fatal(err)
		}
		if err := gg.exec(tensor.Float32, dg, ws, []G.Value{x, dy}); err != nil {
			b.Fatal(err)
		}
		if err := gx.exec(tensor.Float32, dx, ws, []G.Value{x, gamma, dy}); err != nil {
			b.Fatal(err)
		}
	}
}
