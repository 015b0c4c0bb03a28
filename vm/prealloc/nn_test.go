package prealloc

import (
	"fmt"
	"io"
	"log"
	"math/rand"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func TestSoftmax(t *testing.T) {
	cases := []struct {
		shape []int
		axes  []int
	}{
		{[]int{5, 7}, nil}, {[]int{5, 7}, []int{0}}, {[]int{5, 7}, []int{1}},
		{[]int{6}, nil}, {[]int{2, 3, 4}, []int{0}}, {[]int{2, 3, 4}, []int{1}}, {[]int{2, 3, 4}, nil},
		// A column vector takes axis 0, tensor's kernel for an axis that is
		// not the last, with one element after it; a row vector the last.
		{[]int{5, 1}, nil}, {[]int{1, 7}, nil}, {[]int{5, 1}, []int{1}}, {[]int{2, 3, 1}, []int{1}},
		{[]int{2, 3, 4}, []int{2}}, {[]int{2, 3, 4}, []int{-2}}, {[]int{3, 2, 2, 5}, []int{1}}, {[]int{64, 10}, nil},
	}
	for _, dt := range floats {
		for _, c := range cases {
			for _, logSM := range []bool{false, true} {
				t.Run(fmt.Sprintf("%v/%v/%v/log=%v", dt, c.shape, c.axes, logSM), func(t *testing.T) {
					g := G.NewGraph()
					x := input(g, dt, "x", c.shape...)
					sm := G.SoftMax
					if logSM {
						sm = G.LogSoftMax
					}
					n := G.Must(sm(x, c.axes...))
					checkNode(t, n, 20)
					ins := inputsOf(n, 20)
					// tensor starts every row's maximum from the first row's
					// first element: made the largest, it decides every row.
					ins[0].(*tensor.Dense).Set(0, valueOf(dt, 40))
					runBoth(t, n.Op(), ins, n.Dtype(), n.Shape())
					runBoth(t, n.Op(), []G.Value{special(filled(dt, 3, c.shape...))}, n.Dtype(), n.Shape())

					gradOf(t, n, x)
					d := findOp(t, g, "*gorgonia.softmaxDiffOp")
					checkNode(t, d, 21)
					ins = inputsOf(d, 21)
					special(ins[1].(*tensor.Dense))
					special(ins[2].(*tensor.Dense))
					runBoth(t, d.Op(), ins, d.Dtype(), d.Shape())
				})
			}
		}
	}
}

func valueOf(dt tensor.Dtype, v float64) any {
	if dt == tensor.Float32 {
		return float32(v)
	}
	return v
}

// TestSoftmaxNoAllocation: the softmax Funcs run their rows in the
// caller's goroutine, so a call allocates nothing (tensor's kernels start
// a goroutine per row, two heap objects each: the loss of a batch of 64
// made 258 allocations a step).
func TestSoftmaxNoAllocation(t *testing.T) {
	for _, dt := range floats {
		for _, axes := range [][]int{nil, {0}} {
			g := G.NewGraph()
			x := input(g, dt, "x", 64, 10)
			n := G.Must(G.LogSoftMax(x, axes...))
			gradOf(t, n, x)
			for _, node := range []*G.Node{n, findOp(t, g, "*gorgonia.softmaxDiffOp")} {
				f, ok := For(node.Op())
				require.True(t, ok)
				ins := inputsOf(node, 1)
				out := poisoned(dt, node.Shape()...)
				allocs := testing.AllocsPerRun(10, func() { require.NoError(t, f(out, ins...)) })
				require.Zero(t, allocs, "%v %T axes %v: allocations per call", dt, node.Op(), axes)
			}
		}
	}
}

// twin builds the same graph twice: one op runs Do, the other the Func,
// and their hidden state is compared after each call.
func twin(t *testing.T, build func(g *G.ExprGraph) *G.Node) (a, b *G.Node) {
	t.Helper()
	return build(G.NewGraph()), build(G.NewGraph())
}

// runTwins is runBoth on two ops built alike, comparing their state too.
func runTwins(t *testing.T, doOp, funcOp G.Op, ins []G.Value, dt tensor.Dtype, shape tensor.Shape) {
	t.Helper()
	require.Equal(t, state(doOp), state(funcOp), "twins differ before the call")
	f, ok := For(funcOp)
	require.True(t, ok, "For(%T) declined", funcOp)
	want, err := doOp.Do(cloneAll(t, ins)...)
	require.NoError(t, err)
	out := poisoned(dt, shape...)
	require.NoError(t, f(out, cloneAll(t, ins)...))
	requireBits(t, want, out)
	require.Equal(t, state(doOp), state(funcOp), "hidden state after the call")
}

func TestBatchNorm(t *testing.T) {
	for _, dt := range floats {
		for _, shape := range [][]int{{4, 3, 5, 5}, {6, 4}, {2, 3, 1, 1}} {
			t.Run(fmt.Sprintf("%v/%v", dt, shape), func(t *testing.T) {
				build := func(g *G.ExprGraph) *G.Node {
					x := input(g, dt, "x", shape...)
					scale := G.NewTensor(g, dt, len(shape), G.WithShape(append([]int{1, shape[1]}, ones(len(shape)-2)...)...), G.WithName("s"), G.WithInit(G.Ones()))
					bias := G.NewTensor(g, dt, len(shape), G.WithShape(append([]int{1, shape[1]}, ones(len(shape)-2)...)...), G.WithName("b"), G.WithInit(G.Zeroes()))
					y, _, _, _, err := G.BatchNorm(x, scale, bias, 0.9, 1e-5)
					require.NoError(t, err)
					gradOf(t, y, x)
					return findOp(t, g, "*gorgonia.BatchNormOp")
				}
				a, b := twin(t, build)
				da := findOp(t, a.Graph(), "*gorgonia.batchnormDiffOp")
				db := findOp(t, b.Graph(), "*gorgonia.batchnormDiffOp")
				for step := 0; step < 3; step++ {
					if step == 2 {
						require.NoError(t, a.Op().(*G.BatchNormOp).SetTraining(false))
						require.NoError(t, b.Op().(*G.BatchNormOp).SetTraining(false))
					}
					x := filled(dt, 30+step, shape...)
					runTwins(t, a.Op(), b.Op(), []G.Value{x}, dt, a.Shape())
					dy := filled(dt, 40+step, shape...)
					runTwins(t, da.Op(), db.Op(), []G.Value{x, dy}, dt, da.Shape())
				}
			})
		}
	}
}

func ones(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = 1
	}
	return s
}

