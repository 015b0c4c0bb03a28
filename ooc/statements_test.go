package ooc_test

import (
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/ooc"
)

// readNet is an MLP whose script reads, with gorgonia.Read, the cost (a
// scalar), the logits (an intermediate), a reshape of a hidden layer (a
// view), the input (a leaf) and a weight's gradient.
type readNet struct {
	*net
	reads []*G.Value
}

func readMLP(dt tensor.Dtype, seed int64) *readNet {
	rng := rand.New(rand.NewSource(seed))
	g := G.NewGraph()
	const batch, in, hid, out = 32, 12, 16, 4
	x := G.NewMatrix(g, dt, G.WithShape(batch, in), G.WithName("x"), G.WithValue(randT(rng, dt, 1, batch, in)))
	y := G.NewMatrix(g, dt, G.WithShape(batch, out), G.WithName("y"), G.WithValue(onehot(rng, dt, batch, out)))
	w1 := G.NewMatrix(g, dt, G.WithShape(in, hid), G.WithName("w1"), G.WithValue(randT(rng, dt, 0.3, in, hid)))
	w2 := G.NewMatrix(g, dt, G.WithShape(hid, hid), G.WithName("w2"), G.WithValue(randT(rng, dt, 0.3, hid, hid)))
	w3 := G.NewMatrix(g, dt, G.WithShape(hid, out), G.WithName("w3"), G.WithValue(randT(rng, dt, 0.3, hid, out)))
	h1 := G.Must(G.Tanh(G.Must(G.Mul(x, w1))))
	h2 := G.Must(G.Tanh(G.Must(G.Mul(h1, w2))))
	logits := G.Must(G.Mul(h2, w3))
	cost := softmaxCE(logits, y)
	params := G.Nodes{w1, w2, w3}
	if _, err := G.Grad(cost, params...); err != nil {
		panic(err)
	}
	n := &readNet{net: &net{g: g, x: x, y: y, cost: cost, params: params}}
	for _, node := range []*G.Node{cost, logits, G.Must(G.Reshape(h1, tensor.Shape{batch * hid})), x, w2.Deriv()} {
		v := new(G.Value)
		G.Read(node, v)
		n.reads = append(n.reads, v)
	}
	return n
}

// TestReadStatements: after every run, each gorgonia.Read destination holds
// what TapeMachine stores there, bit for bit, in core and at the least
// feasible budget (where what is read has been swapped out and back); from
// the second run on, in the value the script already holds.
func TestReadStatements(t *testing.T) {
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		run := func(t *testing.T, n *readNet, m G.VM) [][][]uint64 {
			var out [][][]uint64
			held := make([]G.Value, len(n.reads))
			for step := 0; step < 3; step++ {
				require.NoError(t, m.RunAll())
				var got [][]uint64
				for k, r := range n.reads {
					require.NotNil(t, *r, "read %d", k)
					got = append(got, bits(t, *r))
					if step > 0 {
						require.Same(t, held[k], *r, "read %d: later runs copy into the value the script holds", k)
					}
					held[k] = *r
				}
				out = append(out, got)
				require.NoError(t, G.NewVanillaSolver(G.WithLearnRate(0.1)).Step(G.NodesToValueGrads(n.params)))
				m.Reset()
			}
			return out
		}
		ref := readMLP(dt, 3)
		tm := G.NewTapeMachine(ref.g)
		want := run(t, ref, tm)
		tm.Close()
		peak, err := ooc.InCorePeak(readMLP(dt, 3).g)
		require.NoError(t, err)
		for _, mode := range []string{"baseline", "min"} {
			t.Run(dt.String()+"/"+mode, func(t *testing.T) {
				opts := []ooc.Option{ooc.WithPoison(), ooc.Baseline()}
				if mode == "min" {
					opts = []ooc.Option{ooc.WithPoison(), ooc.WithBudget(minFeasible(t, func(dt tensor.Dtype, seed int64) *net { return readMLP(dt, seed).net }, dt, peak))}
				}
				n := readMLP(dt, 3)
				m, err := ooc.Compile(n.g, opts...)
				require.NoError(t, err)
				defer m.Close()
				got := run(t, n, m)
				require.Equal(t, want, got)
				if mode == "min" {
					require.Positive(t, m.Stats().SwapInBytes)
				}
			})
		}
	}
}

