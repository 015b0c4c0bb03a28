package layers

import (
	"math/rand"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// benchOp runs one op on random float32 inputs through DoWorkspace, as the VM does.
func benchOp(b *testing.B, op kernel, shapes ...tensor.Shape) {
	benchOpWs(b, op, op.wsBytes(tensor.Float32, shapes), shapes...)
}

// benchOpWs is benchOp with a workspace of wsBytes.
func benchOpWs(b *testing.B, op kernel, wsBytes int64, shapes ...tensor.Shape) {
	rng := rand.New(rand.NewSource(1))
	var in []G.Value
	for _, s := range shapes {
		in = append(in, denseAs(tensor.Float32, s, randData(rng, s.TotalSize())))
	}
	os, err := op.outShape(shapes)
	if err != nil {
		b.Fatal(err)
	}
	out := newDense(tensor.Float32, os)
	ws := alignedNaNBytes(wsBytes)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := op.exec(tensor.Float32, out, ws, in); err != nil {
			b.Fatal(err)
		}
	}
	if f, ok := op.(FLOPser); ok {
		b.ReportMetric(float64(f.FLOPs(shapes))*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	}
}

// The shape GORGONIA-NOTES.md times gorgonia's Conv2d on: 64->64 3x3 on 8x64x56x56.
var (
	benchX  = sh(8, 64, 56, 56)
	benchW  = sh(64, 64, 3, 3)
	benchP  = Square(1, 1).norm()
	benchW1 = sh(256, 64, 1, 1)
)

func BenchmarkConv3x3Forward(b *testing.B) {
	benchOp(b, &convOp{kind: convForward, p: benchP}, benchX, benchW)
}
func BenchmarkConv3x3Data(b *testing.B) {
	benchOp(b, &convOp{kind: convData, p: benchP, h: 56, w: 56}, benchW, benchX)
}
func BenchmarkConv3x3Filter(b *testing.B) {
	benchOp(b, &convOp{kind: convFilter, p: benchP, kh: 3, kw: 3}, benchX, benchX)
}

// BenchmarkConv3x3Tiled runs the three 3x3 products in their least workspace (256-pixel im2col
// tiles, as under ooc.WithWorkspaceLimit): compare with the whole-image ones above.
func BenchmarkConv3x3Tiled(b *testing.B) {
	for _, c := range []struct {
		name   string
		op     *convOp
		shapes []tensor.Shape
	}{
		{"Forward", &convOp{kind: convForward, p: benchP}, []tensor.Shape{benchX, benchW}},
		{"Data", &convOp{kind: convData, p: benchP, h: 56, w: 56}, []tensor.Shape{benchW, benchX}},
		{"Filter", &convOp{kind: convFilter, p: benchP, kh: 3, kw: 3}, []tensor.Shape{benchX, benchX}},
	} {
		b.Run(c.name, func(b *testing.B) {
			benchOpWs(b, c.op, c.op.MinWorkspaceBytes(tensor.Float32, c.shapes), c.shapes...)
		})
	}
}

func BenchmarkConv1x1Forward(b *testing.B) {
	benchOp(b, &convOp{kind: convForward, p: Square(1, 0).norm()}, benchX, benchW1)
}
func BenchmarkBatchNormForward(b *testing.B) {
	op, _ := NewBatchNormOp(4, 64, 0.1, 1e-5)
	benchOp(b, op, benchX, sh(64), sh(64))
}
func BenchmarkBatchNormGradX(b *testing.B) {
	op, _ := NewBatchNormOp(4, 64, 0.1, 1e-5)
	benchOp(b, &bnGradOp{bn: op}, benchX, sh(64), benchX)
}
func BenchmarkMaxPoolForward(b *testing.B) {
	benchOp(b, &maxPoolOp{g: poolGeom{3, 3, 2, 2, 1, 1}}, benchX)
}
func BenchmarkMaxPoolGrad(b *testing.B) {
	benchOp(b, &maxPoolGradOp{g: poolGeom{3, 3, 2, 2, 1, 1}}, benchX, sh(8, 64, 28, 28))
}
func BenchmarkReLU(b *testing.B)     { benchOp(b, &reluOp{}, benchX) }
func BenchmarkReLUGrad(b *testing.B) { benchOp(b, &reluGradOp{}, benchX, benchX) }

// The 2x2 stride-2 pool of smallcnn and VGG, on the Fashion-MNIST model's first pool input.
func BenchmarkMaxPool2x2Forward(b *testing.B) {
	benchOp(b, &maxPoolOp{g: poolGeom{2, 2, 2, 2, 0, 0}}, sh(64, 16, 28, 28))
}
func BenchmarkMaxPool2x2Grad(b *testing.B) {
	benchOp(b, &maxPoolGradOp{g: poolGeom{2, 2, 2, 2, 0, 0}}, sh(64, 16, 28, 28), sh(64, 16, 14, 14))
}
func BenchmarkBatchNormGradGamma(b *testing.B) {
	op, _ := NewBatchNormOp(4, 64, 0.1, 1e-5)
	benchOp(b, &bnGradOp{bn: op, wrtGamma: true}, benchX, benchX)
}

// gorgonia's Conv2d forward on the same shape, through a TapeMachine, for comparison.
func BenchmarkGorgoniaConv2dForward(b *testing.B) {
	g := G.NewGraph()
	rng := rand.New(rand.NewSource(1))
	x := G.NewTensor(g, tensor.Float32, 4, G.WithShape(benchX...), G.WithName("x"),
		G.WithValue(denseAs(tensor.Float32, benchX, randData(rng, benchX.TotalSize()))))
	w := G.NewTensor(g, tensor.Float32, 4, G.WithShape(benchW...), G.WithName("w"),
		G.WithValue(denseAs(tensor.Float32, benchW, randData(rng, benchW.TotalSize()))))
	if _, err := G.Conv2d(x, w, sh(3, 3), []int{1, 1}, []int{1, 1}, []int{1, 1}); err != nil {
		b.Fatal(err)
	}
	m := G.NewTapeMachine(g)
	defer m.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := m.RunAll(); err != nil {
			b.Fatal(err)
		}
		m.Reset()
	}
}

// ResNet-18's last stage on 32x32 images: one output pixel per image, so per-image GEMMs are GEMVs.
var (
	smallX = sh(64, 512, 1, 1)
	smallW = sh(512, 512, 3, 3)
	smallP = Square(1, 1).norm()
)

func BenchmarkSmallConvForward(b *testing.B) {
	benchOp(b, &convOp{kind: convForward, p: smallP}, smallX, smallW)
}
func BenchmarkSmallConvData(b *testing.B) {
	benchOp(b, &convOp{kind: convData, p: smallP, h: 1, w: 1}, smallW, smallX)
}
func BenchmarkSmallConvFilter(b *testing.B) {
	benchOp(b, &convOp{kind: convFilter, p: smallP, kh: 3, kw: 3}, smallX, smallX)
}
