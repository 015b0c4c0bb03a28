package layers

import (
	"fmt"
	"math"
	"math/rand"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

type zoo struct {
	b      *Builder
	loss   *G.Node
	inputs G.Nodes // x, class one-hot, pixel one-hot
}

// buildZoo is a small network that uses every op and builder of the package once, with both losses.
func buildZoo(t testing.TB, dt tensor.Dtype, seed int64) zoo {
	t.Helper()
	g := G.NewGraph()
	b, err := NewBuilder(g, dt, rand.New(rand.NewSource(seed)))
	require.NoError(t, err)
	must := func(n *G.Node, err error) *G.Node {
		t.Helper()
		require.NoError(t, err)
		return n
	}
	const N = 2
	x := must(b.Input("x", N, 3, 12, 12))
	cls := must(b.Input("classes", N, 5))
	pix := must(b.Input("pixels", N, 3, 6, 6))

	h := must(b.ConvBN(x, 8, 3, 1, 1, true, "c1"))
	p1 := must(MaxPool2D(h, 3, 2, 1)) // 6x6
	h = must(b.ConvWith(p1, 8, 3, 3, ConvParams{PadH: 2, PadW: 2, DilationH: 2, DilationW: 2}, true, "c2"))
	h = must(b.BN(h, "bn2"))
	h = must(ReLU(h))
	h = must(AvgPool2D(h, 2, 2, 0))              // 3x3
	u := must(b.ConvTranspose(h, 4, 2, 2, "up")) // 6x6
	h = must(Concat(p1, u))
	h = must(b.Conv(h, 6, 1, 1, 0, "c3"))
	h = must(ReLU(h))
	seg := must(b.ConvBias(h, 3, 3, 1, 1, "seg"))
	h = must(b.ConvBias(h, 6, 1, 2, 0, "c4")) // 3x3, strided 1x1
	h = must(GlobalAvgPool2D(h))
	logits := must(b.Linear(h, 5, "fc"))
	l1 := must(SoftmaxCrossEntropy(logits, cls))
	l2 := must(PixelSoftmaxCrossEntropy(seg, pix))
	loss := must(G.Add(l1, l2))
	_, err = G.Grad(loss, b.Learnables()...)
	require.NoError(t, err)

	rng := rand.New(rand.NewSource(seed + 1))
	require.NoError(t, G.Let(x, denseAs(dt, x.Shape(), randData(rng, x.Shape().TotalSize()))))
	require.NoError(t, G.Let(cls, denseAs(dt, cls.Shape(), oneHot(rng, N, 5, 1))))
	require.NoError(t, G.Let(pix, denseAs(dt, pix.Shape(), pixelOneHot(rng, N, 3, 36))))
	return zoo{b: b, loss: loss, inputs: G.Nodes{x, cls, pix}}
}

func oneHot(rng *rand.Rand, n, k, plane int) []float64 {
	d := make([]float64, n*k*plane)
	for i := 0; i < n; i++ {
		for p := 0; p < plane; p++ {
			d[(i*k+rng.Intn(k))*plane+p] = 1
		}
	}
	return d
}

func pixelOneHot(rng *rand.Rand, n, k, plane int) []float64 { return oneHot(rng, n, k, plane) }

func scalarOf(t testing.TB, n *G.Node) float64 { return f64s(t, n.Value())[0] }

func TestTapeMachineRunsZooAndIsDeterministic(t *testing.T) {
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		t.Run(dt.String(), func(t *testing.T) {
			run := func() (float64, [][]float64, zoo) {
				z := buildZoo(t, dt, 7)
				ps := z.b.Learnables()
				m := G.NewTapeMachine(z.b.Graph(), G.BindDualValues(ps...))
				defer m.Close()
				require.NoError(t, m.RunAll())
				var grads [][]float64
				for _, p := range ps {
					gv, err := p.Grad()
					require.NoError(t, err)
					grads = append(grads, f64s(t, gv))
				}
				return scalarOf(t, z.loss), grads, z
			}
			l1, g1, z := run()
			l2, g2, _ := run()
			require.False(t, math.IsNaN(l1) || math.IsInf(l1, 0))
			require.Equal(t, math.Float64bits(l1), math.Float64bits(l2), "loss differs between runs")
			for i := range g1 {
				require.Equal(t, g1[i], g2[i], "gradient of %v differs between runs", z.b.Learnables()[i])
				require.Greater(t, maxAbs(g1[i]), 0.0, "zero gradient for %v", z.b.Learnables()[i])
			}
			require.Len(t, z.b.BatchNorms(), 2)
		})
	}
}