// sgdNet updates its weights inside the graph, with
// gorgonia.Set(w, w - lr*dw).
func sgdNet(dt tensor.Dtype, seed int64) *net {
	rng := rand.New(rand.NewSource(seed))
	g := G.NewGraph()
	x := G.NewMatrix(g, dt, G.WithShape(16, 8), G.WithName("x"), G.WithValue(randT(rng, dt, 1, 16, 8)))
	w := G.NewMatrix(g, dt, G.WithShape(8, 8), G.WithName("w"), G.WithValue(randT(rng, dt, 0.3, 8, 8)))
	v := G.NewMatrix(g, dt, G.WithShape(8, 3), G.WithName("v"), G.WithValue(randT(rng, dt, 0.3, 8, 3)))
	h := G.Must(G.Tanh(G.Must(G.Mul(x, w))))
	cost := G.Must(G.Mean(G.Must(G.Sum(G.Must(G.Square(G.Must(G.Mul(h, v)))), 1))))
	grads, err := G.Grad(cost, w, v)
	if err != nil {
		panic(err)
	}
	lr := G.NewConstant(castTo(dt, 0.05))
	for i, p := range []*G.Node{w, v} {
		G.Set(p, G.Must(G.Sub(p, G.Must(G.HadamardProd(lr, grads[i])))))
	}
	return &net{g: g, x: x, cost: cost, params: G.Nodes{w, v}}
}

func castTo(dt tensor.Dtype, f float64) interface{} {
	if dt == tensor.Float32 {
		return float32(f)
	}
	return f
}

// TestSetStatements: a gorgonia.Set that TapeMachine carries out assigns
// to its leaf what TapeMachine assigns, bit for bit, in core and at the
// least feasible budget.
func TestSetStatements(t *testing.T) {
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		run := func(t *testing.T, n *net, m G.VM) [][]uint64 {
			var out [][]uint64
			for step := 0; step < 4; step++ {
				require.NoError(t, m.RunAll())
				out = append(out, bits(t, n.cost.Value()))
				for _, p := range n.params {
					out = append(out, bits(t, p.Value()))
				}
				m.Reset()
			}
			return out
		}
		ref := sgdNet(dt, 5)
		tm := G.NewTapeMachine(ref.g)
		want := run(t, ref, tm)
		tm.Close()
		peak, err := ooc.InCorePeak(sgdNet(dt, 5).g)
		require.NoError(t, err)
		for _, mode := range []string{"baseline", "min"} {
			t.Run(dt.String()+"/"+mode, func(t *testing.T) {
				opts := []ooc.Option{ooc.WithPoison(), ooc.Baseline()}
				if mode == "min" {
					opts = []ooc.Option{ooc.WithPoison(), ooc.WithBudget(minFeasible(t, sgdNet, dt, peak))}
				}
				n := sgdNet(dt, 5)
				m, err := ooc.Compile(n.g, opts...)
				require.NoError(t, err)
				defer m.Close()
				require.Equal(t, want, run(t, n, m))
			})
		}
	}
}

