package layers

// Cases and checks for the ops the segmentation, GAN and sequence models added: each forward
// against a plain-loop reference written from the definition, each gradient against central
// differences (through the shared opCases harness where the op fits it, directly where it has a
// scalar result or an operand that is data), and every node's Do, UsePreallocDo and DoWorkspace
// bit for bit.

import (
	"fmt"
	"math"
	"math/rand"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// awayFromZero keeps inputs off a kink (ReLU-like ops, |x| in L1).
func awayFromZero(v [][]float64) {
	for i, x := range v[0] {
		v[0][i] = x + math.Copysign(0.05, x)
	}
}

func mapRef(f func(float64) float64) func(v [][]float64) []float64 {
	return func(v [][]float64) []float64 {
		r := make([]float64, len(v[0]))
		for i, x := range v[0] {
			r[i] = f(x)
		}
		return r
	}
}

func refInstNorm(x nd, eps float64) []float64 {
	N, C, H, W := x.shape[0], x.shape[1], x.shape[2], x.shape[3]
	y := newND(N, C, H, W)
	for n := 0; n < N; n++ {
		for c := 0; c < C; c++ {
			var m, v float64
			for h := 0; h < H; h++ {
				for w := 0; w < W; w++ {
					m += *x.at4(n, c, h, w)
				}
			}
			m /= float64(H * W)
			for h := 0; h < H; h++ {
				for w := 0; w < W; w++ {
					d := *x.at4(n, c, h, w) - m
					v += d * d
				}
			}
			v /= float64(H * W)
			for h := 0; h < H; h++ {
				for w := 0; w < W; w++ {
					*y.at4(n, c, h, w) = (*x.at4(n, c, h, w) - m) / math.Sqrt(v+eps)
				}
			}
		}
	}
	return y.data
}

func refReflectPad(x nd, p int) []float64 {
	N, C, H, W := x.shape[0], x.shape[1], x.shape[2], x.shape[3]
	y := newND(N, C, H+2*p, W+2*p)
	mirror := func(i, n int) int { // fold i into [0, n) about the border pixels
		for i < 0 || i >= n {
			if i < 0 {
				i = -i
			}
			if i >= n {
				i = 2*n - 2 - i
			}
		}
		return i
	}
	for n := 0; n < N; n++ {
		for c := 0; c < C; c++ {
			for h := 0; h < H+2*p; h++ {
				for w := 0; w < W+2*p; w++ {
					*y.at4(n, c, h, w) = *x.at4(n, c, mirror(h-p, H), mirror(w-p, W))
				}
			}
		}
	}
	return y.data
}

// refResize is PyTorch's upsample_bilinear2d written out: source coordinate, its floor, the
// next pixel (clamped) and the linear weights.
func refResize(x nd, oh, ow int, align bool) []float64 {
	N, C, H, W := x.shape[0], x.shape[1], x.shape[2], x.shape[3]
	src := func(o, in, out int) float64 {
		if align {
			if out == 1 {
				return 0
			}
			return float64(o) * float64(in-1) / float64(out-1)
		}
		s := (float64(o)+0.5)*float64(in)/float64(out) - 0.5
		return math.Max(s, 0)
	}
	y := newND(N, C, oh, ow)
	for n := 0; n < N; n++ {
		for c := 0; c < C; c++ {
			for i := 0; i < oh; i++ {
				sh := src(i, H, oh)
				h0 := int(math.Floor(sh))
				h1 := min(h0+1, H-1)
				lh := sh - float64(h0)
				for j := 0; j < ow; j++ {
					sw := src(j, W, ow)
					w0 := int(math.Floor(sw))
					w1 := min(w0+1, W-1)
					lw := sw - float64(w0)
					*y.at4(n, c, i, j) = (1-lh)*((1-lw)**x.at4(n, c, h0, w0)+lw**x.at4(n, c, h0, w1)) +
						lh*((1-lw)**x.at4(n, c, h1, w0)+lw**x.at4(n, c, h1, w1))
				}
			}
		}
	}
	return y.data
}

// refAvgExcl is a 3x3 stride-2 average pool padded by 1 that averages only the pixels inside.
func refAvgExcl(x nd) []float64 {
	N, C, H, W := x.shape[0], x.shape[1], x.shape[2], x.shape[3]
	OH, OW := (H-1)/2+1, (W-1)/2+1
	y := newND(N, C, OH, OW)
	for n := 0; n < N; n++ {
		for c := 0; c < C; c++ {
			for i := 0; i < OH; i++ {
				for j := 0; j < OW; j++ {
					var s, k float64
					for a := 2*i - 1; a <= 2*i+1; a++ {
						for b := 2*j - 1; b <= 2*j+1; b++ {
							if a >= 0 && a < H && b >= 0 && b < W {
								s += *x.at4(n, c, a, b)
								k++
							}
						}
					}
					*y.at4(n, c, i, j) = s / k
				}
			}
		}
	}
	return y.data
}

func sig(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// refLSTM evaluates one of the cell's two outputs from (pre, state) with the gates in PyTorch's order.
func refLSTM(pre, state []float64, n, h int, hidden bool) []float64 {
	r := make([]float64, n*h)
	for i := 0; i < n; i++ {
		p := pre[i*4*h:]
		for j := 0; j < h; j++ {
			s := state[i*h+j]
			if hidden {
				r[i*h+j] = sig(p[3*h+j]) * math.Tanh(s)
			} else {
				r[i*h+j] = sig(p[h+j])*s + sig(p[j])*math.Tanh(p[2*h+j])
			}
		}
	}
	return r
}

func newOpCases() []opCase {
	var cases []opCase
	for _, s := range []tensor.Shape{sh(2, 3, 4, 5), sh(3, 7)} {
		s := s
		cases = append(cases,
			opCase{
				name: fmt.Sprintf("LeakyReLU/x%v", s), shapes: []tensor.Shape{s}, prep: awayFromZero,
				build: func(ns G.Nodes) (*G.Node, error) { return LeakyReLU(ns[0], 0.2) },
				ref: mapRef(func(x float64) float64 {
					if x > 0 {
						return x
					}
					return 0.2 * x
				}),
			},
			opCase{
				name: fmt.Sprintf("Tanh/x%v", s), shapes: []tensor.Shape{s},
				build: func(ns G.Nodes) (*G.Node, error) { return Tanh(ns[0]) },
				ref:   mapRef(math.Tanh),
				gorg:  func(ns G.Nodes) (*G.Node, error) { return G.Tanh(ns[0]) },
			})
	}
	for _, s := range []tensor.Shape{sh(2, 3, 4, 5), sh(1, 2, 1, 3), sh(3, 1, 6, 6)} {
		s := s
		cases = append(cases, opCase{
			name: fmt.Sprintf("InstanceNorm/x%v", s), shapes: []tensor.Shape{s},
			build: func(ns G.Nodes) (*G.Node, error) { return InstanceNorm(ns[0], 1e-5) },
			ref:   func(v [][]float64) []float64 { return refInstNorm(nd{s, v[0]}, 1e-5) },
		})
	}
	for _, c := range []struct {
		x tensor.Shape
		p int
	}{{sh(2, 2, 4, 5), 1}, {sh(1, 3, 5, 4), 3}, {sh(1, 1, 2, 3), 1}} {
		c := c
		cases = append(cases, opCase{
			name: fmt.Sprintf("ReflectionPad2D/x%v_p%d", c.x, c.p), shapes: []tensor.Shape{c.x},
			build: func(ns G.Nodes) (*G.Node, error) { return ReflectionPad2D(ns[0], c.p) },
			ref:   func(v [][]float64) []float64 { return refReflectPad(nd{c.x, v[0]}, c.p) },
		})
	}
	// The pad's adjoint as an op of its own, so its gradient (the pad) is checked too.
	cases = append(cases, opCase{
		name: "ReflectionPad2DGrad/as-op", shapes: []tensor.Shape{sh(2, 2, 8, 7)},
		build: func(ns G.Nodes) (*G.Node, error) { return apply(padSpec{p: 2}.gradSpec(4, 3), ns[0]) },
	})
	for _, c := range []struct {
		x      tensor.Shape
		oh, ow int
		align  bool
	}{
		{sh(2, 2, 3, 4), 9, 13, true},   // DeepLab's 4x with aligned corners (n-1 -> 4(n-1))
		{sh(1, 2, 3, 4), 7, 5, false},   // up in H, up and down mixed
		{sh(1, 3, 8, 6), 3, 4, false},   // down
		{sh(2, 1, 5, 5), 3, 2, true},    // down, aligned
		{sh(2, 3, 1, 1), 4, 5, true},    // ASPP's image pooling: a broadcast
		{sh(1, 2, 4, 1), 6, 3, false},   // one-pixel-wide input
		{sh(1, 1, 6, 6), 1, 1, false},   // to one pixel
		{sh(1, 2, 33, 5), 129, 5, true}, // DeepLab's sizes in one axis
	} {
		c := c
		cases = append(cases, opCase{
			name:   fmt.Sprintf("ResizeBilinear/x%v_to%dx%d_align%t", c.x, c.oh, c.ow, c.align),
			shapes: []tensor.Shape{c.x},
			build:  func(ns G.Nodes) (*G.Node, error) { return ResizeBilinear(ns[0], c.oh, c.ow, c.align) },
			ref:    func(v [][]float64) []float64 { return refResize(nd{c.x, v[0]}, c.oh, c.ow, c.align) },
		})
	}
	cases = append(cases, opCase{
		name: "ResizeBilinearGrad/as-op", shapes: []tensor.Shape{sh(2, 2, 7, 5)},
		build: func(ns G.Nodes) (*G.Node, error) {
			return apply(resizeSpec{ih: 3, iw: 4, oh: 7, ow: 5, align: false, adjoint: true}, ns[0])
		},
	})
	// Pix2PixHD's downsampling between discriminator scales: 3x3/2, padding 1, not counted.
	for _, x := range []tensor.Shape{sh(2, 2, 7, 6), sh(1, 3, 5, 5), sh(1, 1, 2, 2)} {
		x := x
		cases = append(cases, opCase{
			name: fmt.Sprintf("AvgPool2DExcludePad/x%v", x), shapes: []tensor.Shape{x},
			build: func(ns G.Nodes) (*G.Node, error) { return AvgPool2DExcludePad(ns[0], 3, 2, 1) },
			ref:   func(v [][]float64) []float64 { return refAvgExcl(nd{x, v[0]}) },
		})
	}
	seq := sh(2, 3, 1, 4)
	cases = append(cases, opCase{
		name: "SequenceStep/t2", shapes: []tensor.Shape{seq},
		build: func(ns G.Nodes) (*G.Node, error) { return SequenceStep(ns[0], 2) },
		ref: func(v [][]float64) []float64 {
			r := make([]float64, 6)
			for i := range r {
				r[i] = v[0][i*4+2]
			}
			return r
		},
	}, opCase{
		name: "StackSequence/3", shapes: []tensor.Shape{sh(2, 3), sh(2, 3), sh(2, 3)},
		build: func(ns G.Nodes) (*G.Node, error) { return StackSequence(ns...) },
		ref: func(v [][]float64) []float64 {
			r := make([]float64, 18)
			for t := 0; t < 3; t++ {
				for i := 0; i < 6; i++ {
					r[i*3+t] = v[t][i]
				}
			}
			return r
		},
	}, opCase{
		name: "SequencePlace/as-op", shapes: []tensor.Shape{sh(2, 3)},
		build: func(ns G.Nodes) (*G.Node, error) { return apply(seqSpec{kind: seqPlace, t: 1, steps: 3}, ns[0]) },
	})
	const n, h = 3, 2
	cases = append(cases, opCase{
		name: "LSTMGates", shapes: []tensor.Shape{sh(n, 4*h), sh(n, 4*h), sh(4 * h), sh(4 * h)},
		build: func(ns G.Nodes) (*G.Node, error) { return LSTMGates(ns[0], ns[1], ns[2], ns[3]) },
		ref: func(v [][]float64) []float64 {
			r := make([]float64, n*4*h)
			for i := range r {
				r[i] = v[0][i] + v[1][i] + v[2][i%(4*h)] + v[3][i%(4*h)]
			}
			return r
		},
	}, opCase{
		name: "LSTMCell", shapes: []tensor.Shape{sh(n, 4*h), sh(n, h)},
		build: func(ns G.Nodes) (*G.Node, error) { return LSTMCell(ns[0], ns[1]) },
		ref:   func(v [][]float64) []float64 { return refLSTM(v[0], v[1], n, h, false) },
	}, opCase{
		name: "LSTMHidden", shapes: []tensor.Shape{sh(n, 4*h), sh(n, h)},
		build: func(ns G.Nodes) (*G.Node, error) { return LSTMHidden(ns[0], ns[1]) },
		ref:   func(v [][]float64) []float64 { return refLSTM(v[0], v[1], n, h, true) },
	})
	return cases
}

// scalarCase checks an op whose result is a scalar or that has data operands: forward against a
// reference, gradients of the differentiable operands against central differences, float32
// against float64.
type scalarCase struct {
	name   string
	shapes []tensor.Shape
	wrt    []int // operands differentiated
	prep   func(v [][]float64)
	build  buildFn
	ref    func(v [][]float64) float64
}

func scalarCases() []scalarCase {
	s := sh(2, 3, 4, 5)
	return []scalarCase{
		{name: "MSEToConstant/real", shapes: []tensor.Shape{s}, wrt: []int{0},
			build: func(ns G.Nodes) (*G.Node, error) { return MSEToConstant(ns[0], 1, 1) },
			ref: func(v [][]float64) float64 {
				var a float64
				for _, x := range v[0] {
					a += (x - 1) * (x - 1)
				}
				return a / float64(len(v[0]))
			}},
		{name: "MSEToConstant/fake-half", shapes: []tensor.Shape{sh(3, 1, 5, 7)}, wrt: []int{0},
			build: func(ns G.Nodes) (*G.Node, error) { return MSEToConstant(ns[0], 0, 0.5) },
			ref: func(v [][]float64) float64 {
				var a float64
				for _, x := range v[0] {
					a += x * x
				}
				return 0.5 * a / float64(len(v[0]))
			}},
		{name: "L1Loss/x5", shapes: []tensor.Shape{s, s}, wrt: []int{0, 1},
			prep: func(v [][]float64) { // keep a-b off 0, where |.| has its kink
				for i := range v[0] {
					if math.Abs(v[0][i]-v[1][i]) < 0.05 {
						v[0][i] += 0.1
					}
				}
			},
			build: func(ns G.Nodes) (*G.Node, error) { return L1Loss(ns[0], ns[1], 5) },
			ref: func(v [][]float64) float64 {
				var a float64
				for i := range v[0] {
					a += math.Abs(v[0][i] - v[1][i])
				}
				return 5 * a / float64(len(v[0]))
			}},
		{name: "Embedding", shapes: []tensor.Shape{sh(2, 1, 1, 5), sh(4, 3)}, wrt: []int{1},
			prep: func(v [][]float64) { // ids 0..3 with repeats, so the scatter adds
				for i := range v[0] {
					v[0][i] = float64((i * 3) % 4)
				}
			},
			build: func(ns G.Nodes) (*G.Node, error) { return Embedding(ns[0], ns[1]) },
		},
	}
}

// evalScalar runs build on vals (dtype dt) and reduces a non-scalar result with Σ r⊙y; it returns
// the value and the gradients of the wrt operands.
func evalScalar(t *testing.T, dt tensor.Dtype, c scalarCase, vals [][]float64, r []float64) (float64, [][]float64) {
	t.Helper()
	g := G.NewGraph()
	ns := inputNodes(g, dt, c.shapes, vals)
	y, err := c.build(ns)
	require.NoError(t, err)
	loss := y
	if !y.IsScalar() {
		loss = weightedSum(t, y, r)
	}
	var wrt G.Nodes
	for _, i := range c.wrt {
		wrt = append(wrt, ns[i])
	}
	gs, err := G.Grad(loss, wrt...)
	require.NoError(t, err)
	gv := make([]G.Value, len(gs))
	for i := range gs {
		G.Read(gs[i], &gv[i])
	}
	var lv G.Value
	G.Read(loss, &lv)
	m := G.NewTapeMachine(g)
	defer m.Close()
	require.NoError(t, m.RunAll())
	var grads [][]float64
	for _, v := range gv {
		grads = append(grads, f64s(t, v))
	}
	return f64s(t, lv)[0], grads
}

func TestScalarAndDataOpsMatchFiniteDifferences(t *testing.T) {
	for i, c := range scalarCases() {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(300 + i)))
			var vals [][]float64
			for _, s := range c.shapes {
				vals = append(vals, randData(rng, s.TotalSize()))
			}
			if c.prep != nil {
				c.prep(vals)
			}
			var r []float64
			{
				g := G.NewGraph()
				y, err := c.build(inputNodes(g, tensor.Float64, c.shapes, vals))
				require.NoError(t, err)
				if !y.IsScalar() {
					r = randData(rng, y.Shape().TotalSize())
				}
			}
			v64, g64 := evalScalar(t, tensor.Float64, c, vals, r)
			if c.ref != nil {
				require.InDelta(t, c.ref(vals), v64, 1e-12*(1+math.Abs(v64)))
			}
			f := func(vs [][]float64) float64 { v, _ := evalScalar(t, tensor.Float64, c, vs, r); return v }
			for k, in := range c.wrt {
				num := make([]float64, len(vals[in]))
				for j := range num {
					x := vals[in][j]
					vals[in][j] = x + 1e-6
					fp := f(vals)
					vals[in][j] = x - 1e-6
					fm := f(vals)
					vals[in][j] = x
					num[j] = (fp - fm) / 2e-6
				}
				require.LessOrEqual(t, maxAbsDiff(g64[k], num), 1e-6*(1+maxAbs(num)), "gradient of operand %d", in)
			}
			v32, g32 := evalScalar(t, tensor.Float32, c, vals, r)
			require.InDelta(t, v64, v32, 2e-5*(1+math.Abs(v64)))
			for k := range g64 {
				require.LessOrEqual(t, maxAbsDiff(g32[k], g64[k]), 2e-5*(1+maxAbs(g64[k])))
			}
		})
	}
}