func TestZooTrains(t *testing.T) {
	z := buildZoo(t, tensor.Float32, 3)
	ps := z.b.Learnables()
	m := G.NewTapeMachine(z.b.Graph(), G.BindDualValues(ps...))
	defer m.Close()
	solver := G.NewVanillaSolver(G.WithLearnRate(0.1))
	var losses []float64
	for i := 0; i < 6; i++ {
		require.NoError(t, m.RunAll())
		losses = append(losses, scalarOf(t, z.loss))
		require.NoError(t, solver.Step(G.NodesToValueGrads(ps)))
		m.Reset()
	}
	t.Logf("zoo losses: %.4f", losses)
	require.Less(t, losses[len(losses)-1], losses[0])
}

// kernelNodes collects the nodes run by this package's ops.
func kernelNodes(g *G.ExprGraph) G.Nodes {
	var r G.Nodes
	for it := g.Nodes(); it.Next(); {
		n := it.Node().(*G.Node)
		if _, ok := n.Op().(kernel); ok {
			r = append(r, n)
		}
	}
	return r
}

func poisoned(dt tensor.Dtype, s tensor.Shape) *tensor.Dense {
	d := newDense(dt, s)
	switch b := d.Data().(type) {
	case []float32:
		for i := range b {
			b[i] = float32(math.NaN())
		}
	case []float64:
		for i := range b {
			b[i] = math.NaN()
		}
	}
	return d
}

// alignedNaNBytes returns n bytes at a 64-byte boundary, every one 0xFF (a NaN pattern).
func alignedNaNBytes(n int64) []byte {
	buf := make([]byte, n+64)
	off := (64 - int(uintptr(unsafe.Pointer(&buf[0]))%64)) % 64
	ws := buf[off : off+int(n)]
	for i := range ws {
		ws[i] = 0xFF
	}
	return ws
}

func requireSameBits(t *testing.T, a, b G.Value, what string) {
	t.Helper()
	require.True(t, a.Shape().Eq(b.Shape()), "%s: shapes %v and %v", what, a.Shape(), b.Shape())
	switch x := a.Data().(type) {
	case []float32:
		y := b.Data().([]float32)
		for i := range x {
			if math.Float32bits(x[i]) != math.Float32bits(y[i]) {
				t.Fatalf("%s: element %d: %v vs %v", what, i, x[i], y[i])
			}
		}
	case []float64:
		y := b.Data().([]float64)
		for i := range x {
			if math.Float64bits(x[i]) != math.Float64bits(y[i]) {
				t.Fatalf("%s: element %d: %v vs %v", what, i, x[i], y[i])
			}
		}
	}
}

// Every op of the package, forward and backward as gorgonia.Grad emits them: Do, UsePreallocDo and
// DoWorkspace (with exactly WorkspaceBytes of NaN-filled, aligned scratch) agree bit for bit.
func TestDoPreallocWorkspaceBitIdentical(t *testing.T) {
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		z := buildZoo(t, dt, 11)
		g := z.b.Graph()
		nodes := kernelNodes(g)
		seen := map[string]bool{}
		rng := rand.New(rand.NewSource(5))
		for _, n := range nodes {
			op := n.Op()
			seen[fmt.Sprintf("%T", op)] = true
			t.Run(fmt.Sprintf("%v/%v#%d", dt, op, n.ID()), func(t *testing.T) {
				var in []G.Value
				var shapes []tensor.Shape
				for _, c := range children(g, n) {
					in = append(in, denseAs(dt, c.Shape(), randData(rng, c.Shape().TotalSize())))
					shapes = append(shapes, c.Shape().Clone())
				}
				checkRunPaths(t, n, dt, in, shapes)
			})
		}
		for _, typ := range []string{"*layers.convOp", "*layers.BatchNormOp", "*layers.bnGradOp", "*layers.channelSumOp",
			"*layers.maxPoolOp", "*layers.maxPoolGradOp", "*layers.avgPoolOp", "*layers.avgPoolGradOp",
			"*layers.globalAvgPoolOp", "*layers.globalAvgPoolGradOp", "*layers.reluOp", "*layers.reluGradOp"} {
			require.True(t, seen[typ], "zoo graph has no %s", typ)
		}
	}
}