// TestSetRefusedWhereTapeMachineDoesNotAssign: TapeMachine's Set is its op
// writing over the leaf in place; where the op cannot (a matrix product, a
// unary op run through Do, a scalar) TapeMachine leaves the leaf as it was,
// and where it writes over another operand it changes that one instead.
// Compile refuses these, naming the statement.
func TestSetRefusedWhereTapeMachineDoesNotAssign(t *testing.T) {
	vec := func(g *G.ExprGraph, name string) *G.Node {
		return G.NewVector(g, tensor.Float64, G.WithShape(3), G.WithName(name), G.WithValue(tensor.New(tensor.WithBacking([]float64{1, 2, 3}))))
	}
	for _, c := range []struct {
		name string
		set  func(g *G.ExprGraph) *G.Node
	}{
		{"other operand overwritten", func(g *G.ExprGraph) *G.Node { a, c := vec(g, "a"), vec(g, "c"); return G.Set(a, G.Must(G.Add(c, a))) }},
		{"unary op", func(g *G.ExprGraph) *G.Node { a := vec(g, "a"); return G.Set(a, G.Must(G.Tanh(a))) }},
		{"matrix product", func(g *G.ExprGraph) *G.Node {
			a := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 2), G.WithName("a"), G.WithInit(G.Ones()))
			return G.Set(a, G.Must(G.Mul(a, a)))
		}},
		{"scalar", func(g *G.ExprGraph) *G.Node {
			k := G.NewScalar(g, tensor.Float64, G.WithName("k"), G.WithValue(0.0))
			return G.Set(k, G.Must(G.Add(k, G.NewConstant(1.0))))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := G.NewGraph()
			st := c.set(g)
			_, err := ooc.Compile(g)
			require.ErrorContains(t, err, st.Name())
			require.ErrorContains(t, err, "TapeMachine carries out gorgonia.Set(a, b) only by letting b's op write over its operand a")
		})
	}
}

// aeNet is a denoising-autoencoder layer as gorgonia's stacked-autoencoder
// example builds it: tied weights through Transpose, sigmoids, BinaryXent
// (whose stabilisation removes nodes) and Grad (whose pruning does too), so
// gorgonia's id lookups are stale on it.
func aeNet(dt tensor.Dtype, seed int64) *net {
	rng := rand.New(rand.NewSource(seed))
	g := G.NewGraph()
	const batch, in, hid = 16, 12, 6
	xs := randT(rng, dt, 1, batch, in)
	for i := 0; i < xs.Len(); i++ {
		f := rng.Float64()
		if dt == tensor.Float32 {
			xs.Data().([]float32)[i] = float32(f)
		} else {
			xs.Data().([]float64)[i] = f
		}
	}
	x := G.NewMatrix(g, dt, G.WithShape(batch, in), G.WithName("x"), G.WithValue(xs))
	w := G.NewMatrix(g, dt, G.WithShape(in, hid), G.WithName("w"), G.WithValue(randT(rng, dt, 0.3, in, hid)))
	b := G.NewMatrix(g, dt, G.WithShape(batch, hid), G.WithName("b"), G.WithValue(randT(rng, dt, 0.1, batch, hid)))
	hb := G.NewMatrix(g, dt, G.WithShape(batch, in), G.WithName("hb"), G.WithValue(randT(rng, dt, 0.1, batch, in)))
	h := G.Must(G.Sigmoid(G.Must(G.Add(G.Must(G.Mul(x, w)), b))))
	rec := G.Must(G.Sigmoid(G.Must(G.Add(G.Must(G.Mul(h, G.Must(G.Transpose(w)))), hb))))
	cost := G.Must(G.Mean(G.Must(G.BinaryXent(rec, x))))
	read := new(G.Value)
	G.Read(cost, read)
	params := G.Nodes{w, b, hb}
	if _, err := G.Grad(cost, params...); err != nil {
		panic(err)
	}
	return &net{g: g, x: x, cost: cost, params: params, read: read}
}