// StopGradient passes values and stops gradients: d/dx of Σ r⊙StopGradient(x) + Σ q⊙x is q.
func TestStopGradient(t *testing.T) {
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		rng := rand.New(rand.NewSource(5))
		s := sh(2, 3, 2, 2)
		x, r, q := randData(rng, 24), randData(rng, 24), randData(rng, 24)
		g := G.NewGraph()
		ns := inputNodes(g, dt, []tensor.Shape{s}, [][]float64{x})
		sg, err := StopGradient(ns[0])
		require.NoError(t, err)
		// Σ q⊙x by hand: weightedSum names its weights "r", and gorgonia would merge two such nodes.
		qn := G.NewTensor(g, dt, 4, G.WithShape(s...), G.WithName("q"), G.WithValue(denseAs(dt, s, q)))
		direct, err := G.HadamardProd(ns[0], qn)
		require.NoError(t, err)
		direct, err = G.Reshape(direct, sh(24))
		require.NoError(t, err)
		direct, err = G.Sum(direct, 0)
		require.NoError(t, err)
		loss, err := G.Add(weightedSum(t, sg, r), direct)
		require.NoError(t, err)
		gs, err := G.Grad(loss, ns[0])
		require.NoError(t, err)
		var gv, sv G.Value
		G.Read(gs[0], &gv)
		G.Read(sg, &sv)
		m := G.NewTapeMachine(g)
		require.NoError(t, m.RunAll())
		m.Close()
		require.Equal(t, f64s(t, denseAs(dt, s, x)), f64s(t, sv), "forward is the identity")
		require.Equal(t, f64s(t, denseAs(dt, s, q)), f64s(t, gv), "only the direct path's gradient arrives")

		// A graph whose only path to the input goes through the wall has nothing to differentiate.
		g2 := G.NewGraph()
		ns2 := inputNodes(g2, dt, []tensor.Shape{s}, [][]float64{x})
		sg2, err := StopGradient(ns2[0])
		require.NoError(t, err)
		_, err = G.Grad(weightedSum(t, sg2, r), ns2[0])
		require.Error(t, err)
	}
}