// checkRunPaths runs node n's op on in: Do twice, UsePreallocDo into poisoned memory and
// DoWorkspace into NaN bytes the caller owns with exactly the declared workspace agree bit for bit
// (a scalar result: Do and UsePreallocDo), a short workspace is refused, and FLOPs are positive.
func checkRunPaths(t *testing.T, n *G.Node, dt tensor.Dtype, in []G.Value, shapes []tensor.Shape) {
	t.Helper()
	op := n.Op()
	if n.IsScalar() {
		ref, err := op.Do(in...)
		require.NoError(t, err)
		pre := newScalar(dt)
		_, err = op.(G.UsePreallocDoer).UsePreallocDo(pre, in...)
		require.NoError(t, err)
		require.Equal(t, ref.Data(), pre.Data())
		return
	}
	ref, err := op.Do(in...)
	require.NoError(t, err)
	require.True(t, ref.Shape().Eq(n.Shape()), "Do gives %v, node says %v", ref.Shape(), n.Shape())
	again, err := op.Do(in...)
	require.NoError(t, err)
	requireSameBits(t, ref, again, "Do twice")

	pd, ok := op.(G.UsePreallocDoer)
	require.True(t, ok, "%T is not a UsePreallocDoer", op)
	pre := poisoned(dt, n.Shape())
	got, err := pd.UsePreallocDo(pre, in...)
	require.NoError(t, err)
	require.Same(t, pre, got.(*tensor.Dense))
	requireSameBits(t, ref, pre, "UsePreallocDo")

	wo, ok := op.(WorkspaceOp)
	require.True(t, ok, "%T is not a WorkspaceOp", op)
	need := wo.WorkspaceBytes(dt, shapes)
	// As the VM does: the output lives in memory the VM owns, here NaN bytes.
	mem := alignedNaNBytes(int64(n.Shape().TotalSize()) * int64(dt.Size()))
	out := tensor.New(tensor.Of(dt), tensor.WithShape(n.Shape().Clone()...),
		tensor.FromMemory(uintptr(unsafe.Pointer(&mem[0])), uintptr(len(mem))))
	require.NoError(t, wo.DoWorkspace(out, alignedNaNBytes(need), in...))
	requireSameBits(t, ref, out, "DoWorkspace")
	runtime.KeepAlive(mem)
	if need > 0 {
		require.Error(t, wo.DoWorkspace(out, alignedNaNBytes(need-1), in...), "short workspace accepted")
	}

	f, ok := op.(FLOPser)
	require.True(t, ok, "%T has no FLOPs", op)
	require.Greater(t, f.FLOPs(shapes), int64(0))
}

