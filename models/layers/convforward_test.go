package layers

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/gorgonia-ooc/outofcore/blas"
	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestConvForwardWidePlan: where the forward runs on the wide grid (convforward.go) and how it
// cuts the work, and where it leaves the im2col path in place. The bits are
// TestConvExecSameBitsAsOld's business; this says which path those geometries take.
func TestConvForwardWidePlan(t *testing.T) {
	type want struct {
		workers, pieces int  // workers 0: the im2col path
		split           bool // items are pieces, else whole images
	}
	for _, c := range []struct {
		name    string
		x, w    tensor.Shape
		p       ConvParams
		least   bool // the least workspace, else the full one
		workers int
		want    want
	}{
		// smallcnn's block: 811 wide columns, 784 outputs, in two pieces of at most 512 (16x512
		// is wideStageElems), each goroutine taking whole images...
		{"block", sh(64, 16, 28, 28), sh(16, 16, 3, 3), Square(1, 1), false, 2, want{2, 2, false}},
		// ...and in the least workspace (144x256), after xp (16x30x29) pieces of 256 columns.
		{"block least", sh(64, 16, 28, 28), sh(16, 16, 3, 3), Square(1, 1), true, 2, want{2, 4, false}},
		// One input channel: copying 16 channels out of the staging costs more than an im2col
		// matrix of 9 rows (measured 5% slower).
		{"conv1", sh(64, 1, 28, 28), sh(16, 1, 3, 3), Square(1, 1), false, 2, want{}},
		// Three input channels (27 rows) for 16 outputs: the grid, in pieces (the whole
		// workspace, 27x784, is less than two goroutines' xp and 16x811 of staging).
		{"3 channels", sh(64, 3, 28, 28), sh(16, 3, 3, 3), Square(1, 1), false, 2, want{2, 2, false}},
		// 14x14 images, chunked two to a GEMM by the im2col path, run one by one on the grid.
		{"conv2", sh(64, 16, 14, 14), sh(16, 16, 3, 3), Square(1, 1), false, 2, want{2, 1, false}},
		// One image, two goroutines: pieces so that both have work (at least 4 items each).
		{"one image", sh(1, 16, 28, 28), sh(16, 16, 3, 3), Square(1, 1), false, 2, want{2, 7, true}},
		// Four images for two goroutines: halves, so that each has four items.
		{"unpadded", sh(4, 8, 20, 20), sh(8, 8, 3, 3), Square(1, 0), false, 2, want{2, 2, true}},
		{"dilated", sh(4, 8, 20, 20), sh(8, 8, 3, 3), ConvParams{PadH: 2, PadW: 2, DilationH: 2, DilationW: 2}, false, 2, want{2, 2, true}},
		// ResNet-18's layer1 on 32x32: 8x8 images, 71 wide columns for 64 outputs at O = 64...
		{"resnet18 layer1", sh(32, 64, 8, 8), sh(64, 64, 3, 3), Square(1, 1), false, 2, want{2, 1, false}},
		// ...and at O = 256 (ResNet-50's on 64x64).
		{"8x8 O=256", sh(32, 256, 8, 8), sh(256, 256, 3, 3), Square(1, 1), false, 2, want{2, 1, false}},
		// 4x4 at O = 512 (ResNet-18's layer4 on 128x128): 19 columns for 16 outputs, and the
		// dropped ones cost more than the im2col.
		{"4x4 O=512", sh(32, 512, 4, 4), sh(512, 512, 3, 3), Square(1, 1), false, 2, want{}},
		{"stride 2", sh(32, 3, 32, 32), sh(64, 3, 7, 7), Square(2, 3), false, 2, want{}},
		{"stride 1x2", sh(2, 3, 30, 30), sh(2, 3, 5, 5), ConvParams{StrideH: 1, StrideW: 2, PadH: 2, PadW: 1}, false, 2, want{}},
		// A 1x1 unpadded kernel on whole images is its own column matrix already...
		{"direct", sh(2, 13, 24, 24), sh(6, 13, 1, 1), Square(1, 0), false, 2, want{}},
		// ...and on tiny ones (2x2) the im2col path's chunks make one wide GEMM of 64 images.
		{"tiny", sh(64, 32, 2, 2), sh(32, 32, 1, 1), Square(1, 0), false, 2, want{}},
		// 50x50 with two channels: xp (2x52x52) alone is more than the least workspace (18x256).
		{"xp over the least", sh(1, 2, 50, 50), sh(3, 2, 3, 3), Square(1, 1), true, 2, want{}},
		{"xp within the full", sh(1, 2, 50, 50), sh(3, 2, 3, 3), Square(1, 1), false, 2, want{2, 8, true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			op := &convOp{kind: convForward, p: c.p.norm()}
			shapes := []tensor.Shape{c.x, c.w}
			d, err := op.dims(shapes)
			require.NoError(t, err)
			n := op.wsBytes(tensor.Float32, shapes)
			if c.least {
				n = op.MinWorkspaceBytes(tensor.Float32, shapes)
			}
			r := &convRun[float32]{}
			require.NoError(t, r.setup(op, d, alignedNaNBytes(n), nil, nil, nil, nil))
			workers := r.planForwardWide(c.workers, int(n/4))
			got := want{workers: workers}
			if workers > 0 {
				got.pieces, got.split = r.fw.pieces, r.fw.split
				// Each goroutine's region within the workspace, its staging within the region.
				require.LessOrEqual(t, int64(workers*r.fw.region*4), n)
				require.LessOrEqual(t, r.fw.xpLen+d.O*r.fw.width, r.fw.region)
				require.Zero(t, r.fw.width%32*(r.fw.pieces-1), "a piece but the last is whole slivers")
			}
			require.Equal(t, c.want, got)
		})
	}
}