func TestNewOpErrors(t *testing.T) {
	g := G.NewGraph()
	x := G.NewTensor(g, tensor.Float64, 4, G.WithShape(1, 2, 3, 4), G.WithName("x"))
	v := G.NewTensor(g, tensor.Float64, 2, G.WithShape(3, 4), G.WithName("v"))
	_, err := ReflectionPad2D(x, 3)
	require.Error(t, err, "pad as large as the image")
	_, err = ReflectionPad2D(v, 1)
	require.Error(t, err, "2-D input")
	_, err = LeakyReLU(x, 1.5)
	require.Error(t, err)
	_, err = InstanceNorm(x, 0)
	require.Error(t, err)
	_, err = ResizeBilinear(x, 0, 3, true)
	require.Error(t, err)
	_, err = L1Loss(x, v, 1)
	require.Error(t, err)
	_, err = SequenceStep(x, 9)
	require.Error(t, err)
	_, err = Embedding(x, v)
	require.Error(t, err, "ids must be (N,1,1,T)")

	// Ids that are not integers in range are errors at run time.
	ids := G.NewTensor(g, tensor.Float64, 4, G.WithShape(1, 1, 1, 2), G.WithName("ids"))
	e, err := Embedding(ids, v)
	require.NoError(t, err)
	table := denseAs(tensor.Float64, sh(3, 4), make([]float64, 12))
	for _, bad := range [][]float64{{0, 3}, {1.5, 0}, {-1, 0}, {math.NaN(), 0}} {
		_, err := e.Op().Do(denseAs(tensor.Float64, sh(1, 1, 1, 2), bad), table)
		require.Error(t, err, "ids %v", bad)
	}
	_, err = e.Op().Do(denseAs(tensor.Float64, sh(1, 1, 1, 2), []float64{2, 0}), table)
	require.NoError(t, err)
}