func TestConvWorkspaceIsPerImage(t *testing.T) {
	op := &convOp{kind: convForward, p: Square(1, 1).norm()}
	in := []tensor.Shape{sh(1440, 64, 56, 56), sh(64, 64, 3, 3)}
	// One image's 3x3 im2col: 64*9 rows x 56*56 columns of float32.
	require.Equal(t, int64(64*9*56*56*4), op.WorkspaceBytes(tensor.Float32, in))
	require.Equal(t, int64(2*1440*64*64*9*56*56), op.FLOPs(in))
	// A 1x1 stride-1 kernel reads the image in place.
	direct := &convOp{kind: convForward, p: Square(1, 0).norm()}
	require.Equal(t, int64(0), direct.WorkspaceBytes(tensor.Float32, []tensor.Shape{sh(8, 256, 56, 56), sh(64, 256, 1, 1)}))
	// 1x1-pixel images go 256 to a GEMM: im2col of 256 images plus a 512-row staging matrix.
	small := []tensor.Shape{sh(1440, 512, 1, 1), sh(512, 512, 3, 3)}
	require.Equal(t, int64((512*9*256+512*256)*4), op.WorkspaceBytes(tensor.Float32, small))
	data := &convOp{kind: convData, p: Square(1, 1).norm(), h: 56, w: 56}
	require.Equal(t, int64(64*9*56*56*8), data.WorkspaceBytes(tensor.Float64, []tensor.Shape{sh(64, 64, 3, 3), sh(1440, 64, 56, 56)}))
}

func TestSoftmaxCrossEntropyValuesAndGradients(t *testing.T) {
	rng := rand.New(rand.NewSource(9))
	for _, tc := range []struct {
		name  string
		shape tensor.Shape
		build func(l, t *G.Node) (*G.Node, error)
	}{
		{"classes", sh(3, 4), SoftmaxCrossEntropy},
		{"pixels", sh(2, 3, 2, 3), PixelSoftmaxCrossEntropy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			N, K := tc.shape[0], tc.shape[1]
			plane := tc.shape.TotalSize() / (N * K)
			logits := randData(rng, tc.shape.TotalSize())
			target := oneHot(rng, N, K, plane)
			// Reference: -mean over (n, pixel) of log softmax at the target class.
			want := 0.0
			for n := 0; n < N; n++ {
				for p := 0; p < plane; p++ {
					mx, s := math.Inf(-1), 0.0
					for k := 0; k < K; k++ {
						mx = math.Max(mx, logits[(n*K+k)*plane+p])
					}
					for k := 0; k < K; k++ {
						s += math.Exp(logits[(n*K+k)*plane+p] - mx)
					}
					for k := 0; k < K; k++ {
						if target[(n*K+k)*plane+p] == 1 {
							want -= logits[(n*K+k)*plane+p] - mx - math.Log(s)
						}
					}
				}
			}
			want /= float64(N * plane)

			g := G.NewGraph()
			ns := inputNodes(g, tensor.Float64, []tensor.Shape{tc.shape, tc.shape}, [][]float64{logits, target})
			loss, err := tc.build(ns[0], ns[1])
			require.NoError(t, err)
			require.True(t, loss.Shape().IsScalar(), "loss shape %v", loss.Shape())
			gs, err := G.Grad(loss, ns[0])
			require.NoError(t, err)
			var gv G.Value
			G.Read(gs[0], &gv)
			m := G.NewTapeMachine(g)
			defer m.Close()
			require.NoError(t, m.RunAll())
			require.InDelta(t, want, scalarOf(t, loss), 1e-12)
			grad := f64s(t, gv)
			// Analytic: (softmax - target) / (N*plane).
			for n := 0; n < N; n++ {
				for p := 0; p < plane; p++ {
					mx, s := math.Inf(-1), 0.0
					for k := 0; k < K; k++ {
						mx = math.Max(mx, logits[(n*K+k)*plane+p])
					}
					for k := 0; k < K; k++ {
						s += math.Exp(logits[(n*K+k)*plane+p] - mx)
					}
					for k := 0; k < K; k++ {
						i := (n*K+k)*plane + p
						exp := (math.Exp(logits[i]-mx)/s - target[i]) / float64(N*plane)
						require.InDelta(t, exp, grad[i], 1e-12, "logit %d", i)
					}
				}
			}
		})
	}
}

