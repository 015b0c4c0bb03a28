package ooc_test

import (
	"fmt"
	"math"
	"math/rand"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm"
)

// Programs ported from gorgonia code people publish (gorgonia's own
// examples/ directory, and the patterns of third-party repositories:
// VAEs, GANs, DQN agents, seq2seq, transformers, word2vec, policy
// gradients), each with its own training loop: what it Lets before each
// run, what it reads after (node values, gorgonia.Read destinations,
// gradients), its solver or its in-graph update, Reset. Each is built
// twice from the same seed, run by gorgonia's TapeMachine and by
// ooc.Compile (in core, and at the least feasible budget with fresh
// device memory poisoned), and everything the loop reads, and the weights
// at the end, must agree bit for bit.
//
// The programs marked long run only with OOC_PROGRAMS_LONG=1 (and never
// under -short).

// realRun is one build of a ported program.
type realRun struct {
	g *G.ExprGraph
	// learn: the learnables the script binds with BindDualValues (none:
	// the script's TapeMachine binds nothing).
	learn G.Nodes
	// outs: the nodes the script's gorgonia.CompileFunction names as
	// outputs; ooc.WithOutputs names them.
	outs G.Nodes
	// more: the script's other graphs, each with its own machine (a GAN's
	// generator step), weights shared with g through their tensors.
	more []*realRun
	// step is one iteration of the script's loop, given a machine per
	// graph (g's first, then more's); it returns the bits of everything
	// the script reads in it.
	step func(t *testing.T, ms []G.VM, i int) [][]uint64
	// final: nodes whose values are compared after the last step.
	final G.Nodes
}

type realProgram struct {
	from  string // where the pattern comes from
	dts   []tensor.Dtype
	steps int
	long  bool
	build func(dt tensor.Dtype) *realRun
}

var bothDtypes = []tensor.Dtype{tensor.Float32, tensor.Float64}

// graphs is g and more, as realRuns of their own.
func (r *realRun) graphs() []*realRun { return append([]*realRun{r}, r.more...) }

func (r *realRun) oocOptions() []ooc.Option {
	opts := []ooc.Option{ooc.WithPoison()}
	if len(r.learn) > 0 {
		opts = append(opts, ooc.BindDualValues(r.learn...))
	}
	if len(r.outs) > 0 {
		opts = append(opts, ooc.WithOutputs(r.outs...))
	}
	return opts
}

func (r *realRun) run(t *testing.T, ms []G.VM, steps int) [][]uint64 {
	t.Helper()
	var out [][]uint64
	for i := 0; i < steps; i++ {
		out = append(out, r.step(t, ms, i)...)
	}
	for _, n := range r.final {
		out = append(out, valueBits(t, n.Value()))
	}
	return out
}

// checkRealPrograms runs each program under TapeMachine and out of core, in
// core and at the least feasible budget, and compares what its loop reads.
func checkRealPrograms(t *testing.T, progs map[string]realProgram) {
	long := os.Getenv("OOC_PROGRAMS_LONG") == "1" && !testing.Short()
	for _, name := range sortedNames(progs) {
		p := progs[name]
		for _, dt := range p.dts {
			t.Run(name+"/"+dt.String(), func(t *testing.T) {
				if p.long && !long {
					t.Skip("long program: set OOC_PROGRAMS_LONG=1 to run it")
				}
				ref := p.build(dt)
				var tms []G.VM
				for _, r := range ref.graphs() {
					var tmOpts []G.VMOpt
					if len(r.learn) > 0 {
						tmOpts = append(tmOpts, G.BindDualValues(r.learn...))
					}
					tms = append(tms, G.NewTapeMachine(r.g, tmOpts...))
				}
				want := ref.run(t, tms, p.steps)
				for _, tm := range tms {
					require.NoError(t, tm.Close())
				}

				// The least feasible budget of each graph.
				var peaks, leasts []int64
				for k, probe := range p.build(dt).graphs() {
					inCore, err := ooc.Plan(probe.g, append(probe.oocOptions(), ooc.Baseline())...)
					require.NoError(t, err)
					peaks = append(peaks, inCore.Peak)
					leasts = append(leasts, leastBudget(inCore.Peak, func(b int64) bool {
						r := p.build(dt).graphs()[k]
						_, err := ooc.Plan(r.g, append(r.oocOptions(), ooc.WithBudget(b))...)
						return err == nil
					}))
				}
				for _, least := range []bool{false, true} {
					got := p.build(dt)
					var ms []G.VM
					for k, r := range got.graphs() {
						opts := append(r.oocOptions(), ooc.Baseline())
						if least {
							opts = append(r.oocOptions(), ooc.WithBudget(leasts[k]))
						}
						m, err := ooc.Compile(r.g, opts...)
						require.NoError(t, err, "least budget %v", least)
						ms = append(ms, m)
					}
					res := got.run(t, ms, p.steps)
					for k, m := range ms {
						st := m.(interface{ Stats() vm.Stats }).Stats()
						require.NoError(t, m.Close())
						if least {
							require.LessOrEqual(t, st.PeakDeviceBytes, leasts[k])
						}
					}
					requireSameReads(t, want, res, "least budget %v %v (in-core peaks %v), from %s", least, leasts, peaks, p.from)
				}
			})
		}
	}
}

