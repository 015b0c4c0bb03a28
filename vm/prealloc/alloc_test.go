package prealloc

import (
	"fmt"
	"io"
	"log"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// heapBytes is the Go heap allocated per call of f, averaged over runs
// after one warm-up call.
func heapBytes(runs int, f func()) uint64 {
	f()
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	for i := 0; i < runs; i++ {
		f()
	}
	runtime.ReadMemStats(&b)
	return (b.TotalAlloc - a.TotalAlloc) / uint64(runs)
}

// TestNoProportionalAllocation runs each Func on tensors of megabytes and
// requires its Go-heap allocation per call to stay far below the result's
// size (Do's is at least that size). What remains is headers, and the
// goroutines some of gorgonia's kernels start per channel.
func TestNoProportionalAllocation(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates megabytes")
	}
	defer log.SetOutput(log.Writer())
	log.SetOutput(io.Discard)
	dt := tensor.Float32
	x4 := []int{16, 16, 32, 32} // 1 MiB of float32
	type c struct {
		name  string
		build func(g *G.ExprGraph) *G.Node
		limit float64 // fraction of the result's bytes allowed
	}
	grad := func(typ string, fwd func(x *G.Node) *G.Node) func(g *G.ExprGraph) *G.Node {
		return func(g *G.ExprGraph) *G.Node {
			x := input(g, dt, "x", x4...)
			gradOf(t, fwd(x), x)
			return findOp(t, g, typ)
		}
	}
	cases := []c{
		{"transpose", func(g *G.ExprGraph) *G.Node { return G.Must(G.Transpose(input(g, dt, "x", x4...), 0, 2, 3, 1)) }, 0.01},
		{"tanh", func(g *G.ExprGraph) *G.Node { return G.Must(G.Tanh(input(g, dt, "x", x4...))) }, 0.01},
		{"add", func(g *G.ExprGraph) *G.Node { return G.Must(G.Add(input(g, dt, "a", x4...), input(g, dt, "b", x4...))) }, 0.01},
		{"div", func(g *G.ExprGraph) *G.Node {
			return G.Must(G.HadamardDiv(input(g, dt, "a", x4...), input(g, dt, "b", x4...)))
		}, 0.01},
		{"softmax", func(g *G.ExprGraph) *G.Node { return G.Must(G.SoftMax(input(g, dt, "x", 256, 1024))) }, 0.01},
		{"softmax diff", func(g *G.ExprGraph) *G.Node {
			x := input(g, dt, "x", 256, 1024)
			gradOf(t, G.Must(G.SoftMax(x)), x)
			return findOp(t, g, "*gorgonia.softmaxDiffOp")
		}, 0.01},
		{"sum axis 0", func(g *G.ExprGraph) *G.Node { return G.Must(G.Sum(input(g, dt, "x", 1024, 256), 0)) }, 0.05},
		{"sum (2,3)", func(g *G.ExprGraph) *G.Node { return G.Must(G.Sum(input(g, dt, "x", 64, 64, 8, 8), 2, 3)) }, 0.05},
		{"max 1", func(g *G.ExprGraph) *G.Node { return G.Must(G.Max(input(g, dt, "x", 64, 64, 64), 1)) }, 0.05},
		{"concat", func(g *G.ExprGraph) *G.Node {
			return G.Must(G.Concat(1, input(g, dt, "a", x4...), input(g, dt, "b", x4...)))
		}, 0.01},
		{"slice", func(g *G.ExprGraph) *G.Node { return G.Must(G.Slice(input(g, dt, "x", x4...), nil, G.S(2, 14))) }, 0.01},
		{"slice incr", grad("gorgonia.sliceIncrOp", func(x *G.Node) *G.Node { return G.Must(G.Slice(x, nil, G.S(2, 14))) }), 0.01},
		{"reshape", func(g *G.ExprGraph) *G.Node {
			return G.Must(G.Reshape(input(g, dt, "x", x4...), tensor.Shape{16, 16 * 32 * 32}))
		}, 0.01},
		{"batch norm", grad("*gorgonia.BatchNormOp", func(x *G.Node) *G.Node {
			y, _, _, _, err := G.BatchNorm(x, nil, nil, 0.9, 1e-5)
			require.NoError(t, err)
			return y
		}), 0.01},
		{"batch norm diff", grad("*gorgonia.batchnormDiffOp", func(x *G.Node) *G.Node {
			y, _, _, _, err := G.BatchNorm(x, nil, nil, 0.9, 1e-5)
			require.NoError(t, err)
			return y
		}), 0.01},
		{"dropout", func(g *G.ExprGraph) *G.Node { return G.Must(G.Dropout(input(g, dt, "x", x4...), 0.5)) }, 0.01},
		{"dropout diff", grad("*gorgonia.dropoutDiffOp", func(x *G.Node) *G.Node { return G.Must(G.Dropout(x, 0.5)) }), 0.01},
		{"upsample", func(g *G.ExprGraph) *G.Node { return G.Must(G.Upsample2D(input(g, dt, "x", 16, 16, 16, 16), 2)) }, 0.01},
		{"upsample diff", func(g *G.ExprGraph) *G.Node {
			x := input(g, dt, "x", 16, 16, 16, 16)
			gradOf(t, G.Must(G.Upsample2D(x, 2)), x)
			return findOp(t, g, "*gorgonia.upsampleDiffOp")
		}, 0.01},
		{"avg pool", func(g *G.ExprGraph) *G.Node {
			return G.Must(G.AveragePool2D(input(g, dt, "x", x4...), tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}))
		}, 0.01},
		{"avg pool diff", grad("*gorgonia.avgPoolDiffOp", func(x *G.Node) *G.Node {
			return G.Must(G.AveragePool2D(x, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}))
		}), 0.01},
		{"max pool", func(g *G.ExprGraph) *G.Node {
			return G.Must(G.MaxPool2D(input(g, dt, "x", x4...), tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}))
		}, 0.01},
		{"global avg pool", func(g *G.ExprGraph) *G.Node { return G.Must(G.GlobalAveragePool2D(input(g, dt, "x", x4...))) }, 0.01},
		// gonum's gemm starts workers.
		{"matmul", func(g *G.ExprGraph) *G.Node {
			return G.Must(G.Mul(input(g, dt, "a", 512, 64), input(g, dt, "b", 64, 512)))
		}, 0.02},
		{"tensordot", func(g *G.ExprGraph) *G.Node {
			return G.Must(G.Tensordot([]int{2}, []int{0}, input(g, dt, "a", 16, 32, 64), input(g, dt, "b", 64, 512)))
		}, 0.02},
		{"by indices", func(g *G.ExprGraph) *G.Node {
			idx := make([]int, 1024)
			for i := range idx {
				idx[i] = (i * 7) % 256
			}
			ix := G.NewVector(g, tensor.Int, G.WithShape(1024), G.WithName("i"), G.WithValue(tensor.New(tensor.WithBacking(idx))))
			return G.Must(G.ByIndices(input(g, dt, "x", 256, 256), ix, 0))
		}, 0.01},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := G.NewGraph()
			n := c.build(g)
			if fmt.Sprintf("%T", n.Op()) == "*gorgonia.dropoutOp" {
				setGenerator(t, n.Op(), 1)
			}
			f, ok := For(n.Op())
			require.True(t, ok)
			ins := inputsOf(n, 1)
			out := poisoned(n.Dtype(), n.Shape()...)
			// Do allocates the result (and more); the bound is against
			// the larger of the result and the inputs.
			size := float64(len(out.Raw))
			for _, in := range ins {
				if d, ok := in.(*tensor.Dense); ok && float64(len(d.Raw)) > size {
					size = float64(len(d.Raw))
				}
			}
			mine := heapBytes(3, func() { require.NoError(t, f(out, ins...)) })
			theirs := heapBytes(1, func() {
				_, err := n.Op().Do(ins...)
				require.NoError(t, err)
			})
			t.Logf("%-16s tensors %8.0f KiB: Func %7d B/call, Do %9d B/call", c.name, size/1024, mine, theirs)
			require.Less(t, float64(mine), max(c.limit*size, 4096), "Func allocates %d bytes for %.0f-byte tensors", mine, size)
		})
	}
}