func TestBatchNormRunningStatistics(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	xs := sh(4, 2, 3, 3)
	x := randData(rng, xs.TotalSize())
	g := G.NewGraph()
	ns := inputNodes(g, tensor.Float64, []tensor.Shape{xs, sh(2), sh(2)}, [][]float64{x, {1, 1}, {0, 0}})
	y, op, err := BatchNorm(ns[0], ns[1], ns[2], 0.1, 1e-5)
	require.NoError(t, err)
	require.Same(t, op, y.Op())
	m, v := op.RunningStats()
	require.Equal(t, []float64{0, 0}, m)
	require.Equal(t, []float64{1, 1}, v)

	mach := G.NewTapeMachine(g) // calls SetTraining(true): must not reset anything
	defer mach.Close()
	require.True(t, op.Training())
	require.NoError(t, mach.RunAll())
	mach.Reset()
	require.NoError(t, mach.RunAll())
	// Two forwards: running = 0.9*(0.9*r0 + 0.1*b) + 0.1*b with the unbiased batch variance.
	gotM, gotV := op.RunningStats()
	cnt := float64(4 * 9)
	for c := 0; c < 2; c++ {
		bm, bv := 0.0, 0.0
		for n := 0; n < 4; n++ {
			for i := 0; i < 9; i++ {
				bm += x[(n*2+c)*9+i]
			}
		}
		bm /= cnt
		for n := 0; n < 4; n++ {
			for i := 0; i < 9; i++ {
				d := x[(n*2+c)*9+i] - bm
				bv += d * d
			}
		}
		bv /= cnt - 1
		require.InDelta(t, 0.9*(0.1*bm)+0.1*bm, gotM[c], 1e-12)
		require.InDelta(t, 0.9*(0.9+0.1*bv)+0.1*bv, gotV[c], 1e-12)
	}

	// Inference mode normalises with the running statistics and leaves them alone.
	op.SetTraining(false)
	out, err := op.Do(denseAs(tensor.Float64, xs, x), denseAs(tensor.Float64, sh(2), []float64{1, 1}), denseAs(tensor.Float64, sh(2), []float64{0, 0}))
	require.NoError(t, err)
	want := refBN(nd{xs, x}, []float64{1, 1}, []float64{0, 0}, 1e-5, gotM, gotV)
	require.LessOrEqual(t, maxAbsDiff(f64s(t, out), want.data), 1e-12)
	m2, v2 := op.RunningStats()
	require.Equal(t, gotM, m2)
	require.Equal(t, gotV, v2)
}

func TestErrorsNotPanics(t *testing.T) {
	g := G.NewGraph()
	x := G.NewTensor(g, tensor.Float64, 4, G.WithShape(2, 3, 8, 8), G.WithName("x"))
	w := G.NewTensor(g, tensor.Float64, 4, G.WithShape(4, 2, 3, 3), G.WithName("w"))
	_, err := Conv2D(x, w, nil, Square(1, 1))
	require.Error(t, err, "channel mismatch")
	_, err = Conv2D(x, w, nil, ConvParams{StrideH: -1})
	require.Error(t, err)
	_, err = MaxPool2D(x, 3, 2, 2)
	require.Error(t, err, "padding above half the kernel")
	_, err = MaxPool2D(x, 9, 1, 0)
	require.Error(t, err, "window larger than image")
	wt := G.NewTensor(g, tensor.Float64, 4, G.WithShape(3, 2, 2, 2), G.WithName("wt"))
	_, err = ConvTranspose2D(x, wt, nil, ConvParams{StrideH: 2, StrideW: 2, OutPadH: 2})
	require.Error(t, err, "output padding >= stride")
	gm := G.NewTensor(g, tensor.Float64, 1, G.WithShape(4), G.WithName("gm"))
	_, _, err = BatchNorm(x, gm, gm, 0.1, 1e-5)
	require.Error(t, err, "gamma of the wrong size")
	_, err = SoftmaxCrossEntropy(x, x)
	require.Error(t, err)

	b, err := NewBuilder(g, tensor.Float64, rand.New(rand.NewSource(1)))
	require.NoError(t, err)
	_, err = b.Conv(x, 4, 3, 1, 1, "conv")
	require.NoError(t, err)
	_, err = b.Conv(x, 4, 3, 1, 1, "conv")
	require.Error(t, err, "duplicate name")
	_, err = NewBuilder(g, tensor.Int, rand.New(rand.NewSource(1)))
	require.Error(t, err)

	// Run-time shape errors come back as errors.
	op := &maxPoolOp{g: poolGeom{2, 2, 2, 2, 0, 0}}
	_, err = op.UsePreallocDo(newDense(tensor.Float64, sh(1, 1, 3, 3)), newDense(tensor.Float64, sh(1, 1, 4, 4)))
	require.Error(t, err)
	_, err = op.Do(newDense(tensor.Float64, sh(4, 4)))
	require.Error(t, err)
	_, err = op.Do(newDense(tensor.Float64, sh(1, 1, 4, 4)), newDense(tensor.Float64, sh(1, 1, 4, 4)))
	require.Error(t, err)
}