// removedNodeNet is an MLP with one extra node made before the others and
// removed with RemoveNode after gorgonia's id lookups have cached every
// node's index: the removal shifts the index behind every later id. With
// remove false the extra node stays (unused), for the reference run.
func removedNodeNet(remove bool) builder {
	return func(dt tensor.Dtype, seed int64) *net {
		rng := rand.New(rand.NewSource(seed))
		g := G.NewGraph()
		const batch, in, hid, out = 32, 10, 16, 4
		x := G.NewMatrix(g, dt, G.WithShape(batch, in), G.WithName("x"), G.WithValue(randT(rng, dt, 1, batch, in)))
		junk := G.Must(G.Square(x))
		y := G.NewMatrix(g, dt, G.WithShape(batch, out), G.WithName("y"), G.WithValue(onehot(rng, dt, batch, out)))
		w1 := G.NewMatrix(g, dt, G.WithShape(in, hid), G.WithName("w1"), G.WithValue(randT(rng, dt, 0.3, in, hid)))
		w2 := G.NewMatrix(g, dt, G.WithShape(hid, out), G.WithName("w2"), G.WithValue(randT(rng, dt, 0.3, hid, out)))
		h := G.Must(G.Tanh(G.Must(G.Mul(x, w1))))
		cost := softmaxCE(G.Must(G.Mul(h, w2)), y)
		params := G.Nodes{w1, w2}
		if _, err := G.Grad(cost, params...); err != nil {
			panic(err)
		}
		if remove {
			for _, n := range g.AllNodes() {
				g.Node(n.ID())
			}
			g.RemoveNode(junk)
		}
		return &net{g: g, x: x, y: y, cost: cost, params: params}
	}
}

func staleNodes(g *G.ExprGraph) int {
	stale := 0
	for _, n := range g.AllNodes() {
		if g.Node(n.ID()) != n {
			stale++
		}
	}
	return stale
}

// TestTraceAfterRemoveNode: on graphs where RemoveNode left gorgonia's id
// lookups stale, every function reads the node's own operands, and the run
// equals TapeMachine's bit for bit, in core and at the least feasible
// budget.
func TestTraceAfterRemoveNode(t *testing.T) {
	for _, c := range []struct {
		name       string
		build, ref builder
	}{
		{"binaryxent", aeNet, aeNet},
		{"explicit", removedNodeNet(true), removedNodeNet(false)},
	} {
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			t.Run(c.name+"/"+dt.String(), func(t *testing.T) {
				n := c.build(dt, 7)
				require.Positive(t, staleNodes(n.g), "the graph must exercise the stale id lookup")
				tr, err := ooc.NewTrace(n.g)
				require.NoError(t, err)
				for _, f := range tr.Funcs {
					var got G.Nodes
					for _, v := range f.Operands() {
						got = append(got, tr.Vars[v].Node)
					}
					require.Equal(t, ooc.Operands(f.Node), got, "operands of %s", f.Node.Name())
				}
				ref := c.ref(dt, 7)
				tm := G.NewTapeMachine(ref.g, G.BindDualValues(ref.params...))
				wantL, wantG, wantW := trainSteps(t, ref, tm, 3)
				tm.Close()
				peak, err := ooc.InCorePeak(c.build(dt, 7).g)
				require.NoError(t, err)
				for _, budget := range []int64{0, minFeasible(t, c.build, dt, peak)} {
					got := c.build(dt, 7)
					opts := []ooc.Option{ooc.BindDualValues(got.params...), ooc.WithPoison(), ooc.Baseline()}
					if budget > 0 {
						opts = []ooc.Option{ooc.BindDualValues(got.params...), ooc.WithPoison(), ooc.WithBudget(budget)}
					}
					m, err := ooc.Compile(got.g, opts...)
					require.NoError(t, err)
					gotL, gotG, gotW := trainSteps(t, got, m, 3)
					require.NoError(t, m.Close())
					require.Equal(t, wantL, gotL, "loss, budget %d", budget)
					require.Equal(t, wantG, gotG, "gradients, budget %d", budget)
					require.Equal(t, wantW, gotW, "weights, budget %d", budget)
				}
			})
		}
	}
}