// setGenerator gives a dropout op a seeded generator, so two ops draw the
// same numbers.
func setGenerator(t *testing.T, op G.Op, seed int64) {
	t.Helper()
	p, typ, err := fieldAddr(op, "rndGen", reflect.Func)
	require.NoError(t, err)
	require.Equal(t, "gorgonia.randomGenF", typ.String())
	r := rand.New(rand.NewSource(seed))
	*(*func() float64)(p) = r.Float64
}

func draw(t *testing.T, op G.Op) float64 {
	p, _, err := fieldAddr(op, "rndGen", reflect.Func)
	require.NoError(t, err)
	return (*(*func() float64)(p))()
}

func TestDropout(t *testing.T) {
	for _, dt := range floats {
		for _, prob := range []float64{0.3, 0.5, 0} {
			t.Run(fmt.Sprintf("%v/p=%v", dt, prob), func(t *testing.T) {
				build := func(g *G.ExprGraph) *G.Node {
					x := input(g, dt, "x", 4, 3, 5)
					y := G.Must(G.Dropout(x, prob))
					gradOf(t, y, x)
					return y
				}
				a, b := twin(t, build)
				setGenerator(t, a.Op(), 7)
				setGenerator(t, b.Op(), 7)
				for step := 0; step < 2; step++ {
					runTwins(t, a.Op(), b.Op(), []G.Value{filled(dt, 50+step, 4, 3, 5)}, dt, a.Shape())
					require.Equal(t, draw(t, a.Op()), draw(t, b.Op()), "the generators advanced alike")
				}
				// Not training: Do returns its input.
				require.NoError(t, a.Op().(G.TrainModeOp).SetTraining(false))
				require.NoError(t, b.Op().(G.TrainModeOp).SetTraining(false))
				runTwins(t, a.Op(), b.Op(), []G.Value{filled(dt, 52, 4, 3, 5)}, dt, a.Shape())
				require.Equal(t, draw(t, a.Op()), draw(t, b.Op()))

				da := findOp(t, a.Graph(), "*gorgonia.dropoutDiffOp")
				ins := inputsOf(da, 53)
				y := ins[1].(*tensor.Dense)
				for i := 0; i < y.Shape().TotalSize(); i += 3 {
					require.NoError(t, y.SetAt(zeroOf(dt), unravel(y.Shape(), i)...))
				}
				runBoth(t, da.Op(), ins, dt, da.Shape())
			})
		}
	}
}