// requireSameReads fails naming the first read that differs (the full
// dumps of require.Equal are unreadable for these programs).
func requireSameReads(t *testing.T, want, got [][]uint64, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	require.Equal(t, len(want), len(got), msg)
	for k := range want {
		if len(want[k]) != len(got[k]) {
			t.Fatalf("read %d: %d values, want %d (%s)", k, len(got[k]), len(want[k]), msg)
		}
		diff := 0
		first := -1
		for j := range want[k] {
			if want[k][j] != got[k][j] {
				diff++
				if first < 0 {
					first = j
				}
			}
		}
		if diff > 0 {
			t.Fatalf("read %d of %d: %d of %d values differ, the first at %d: %#x, want %#x (%s)",
				k, len(want), diff, len(want[k]), first, got[k][first], want[k][first], msg)
		}
	}
}

// valueBits is bits for any value a script reads: floats, and the bool
// and int tensors of comparisons and indices.
func valueBits(t *testing.T, v G.Value) []uint64 {
	t.Helper()
	require.NotNil(t, v, "a value the script reads is nil")
	switch d := v.Data().(type) {
	case []bool:
		out := make([]uint64, len(d))
		for i, b := range d {
			if b {
				out[i] = 1
			}
		}
		return out
	case bool:
		if d {
			return []uint64{1}
		}
		return []uint64{0}
	case []int:
		out := make([]uint64, len(d))
		for i, x := range d {
			out[i] = uint64(x)
		}
		return out
	case int:
		return []uint64{uint64(d)}
	}
	return bits(t, v)
}

// reads returns the bits of what a script reads after a run: a node's
// Value(), a gorgonia.Read destination, or (gradOf) a learnable's Grad().
func reads(t *testing.T, what ...any) [][]uint64 {
	t.Helper()
	var out [][]uint64
	for _, w := range what {
		switch w := w.(type) {
		case *G.Node:
			out = append(out, valueBits(t, w.Value()))
		case *G.Value:
			out = append(out, valueBits(t, *w))
		case gradOf:
			for _, p := range w {
				g, err := p.Grad()
				require.NoError(t, err, p.Name())
				out = append(out, valueBits(t, g))
			}
		default:
			t.Fatalf("cannot read %T", w)
		}
	}
	return out
}

// gradOf asks reads for the gradients of learnables.
type gradOf G.Nodes

// stepData is the data a loop's step i Lets: the same in both runs.
func stepData(i int) *rand.Rand { return rand.New(rand.NewSource(int64(1000 + i))) }

func let(t *testing.T, n *G.Node, v any) {
	t.Helper()
	require.NoError(t, G.Let(n, v))
}

func scalarOf(dt tensor.Dtype, v float64) any { return castTo(dt, v) }

// trainLoop is the loop most scripts write: Let the step's data, RunAll,
// read, step each solver on its learnables, Reset.
func trainLoop(lets func(t *testing.T, i int), readList []any, solvers ...solverOn) func(t *testing.T, ms []G.VM, i int) [][]uint64 {
	return func(t *testing.T, ms []G.VM, i int) [][]uint64 {
		m := ms[0]
		if lets != nil {
			lets(t, i)
		}
		require.NoError(t, m.RunAll())
		out := reads(t, readList...)
		for _, s := range solvers {
			require.NoError(t, s.solver.Step(G.NodesToValueGrads(s.params)))
		}
		m.Reset()
		return out
	}
}

type solverOn struct {
	solver G.Solver
	params G.Nodes
}