// readSetNet is sgdNet's update with gorgonia.Read statements of the
// weights written before the cost, between Grad and Set, after the Set (and
// of a reshape of a weight after it): each stands at its place in the
// program, some before the update's op writes over the weight, some after.
func readSetNet(dt tensor.Dtype, seed int64) (*net, []*G.Value) {
	rng := rand.New(rand.NewSource(seed))
	g := G.NewGraph()
	x := G.NewMatrix(g, dt, G.WithShape(16, 8), G.WithName("x"), G.WithValue(randT(rng, dt, 1, 16, 8)))
	w := G.NewMatrix(g, dt, G.WithShape(8, 8), G.WithName("w"), G.WithValue(randT(rng, dt, 0.3, 8, 8)))
	v := G.NewMatrix(g, dt, G.WithShape(8, 3), G.WithName("v"), G.WithValue(randT(rng, dt, 0.3, 8, 3)))
	var reads []*G.Value
	read := func(n *G.Node) {
		r := new(G.Value)
		G.Read(n, r)
		reads = append(reads, r)
	}
	read(w)
	h := G.Must(G.Tanh(G.Must(G.Mul(x, w))))
	cost := G.Must(G.Mean(G.Must(G.Sum(G.Must(G.Square(G.Must(G.Mul(h, v)))), 1))))
	read(v)
	grads, err := G.Grad(cost, w, v)
	if err != nil {
		panic(err)
	}
	read(w)
	lr := G.NewConstant(castTo(dt, 0.05))
	for i, p := range []*G.Node{w, v} {
		G.Set(p, G.Must(G.Sub(p, G.Must(G.HadamardProd(lr, grads[i])))))
	}
	read(w)
	read(v)
	read(G.Must(G.Reshape(v, tensor.Shape{24})))
	read(cost)
	return &net{g: g, x: x, cost: cost, params: G.Nodes{w, v}}, reads
}

// TestReadOfASetLeafSeesItsPlace: a gorgonia.Read of a leaf that a
// gorgonia.Set assigns reads the value the leaf has at the Read's place in
// the program, as TapeMachine's read instruction does: before the update
// for the reads written before it, after for those written after. (Before
// the fix, every such read saw the value after the run.)
func TestReadOfASetLeafSeesItsPlace(t *testing.T) {
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		run := func(t *testing.T, reads []*G.Value, m G.VM) [][][]uint64 {
			var out [][][]uint64
			for step := 0; step < 3; step++ {
				require.NoError(t, m.RunAll())
				var got [][]uint64
				for k, r := range reads {
					require.NotNil(t, *r, "read %d", k)
					got = append(got, bits(t, *r))
				}
				out = append(out, got)
				m.Reset()
			}
			return out
		}
		ref, refReads := readSetNet(dt, 4)
		tm := G.NewTapeMachine(ref.g)
		want := run(t, refReads, tm)
		require.NoError(t, tm.Close())
		// The program's order puts some reads of w before its update and
		// some after: the test means something only if they differ.
		require.NotEqual(t, want[0][0], want[0][3], "TapeMachine read w at the same value before and after its Set")
		peak, err := ooc.InCorePeak(ref.g)
		require.NoError(t, err)
		build := func(dt tensor.Dtype, seed int64) *net { n, _ := readSetNet(dt, seed); return n }
		for _, mode := range []string{"baseline", "min"} {
			t.Run(dt.String()+"/"+mode, func(t *testing.T) {
				opts := []ooc.Option{ooc.WithPoison(), ooc.Baseline()}
				if mode == "min" {
					opts = []ooc.Option{ooc.WithPoison(), ooc.WithBudget(minFeasible(t, build, dt, peak))}
				}
				n, reads := readSetNet(dt, 4)
				m, err := ooc.Compile(n.g, opts...)
				require.NoError(t, err)
				defer m.Close()
				require.Equal(t, want, run(t, reads, m))
			})
		}
	}
}