func zeroOf(dt tensor.Dtype) any {
	if dt == tensor.Float32 {
		return float32(0)
	}
	return float64(0)
}

func unravel(shape tensor.Shape, i int) []int {
	c := make([]int, len(shape))
	for d := len(shape) - 1; d >= 0; d-- {
		c[d] = i % shape[d]
		i /= shape[d]
	}
	return c
}

// Dropout's own UsePreallocDo passes its kernel a method value, not data.
func TestDropoutPreallocPanics(t *testing.T) {
	defer log.SetOutput(log.Writer())
	log.SetOutput(io.Discard) // its kernel logs before panicking
	g := G.NewGraph()
	n := G.Must(G.Dropout(input(g, tensor.Float64, "x", 3, 4), 0.5))
	require.Panics(t, func() {
		_, _ = n.Op().(G.UsePreallocDoer).UsePreallocDo(poisoned(tensor.Float64, 3, 4), filled(tensor.Float64, 1, 3, 4))
	})
}

func TestPools(t *testing.T) {
	cases := []struct {
		shape          []int
		kernel         tensor.Shape
		pad, stride    []int
		name           string
		avg            bool
		outH, wantDiff string
	}{
		{[]int{2, 3, 6, 6}, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}, "avg 2x2/2", true, "", "*gorgonia.avgPoolDiffOp"},
		{[]int{2, 3, 7, 5}, tensor.Shape{3, 3}, []int{1, 1}, []int{2, 2}, "avg 3x3/2 pad 1", true, "", "*gorgonia.avgPoolDiffOp"},
		{[]int{1, 2, 5, 5}, tensor.Shape{3, 2}, []int{0, 1, 1, 0}, []int{1, 2}, "avg explicit pad", true, "", "*gorgonia.avgPoolDiffOp"},
		{[]int{2, 3, 6, 6}, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}, "max 2x2/2", false, "", "*gorgonia.maxPoolDiffOp"},
		{[]int{2, 3, 7, 5}, tensor.Shape{3, 3}, []int{1, 1}, []int{2, 2}, "max 3x3/2 pad 1", false, "", "*gorgonia.maxPoolDiffOp"},
	}
	for _, dt := range floats {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%v/%s", dt, c.name), func(t *testing.T) {
				build := func(g *G.ExprGraph) *G.Node {
					x := input(g, dt, "x", c.shape...)
					pool := G.MaxPool2D
					if c.avg {
						pool = G.AveragePool2D
					}
					y, err := pool(x, c.kernel, c.pad, c.stride)
					require.NoError(t, err)
					gradOf(t, y, x)
					return y
				}
				a, b := twin(t, build)
				x := special(filled(dt, 60, c.shape...))
				runTwins(t, a.Op(), b.Op(), []G.Value{x}, dt, a.Shape())
				da := findOp(t, a.Graph(), c.wantDiff)
				db := findOp(t, b.Graph(), c.wantDiff)
				ins := inputsOf(da, 61)
				ins[0] = x
				runTwins(t, da.Op(), db.Op(), ins, dt, da.Shape())
			})
		}
	}
}

func TestIm2ColCol2Im(t *testing.T) {
	for _, dt := range floats {
		g := G.NewGraph()
		x := input(g, dt, "x", 2, 3, 6, 5)
		n := G.Must(G.Im2Col(x, tensor.Shape{3, 3}, []int{1, 1}, []int{2, 1}, []int{1, 1}))
		checkNode(t, n, 70)
		gradOf(t, n, x)
		checkNode(t, findOp(t, g, "gorgonia.col2imOp"), 71)
	}
}