// A ResNet-50 at batch 1440 and 224x224 builds, with its backward, allocating its weights and
// nothing activation-sized (one activation of its stem is 4.6 GB).
func TestBuildResNet50AtPaperScale(t *testing.T) {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()

	g := G.NewGraph()
	b, err := NewBuilder(g, tensor.Float32, rand.New(rand.NewSource(1)))
	require.NoError(t, err)
	must := func(n *G.Node, err error) *G.Node {
		t.Helper()
		require.NoError(t, err)
		return n
	}
	x := must(b.Input("x", 1440, 3, 224, 224))
	labels := must(b.Input("labels", 1440, 1000))
	h := must(b.ConvBN(x, 64, 7, 2, 3, true, "conv1"))
	h = must(MaxPool2D(h, 3, 2, 1))
	in := 64
	for stage, blocks := range []int{3, 4, 6, 3} {
		width := 64 << stage
		for i := 0; i < blocks; i++ {
			stride := 1
			if i == 0 && stage > 0 {
				stride = 2
			}
			name := fmt.Sprintf("layer%d.%d", stage+1, i)
			y := must(b.ConvBN(h, width, 1, 1, 0, true, name+".conv1"))
			y = must(b.ConvBN(y, width, 3, stride, 1, true, name+".conv2"))
			y = must(b.ConvBN(y, 4*width, 1, 1, 0, false, name+".conv3"))
			sc := h
			if i == 0 {
				sc = must(b.ConvBN(h, 4*width, 1, stride, 0, false, name+".downsample"))
			}
			h = must(ReLU(must(G.Add(y, sc))))
			in = 4 * width
		}
	}
	require.Equal(t, 2048, in)
	h = must(GlobalAvgPool2D(h))
	logits := must(b.Linear(h, 1000, "fc"))
	loss := must(SoftmaxCrossEntropy(logits, labels))
	_, err = G.Grad(loss, b.Learnables()...)
	require.NoError(t, err)

	runtime.GC()
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	weights := 4 * b.NumParams()
	t.Logf("ResNet-50 batch 1440: %d params, heap grew %.1f MiB (weights %.1f MiB), built in %v",
		b.NumParams(), float64(grown)/(1<<20), float64(weights)/(1<<20), time.Since(start))
	require.Equal(t, int64(25_557_032), b.NumParams(), "torchvision's resnet50 parameter count")
	require.Less(t, grown, weights+64<<20)
	runtime.KeepAlive(g)
}

