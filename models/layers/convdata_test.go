package layers

import (
	"fmt"
	"math"
	"math/rand"
	"runtime"
	"testing"

	"github.com/gorgonia-ooc/outofcore/blas"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	G "gorgonia.org/gorgonia"
)

// wideCase is a data gradient: weight (o,c,k,k) onto a batch of n c x h x w images.
type wideCase struct {
	n, c, h, w, o, k int
	p                ConvParams
}

func (g wideCase) op() (*convOp, []tensor.Shape) {
	p := g.p.norm()
	xs, ws := sh(g.n, g.c, g.h, g.w), sh(g.o, g.c, g.k, g.k)
	ys, _ := (&convOp{kind: convForward, p: p}).outShape([]tensor.Shape{xs, ws})
	return &convOp{kind: convData, p: p, h: g.h, w: g.w}, []tensor.Shape{ws, ys}
}

// planWideFor sets up a float32 run of the case in a workspace of wsBytes and plans it.
func planWideFor(t *testing.T, g wideCase, wsBytes int64, workers int, weight []float64) (*convRun[float32], bool) {
	t.Helper()
	op, shapes := g.op()
	d, err := op.dims(shapes)
	require.NoError(t, err)
	w := denseAs(tensor.Float32, shapes[0], weight).Data().([]float32)
	dy := make([]float32, shapes[1].TotalSize())
	dx := make([]float32, g.n*g.c*g.h*g.w)
	r := &convRun[float32]{pw: new(blas.PackedA[float32])}
	require.NoError(t, r.setup(op, d, alignedNaNBytes(wsBytes), w, dy, nil, dx))
	require.NoError(t, r.pw.Pack(true, r.K, r.O, r.a, r.K))
	align := r.pw.RowAlign()
	return r, r.planWide(workers, align/gcd(r.KK, align))
}

// TestConvDataWidePlan: the data gradient takes the wide grid where it applies (stride 1, a
// grid at least 3/4 valid, enough pixels, regions that fit) in the whole and the least
// workspace, and its goroutines' regions stay within the workspace the op declares.
func TestConvDataWidePlan(t *testing.T) {
	cases := []struct {
		name string
		g    wideCase
		want [2]bool // in the whole and in the least workspace
	}{
		{"smallcnn block", wideCase{64, 16, 28, 28, 16, 3, Square(1, 1)}, [2]bool{true, true}},
		// Nine rows of colw per wide pixel: widening dy would cost more than the adds save.
		{"smallcnn conv1", wideCase{64, 1, 28, 28, 16, 3, Square(1, 1)}, [2]bool{false, false}},
		{"1x1 padded (chunks)", wideCase{2, 24, 9, 11, 4, 1, Square(1, 1)}, [2]bool{true, true}},
		{"56x56 3x3 (channel groups for L2)", wideCase{8, 64, 56, 56, 64, 3, Square(1, 1)}, [2]bool{true, true}},
		{"smallcnn conv2 (chunks)", wideCase{64, 16, 14, 14, 16, 3, Square(1, 1)}, [2]bool{true, true}},
		{"unpadded", wideCase{2, 6, 20, 20, 8, 3, Square(1, 0)}, [2]bool{true, true}},
		{"O over 256", wideCase{1, 16, 16, 16, 260, 3, Square(1, 1)}, [2]bool{true, true}},
		{"stride 2", wideCase{2, 3, 32, 32, 8, 3, Square(2, 1)}, [2]bool{false, false}},
		{"stride 2 across only", wideCase{1, 3, 30, 30, 2, 5, ConvParams{StrideH: 1, StrideW: 2, PadH: 2, PadW: 1}}, [2]bool{false, false}},
		{"grid under 3/4 valid", wideCase{2, 4, 4, 4, 8, 3, Square(1, 1)}, [2]bool{false, false}},
		{"1x1 unpadded on one image (no workspace)", wideCase{2, 13, 24, 24, 6, 1, Square(1, 0)}, [2]bool{false, false}},
		{"under 64 wide pixels", wideCase{2, 8, 6, 6, 8, 3, Square(1, 1)}, [2]bool{false, false}},
	}
	for _, c := range cases {
		op, shapes := c.g.op()
		full, least := op.wsBytes(tensor.Float32, shapes), op.MinWorkspaceBytes(tensor.Float32, shapes)
		weight := randData(rand.New(rand.NewSource(1)), shapes[0].TotalSize())
		for wi, n := range []int64{full, least} {
			for _, workers := range []int{1, 2, 3} {
				what := fmt.Sprintf("%s, workspace %d of %d bytes, %d goroutines", c.name, n, full, workers)
				r, got := planWideFor(t, c.g, n, workers, weight)
				require.Equal(t, c.want[wi], got, what)
				if !got {
					continue
				}
				g := r.wide
				require.LessOrEqual(t, int64(g.workers*g.region*4), min(n, full), what)
				require.True(t, g.workers >= 1 && g.workers <= workers, what)
				require.True(t, g.tq >= min(g.q, wideMinTile) && g.cg >= 1 && g.cg <= c.g.c, what)
			}
		}
	}
}