func TestLinAlg(t *testing.T) {
	for _, dt := range floats {
		g := G.NewGraph()
		a, b := input(g, dt, "a", 3, 4), input(g, dt, "b", 4, 5)
		v, w := input(g, dt, "v", 4), input(g, dt, "w", 3)
		ba, bb := input(g, dt, "ba", 2, 3, 4), input(g, dt, "bb", 2, 4, 5)
		gradOf(t, G.Must(G.Mul(a, b)), a, b)
		gradOf(t, G.Must(G.Mul(a, v)), a, v)
		gradOf(t, G.Must(G.OuterProd(w, v)), w, v)
		gradOf(t, G.Must(G.BatchedMatMul(ba, bb)), ba, bb)
		ops := findOps(g, "gorgonia.linAlgBinOp")
		require.GreaterOrEqual(t, len(ops), 8)
		for i, n := range ops {
			if n.IsScalar() {
				continue
			}
			t.Run(fmt.Sprintf("%v/%d/%v", dt, i, n.Op()), func(t *testing.T) {
				ins := inputsOf(n, 80+i)
				if _, err := n.Op().Do(cloneAll(t, ins)...); err != nil {
					// OuterProd's gradient for its second operand multiplies
					// by the wrong vector: gorgonia's own op fails, and so
					// must the Func.
					f, _ := For(n.Op())
					require.Error(t, f(poisoned(dt, n.Shape()...), ins...))
					return
				}
				checkNode(t, n, 80+i)
			})
		}
	}
}

// TestMatMulGEMM: a matrix product and its gradients (transposed operands) are tensor's GEMM
// call made directly, bit for bit and without allocating, for every mix of dimensions of 1
// (where T() is a no-op or turns a vector) and larger ones, including the GEMM's packed
// and edge paths.
func TestMatMulGEMM(t *testing.T) {
	dims := []int{1, 3, 17, 70}
	for _, dt := range floats {
		for _, m := range dims {
			for _, k := range dims {
				for _, n := range dims {
					g := G.NewGraph()
					a, b := input(g, dt, "a", m, k), input(g, dt, "b", k, n)
					gradOf(t, G.Must(G.Mul(a, b)), a, b)
					for i, node := range findOps(g, "gorgonia.linAlgBinOp") {
						checkNode(t, node, 90+i)
						f, ok := For(node.Op())
						require.True(t, ok)
						ins := inputsOf(node, 90+i)
						out := poisoned(dt, node.Shape()...)
						allocs := testing.AllocsPerRun(3, func() { require.NoError(t, f(out, ins...)) })
						require.Zero(t, allocs, "%v (%d,%d)x(%d,%d) %v: allocations", dt, m, k, k, n, node.Op())
					}
				}
			}
		}
	}
}

// Sum's gradient repeats the incoming gradient along the summed axes.
func TestRepeat(t *testing.T) {
	for _, dt := range floats {
		g := G.NewGraph()
		x := input(g, dt, "x", 3, 4, 5)
		gradOf(t, G.Must(G.Sum(x, 1)), x)
		gradOf(t, G.Must(G.Sum(x, 0, 2)), x)
		reps := findOps(g, "*gorgonia.repeatOp")
		require.NotEmpty(t, reps)
		for i, n := range reps {
			// The second operand is the repeat count (a SizeOf node).
			along, err := intField(n.Op(), "along")
			require.NoError(t, err)
			ins := inputsOf(n, 90+i)
			ins[1] = scalarOf(dt, float64(n.Shape()[along]/ins[0].Shape()[along]))
			runBoth(t, n.Op(), ins, dt, n.Shape())
		}
	}
}

func TestConvType(t *testing.T) {
	for _, c := range []struct{ from, to tensor.Dtype }{
		{tensor.Float64, tensor.Int}, {tensor.Float32, tensor.Int}, {tensor.Int, tensor.Float64}, {tensor.Int, tensor.Float32},
	} {
		g := G.NewGraph()
		x := G.NewTensor(g, c.from, 2, G.WithShape(3, 4), G.WithName("x"))
		n := G.Must(G.ConvType(x, c.from, c.to))
		runBoth(t, n.Op(), []G.Value{filled(c.from, 1, 3, 4)}, c.to, n.Shape())
	}
}