// TestConvForwardWideNoAllocs: once warm, a forward on the wide grid allocates nothing (the
// offset table and the goroutines' image slots are kept with the cached convRun). It counts the
// wide grid's part only (convExec's unpacking of its operands allocates on either path, and so
// does PackedA.Pack), on one goroutine (workpool starts a helper when none is idle, which under
// load happens).
func TestConvForwardWideNoAllocs(t *testing.T) {
	wideNoAllocs[float32](t, tensor.Float32)
	wideNoAllocs[float64](t, tensor.Float64)
}

func wideNoAllocs[T blas.Float](t *testing.T, dt tensor.Dtype) {
	op := &convOp{kind: convForward, p: Square(1, 1).norm(), bias: true}
	shapes := []tensor.Shape{sh(8, 16, 28, 28), sh(16, 16, 3, 3), sh(16)}
	d, err := op.dims(shapes)
	require.NoError(t, err)
	rng := rand.New(rand.NewSource(3))
	x, w, bias := make([]T, prod(8, 16, 28, 28)), make([]T, prod(16, 16, 3, 3)), make([]T, 16)
	for _, s := range [][]T{x, w, bias} {
		for i := range s {
			s[i] = T(rng.NormFloat64())
		}
	}
	y := make([]T, prod(8, 16, 28, 28))
	ws := alignedNaNBytes(op.wsBytes(dt, shapes))
	r := getConvRun[T]()
	require.NoError(t, r.setup(op, d, ws, x, w, bias, y))
	require.NoError(t, r.pw.Pack(false, r.O, r.K, w, r.K))
	putConvRun(r) // the cache keeps the packed weights, which the runs below use
	wide := false
	run := func() {
		r := getConvRun[T]()
		defer putConvRun(r)
		require.NoError(t, r.setup(op, d, ws, x, w, bias, y))
		wide = r.forwardWide(1, ws)
		require.NoError(t, r.err)
	}
	run()
	allocs := testing.AllocsPerRun(5, run)
	require.True(t, wide, "the wide grid ran")
	require.Zero(t, allocs, "%v: allocations per call once warm", dt)
}