// newZoo builds a small graph through every new op (the generator, discriminator and LSTM
// patterns) with its backward, for the run-path checks.
func newZoo(t testing.TB, dt tensor.Dtype) *G.ExprGraph {
	t.Helper()
	g := G.NewGraph()
	b, err := NewBuilder(g, dt, rand.New(rand.NewSource(3)))
	require.NoError(t, err)
	must := func(n *G.Node, err error) *G.Node {
		t.Helper()
		require.NoError(t, err)
		return n
	}
	rng := rand.New(rand.NewSource(4))
	x := must(b.Input("x", 2, 3, 6, 5))
	require.NoError(t, G.Let(x, denseAs(dt, x.Shape(), randData(rng, 180))))
	h := must(b.ConvBias(x, 3, 1, 1, 0, "c0"))
	h = must(ReflectionPad2D(h, 2))
	h = must(b.ConvBias(h, 4, 5, 1, 0, "c1"))
	h = must(InstanceNorm(h, 1e-5))
	h = must(LeakyReLU(h, 0.2))
	h = must(b.ConvWith(h, 4, 3, 3, ConvParams{PadH: 2, PadW: 2, DilationH: 2, DilationW: 2}, false, "atrous"))
	up := must(ResizeBilinear(h, 11, 9, true))
	fake := must(Tanh(must(b.ConvBias(up, 3, 3, 1, 1, "out"))))
	down := must(ResizeBilinear(fake, 4, 3, false))
	d := must(b.ConvBias(must(StopGradient(down)), 3, 3, 1, 1, "d"))
	loss := must(G.Add(must(MSEToConstant(down, 1, 1)), must(MSEToConstant(d, 0, 0.5))))
	loss = must(G.Add(loss, must(L1Loss(down, must(StopGradient(d)), 2))))

	// An LSTM of two steps over embedded tokens.
	ids := must(b.Input("ids", 2, 1, 1, 2))
	require.NoError(t, G.Let(ids, denseAs(dt, ids.Shape(), []float64{0, 3, 2, 1})))
	table := must(b.Weight("emb", sh(4, 3), b.Normal(1)))
	wih := must(b.Weight("wih", sh(3, 8), b.Normal(0.5)))
	whh := must(b.Weight("whh", sh(2, 8), b.Normal(0.5)))
	bih := must(b.Weight("bih", sh(8), b.Normal(0.5)))
	bhh := must(b.Weight("bhh", sh(8), b.Normal(0.5)))
	emb := must(Embedding(ids, table))
	hs := must(b.Input("h0", 2, 2))
	require.NoError(t, G.Let(hs, denseAs(dt, sh(2, 2), make([]float64, 4))))
	cs := hs
	var outs G.Nodes
	for step := 0; step < 2; step++ {
		xt := must(SequenceStep(emb, step))
		pre := must(LSTMGates(must(G.Mul(xt, wih)), must(G.Mul(hs, whh)), bih, bhh))
		cs = must(LSTMCell(pre, cs))
		hs = must(LSTMHidden(pre, cs))
		outs = append(outs, hs)
	}
	seq := must(StackSequence(outs...))
	loss = must(G.Add(loss, must(MSEToConstant(seq, 0.5, 1))))
	_, err = G.Grad(loss, b.Learnables()...)
	require.NoError(t, err)
	return g
}