// setLoopNet trains inside the graph as some scripts do: the learning rate
// is a scalar input the loop Lets every step (a schedule), the weights are
// updated by gorgonia.Set, and the input batch is pushed along the sign of
// its own gradient (an adversarial step) by another Set. Reads fetch the
// cost and the input as the step leaves it.
func setLoopNet(dt tensor.Dtype, seed int64) (*net, *G.Node, []*G.Value) {
	rng := rand.New(rand.NewSource(seed))
	g := G.NewGraph()
	x := G.NewMatrix(g, dt, G.WithShape(12, 6), G.WithName("x"), G.WithValue(randT(rng, dt, 1, 12, 6)))
	y := G.NewMatrix(g, dt, G.WithShape(12, 3), G.WithName("y"), G.WithValue(onehot(rng, dt, 12, 3)))
	w := G.NewMatrix(g, dt, G.WithShape(6, 8), G.WithName("w"), G.WithValue(randT(rng, dt, 0.3, 6, 8)))
	v := G.NewMatrix(g, dt, G.WithShape(8, 3), G.WithName("v"), G.WithValue(randT(rng, dt, 0.3, 8, 3)))
	lr := G.NewScalar(g, dt, G.WithName("lr"))
	h := G.Must(G.Sigmoid(G.Must(G.Mul(x, w))))
	cost := softmaxCE(G.Must(G.Mul(h, v)), y)
	grads, err := G.Grad(cost, w, v, x)
	if err != nil {
		panic(err)
	}
	for i, p := range []*G.Node{w, v} {
		G.Set(p, G.Must(G.Sub(p, G.Must(G.Mul(lr, grads[i])))))
	}
	G.Set(x, G.Must(G.Add(x, G.Must(G.Mul(G.NewConstant(castTo(dt, 0.01)), G.Must(G.Sign(grads[2])))))))
	var reads []*G.Value
	for _, n := range []*G.Node{cost, x} {
		r := new(G.Value)
		G.Read(n, r)
		reads = append(reads, r)
	}
	return &net{g: g, x: x, y: y, cost: cost, params: G.Nodes{w, v}}, lr, reads
}

// TestSetLoopWithScalarInputs: the loop of setLoopNet (a scalar learning
// rate Let before every run, Sets on the weights and on the input) gives
// what TapeMachine gives, bit for bit, in core and at the least budget.
func TestSetLoopWithScalarInputs(t *testing.T) {
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		run := func(t *testing.T, n *net, lr *G.Node, reads []*G.Value, m G.VM) [][]uint64 {
			var out [][]uint64
			for step := 0; step < 4; step++ {
				require.NoError(t, G.Let(lr, castTo(dt, 0.1/float64(step+1))))
				require.NoError(t, m.RunAll())
				for _, r := range reads {
					out = append(out, bits(t, *r))
				}
				for _, p := range append(G.Nodes{n.x}, n.params...) {
					out = append(out, bits(t, p.Value()))
				}
				m.Reset()
			}
			return out
		}
		ref, lr, reads := setLoopNet(dt, 6)
		tm := G.NewTapeMachine(ref.g)
		want := run(t, ref, lr, reads, tm)
		require.NoError(t, tm.Close())
		build := func(dt tensor.Dtype, seed int64) *net {
			n, lr, _ := setLoopNet(dt, seed)
			require.NoError(t, G.Let(lr, castTo(dt, 0.1)))
			return n
		}
		peak, err := ooc.InCorePeak(build(dt, 6).g)
		require.NoError(t, err)
		for _, mode := range []string{"baseline", "min"} {
			t.Run(dt.String()+"/"+mode, func(t *testing.T) {
				opts := []ooc.Option{ooc.WithPoison(), ooc.Baseline()}
				if mode == "min" {
					opts = []ooc.Option{ooc.WithPoison(), ooc.WithBudget(minFeasible(t, build, dt, peak))}
				}
				n, lr, reads := setLoopNet(dt, 6)
				m, err := ooc.Compile(n.g, opts...)
				require.NoError(t, err)
				defer m.Close()
				require.Equal(t, want, run(t, n, lr, reads, m))
			})
		}
	}
}