// TestConvForwardWideErrors: a workspace that is misaligned or short is refused with an error
// saying so, on a geometry the wide grid would take (the workspace is checked before either
// path is chosen).
func TestConvForwardWideErrors(t *testing.T) {
	op := &convOp{kind: convForward, p: Square(1, 1).norm()}
	shapes := []tensor.Shape{sh(2, 4, 12, 12), sh(4, 4, 3, 3)}
	rng := rand.New(rand.NewSource(4))
	var in []G.Value
	for _, s := range shapes {
		in = append(in, denseAs(tensor.Float32, s, randData(rng, s.TotalSize())))
	}
	os, err := op.outShape(shapes)
	require.NoError(t, err)
	n := op.wsBytes(tensor.Float32, shapes)
	for _, c := range []struct {
		name string
		ws   []byte
		msg  string
	}{
		{"misaligned", alignedNaNBytes(n + 4)[1 : n+1], "not aligned"},
		{"short", alignedNaNBytes(op.MinWorkspaceBytes(tensor.Float32, shapes) - 4), "too small"},
	} {
		err := op.exec(tensor.Float32, newDense(tensor.Float32, os), c.ws, in)
		require.ErrorContains(t, err, c.msg, fmt.Sprintf("%s workspace", c.name))
	}
}

// BenchmarkConvForwardWide times the forward with the wide grid off (im2col) and on, alternating
// in blocks of a few calls so that both see the same load, and reports each side's wall and
// process CPU time per call and the ratio of the CPU times. smallcnn's conv1 (one input channel)
// takes the im2col path either way: its ratio is the measurement's noise.
func BenchmarkConvForwardWide(b *testing.B) {
	for _, l := range []struct {
		name string
		x, w tensor.Shape
		p    ConvParams
	}{
		{"smallcnn-conv1", sh(64, 1, 28, 28), sh(16, 1, 3, 3), Square(1, 1)},
		{"smallcnn-block", sh(64, 16, 28, 28), sh(16, 16, 3, 3), Square(1, 1)},
		{"smallcnn-conv2", sh(64, 16, 14, 14), sh(16, 16, 3, 3), Square(1, 1)},
		{"resnet18-layer1", sh(32, 64, 8, 8), sh(64, 64, 3, 3), Square(1, 1)},
		{"56x56-3x3", benchX, benchW, Square(1, 1)},
	} {
		for _, least := range []bool{false, true} {
			name := l.name
			if least {
				name += "-least"
			}
			b.Run(name, func(b *testing.B) {
				op := &convOp{kind: convForward, p: l.p.norm()}
				shapes := []tensor.Shape{l.x, l.w}
				rng := rand.New(rand.NewSource(1))
				var in []G.Value
				for _, s := range shapes {
					in = append(in, denseAs(tensor.Float32, s, randData(rng, s.TotalSize())))
				}
				os, err := op.outShape(shapes)
				require.NoError(b, err)
				out := newDense(tensor.Float32, os)
				n := op.wsBytes(tensor.Float32, shapes)
				if least {
					n = op.MinWorkspaceBytes(tensor.Float32, shapes)
				}
				ws := alignedNaNBytes(n)
				d, err := op.dims(shapes)
				require.NoError(b, err)
				// A helper thread's CPU time reaches the process's account late (at its next
				// switch or tick): blocks of calls, not single ones, keep it on its own side.
				const block = 5
				var cpu, wall [2]int64 // im2col, wide
				for b.Loop() {
					for side := range cpu {
						noWideForward = side == 0
						c0, t0 := processCPU(), time.Now()
						for i := 0; i < block; i++ {
							if err := convExec[float32](op, d, out, ws, in); err != nil {
								b.Fatal(err)
							}
						}
						cpu[side] += processCPU() - c0
						wall[side] += int64(time.Since(t0))
						noWideForward = false
					}
				}
				calls := float64(block * b.N)
				b.ReportMetric(float64(cpu[0])/calls/1e6, "im2col-cpu-ms")
				b.ReportMetric(float64(cpu[1])/calls/1e6, "wide-cpu-ms")
				b.ReportMetric(float64(wall[0])/calls/1e6, "im2col-wall-ms")
				b.ReportMetric(float64(wall[1])/calls/1e6, "wide-wall-ms")
				b.ReportMetric(float64(cpu[0])/float64(max(cpu[1], 1)), "cpu-im2col/wide")
			})
		}
	}
}