func mustGrad(cost *G.Node, params ...*G.Node) G.Nodes {
	grads, err := G.Grad(cost, params...)
	if err != nil {
		panic(err)
	}
	return grads
}

var realPrograms = map[string]realProgram{
	// examples/iris: linear regression on a design matrix made with
	// NodeFromAny, a parameter vector (a matrix-vector Mul), the prediction
	// read with gorgonia.Read, the vanilla solver stepped on
	// []ValueGrad{theta}; the loop prints theta, the cost and the
	// accuracy from the prediction.
	"iris-linreg": {from: "gorgonia examples/iris", dts: bothDtypes, steps: 4, build: func(dt tensor.Dtype) *realRun {
		rng := rand.New(rand.NewSource(1))
		g := G.NewGraph()
		const n, feats = 30, 8
		X := G.NodeFromAny(g, randT(rng, dt, 1, n, feats), G.WithName("x"))
		Y := G.NodeFromAny(g, randT(rng, dt, 1, n), G.WithName("y"))
		theta := G.NewVector(g, dt, G.WithName("theta"), G.WithShape(feats), G.WithValue(randT(rng, dt, 1, feats)))
		pred := G.Must(G.Mul(X, theta))
		predicted := new(G.Value)
		G.Read(pred, predicted)
		cost := G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(pred, Y))))))
		mustGrad(cost, theta)
		solver := G.NewVanillaSolver(G.WithLearnRate(0.01))
		model := []G.ValueGrad{theta}
		return &realRun{g: g, learn: G.Nodes{theta}, final: G.Nodes{theta},
			step: func(t *testing.T, ms []G.VM, i int) [][]uint64 {
				m := ms[0]
				require.NoError(t, m.RunAll())
				require.NoError(t, solver.Step(model))
				out := reads(t, theta, cost, predicted)
				m.Reset()
				return out
			}}
	}},

	// examples/charRNN: an LSTM over one-sample vectors (weights times the
	// input vector, vector biases), the input an embedding row sliced by
	// the source character, SoftMax of a vector, the loss -log p sliced at
	// the target character and summed over the sentence, a log2 perplexity
	// read with gorgonia.Read beside the cost, RMSProp with L2 and clipping.
	"charrnn": {from: "gorgonia examples/charRNN", dts: bothDtypes, steps: 3, build: func(dt tensor.Dtype) *realRun {
		rng := rand.New(rand.NewSource(2))
		g := G.NewGraph()
		const vocab, emb, hid = 8, 8, 8
		w := func(name string, s float64, shape ...int) *G.Node {
			return G.NodeFromAny(g, randT(rng, dt, s, shape...), G.WithName(name))
		}
		zeros := func(name string, n int) *G.Node {
			return G.NodeFromAny(g, tensor.New(tensor.Of(dt), tensor.WithShape(n)), G.WithName(name))
		}
		var learn G.Nodes
		type gate struct{ wx, wh, b *G.Node }
		gates := make([]gate, 4)
		for k, name := range []string{"i", "f", "o", "c"} {
			gates[k] = gate{w("wx"+name, 0.3, hid, emb), w("wh"+name, 0.3, hid, hid), zeros("bias_"+name, hid)}
			learn = append(learn, gates[k].wx, gates[k].wh, gates[k].b)
		}
		whd, biasD := w("whd", 0.3, vocab, hid), zeros("bias_d", vocab)
		embedding := w("embedding", 0.5, vocab, emb)
		learn = append(learn, whd, biasD, embedding)
		hidden, cell := zeros("prevHidden", hid), zeros("prevCell", hid)
		affine := func(k int, x, h *G.Node) *G.Node {
			return G.Must(G.Add(G.Must(G.Add(G.Must(G.Mul(gates[k].wx, x)), G.Must(G.Mul(gates[k].wh, h)))), gates[k].b))
		}
		var cost, perp *G.Node
		sentence := []int{0, 3, 5, 2, 6, 1}
		for i := 0; i+1 < len(sentence); i++ {
			x := G.Must(G.Slice(embedding, G.S(sentence[i])))
			in := G.Must(G.Sigmoid(affine(0, x, hidden)))
			forget := G.Must(G.Sigmoid(affine(1, x, hidden)))
			outg := G.Must(G.Sigmoid(affine(2, x, hidden)))
			write := G.Must(G.Tanh(affine(3, x, hidden)))
			cell = G.Must(G.Add(G.Must(G.HadamardProd(forget, cell)), G.Must(G.HadamardProd(in, write))))
			hidden = G.Must(G.HadamardProd(outg, G.Must(G.Tanh(cell))))
			probs := G.Must(G.SoftMax(G.Must(G.Add(G.Must(G.Mul(whd, hidden)), biasD))))
			loss := G.Must(G.Slice(G.Must(G.Neg(G.Must(G.Log(probs)))), G.S(sentence[i+1])))
			p := G.Must(G.Slice(G.Must(G.Neg(G.Must(G.Log2(probs)))), G.S(sentence[i+1])))
			if cost == nil {
				cost, perp = loss, p
			} else {
				cost, perp = G.Must(G.Add(cost, loss)), G.Must(G.Add(perp, p))
			}
		}
		costVal, perpVal := new(G.Value), new(G.Value)
		G.Read(perp, perpVal)
		G.Read(cost, costVal)
		mustGrad(cost, learn...)
		solver := G.NewRMSPropSolver(G.WithLearnRate(0.05), G.WithL2Reg(1e-4), G.WithClip(5))
		return &realRun{g: g, learn: learn, final: learn,
			step: trainLoop(nil, []any{costVal, perpVal, gradOf(learn)}, solverOn{solver, learn})}
	}},

	// examples/logisticregression: no solver, the update is in the graph
	// (w - lr * dcost/dw, with the gradients Grad returned), which the
	// script names as outputs of gorgonia.CompileFunction (WithOutputs
	// here); a bool prediction (Gt without retSame) read with gorgonia.Read;
	// binary cross-entropy written by hand with constants; an L2 term; the
	// weights Let after the machine is made; each step Resets, Lets the
	// data, runs, and sets w and b to their updates.
	"logreg-in-graph-update": {from: "gorgonia examples/logisticregression", dts: bothDtypes, steps: 4, build: func(dt tensor.Dtype) *realRun {
		rng := rand.New(rand.NewSource(3))
		g := G.NewGraph()
		const n, feats = 64, 8
		x := G.NewMatrix(g, dt, G.WithName("x"), G.WithShape(n, feats))
		y := G.NewVector(g, dt, G.WithName("y"), G.WithShape(n))
		w := G.NewVector(g, dt, G.WithName("w"), G.WithShape(feats))
		b := G.NewScalar(g, dt, G.WithName("bias"))
		one := G.NewConstant(scalarOf(dt, 1))
		prob := G.Must(G.Sigmoid(G.Must(G.Add(G.Must(G.Mul(x, w)), b))))
		pred := G.Must(G.Gt(prob, G.NewConstant(scalarOf(dt, 0.5)), false))
		predicted := new(G.Value)
		G.Read(pred, predicted)
		fst := G.Must(G.HadamardProd(G.Must(G.Neg(y)), G.Must(G.Log(prob))))
		snd := G.Must(G.HadamardProd(G.Must(G.Sub(one, y)), G.Must(G.Log(G.Must(G.Sub(one, prob))))))
		loss := G.Must(G.Mean(G.Must(G.Sub(fst, snd))))
		reg := G.Must(G.Mul(G.NewConstant(scalarOf(dt, 0.01), G.WithName("l2reg")), G.Must(G.Sum(G.Must(G.Square(w))))))
		cost := G.Must(G.Add(loss, reg))
		grads := mustGrad(cost, w, b)
		lr := G.NewConstant(scalarOf(dt, 0.1))
		wUpd := G.Must(G.Sub(w, G.Must(G.Mul(lr, grads[0]))))
		bUpd := G.Must(G.Sub(b, G.Must(G.Mul(lr, grads[1]))))
		xs := randT(rng, dt, 1, n, feats)
		ys := tensor.New(tensor.Of(dt), tensor.WithShape(n))
		for i := 0; i < n; i++ {
			setAt(ys, i, float64(rng.Intn(2)))
		}
		wT := randT(rng, dt, 0.5, feats)
		return &realRun{g: g, outs: G.Nodes{wUpd, bUpd}, final: G.Nodes{w, b},
			step: func(t *testing.T, ms []G.VM, i int) [][]uint64 {
				m := ms[0]
				if i == 0 {
					let(t, w, wT)
					let(t, b, scalarOf(dt, 0))
				}
				m.Reset()
				let(t, x, xs)
				let(t, y, ys)
				require.NoError(t, m.RunAll())
				out := reads(t, predicted, cost, wUpd, bUpd)
				setNode(t, m, w, wUpd)
				setNode(t, m, b, bUpd)
				return out
			}}
	}},

	// A VAE as third-party gorgonia VAEs write it: an encoder to a mean
	// and a log-variance, the reparameterisation with noise the loop Lets
	// each step (gorgonia's random nodes are clock-seeded), a sigmoid
	// decoder, the reconstruction's cross-entropy written by hand, the KL
	// term, a KL weight that is a scalar input Let each step (annealing),
	// Adam.
	"vae": {from: "third-party gorgonia VAEs (reparameterisation trick)", dts: bothDtypes, steps: 3, build: func(dt tensor.Dtype) *realRun {
		c := &userCtx{g: G.NewGraph(), dt: dt, rng: rand.New(rand.NewSource(4))}
		const batch, in, hid, lat = 8, 16, 12, 4
		x := G.NewMatrix(c.g, dt, G.WithShape(batch, in), G.WithName("x"))
		eps := G.NewMatrix(c.g, dt, G.WithShape(batch, lat), G.WithName("eps"))
		beta := G.NewScalar(c.g, dt, G.WithName("beta"))
		w1, b1 := c.leaf("w1", 0.3, in, hid), c.leaf("b1", 0.1, hid)
		wmu, wlv := c.leaf("wmu", 0.3, hid, lat), c.leaf("wlv", 0.3, hid, lat)
		wd1, wd2 := c.leaf("wd1", 0.3, lat, hid), c.leaf("wd2", 0.3, hid, in)
		h := G.Must(G.Tanh(G.Must(G.BroadcastAdd(G.Must(G.Mul(x, w1)), b1, nil, []byte{0}))))
		mu := G.Must(G.Mul(h, wmu))
		logvar := G.Must(G.Mul(h, wlv))
		std := G.Must(G.Exp(G.Must(G.Mul(logvar, c.scalar(0.5)))))
		z := G.Must(G.Add(mu, G.Must(G.HadamardProd(std, eps))))
		xr := G.Must(G.Sigmoid(G.Must(G.Mul(G.Must(G.Rectify(G.Must(G.Mul(z, wd1)))), wd2))))
		one := c.scalar(1)
		bce := G.Must(G.Add(G.Must(G.HadamardProd(x, G.Must(G.Log(xr)))), G.Must(G.HadamardProd(G.Must(G.Sub(one, x)), G.Must(G.Log(G.Must(G.Sub(one, xr))))))))
		recon := G.Must(G.Neg(G.Must(G.Sum(bce))))
		kl := G.Must(G.Mul(c.scalar(-0.5), G.Must(G.Sum(G.Must(G.Sub(G.Must(G.Sub(G.Must(G.Add(one, logvar)), G.Must(G.Square(mu)))), G.Must(G.Exp(logvar))))))))
		cost := G.Must(G.Div(G.Must(G.Add(recon, G.Must(G.Mul(beta, kl)))), c.scalar(batch)))
		learn := G.Nodes{w1, b1, wmu, wlv, wd1, wd2}
		mustGrad(cost, learn...)
		recVal := new(G.Value)
		G.Read(xr, recVal)
		solver := G.NewAdamSolver(G.WithLearnRate(0.01))
		lets := func(t *testing.T, i int) {
			r := stepData(i)
			let(t, x, randUnit(r, dt, batch, in))
			let(t, eps, randT(r, dt, 1, batch, lat))
			let(t, beta, scalarOf(dt, 0.25*float64(i+1)))
		}
		return &realRun{g: c.g, learn: learn, final: learn,
			step: trainLoop(lets, []any{cost, recon, kl, recVal, gradOf(learn)}, solverOn{solver, learn})}
	}},

	// A GAN as gorgonia GAN code writes it: gorgonia.Grad cannot run twice
	// over shared nodes ("No gradients found for node"), so the
	// discriminator's step and the generator's step are two graphs with two
	// machines, their weights shared through the tensors both graphs'
	// nodes are made from (NodeFromAny), each graph's own learnables bound
	// to dual values and stepped by their own Adam solver; noise and real
	// batches Let each step; the generator's step sees the weights the
	// discriminator's solver has just updated.
	"gan": {from: "third-party gorgonia GANs (two graphs sharing weight tensors, two solvers)", dts: bothDtypes, steps: 3, build: func(dt tensor.Dtype) *realRun {
		rng := rand.New(rand.NewSource(5))
		const batch, noise, hid, feat = 8, 4, 8, 6
		gT1, gT2 := randT(rng, dt, 0.4, noise, hid), randT(rng, dt, 0.4, hid, feat)
		dT1, dT2 := randT(rng, dt, 0.4, feat, hid), randT(rng, dt, 0.4, hid, 1)
		type half struct {
			g              *G.ExprGraph
			z              *G.Node
			g1, g2, d1, d2 *G.Node
			fake, dFake    *G.Node
		}
		disc := func(h *half, in *G.Node) *G.Node {
			return G.Must(G.Sigmoid(G.Must(G.Mul(G.Must(G.LeakyRelu(G.Must(G.Mul(in, h.d1)), 0.2)), h.d2))))
		}
		mk := func() *half {
			h := &half{g: G.NewGraph()}
			h.z = G.NewMatrix(h.g, dt, G.WithShape(batch, noise), G.WithName("z"))
			h.g1, h.g2 = G.NodeFromAny(h.g, gT1, G.WithName("g1")), G.NodeFromAny(h.g, gT2, G.WithName("g2"))
			h.d1, h.d2 = G.NodeFromAny(h.g, dT1, G.WithName("d1")), G.NodeFromAny(h.g, dT2, G.WithName("d2"))
			h.fake = G.Must(G.Tanh(G.Must(G.Mul(G.Must(G.LeakyRelu(G.Must(G.Mul(h.z, h.g1)), 0.2)), h.g2))))
			h.dFake = disc(h, h.fake)
			return h
		}
		dh, gh := mk(), mk()
		real := G.NewMatrix(dh.g, dt, G.WithShape(batch, feat), G.WithName("real"))
		one := G.NewConstant(scalarOf(dt, 1))
		dCost := G.Must(G.Neg(G.Must(G.Mean(G.Must(G.Add(G.Must(G.Log(disc(dh, real))), G.Must(G.Log(G.Must(G.Sub(one, dh.dFake))))))))))
		gCost := G.Must(G.Neg(G.Must(G.Mean(G.Must(G.Log(gh.dFake))))))
		dParams, gParams := G.Nodes{dh.d1, dh.d2}, G.Nodes{gh.g1, gh.g2}
		mustGrad(dCost, dParams...)
		mustGrad(gCost, gParams...)
		dSolver, gSolver := G.NewAdamSolver(G.WithLearnRate(0.02)), G.NewAdamSolver(G.WithLearnRate(0.01))
		return &realRun{g: dh.g, learn: dParams, more: []*realRun{{g: gh.g, learn: gParams}},
			final: G.Nodes{dh.d1, dh.d2, gh.g1, gh.g2, gh.d1, dh.g2},
			step: func(t *testing.T, ms []G.VM, i int) [][]uint64 {
				r := stepData(i)
				let(t, dh.z, randT(r, dt, 1, batch, noise))
				let(t, real, randT(r, dt, 0.5, batch, feat))
				require.NoError(t, ms[0].RunAll())
				out := reads(t, dCost, dh.fake, gradOf(dParams))
				require.NoError(t, dSolver.Step(G.NodesToValueGrads(dParams)))
				ms[0].Reset()
				let(t, gh.z, randT(r, dt, 1, batch, noise))
				require.NoError(t, ms[1].RunAll())
				out = append(out, reads(t, gCost, gradOf(gParams))...)
				require.NoError(t, gSolver.Step(G.NodesToValueGrads(gParams)))
				ms[1].Reset()
				return out
			}}
	}},

	// A transformer encoder block on a (batch, seq, dim) tensor: Q, K, V by
	// reshaping to rows for Mul and back, scores by BatchedMatMul with the
	// second operand transposed (the flag in one head, Transpose with axes
	// in the other), SoftMax along axis 2, a second BatchedMatMul, heads
	// joined by Concat on axis 2, a residual, LayerNorm written by hand
	// (Mean and variance along the last axis, BroadcastSub,
	// BroadcastHadamardDiv by Sqrt(var + eps), a gain and bias broadcast
	// over batch and sequence), a ReLU feed-forward, mean pooling over the
	// sequence, softmax cross-entropy, Adam.
	"transformer-block": {from: "third-party gorgonia transformers (attention, hand-written LayerNorm)", dts: bothDtypes, steps: 3, build: func(dt tensor.Dtype) *realRun {
		c := &userCtx{g: G.NewGraph(), dt: dt, rng: rand.New(rand.NewSource(6))}
		const batch, seq, dim, head, classes = 2, 5, 8, 4, 3
		x := c.leaf("x", 1, batch, seq, dim)
		y := G.NewMatrix(c.g, dt, G.WithShape(batch, classes), G.WithName("y"), G.WithValue(onehot(c.rng, dt, batch, classes)))
		rows := func(n *G.Node) *G.Node { return G.Must(G.Reshape(n, tensor.Shape{batch * seq, n.Shape()[2]})) }
		proj := func(n, w *G.Node) *G.Node {
			return G.Must(G.Reshape(G.Must(G.Mul(rows(n), w)), tensor.Shape{batch, seq, w.Shape()[1]}))
		}
		var learn G.Nodes
		var heads G.Nodes
		for hd := 0; hd < 2; hd++ {
			wq, wk, wv := c.leaf("wq", 0.3, dim, head), c.leaf("wk", 0.3, dim, head), c.leaf("wv", 0.3, dim, head)
			learn = append(learn, wq, wk, wv)
			q, k, v := proj(x, wq), proj(x, wk), proj(x, wv)
			var scores *G.Node
			if hd == 0 {
				scores = G.Must(G.BatchedMatMul(q, k, false, true))
			} else {
				scores = G.Must(G.BatchedMatMul(q, G.Must(G.Transpose(k, 0, 2, 1))))
			}
			scores = G.Must(G.Mul(scores, c.scalar(1/math.Sqrt(head))))
			att := G.Must(G.SoftMax(scores, 2))
			heads = append(heads, G.Must(G.BatchedMatMul(att, v)))
		}
		wo := c.leaf("wo", 0.3, 2*head, dim)
		h := G.Must(G.Add(x, proj(G.Must(G.Concat(2, heads...)), wo)))
		gain, bias := c.leaf("gain", 0.1, dim), c.leaf("beta", 0.1, dim)
		mean := G.Must(G.Mean(h, 2))
		diff := G.Must(G.BroadcastSub(h, mean, nil, []byte{2}))
		variance := G.Must(G.Mean(G.Must(G.Square(diff)), 2))
		norm := G.Must(G.BroadcastHadamardDiv(diff, G.Must(G.Sqrt(G.Must(G.Add(variance, c.scalar(1e-5))))), nil, []byte{2}))
		norm = G.Must(G.BroadcastAdd(G.Must(G.BroadcastHadamardProd(norm, gain, nil, []byte{0, 1})), bias, nil, []byte{0, 1}))
		w1, w2 := c.leaf("ff1", 0.3, dim, 2*dim), c.leaf("ff2", 0.3, 2*dim, dim)
		// The residual's sum is written with the feed-forward first:
		// written Add(norm, ...), TapeMachine's gradient of ff1 is wrong (see
		// TestTapeMachineViewClobber).
		ff := G.Must(G.Add(proj(G.Must(G.Rectify(proj(norm, w1))), w2), norm))
		wc := c.leaf("wc", 0.3, dim, classes)
		logits := G.Must(G.Mul(G.Must(G.Mean(ff, 1)), wc))
		cost := softmaxCE(logits, y)
		learn = append(learn, wo, gain, bias, w1, w2, wc)
		mustGrad(cost, learn...)
		solver := G.NewAdamSolver(G.WithLearnRate(0.01))
		return &realRun{g: c.g, learn: learn, final: learn,
			step: trainLoop(nil, []any{cost, gradOf(learn)}, solverOn{solver, learn})}
	}},
}

// TestRealProgramsBitForBit: the programs above train bit for bit as under
// TapeMachine, in core and at the least feasible budget.
func TestRealProgramsBitForBit(t *testing.T) {
	checkRealPrograms(t, realPrograms)
}

// setNode is what a script's machine.Set(a, b) does after a run: a takes
// b's value. *vm.Machine has the method as gorgonia's TapeMachine has it.
func setNode(t *testing.T, m G.VM, a, b *G.Node) {
	t.Helper()
	s, ok := m.(interface{ Set(a, b *G.Node) error })
	require.True(t, ok, "%T has no Set method", m)
	require.NoError(t, s.Set(a, b))
}