// GroupNorm's kernel allocates scratch vectors inside gorgonia, in Do and
// in the Func alike: measured here, not bounded.
func TestGroupNormAllocation(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates megabytes")
	}
	g := G.NewGraph()
	x := input(g, tensor.Float32, "x", 16, 16, 32, 32)
	scale := G.NewTensor(g, tensor.Float32, 4, G.WithShape(1, 16, 1, 1), G.WithName("s"), G.WithInit(G.Ones()))
	bias := G.NewTensor(g, tensor.Float32, 4, G.WithShape(1, 16, 1, 1), G.WithName("b"), G.WithInit(G.Zeroes()))
	_, err := G.GroupNorm(x, scale, bias, 4, 16, 1e-5)
	require.NoError(t, err)
	n := findOp(t, g, "*gorgonia.GroupNormOp")
	f, ok := For(n.Op())
	require.True(t, ok)
	ins := inputsOf(n, 1)
	out := poisoned(tensor.Float32, n.Shape()...)
	mine := heapBytes(2, func() { require.NoError(t, f(out, ins...)) })
	t.Logf("GroupNorm: result %d KiB, Func allocates %d B/call (gorgonia's rowwiseMoments)", len(out.Raw)/1024, mine)
}

// TestFuncsNoAllocation: the Funcs of the ops a training step of the bundled models runs
// through this package allocate nothing per call once warm (the shapes and strides they work
// with stay on the stack).
func TestFuncsNoAllocation(t *testing.T) {
	dt := tensor.Float32
	cases := []struct {
		name  string
		build func(g *G.ExprGraph) *G.Node
	}{
		{"concat", func(g *G.ExprGraph) *G.Node {
			return G.Must(G.Concat(1, input(g, dt, "a", 4, 3, 5), input(g, dt, "b", 4, 2, 5)))
		}},
		{"transpose", func(g *G.ExprGraph) *G.Node { return G.Must(G.Transpose(input(g, dt, "x", 2, 3, 4), 2, 0, 1)) }},
		{"sum axis 0", func(g *G.ExprGraph) *G.Node { return G.Must(G.Sum(input(g, dt, "x", 6, 5), 0)) }},
		{"sum axis 1", func(g *G.ExprGraph) *G.Node { return G.Must(G.Sum(input(g, dt, "x", 6, 5), 1)) }},
		{"reshape", func(g *G.ExprGraph) *G.Node { return G.Must(G.Reshape(input(g, dt, "x", 6, 5), tensor.Shape{3, 10})) }},
		{"slice", func(g *G.ExprGraph) *G.Node { return G.Must(G.Slice(input(g, dt, "x", 4, 6, 5), nil, G.S(1, 4))) }},
		{"log softmax", func(g *G.ExprGraph) *G.Node { return G.Must(G.LogSoftMax(input(g, dt, "x", 6, 5), 1)) }},
		{"matmul", func(g *G.ExprGraph) *G.Node { return G.Must(G.Mul(input(g, dt, "a", 6, 5), input(g, dt, "b", 5, 4))) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := c.build(G.NewGraph())
			f, ok := For(n.Op())
			require.True(t, ok)
			ins := inputsOf(n, 1)
			out := poisoned(n.Dtype(), n.Shape()...)
			run := func() { require.NoError(t, f(out, ins...)) }
			run()
			require.Zero(t, testing.AllocsPerRun(5, run), "allocations per call")
		})
	}
}