// Every new op, forward and backward, gives the same bits through Do, UsePreallocDo and
// DoWorkspace (into NaN-filled memory), and declares positive FLOPs.
func TestNewOpsRunPathsBitIdentical(t *testing.T) {
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		g := newZoo(t, dt)
		rng := rand.New(rand.NewSource(6))
		seen := map[string]bool{}
		for _, n := range kernelNodes(g) {
			op, ok := n.Op().(*frameOp)
			if !ok {
				continue
			}
			kind := fmt.Sprintf("%T", op.s)
			seen[kind] = true
			t.Run(fmt.Sprintf("%v/%v#%d", dt, op, n.ID()), func(t *testing.T) {
				var in []G.Value
				var shapes []tensor.Shape
				for _, c := range children(g, n) {
					v := randData(rng, max(c.Shape().TotalSize(), 1))
					if c.Name() == "ids" {
						v = []float64{0, 3, 2, 1}
					}
					var val G.Value = denseAs(dt, c.Shape(), v)
					if c.IsScalar() {
						val = scalarOf32or64(dt, v[0])
					}
					in = append(in, val)
					shapes = append(shapes, c.Shape().Clone())
				}
				checkRunPaths(t, n, dt, in, shapes)
			})
		}
		for _, kind := range []string{"layers.padSpec", "layers.padGradSpec", "layers.instNormSpec", "layers.instNormGradSpec",
			"layers.actSpec", "layers.actGradSpec", "layers.resizeSpec", "layers.stopSpec", "layers.lossSpec", "layers.lossGradSpec",
			"layers.embedSpec", "layers.embedGradSpec", "layers.seqSpec", "layers.gatesSpec", "layers.cellSpec"} {
			require.True(t, seen[kind], "zoo has no %s", kind)
		}
	}
}