// TestConvDataWideNonFiniteWeights: a zero column of the wide dy gives +0 only through finite
// weights (Inf·0 is NaN, and the zero columns of an unpadded grid land on dx itself), so a
// weight that is not finite sends the call the old way and its bits stay the old ones.
func TestConvDataWideNonFiniteWeights(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	g := wideCase{2, 4, 12, 13, 5, 3, Square(1, 0)}
	op, shapes := g.op()
	for _, bad := range []float64{math.Inf(1), math.Inf(-1), math.NaN()} {
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			rng := rand.New(rand.NewSource(3))
			w := randData(rng, shapes[0].TotalSize())
			w[2*g.c*g.k*g.k+g.k*g.k] = bad // o=2, c=1, tap (0,0): column W-1 of channel 1 sees no valid tap (0,0)
			in := []G.Value{denseAs(dt, shapes[0], w), denseAs(dt, shapes[1], randData(rng, shapes[1].TotalSize()))}
			d, err := op.dims(shapes)
			require.NoError(t, err)
			os, _ := op.outShape(shapes)
			n := op.wsBytes(dt, shapes)
			want, got := newDense(dt, os), newDense(dt, os)
			if dt == tensor.Float32 {
				require.NoError(t, convExecOld[float32](op, d, want, alignedNaNBytes(n), in))
			} else {
				require.NoError(t, convExecOld[float64](op, d, want, alignedNaNBytes(n), in))
			}
			runtime.GOMAXPROCS(2)
			require.NoError(t, op.DoWorkspace(got, alignedNaNBytes(n), in...))
			requireSameBits(t, want, got, fmt.Sprintf("weight %v, %v", bad, dt))
		}
	}
	// The finite case of the same geometry does run on the wide grid.
	_, ok := planWideFor(t, g, op.wsBytes(tensor.Float32, shapes), 2, randData(rand.New(rand.NewSource(3)), shapes[0].TotalSize()))
	require.True(t, ok)
}

// BenchmarkConvDataWide times the data gradient on the wide grid ("wide") against the path it
// took before ("before", the same code with the wide grid off), side by side so they share the
// machine's load: smallcnn's layers (b64, 28x28; conv2 at 14x14), the block in the least
// workspace, ResNet-18's 3x3 stride-1 layer on 32x32 inputs (8x8 at layer1) and a 56x56 3x3.
func BenchmarkConvDataWide(b *testing.B) {
	layers := []struct {
		name      string
		w, y      tensor.Shape
		hw        int
		leastWork bool
	}{
		{"smallcnn-conv1", sh(16, 1, 3, 3), sh(64, 16, 28, 28), 28, false},
		{"smallcnn-block", sh(16, 16, 3, 3), sh(64, 16, 28, 28), 28, false},
		{"smallcnn-block-tiled", sh(16, 16, 3, 3), sh(64, 16, 28, 28), 28, true},
		{"smallcnn-conv2", sh(16, 16, 3, 3), sh(64, 16, 14, 14), 14, false},
		{"resnet18-layer1", sh(64, 64, 3, 3), sh(32, 64, 8, 8), 8, false},
		{"56x56-3x3", benchW, benchX, 56, false},
	}
	defer func(on bool) { convDataWide = on }(convDataWide)
	for _, l := range layers {
		op := &convOp{kind: convData, p: Square(1, 1).norm(), h: l.hw, w: l.hw}
		shapes := []tensor.Shape{l.w, l.y}
		for _, impl := range []string{"before", "wide"} {
			b.Run(l.name+"/"+impl, func(b *testing.B) {
				convDataWide = impl == "wide"
				rng := rand.New(rand.NewSource(1))
				in := []G.Value{denseAs(tensor.Float32, l.w, randData(rng, l.w.TotalSize())), denseAs(tensor.Float32, l.y, randData(rng, l.y.TotalSize()))}
				os, _ := op.outShape(shapes)
				out := newDense(tensor.Float32, os)
				n := op.wsBytes(tensor.Float32, shapes)
				if l.leastWork {
					n = op.MinWorkspaceBytes(tensor.Float32, shapes)
				}
				ws := alignedNaNBytes(n)
				d, _ := op.dims(shapes)
				b.ReportAllocs()
				cpu0 := processCPU()
				for b.Loop() {
					if err := convExec[float32](op, d, out, ws, in); err != nil {
						b.Fatal(err)
					}
				}
				// Under load wall time says little; CPU time is the work done, on all cores.
				b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}
