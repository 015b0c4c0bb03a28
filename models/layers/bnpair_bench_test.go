package layers

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

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

// BenchmarkBNReLUForward is a batch norm forward and the ReLU after it on smallcnn's first
// layers (64x16x28x28) and ResNet-18's first stage at 32x32 (32x64x32x32), float32: unfused as
// the VM runs them apart (ReLU in place over the batch norm's output), and fused into one pass
// (bnReLUOp). Each iteration runs both, in turns of order, so both see the same machine load;
// it reports each one's ns a call and their ratio (fused/unfused):
// go test -run XXX -bench BNReLUForward ./models/layers/
func BenchmarkBNReLUForward(b *testing.B) {
	for _, xs := range []tensor.Shape{sh(64, 16, 28, 28), sh(32, 64, 32, 32)} {
		rng := rand.New(rand.NewSource(1))
		op, err := NewBatchNormOp(4, xs[1], 0.1, 1e-5)
		if err != nil {
			b.Fatal(err)
		}
		x := denseAs(tensor.Float32, xs, randData(rng, xs.TotalSize()))
		gamma := denseAs(tensor.Float32, sh(xs[1]), randData(rng, xs[1]))
		beta := denseAs(tensor.Float32, sh(xs[1]), randData(rng, xs[1]))
		y := newDense(tensor.Float32, xs)
		ws := alignedNaNBytes(op.wsBytes(tensor.Float32, []tensor.Shape{xs}))
		in := []G.Value{x, gamma, beta}
		fused := bnReLUOp{op}
		runs := [2]func() error{
			func() error {
				if err := op.exec(tensor.Float32, y, ws, in); err != nil {
					return err
				}
				return (&reluOp{}).exec(tensor.Float32, y, nil, []G.Value{y})
			},
			func() error { return fused.exec(tensor.Float32, y, ws, in) },
		}
		b.Run(fmt.Sprint(xs), func(b *testing.B) {
			var took [2]time.Duration
			for i := 0; i < b.N; i++ {
				for k := 0; k < 2; k++ {
					r := (i + k) % 2
					t0 := time.Now()
					if err := runs[r](); err != nil {
						b.Fatal(err)
					}
					took[r] += time.Since(t0)
				}
			}
			b.ReportMetric(float64(took[0].Nanoseconds())/float64(b.N), "unfused-ns/op")
			b.ReportMetric(float64(took[1].Nanoseconds())/float64(b.N), "fused-ns/op")
			b.ReportMetric(float64(took[1])/float64(took[0]), "fused/unfused")
		})
	}
}