func scalarOf32or64(dt tensor.Dtype, v float64) G.Value {
	if dt == tensor.Float32 {
		return G.NewF32(float32(v))
	}
	return G.NewF64(v)
}

// Shapes big enough for the parallel paths: the same bits with one goroutine as with several.
func TestNewOpsParallelDeterministic(t *testing.T) {
	x := sh(4, 16, 40, 40)
	ids := make([]float64, 8*64)
	for i := range ids {
		ids[i] = float64(i * 7 % 50)
	}
	cases := []struct {
		s      spec
		shapes []tensor.Shape
		fixed  map[int][]float64
	}{
		{actSpec{kind: actLeaky, slope: 0.2, dims: 4}, []tensor.Shape{x}, nil},
		{actSpec{kind: actTanh, dims: 4}, []tensor.Shape{x}, nil},
		{actGradSpec{kind: actTanh, dims: 4}, []tensor.Shape{x, x}, nil},
		{instNormSpec{eps: 1e-5}, []tensor.Shape{x}, nil},
		{instNormGradSpec{eps: 1e-5}, []tensor.Shape{x, x}, nil},
		{padSpec{p: 3}, []tensor.Shape{x}, nil},
		{padSpec{p: 3}.gradSpec(34, 34), []tensor.Shape{x}, nil},
		{resizeSpec{ih: 40, iw: 40, oh: 157, ow: 157, align: true}, []tensor.Shape{x}, nil},
		{resizeSpec{ih: 10, iw: 10, oh: 40, ow: 40, adjoint: true}, []tensor.Shape{x}, nil},
		{lossSpec{kind: lossL1, scale: 2, dims: 4}, []tensor.Shape{x, x}, nil},
		{lossGradSpec{loss: lossSpec{kind: lossMSE, target: 1, scale: 1, dims: 4}}, []tensor.Shape{x, tensor.ScalarShape()}, nil},
		{embedSpec{}, []tensor.Shape{sh(8, 1, 1, 64), sh(50, 300)}, map[int][]float64{0: ids}},
		{embedGradSpec{vocab: 50}, []tensor.Shape{sh(8, 1, 1, 64), sh(8, 300, 1, 64)}, map[int][]float64{0: ids}},
		{cellSpec{kind: cellC}, []tensor.Shape{sh(64, 2048), sh(64, 512)}, nil},
		{cellSpec{kind: cellCGradPre}, []tensor.Shape{sh(64, 2048), sh(64, 512), sh(64, 512)}, nil},
	}
	rng := rand.New(rand.NewSource(8))
	for _, c := range cases {
		t.Run(c.s.name(), func(t *testing.T) {
			op := &frameOp{s: c.s}
			var in []G.Value
			for i, s := range c.shapes {
				v := c.fixed[i]
				if v == nil {
					v = randData(rng, max(s.TotalSize(), 1))
				}
				if s.IsScalar() {
					in = append(in, G.NewF32(float32(v[0])))
				} else {
					in = append(in, denseAs(tensor.Float32, s, v))
				}
			}
			par, err := op.Do(in...)
			require.NoError(t, err)
			prev := runtime.GOMAXPROCS(1)
			serial, err := op.Do(in...)
			runtime.GOMAXPROCS(prev)
			require.NoError(t, err)
			if par.Shape().IsScalar() {
				require.Equal(t, par.Data(), serial.Data())
				return
			}
			requireSameBits(t, par, serial, "GOMAXPROCS=1 vs default")
		})
	}
}