func TestGroupNorm(t *testing.T) {
	defer log.SetOutput(log.Writer())
	log.SetOutput(io.Discard) // groupNormDiffOp logs its whole input from inside
	for _, dt := range floats {
		for _, c := range []struct {
			shape         []int
			groups, chans int
		}{{[]int{2, 20, 2, 2}, 2, 20}, {[]int{3, 8, 5, 5}, 4, 8}, {[]int{2, 6, 70, 3}, 3, 6}} {
			t.Run(fmt.Sprintf("%v/%v/%d", dt, c.shape, c.groups), func(t *testing.T) {
				build := func(g *G.ExprGraph) *G.Node {
					x := input(g, dt, "x", c.shape...)
					scale := G.NewTensor(g, dt, 4, G.WithShape(1, c.chans, 1, 1), G.WithName("s"), G.WithInit(G.Ones()))
					bias := G.NewTensor(g, dt, 4, G.WithShape(1, c.chans, 1, 1), G.WithName("b"), G.WithInit(G.Zeroes()))
					y, err := G.GroupNorm(x, scale, bias, c.groups, c.chans, 1e-5)
					require.NoError(t, err)
					gradOf(t, y, x)
					return findOp(t, g, "*gorgonia.GroupNormOp")
				}
				a, b := twin(t, build)
				x := filled(dt, 100, c.shape...)
				runTwins(t, a.Op(), b.Op(), []G.Value{x}, dt, a.Shape())
				da := findOp(t, a.Graph(), "*gorgonia.groupNormDiffOp")
				db := findOp(t, b.Graph(), "*gorgonia.groupNormDiffOp")
				runTwins(t, da.Op(), db.Op(), []G.Value{x, filled(dt, 101, c.shape...)}, dt, da.Shape())
			})
		}
	}
}

func TestCTCLossDiff(t *testing.T) {
	for _, dt := range floats {
		for _, red := range []G.Reduction{G.ReductionMean, G.ReductionSum} {
			t.Run(fmt.Sprintf("%v/%v", dt, red), func(t *testing.T) {
				build := func(g *G.ExprGraph) *G.Node {
					lp := input(g, dt, "lp", 5, 3, 4)
					tg := G.NewTensor(g, tensor.Int, 2, G.WithShape(3, 2), G.WithName("tg"),
						G.WithValue(tensor.New(tensor.WithShape(3, 2), tensor.WithBacking([]int{1, 2, 3, 1, 2, 2}))))
					il := G.NewTensor(g, tensor.Int, 1, G.WithShape(3), G.WithName("il"),
						G.WithValue(tensor.New(tensor.WithBacking([]int{5, 4, 5}))))
					tl := G.NewTensor(g, tensor.Int, 1, G.WithShape(3), G.WithName("tl"),
						G.WithValue(tensor.New(tensor.WithBacking([]int{2, 1, 2}))))
					loss, err := G.CTCLoss(lp, tg, il, tl, red)
					require.NoError(t, err)
					_, err = G.Grad(loss, lp)
					require.NoError(t, err)
					return loss
				}
				a, b := twin(t, build)
				ins := inputsOf(a, 110)
				// log-probabilities: log of a softmax over the labels
				lp, err := tensor.LogSoftMax(ins[0].(*tensor.Dense), 2)
				require.NoError(t, err)
				ins[0] = lp
				// The forward pass leaves its alphas in the op for the gradient.
				_, err = a.Op().Do(cloneAll(t, ins)...)
				require.NoError(t, err)
				_, err = b.Op().Do(cloneAll(t, ins)...)
				require.NoError(t, err)
				da := findOp(t, a.Graph(), "*gorgonia.ctcLossDiffOp")
				db := findOp(t, b.Graph(), "*gorgonia.ctcLossDiffOp")
				dins := append(cloneAll(t, ins), scalarOf(dt, 0.5))
				runTwins(t, da.Op(), db.Op(), dins, dt, da.Shape())
			})
		}
	}
}