// Shapes big enough that im2col, col2im, the GEMMs, BN and the pools take their parallel paths:
// results equal the float64 kernels to float32 precision and do not change with GOMAXPROCS.
func TestParallelPathsDeterministic(t *testing.T) {
	bn, err := NewBatchNormOp(4, 16, 0.1, 1e-5)
	require.NoError(t, err)
	p := Square(1, 1).norm()
	x, w, y := sh(4, 16, 40, 40), sh(24, 16, 3, 3), sh(4, 24, 40, 40)
	cases := []struct {
		op     kernel
		shapes []tensor.Shape
	}{
		{&convOp{kind: convForward, p: p}, []tensor.Shape{x, w}},
		{&convOp{kind: convData, p: p, h: 40, w: 40}, []tensor.Shape{w, y}},
		{&convOp{kind: convFilter, p: p, kh: 3, kw: 3}, []tensor.Shape{x, y}},
		{&convOp{kind: convForward, p: Square(2, 0).norm()}, []tensor.Shape{x, sh(24, 16, 1, 1)}},
		// 16-pixel images, 16 to a GEMM: chunks of 16, 16 and 8.
		{&convOp{kind: convForward, p: p}, []tensor.Shape{sh(40, 32, 4, 4), sh(256, 32, 3, 3)}},
		{&convOp{kind: convData, p: p, h: 4, w: 4}, []tensor.Shape{sh(256, 32, 3, 3), sh(40, 256, 4, 4)}},
		{&convOp{kind: convFilter, p: p, kh: 3, kw: 3}, []tensor.Shape{sh(40, 32, 4, 4), sh(40, 256, 4, 4)}},
		{bn, []tensor.Shape{x, sh(16), sh(16)}},
		{&bnGradOp{bn: bn}, []tensor.Shape{x, sh(16), x}},
		{&bnGradOp{bn: bn, wrtGamma: true}, []tensor.Shape{x, x}},
		{&channelSumOp{dims: 4}, []tensor.Shape{x}},
		{&maxPoolOp{g: poolGeom{3, 3, 2, 2, 1, 1}}, []tensor.Shape{x}},
		{&maxPoolGradOp{g: poolGeom{3, 3, 2, 2, 1, 1}}, []tensor.Shape{x, sh(4, 16, 20, 20)}},
		{&avgPoolOp{g: poolGeom{2, 2, 2, 2, 0, 0}}, []tensor.Shape{x}},
		{&avgPoolGradOp{g: poolGeom{2, 2, 2, 2, 0, 0}, h: 40, w: 40}, []tensor.Shape{sh(4, 16, 20, 20)}},
		{&globalAvgPoolOp{}, []tensor.Shape{x}},
		{&globalAvgPoolGradOp{h: 40, w: 40}, []tensor.Shape{sh(4, 16)}},
		{&reluOp{}, []tensor.Shape{x}},
		{&reluGradOp{}, []tensor.Shape{x, x}},
	}
	rng := rand.New(rand.NewSource(8))
	for _, c := range cases {
		t.Run(c.op.String(), func(t *testing.T) {
			var vals [][]float64
			for _, s := range c.shapes {
				vals = append(vals, randData(rng, s.TotalSize()))
			}
			run := func(dt tensor.Dtype) G.Value {
				var in []G.Value
				for i, s := range c.shapes {
					in = append(in, denseAs(dt, s, vals[i]))
				}
				v, err := c.op.Do(in...)
				require.NoError(t, err)
				return v
			}
			r64 := run(tensor.Float64)
			r32 := run(tensor.Float32)
			want := f64s(t, r64)
			require.LessOrEqual(t, maxAbsDiff(f64s(t, r32), want), 1e-4*(1+maxAbs(want)))
			prev := runtime.GOMAXPROCS(1)
			serial := run(tensor.Float32)
			runtime.GOMAXPROCS(prev)
			requireSameBits(t, r32, serial, "GOMAXPROCS=1 vs default")
		})
	}
}

// With ties in a window both pools route the gradient to the first maximum in row-major order.
func TestMaxPoolTiesMatchGorgonia(t *testing.T) {
	xs := sh(2, 3, 7, 7)
	rng := rand.New(rand.NewSource(3))
	v := make([]float64, xs.TotalSize())
	for i := range v {
		v[i] = float64(rng.Intn(3)) // many equal maxima per 3x3 window
	}
	r := randData(rng, sh(2, 3, 4, 4).TotalSize())
	shapes := []tensor.Shape{xs}
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		yo, gO := runTape(t, dt, shapes, [][]float64{v}, r, func(ns G.Nodes) (*G.Node, error) { return MaxPool2D(ns[0], 3, 2, 1) }, nil)
		yg, gG := runTape(t, dt, shapes, [][]float64{v}, r, func(ns G.Nodes) (*G.Node, error) {
			return G.MaxPool2D(ns[0], sh(3, 3), []int{1, 1}, []int{2, 2})
		}, nil)
		require.Equal(t, yg, yo)
		require.Equal(t, gG, gO)
	}
}