// TestInferredSizeMemo: the check of out against the op's inferred shape is remembered only
// for exactly the shapes it passed with (a scalar operand only as a scalar); the Func still
// refuses outs and operands of other shapes after a good call.
func TestInferredSizeMemo(t *testing.T) {
	var m sizeMemo
	a, v := filled(tensor.Float64, 1, 3, 4), filled(tensor.Float64, 2, 4)
	out := poisoned(tensor.Float64, 3)
	require.False(t, m.holds(out, []G.Value{a, v}))
	m.remember(out, []G.Value{a, v})
	require.True(t, m.holds(out, []G.Value{a, v}))
	require.True(t, m.holds(poisoned(tensor.Float64, 3), []G.Value{filled(tensor.Float64, 5, 3, 4), v}), "other values, same shapes")
	require.False(t, m.holds(poisoned(tensor.Float64, 4), []G.Value{a, v}))
	require.False(t, m.holds(poisoned(tensor.Float64, 3, 1), []G.Value{a, v}))
	require.False(t, m.holds(out, []G.Value{filled(tensor.Float64, 1, 4, 3), v}))
	require.False(t, m.holds(out, []G.Value{a}))
	require.False(t, m.holds(out, []G.Value{a, G.NewF64(4)}))
	m.remember(out, []G.Value{a, G.NewF64(4)})
	require.True(t, m.holds(out, []G.Value{a, G.NewF64(7)}))
	require.False(t, m.holds(out, []G.Value{a, v}))

	g := G.NewGraph()
	n := G.Must(G.Mul(input(g, tensor.Float64, "a", 3, 4), input(g, tensor.Float64, "v", 4)))
	f, ok := For(n.Op())
	require.True(t, ok)
	ins := inputsOf(n, 1)
	require.NoError(t, f(poisoned(tensor.Float64, 3), ins...))
	require.Error(t, f(poisoned(tensor.Float64, 4), ins...), "out of the wrong size after a good call")
	require.NoError(t, f(poisoned(tensor.Float64, 3), ins...))
}

// TestKeepShapeNoAllocation: keeping out's shape around an op's own UsePreallocDo costs nothing
// when the op leaves the shape alone, and restores it when the op reshaped out.
func TestKeepShapeNoAllocation(t *testing.T) {
	out := poisoned(tensor.Float32, 3, 4)
	keep := func() {
		var ks keepShape
		ks.save(out)
		ks.restore(out)
	}
	require.Zero(t, testing.AllocsPerRun(10, keep))
	var ks keepShape
	ks.save(out)
	require.NoError(t, out.Reshape(12))
	ks.restore(out)
	require.Equal(t, []int{3, 4}, []int(out.Shape()))
}
