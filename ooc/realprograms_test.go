package ooc_test

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm"
)

// Programs as gorgonia users write them: ported from gorgonia's own
// examples/ directory (iris, logisticregression, charRNN, convnet, resnet,
// stacked_autoencoder, read at v0.9.18), and common model patterns written
// in gorgonia's API the way its examples write theirs (VAEs, GANs, DQN
// agents, seq2seq, transformers, word2vec, policy gradients: not ported
// from any one repository). Each has its own training loop: what it Lets
// before each run, what it reads after (node values, gorgonia.Read
// destinations, gradients), its solver or its in-graph update, Reset.
// Each is built twice from the same seed, run by gorgonia's TapeMachine
// and by ooc.Compile (in core, at half the in-core peak where it plans, and
// at the least feasible budget, with fresh device memory poisoned), and
// everything the loop reads, and the weights at the end, must agree bit
// for bit.
//
// Each runs in well under a second (all of them take about 5 s together,
// on this 2-vCPU machine under load), so none is behind an opt-in.

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
// core, at half the in-core peak (where every graph plans there) and at the
// least feasible budget, and compares what its loop reads.
func checkRealPrograms(t *testing.T, progs map[string]realProgram) {
	checkRealProgramsOn(t, progs, nil)
}

// checkRealProgramsOn is checkRealPrograms on a device: nil is the CPU
// device (bit for bit); a CUDA target compares within the zoo's tolerance,
// each read as one tensor (a float32 program's float64 build on the
// TapeMachines is the reference of the float32 clause), with the backend's
// reserve added to the budget.
func checkRealProgramsOn(t *testing.T, progs map[string]realProgram, dev *cudaTarget) {
	for _, name := range sortedNames(progs) {
		p := progs[name]
		for _, dt := range p.dts {
			t.Run(name+"/"+dt.String(), func(t *testing.T) {
				want := p.readsOnTape(t, dt)
				f64 := once(func(t *testing.T) [][]uint64 { return p.readsOnTape(t, tensor.Float64) })
				peaks, budgets := realBudgets(t, p, dt)
				for _, bud := range budgets {
					got := p.build(dt)
					var ms []G.VM
					for k, r := range got.graphs() {
						opts := append(r.oocOptions(), ooc.Baseline())
						if bud.bytes != nil {
							opts = append(r.oocOptions(), ooc.WithBudget(bud.bytes[k]+dev.reserve()))
						}
						m, err := ooc.Compile(r.g, append(opts, dev.options()...)...)
						require.NoError(t, err, bud.name)
						ms = append(ms, m)
					}
					res := got.run(t, ms, p.steps)
					for k, m := range ms {
						st := m.(interface{ Stats() vm.Stats }).Stats()
						require.NoError(t, m.Close())
						if bud.bytes != nil {
							require.LessOrEqual(t, st.PeakDeviceBytes, bud.bytes[k]+dev.reserve(), bud.name)
						}
					}
					if dev != nil {
						dev.requireClose(t, dt, fmt.Sprintf("reads at %s %v (in-core peaks %v), from %s", bud.name, bud.bytes, peaks, p.from), want, res, f64)
						continue
					}
					requireSameReads(t, want, res, "%s %v (in-core peaks %v), from %s", bud.name, bud.bytes, peaks, p.from)
				}
			})
		}
	}
}

// readsOnTape runs a fresh build of p in dt on gorgonia's TapeMachines and
// returns what its loop reads: the reference the suites compare with, and
// (in float64) the float32 CUDA clause's.
func (p realProgram) readsOnTape(t *testing.T, dt tensor.Dtype) [][]uint64 {
	t.Helper()
	ref := p.build(dt)
	var tms []G.VM
	for _, r := range ref.graphs() {
		var tmOpts []G.VMOpt
		if len(r.learn) > 0 {
			tmOpts = append(tmOpts, G.BindDualValues(r.learn...))
		}
		tms = append(tms, G.NewTapeMachine(r.g, tmOpts...))
	}
	reads := ref.run(t, tms, p.steps)
	for _, tm := range tms {
		require.NoError(t, tm.Close())
	}
	return reads
}

// realBudget is one budget a program runs at: bytes per graph (nil: in
// core, Baseline).
type realBudget struct {
	name  string
	bytes []int64
}

// realBudgets returns each graph's in-core peak and the budgets p runs at:
// in core, half the peak (where every graph plans there) and each graph's
// least feasible budget.
func realBudgets(t *testing.T, p realProgram, dt tensor.Dtype) (peaks []int64, budgets []realBudget) {
	t.Helper()
	plans := func(k int, b int64) bool {
		r := p.build(dt).graphs()[k]
		// By Window: the default, Auto, would plan Hybrid at every step too.
		_, err := ooc.Plan(r.g, append([]ooc.Option{ooc.WithScheduler(ooc.Window{})}, append(r.oocOptions(), ooc.WithBudget(b))...)...)
		return err == nil
	}
	var halves, leasts []int64
	halfPlans := true
	for k, probe := range p.build(dt).graphs() {
		inCore, err := ooc.Plan(probe.g, append(probe.oocOptions(), ooc.Baseline())...)
		require.NoError(t, err)
		peaks = append(peaks, inCore.Peak)
		halves = append(halves, inCore.Peak/2)
		leasts = append(leasts, leastBudget(inCore.Peak, func(b int64) bool { return plans(k, b) }))
		halfPlans = halfPlans && plans(k, halves[k])
	}
	budgets = []realBudget{{name: "in core"}}
	if halfPlans {
		budgets = append(budgets, realBudget{"half the in-core peak", halves})
	} else {
		t.Logf("no schedule at half the in-core peaks %v (least %v)", peaks, leasts)
	}
	return peaks, append(budgets, realBudget{"least budget", leasts})
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
		zeros("inputVector_", emb) // the example makes it and never uses it
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

	// A VAE: an encoder to a mean
	// and a log-variance, the reparameterisation with noise the loop Lets
	// each step (gorgonia's random nodes are clock-seeded), a sigmoid
	// decoder, the reconstruction's cross-entropy written by hand, the KL
	// term, a KL weight that is a scalar input Let each step (annealing),
	// Adam.
	"vae": {from: "pattern: VAEs (reparameterisation trick)", dts: bothDtypes, steps: 3, build: func(dt tensor.Dtype) *realRun {
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

	// A GAN as one writes it in gorgonia: gorgonia.Grad cannot run twice
	// over shared nodes ("No gradients found for node"), so the
	// discriminator's step and the generator's step are two graphs with two
	// machines, their weights shared through the tensors both graphs'
	// nodes are made from (NodeFromAny), each graph's own learnables bound
	// to dual values and stepped by their own Adam solver; noise and real
	// batches Let each step; the generator's step sees the weights the
	// discriminator's solver has just updated.
	"gan": {from: "pattern: GANs (two graphs sharing weight tensors, two solvers)", dts: bothDtypes, steps: 3, build: func(dt tensor.Dtype) *realRun {
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
	"transformer-block": {from: "pattern: transformers (attention, hand-written LayerNorm)", dts: bothDtypes, steps: 3, build: func(dt tensor.Dtype) *realRun {
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
		ff := G.Must(G.Add(norm, proj(G.Must(G.Rectify(proj(norm, w1))), w2)))
		wc := c.leaf("wc", 0.3, dim, classes)
		logits := G.Must(G.Mul(G.Must(G.Mean(ff, 1)), wc))
		cost := softmaxCE(logits, y)
		learn = append(learn, wo, gain, bias, w1, w2, wc)
		mustGrad(cost, learn...)
		solver := G.NewAdamSolver(G.WithLearnRate(0.01))
		return &realRun{g: c.g, learn: learn, final: learn,
			step: trainLoop(nil, []any{cost, gradOf(learn)}, solverOn{solver, learn})}
	}},

	// examples/convnet at a small size: three Conv2d/Rectify/MaxPool2D
	// blocks with Dropout after the first two, Reshape to rows, Dropout,
	// a ReLU layer, Dropout, SoftMax; its cost is -Mean(Log(out ⊙ y)) as
	// the example writes it (the log of the zeros of the one-hot product
	// is -Inf, so the cost is +Inf and the gradients NaN: both machines
	// must give the same NaNs); the cost read with gorgonia.Read; RMSProp
	// with WithBatchSize; each step Lets a batch sliced from a dataset and
	// reshaped in place, as the example's loader does.
	"convnet": {from: "gorgonia examples/convnet", dts: bothDtypes, steps: 2, build: func(dt tensor.Dtype) *realRun {
		c := &userCtx{g: G.NewGraph(), dt: dt, rng: rand.New(rand.NewSource(7))}
		const bs, classes = 4, 10
		x := G.NewTensor(c.g, dt, 4, G.WithShape(bs, 1, 8, 8), G.WithName("x"))
		y := G.NewMatrix(c.g, dt, G.WithShape(bs, classes), G.WithName("y"))
		w0, w1, w2 := c.leaf("w0", 0.3, 4, 1, 3, 3), c.leaf("w1", 0.2, 8, 4, 3, 3), c.leaf("w2", 0.2, 8, 8, 3, 3)
		w3, w4 := c.leaf("w3", 0.2, 8, 16), c.leaf("w4", 0.2, 16, classes)
		block := func(in, w *G.Node) *G.Node {
			h := G.Must(G.Rectify(G.Must(G.Conv2d(in, w, tensor.Shape{3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}))))
			return G.Must(G.MaxPool2D(h, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}))
		}
		l0 := G.Must(G.Dropout(block(x, w0), 0.2))
		l1 := G.Must(G.Dropout(block(l0, w1), 0.2))
		p2 := block(l1, w2)
		sh := p2.Shape()
		l2 := G.Must(G.Dropout(G.Must(G.Reshape(p2, tensor.Shape{sh[0], sh[1] * sh[2] * sh[3]})), 0.2))
		l3 := G.Must(G.Dropout(G.Must(G.Rectify(G.Must(G.Mul(l2, w3)))), 0.55))
		out := G.Must(G.SoftMax(G.Must(G.Mul(l3, w4))))
		cost := G.Must(G.Neg(G.Must(G.Mean(G.Must(G.Log(G.Must(G.HadamardProd(out, y))))))))
		costVal := new(G.Value)
		G.Read(cost, costVal)
		learn := G.Nodes{w0, w1, w2, w3, w4}
		mustGrad(cost, learn...)
		seedDropout(&net{g: c.g})
		inputs := randT(c.rng, dt, 1, 3*bs, 64)
		targets := onehot(c.rng, dt, 3*bs, classes)
		solver := G.NewRMSPropSolver(G.WithBatchSize(float64(bs)))
		lets := func(t *testing.T, b int) {
			xv, err := inputs.Slice(G.S(b*bs, (b+1)*bs))
			require.NoError(t, err)
			yv, err := targets.Slice(G.S(b*bs, (b+1)*bs))
			require.NoError(t, err)
			require.NoError(t, xv.(*tensor.Dense).Reshape(bs, 1, 8, 8))
			let(t, x, xv)
			let(t, y, yv)
		}
		return &realRun{g: c.g, learn: learn, final: learn,
			step: trainLoop(lets, []any{costVal, gradOf(learn)}, solverOn{solver, learn})}
	}},

	// A seq2seq model trained with teacher forcing: an Elman encoder over
	// the source steps (Slice of a 3-D input), its last state the
	// decoder's first, the decoder fed the target's previous token
	// (one-hot, Let each step with the source and the targets), a
	// log-softmax cross-entropy per decoder step summed, Momentum.
	"seq2seq-teacher-forcing": {from: "pattern: seq2seq (teacher forcing over an unrolled loop)", dts: bothDtypes, steps: 3, build: func(dt tensor.Dtype) *realRun {
		c := &userCtx{g: G.NewGraph(), dt: dt, rng: rand.New(rand.NewSource(8))}
		const batch, srcLen, tgtLen, in, hid, vocab = 4, 4, 3, 5, 8, 6
		src := G.NewTensor(c.g, dt, 3, G.WithShape(srcLen, batch, in), G.WithName("src"))
		tgtIn := G.NewTensor(c.g, dt, 3, G.WithShape(tgtLen, batch, vocab), G.WithName("tgtIn"))
		tgtOut := G.NewTensor(c.g, dt, 3, G.WithShape(tgtLen, batch, vocab), G.WithName("tgtOut"))
		ex, eh := c.leaf("enc_x", 0.3, in, hid), c.leaf("enc_h", 0.3, hid, hid)
		dx, dh := c.leaf("dec_x", 0.3, vocab, hid), c.leaf("dec_h", 0.3, hid, hid)
		wout, bout := c.leaf("out", 0.3, hid, vocab), c.leaf("out_b", 0.1, vocab)
		h := G.NewMatrix(c.g, dt, G.WithShape(batch, hid), G.WithName("h0"), G.WithValue(tensor.New(tensor.Of(dt), tensor.WithShape(batch, hid))))
		for s := 0; s < srcLen; s++ {
			h = G.Must(G.Tanh(G.Must(G.Add(G.Must(G.Mul(G.Must(G.Slice(src, G.S(s))), ex)), G.Must(G.Mul(h, eh))))))
		}
		var cost *G.Node
		for s := 0; s < tgtLen; s++ {
			h = G.Must(G.Tanh(G.Must(G.Add(G.Must(G.Mul(G.Must(G.Slice(tgtIn, G.S(s))), dx)), G.Must(G.Mul(h, dh))))))
			logits := G.Must(G.BroadcastAdd(G.Must(G.Mul(h, wout)), bout, nil, []byte{0}))
			ce := softmaxCE(logits, G.Must(G.Slice(tgtOut, G.S(s))))
			if cost == nil {
				cost = ce
			} else {
				cost = G.Must(G.Add(cost, ce))
			}
		}
		learn := G.Nodes{ex, eh, dx, dh, wout, bout}
		mustGrad(cost, learn...)
		solver := G.NewMomentum(G.WithLearnRate(0.05), G.WithMomentum(0.9))
		lets := func(t *testing.T, i int) {
			r := stepData(i)
			let(t, src, randT(r, dt, 1, srcLen, batch, in))
			toks := onehot(r, dt, (tgtLen+1)*batch, vocab)
			all, err := toks.Slice(G.S(0, tgtLen*batch))
			require.NoError(t, err)
			next, err := toks.Slice(G.S(batch, (tgtLen+1)*batch))
			require.NoError(t, err)
			in := all.(*tensor.Dense).Materialize().(*tensor.Dense)
			out := next.(*tensor.Dense).Materialize().(*tensor.Dense)
			require.NoError(t, in.Reshape(tgtLen, batch, vocab))
			require.NoError(t, out.Reshape(tgtLen, batch, vocab))
			let(t, tgtIn, in)
			let(t, tgtOut, out)
		}
		return &realRun{g: c.g, learn: learn, final: learn,
			step: trainLoop(lets, []any{cost, gradOf(learn)}, solverOn{solver, learn})}
	}},

	// A DQN agent's update in gorgonia: a Q-network MLP
	// over a batch of states, the taken action's Q value picked by a
	// one-hot action mask, a Huber loss written by hand (a retSame mask
	// from Lt(Abs(d), 1)), RMSProp; the loop reads the Q values through a
	// gorgonia.Read and builds the next step's targets from them
	// (r + gamma * max Q), so a wrong read changes the training.
	"dqn-huber": {from: "pattern: DQN agents", dts: bothDtypes, steps: 4, build: func(dt tensor.Dtype) *realRun {
		c := &userCtx{g: G.NewGraph(), dt: dt, rng: rand.New(rand.NewSource(9))}
		const batch, state, hid, actions = 8, 6, 16, 4
		s := G.NewMatrix(c.g, dt, G.WithShape(batch, state), G.WithName("state"))
		mask := G.NewMatrix(c.g, dt, G.WithShape(batch, actions), G.WithName("actionMask"))
		target := G.NewVector(c.g, dt, G.WithShape(batch), G.WithName("target"))
		w1, b1 := c.leaf("w1", 0.3, state, hid), c.leaf("b1", 0.1, hid)
		w2 := c.leaf("w2", 0.3, hid, actions)
		h := G.Must(G.Rectify(G.Must(G.BroadcastAdd(G.Must(G.Mul(s, w1)), b1, nil, []byte{0}))))
		q := G.Must(G.Mul(h, w2))
		qVal := new(G.Value)
		G.Read(q, qVal)
		qa := G.Must(G.Sum(G.Must(G.HadamardProd(q, mask)), 1))
		d := G.Must(G.Sub(qa, target))
		a := G.Must(G.Abs(d))
		small := G.Must(G.Lt(a, c.scalar(1), true))
		quad := G.Must(G.HadamardProd(small, G.Must(G.Mul(G.Must(G.Square(d)), c.scalar(0.5)))))
		lin := G.Must(G.HadamardProd(G.Must(G.Sub(c.scalar(1), small)), G.Must(G.Sub(a, c.scalar(0.5)))))
		loss := G.Must(G.Mean(G.Must(G.Add(quad, lin))))
		learn := G.Nodes{w1, b1, w2}
		mustGrad(loss, learn...)
		solver := G.NewRMSPropSolver(G.WithLearnRate(0.01))
		maxQ := make([]float64, batch)
		lets := func(t *testing.T, i int) {
			r := stepData(i)
			let(t, s, randT(r, dt, 1, batch, state))
			let(t, mask, onehot(r, dt, batch, actions))
			tt := tensor.New(tensor.Of(dt), tensor.WithShape(batch))
			for k := 0; k < batch; k++ {
				setAt(tt, k, r.Float64()+0.9*maxQ[k])
			}
			let(t, target, tt)
		}
		step := trainLoop(lets, []any{loss, qVal, gradOf(learn)}, solverOn{solver, learn})
		return &realRun{g: c.g, learn: learn, final: learn,
			step: func(t *testing.T, ms []G.VM, i int) [][]uint64 {
				out := step(t, ms, i)
				qv := (*qVal).(*tensor.Dense)
				for k := 0; k < batch; k++ {
					maxQ[k] = math.Inf(-1)
					for j := 0; j < actions; j++ {
						maxQ[k] = math.Max(maxQ[k], at(qv, k*actions+j))
					}
				}
				return out
			}}
	}},

	// A neural-ODE-like model: an explicit Euler loop h += dt * f(h) with
	// one shared f (a Tanh layer with a broadcast bias) applied six times,
	// the step size a scalar input Let each step, a mean squared error to
	// a target, the vanilla solver.
	"euler-ode-loop": {from: "pattern: neural ODE / residual loops", dts: bothDtypes, steps: 3, build: func(dt tensor.Dtype) *realRun {
		c := &userCtx{g: G.NewGraph(), dt: dt, rng: rand.New(rand.NewSource(10))}
		const batch, dim = 6, 8
		x := G.NewMatrix(c.g, dt, G.WithShape(batch, dim), G.WithName("x"))
		yT := G.NewMatrix(c.g, dt, G.WithShape(batch, dim), G.WithName("y"))
		step := G.NewScalar(c.g, dt, G.WithName("dt"))
		w, b := c.leaf("w", 0.4, dim, dim), c.leaf("b", 0.1, dim)
		h := x
		for k := 0; k < 6; k++ {
			f := G.Must(G.Tanh(G.Must(G.BroadcastAdd(G.Must(G.Mul(h, w)), b, nil, []byte{0}))))
			h = G.Must(G.Add(h, G.Must(G.Mul(step, f))))
		}
		cost := G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(h, yT))))))
		learn := G.Nodes{w, b}
		mustGrad(cost, learn...)
		solver := G.NewVanillaSolver(G.WithLearnRate(0.1))
		lets := func(t *testing.T, i int) {
			r := stepData(i)
			let(t, x, randT(r, dt, 1, batch, dim))
			let(t, yT, randT(r, dt, 1, batch, dim))
			let(t, step, scalarOf(dt, 0.1+0.05*float64(i)))
		}
		return &realRun{g: c.g, learn: learn, final: learn,
			// Not h.Value(): TapeMachine's Sub(h, y) writes over h's register,
			// so there h holds h - y (a difference the package doc states).
			step: trainLoop(lets, []any{cost, gradOf(learn)}, solverOn{solver, learn})}
	}},

	// word2vec's skip-gram with negative sampling: two embedding tables
	// looked up with ByIndices by int index vectors Let each step (centre,
	// context, negative words), dot products as Sum(HadamardProd, 1),
	// log-sigmoid losses, the vanilla solver.
	"skipgram-negative-sampling": {from: "pattern: word2vec", dts: bothDtypes, steps: 3, build: func(dt tensor.Dtype) *realRun {
		c := &userCtx{g: G.NewGraph(), dt: dt, rng: rand.New(rand.NewSource(11))}
		const vocab, dim, batch = 12, 8, 6
		emb, ctx := c.leaf("emb", 0.3, vocab, dim), c.leaf("ctx", 0.3, vocab, dim)
		idx := func(name string) *G.Node {
			return G.NewVector(c.g, tensor.Int, G.WithShape(batch), G.WithName(name))
		}
		centre, context, neg := idx("centre"), idx("context"), idx("negative")
		u := G.Must(G.ByIndices(emb, centre, 0))
		v := G.Must(G.ByIndices(ctx, context, 0))
		n := G.Must(G.ByIndices(ctx, neg, 0))
		pos := G.Must(G.Log(G.Must(G.Sigmoid(G.Must(G.Sum(G.Must(G.HadamardProd(u, v)), 1))))))
		ng := G.Must(G.Log(G.Must(G.Sigmoid(G.Must(G.Neg(G.Must(G.Sum(G.Must(G.HadamardProd(u, n)), 1))))))))
		cost := G.Must(G.Neg(G.Must(G.Mean(G.Must(G.Add(pos, ng))))))
		learn := G.Nodes{emb, ctx}
		mustGrad(cost, learn...)
		solver := G.NewVanillaSolver(G.WithLearnRate(0.5))
		lets := func(t *testing.T, i int) {
			r := stepData(i)
			for _, node := range []*G.Node{centre, context, neg} {
				ids := make([]int, batch)
				for k := range ids {
					ids[k] = r.Intn(vocab)
				}
				let(t, node, tensor.New(tensor.WithShape(batch), tensor.WithBacking(ids)))
			}
		}
		return &realRun{g: c.g, learn: learn, final: learn,
			step: trainLoop(lets, []any{cost, gradOf(learn)}, solverOn{solver, learn})}
	}},

	// Online learning on one sample at a time, float64 as most gorgonia
	// tutorials write it: the input a vector Let each step, weights times
	// the vector (matrix-vector Mul), vector biases, SoftMax of a vector,
	// -Sum(y ⊙ log p) with a one-hot vector target, AdaGrad.
	"online-vector-mlp": {from: "pattern: tutorials (a vector input, not a batch)", dts: []tensor.Dtype{tensor.Float64}, steps: 5, build: func(dt tensor.Dtype) *realRun {
		c := &userCtx{g: G.NewGraph(), dt: dt, rng: rand.New(rand.NewSource(12))}
		const in, hid, out = 6, 8, 4
		x := G.NewVector(c.g, dt, G.WithShape(in), G.WithName("x"))
		y := G.NewVector(c.g, dt, G.WithShape(out), G.WithName("y"))
		w1, b1 := c.leaf("w1", 0.4, hid, in), c.leaf("b1", 0.1, hid)
		w2, b2 := c.leaf("w2", 0.4, out, hid), c.leaf("b2", 0.1, out)
		h := G.Must(G.Rectify(G.Must(G.Add(G.Must(G.Mul(w1, x)), b1))))
		p := G.Must(G.SoftMax(G.Must(G.Add(G.Must(G.Mul(w2, h)), b2))))
		cost := G.Must(G.Neg(G.Must(G.Sum(G.Must(G.HadamardProd(y, G.Must(G.Log(p))))))))
		learn := G.Nodes{w1, b1, w2, b2}
		mustGrad(cost, learn...)
		solver := G.NewAdaGradSolver(G.WithLearnRate(0.1))
		lets := func(t *testing.T, i int) {
			r := stepData(i)
			let(t, x, randT(r, dt, 1, in))
			yv := tensor.New(tensor.Of(dt), tensor.WithShape(out))
			setAt(yv, r.Intn(out), 1)
			let(t, y, yv)
		}
		return &realRun{g: c.g, learn: learn, final: learn,
			step: trainLoop(lets, []any{cost, p, gradOf(learn)}, solverOn{solver, learn})}
	}},

	// Binary classification with the numerically stable sigmoid
	// cross-entropy written by hand (max(z, 0) - z*y + log1p(exp(-|z|))),
	// a second head's loss through Softplus, an L2 term on every weight
	// added to the cost, and a 0/1 mask of valid samples Let each step
	// (padding) weighting the per-sample losses; Adam.
	"masked-sigmoid-xent-l2": {from: "pattern: stable BCE and padding masks", dts: bothDtypes, steps: 3, build: func(dt tensor.Dtype) *realRun {
		c := &userCtx{g: G.NewGraph(), dt: dt, rng: rand.New(rand.NewSource(13))}
		const batch, in, hid = 8, 6, 8
		x := G.NewMatrix(c.g, dt, G.WithShape(batch, in), G.WithName("x"))
		y := G.NewMatrix(c.g, dt, G.WithShape(batch, 1), G.WithName("y"))
		valid := G.NewMatrix(c.g, dt, G.WithShape(batch, 1), G.WithName("valid"))
		w1, w2, w3 := c.leaf("w1", 0.4, in, hid), c.leaf("w2", 0.4, hid, 1), c.leaf("w3", 0.4, hid, 1)
		h := G.Must(G.Tanh(G.Must(G.Mul(x, w1))))
		z := G.Must(G.Mul(h, w2))
		bce := G.Must(G.Add(G.Must(G.Sub(G.Must(G.Rectify(z)), G.Must(G.HadamardProd(z, y)))), G.Must(G.Log1p(G.Must(G.Exp(G.Must(G.Neg(G.Must(G.Abs(z))))))))))
		z2 := G.Must(G.Mul(h, w3))
		sp := G.Must(G.Sub(G.Must(G.Softplus(z2)), G.Must(G.HadamardProd(z2, y))))
		per := G.Must(G.HadamardProd(G.Must(G.Add(bce, sp)), valid))
		loss := G.Must(G.Div(G.Must(G.Sum(per)), G.Must(G.Sum(valid))))
		var l2 *G.Node
		for _, w := range []*G.Node{w1, w2, w3} {
			sq := G.Must(G.Sum(G.Must(G.Square(w))))
			if l2 == nil {
				l2 = sq
			} else {
				l2 = G.Must(G.Add(l2, sq))
			}
		}
		cost := G.Must(G.Add(loss, G.Must(G.Mul(c.scalar(1e-3), l2))))
		learn := G.Nodes{w1, w2, w3}
		mustGrad(cost, learn...)
		solver := G.NewAdamSolver(G.WithLearnRate(0.02))
		lets := func(t *testing.T, i int) {
			r := stepData(i)
			let(t, x, randT(r, dt, 1, batch, in))
			yv, mv := tensor.New(tensor.Of(dt), tensor.WithShape(batch, 1)), tensor.New(tensor.Of(dt), tensor.WithShape(batch, 1))
			for k := 0; k < batch; k++ {
				setAt(yv, k, float64(r.Intn(2)))
				if k < batch-i {
					setAt(mv, k, 1)
				}
			}
			let(t, y, yv)
			let(t, valid, mv)
		}
		return &realRun{g: c.g, learn: learn, final: learn,
			step: trainLoop(lets, []any{cost, loss, l2, gradOf(learn)}, solverOn{solver, learn})}
	}},

	// REINFORCE without a scalar cost:
	// gorgonia.Backpropagate from the log-probabilities with an output
	// gradient that is an input node (-advantage at the action taken,
	// divided by the batch) Let each step; the log-probabilities read
	// with gorgonia.Read; Adam.
	"reinforce-backpropagate": {from: "pattern: policy-gradient agents", dts: bothDtypes, steps: 3, build: func(dt tensor.Dtype) *realRun {
		c := &userCtx{g: G.NewGraph(), dt: dt, rng: rand.New(rand.NewSource(14))}
		const batch, state, hid, actions = 8, 5, 8, 4
		s := G.NewMatrix(c.g, dt, G.WithShape(batch, state), G.WithName("state"))
		dlogp := G.NewMatrix(c.g, dt, G.WithShape(batch, actions), G.WithName("dlogp"))
		w1, w2 := c.leaf("w1", 0.4, state, hid), c.leaf("w2", 0.4, hid, actions)
		logp := G.Must(G.LogSoftMax(G.Must(G.Mul(G.Must(G.Tanh(G.Must(G.Mul(s, w1)))), w2))))
		logpVal := new(G.Value)
		G.Read(logp, logpVal)
		learn := G.Nodes{w1, w2}
		if _, err := G.Backpropagate(G.Nodes{logp}, G.Nodes{dlogp}, learn); err != nil {
			panic(err)
		}
		solver := G.NewAdamSolver(G.WithLearnRate(0.01))
		lets := func(t *testing.T, i int) {
			r := stepData(i)
			let(t, s, randT(r, dt, 1, batch, state))
			g := tensor.New(tensor.Of(dt), tensor.WithShape(batch, actions))
			for k := 0; k < batch; k++ {
				setAt(g, k*actions+r.Intn(actions), -r.NormFloat64()/batch)
			}
			let(t, dlogp, g)
		}
		return &realRun{g: c.g, learn: learn, final: learn,
			step: trainLoop(lets, []any{logpVal, gradOf(learn)}, solverOn{solver, learn})}
	}},

	// examples/stacked_autoencoder's denoising layer: tied weights (the
	// decoder multiplies by Transpose(w)), Sigmoid layers with bias
	// vectors added to matrix products (Add of a matrix and a broadcast
	// row, here BroadcastAdd), the corruption a 0/1 mask (gorgonia's
	// BinomialRandomNode is clock-seeded, so the mask is Let each step),
	// Mean(BinaryXent(reconstruction, input)), the vanilla solver.
	"tied-denoising-autoencoder": {from: "gorgonia examples/stacked_autoencoder", dts: bothDtypes, steps: 3, build: func(dt tensor.Dtype) *realRun {
		c := &userCtx{g: G.NewGraph(), dt: dt, rng: rand.New(rand.NewSource(15))}
		const batch, in, hid = 8, 12, 8
		x := G.NewMatrix(c.g, dt, G.WithShape(batch, in), G.WithName("x"))
		corruption := G.NewMatrix(c.g, dt, G.WithShape(batch, in), G.WithName("corruption"))
		w, b, bp := c.leaf("w", 0.3, in, hid), c.leaf("b", 0.1, hid), c.leaf("bprime", 0.1, in)
		corrupted := G.Must(G.HadamardProd(corruption, x))
		h := G.Must(G.Sigmoid(G.Must(G.BroadcastAdd(G.Must(G.Mul(corrupted, w)), b, nil, []byte{0}))))
		out := G.Must(G.Sigmoid(G.Must(G.BroadcastAdd(G.Must(G.Mul(h, G.Must(G.Transpose(w)))), bp, nil, []byte{0}))))
		cost := G.Must(G.Mean(G.Must(G.BinaryXent(out, x))))
		learn := G.Nodes{w, b, bp}
		mustGrad(cost, learn...)
		solver := G.NewVanillaSolver(G.WithLearnRate(0.1))
		lets := func(t *testing.T, i int) {
			r := stepData(i)
			let(t, x, randUnit(r, dt, batch, in))
			m := tensor.New(tensor.Of(dt), tensor.WithShape(batch, in))
			for k := 0; k < batch*in; k++ {
				if r.Float64() > 0.3 {
					setAt(m, k, 1)
				}
			}
			let(t, corruption, m)
		}
		return &realRun{g: c.g, learn: learn, final: learn,
			step: trainLoop(lets, []any{cost, gradOf(learn)}, solverOn{solver, learn})}
	}},

	// examples/charRNN compiles g.SubgraphRoots(...) of a graph that
	// holds more than the step needs: here the training cost and its
	// gradients are the roots, and a second head (a prediction the script
	// evaluates elsewhere) is left out of the machine's graph.
	"subgraph-roots": {from: "gorgonia examples/charRNN (SubgraphRoots)", dts: bothDtypes, steps: 3, build: func(dt tensor.Dtype) *realRun {
		c := &userCtx{g: G.NewGraph(), dt: dt, rng: rand.New(rand.NewSource(16))}
		const batch, in, hid, classes = 8, 6, 8, 4
		x := G.NewMatrix(c.g, dt, G.WithShape(batch, in), G.WithName("x"))
		y := G.NewMatrix(c.g, dt, G.WithShape(batch, classes), G.WithName("y"))
		w1, w2, wOther := c.leaf("w1", 0.4, in, hid), c.leaf("w2", 0.4, hid, classes), c.leaf("other", 0.4, hid, 2)
		h := G.Must(G.Tanh(G.Must(G.Mul(x, w1))))
		cost := softmaxCE(G.Must(G.Mul(h, w2)), y)
		_ = G.Must(G.SoftMax(G.Must(G.Mul(h, wOther))))
		learn := G.Nodes{w1, w2}
		grads := mustGrad(cost, learn...)
		costVal := new(G.Value)
		readCost := G.Read(cost, costVal)
		sub := c.g.SubgraphRoots(append(G.Nodes{cost, readCost}, grads...)...)
		solver := G.NewAdamSolver(G.WithLearnRate(0.01))
		lets := func(t *testing.T, i int) {
			r := stepData(i)
			let(t, x, randT(r, dt, 1, batch, in))
			let(t, y, onehot(r, dt, batch, classes))
		}
		return &realRun{g: sub, learn: learn, final: learn,
			step: trainLoop(lets, []any{costVal, gradOf(learn)}, solverOn{solver, learn})}
	}},

	// Products of every rank as gorgonia.Mul gives them: a learnable scalar
	// times a matrix, a vector times a matrix, a matrix times a vector, a
	// vector dot product; Pow by a constant, Cube, Sqrt; Momentum.
	"mixed-rank-mul-pow": {from: "pattern: gorgonia Mul's rank cases", dts: bothDtypes, steps: 3, build: func(dt tensor.Dtype) *realRun {
		c := &userCtx{g: G.NewGraph(), dt: dt, rng: rand.New(rand.NewSource(17))}
		x := c.leaf("x", 1, 8, 8)
		var alpha *G.Node
		if dt == tensor.Float32 {
			alpha = G.NewScalar(c.g, dt, G.WithName("alpha"), G.WithValue(float32(0.7)))
		} else {
			alpha = G.NewScalar(c.g, dt, G.WithName("alpha"), G.WithValue(0.7))
		}
		u, v, m := c.leaf("u", 0.4, 8), c.leaf("v", 0.4, 8), c.leaf("m", 0.4, 8, 8)
		sx := G.Must(G.Mul(alpha, x))                                // scalar x matrix
		uv := G.Must(G.Mul(u, G.Must(G.Tanh(G.Must(G.Mul(sx, m)))))) // vector x matrix
		mv := G.Must(G.Mul(m, v))                                    // matrix x vector
		dot := G.Must(G.Mul(uv, mv))                                 // vector . vector
		p := G.Must(G.Pow(G.Must(G.Sigmoid(uv)), c.scalar(3)))
		r := G.Must(G.Sqrt(G.Must(G.Add(G.Must(G.Cube(mv)), G.Must(G.Add(G.Must(G.Square(mv)), c.scalar(2)))))))
		cost := G.Must(G.Add(G.Must(G.Add(G.Must(G.Square(dot)), G.Must(G.Sum(p)))), G.Must(G.Mean(r))))
		learn := G.Nodes{alpha, u, v, m}
		mustGrad(cost, learn...)
		solver := G.NewMomentum(G.WithLearnRate(0.01))
		return &realRun{g: c.g, learn: learn, final: learn,
			step: trainLoop(nil, []any{cost, dot, gradOf(learn)}, solverOn{solver, learn})}
	}},

	// Gradient clipping by global norm, written in the loop: after RunAll
	// the script reads every gradient, computes their global norm in Go
	// and scales the gradients in place (tensor.Mul with UseUnsafe)
	// before the solver steps; the next run must overwrite them, not add
	// to the scaled ones.
	"global-norm-clip-by-hand": {from: "pattern: training loops (clip_by_global_norm)", dts: bothDtypes, steps: 3, build: func(dt tensor.Dtype) *realRun {
		c := &userCtx{g: G.NewGraph(), dt: dt, rng: rand.New(rand.NewSource(18))}
		const batch, in, hid, classes = 8, 6, 8, 4
		x := G.NewMatrix(c.g, dt, G.WithShape(batch, in), G.WithName("x"))
		y := G.NewMatrix(c.g, dt, G.WithShape(batch, classes), G.WithName("y"))
		w1, w2 := c.leaf("w1", 1.5, in, hid), c.leaf("w2", 1.5, hid, classes)
		cost := softmaxCE(G.Must(G.Mul(G.Must(G.Rectify(G.Must(G.Mul(x, w1)))), w2)), y)
		learn := G.Nodes{w1, w2}
		mustGrad(cost, learn...)
		solver := G.NewVanillaSolver(G.WithLearnRate(0.5))
		return &realRun{g: c.g, learn: learn, final: learn,
			step: func(t *testing.T, ms []G.VM, i int) [][]uint64 {
				r := stepData(i)
				let(t, x, randT(r, dt, 2, batch, in))
				let(t, y, onehot(r, dt, batch, classes))
				require.NoError(t, ms[0].RunAll())
				out := reads(t, cost, gradOf(learn))
				var sq float64
				for _, p := range learn {
					g, err := p.Grad()
					require.NoError(t, err)
					d := g.(*tensor.Dense)
					for k := 0; k < d.Len(); k++ {
						sq += at(d, k) * at(d, k)
					}
				}
				if norm := math.Sqrt(sq); norm > 0.1 {
					for _, p := range learn {
						g, _ := p.Grad()
						_, err := tensor.Mul(g.(*tensor.Dense), scalarOf(dt, 0.1/norm), tensor.UseUnsafe())
						require.NoError(t, err)
					}
				}
				require.NoError(t, solver.Step(G.NodesToValueGrads(learn)))
				ms[0].Reset()
				return out
			}}
	}},

	// examples/resnet at a small size: convolution blocks whose pooled
	// output is flattened (Reshape), projected by a matrix product,
	// reshaped back to the block's convolution output and added to it (a
	// residual through views), Dropout after each sum and after the
	// dense layer, the stage's output Reshaped again for the classifier,
	// the example's -Mean(Log(out ⊙ y)) cost, RMSProp with a batch size.
	"resnet-example": {from: "gorgonia examples/resnet", dts: bothDtypes, steps: 2, build: func(dt tensor.Dtype) *realRun {
		c := &userCtx{g: G.NewGraph(), dt: dt, rng: rand.New(rand.NewSource(20))}
		const bs, classes = 2, 10
		x := G.NewTensor(c.g, dt, 4, G.WithShape(bs, 1, 8, 8), G.WithName("x"))
		y := G.NewMatrix(c.g, dt, G.WithShape(bs, classes), G.WithName("y"))
		w0, w1 := c.leaf("w0", 0.3, 4, 1, 3, 3), c.leaf("w1", 0.2, 8, 4, 3, 3)
		w1r, w2 := c.leaf("w1r", 0.1, 32, 128), c.leaf("w2", 0.2, 16, 8, 3, 3)
		w2r, w3, w4 := c.leaf("w2r", 0.1, 64, 256), c.leaf("w3", 0.1, 256, 16), c.leaf("w4", 0.2, 16, classes)
		conv := func(in, w *G.Node) *G.Node {
			return G.Must(G.Conv2d(in, w, tensor.Shape{3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}))
		}
		pool := func(in *G.Node) *G.Node {
			return G.Must(G.MaxPool2D(in, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}))
		}
		flat := func(in *G.Node) *G.Node {
			s := in.Shape()
			return G.Must(G.Reshape(in, tensor.Shape{s[0], s[1] * s[2] * s[3]}))
		}
		l0 := G.Must(G.Dropout(pool(G.Must(G.Rectify(conv(x, w0)))), 0.2))
		c1 := conv(l0, w1)
		r1 := G.Must(G.Reshape(G.Must(G.Mul(flat(pool(G.Must(G.Rectify(c1)))), w1r)), c1.Shape()))
		l1 := G.Must(G.Dropout(G.Must(G.Add(c1, r1)), 0.2))
		c2 := conv(l1, w2)
		r2 := G.Must(G.Reshape(G.Must(G.Mul(flat(pool(G.Must(G.Rectify(c2)))), w2r)), c2.Shape()))
		l2 := flat(G.Must(G.Dropout(G.Must(G.Add(c2, r2)), 0.2)))
		l3 := G.Must(G.Dropout(G.Must(G.Rectify(G.Must(G.Mul(l2, w3)))), 0.55))
		out := G.Must(G.SoftMax(G.Must(G.Mul(l3, w4))))
		cost := G.Must(G.Neg(G.Must(G.Mean(G.Must(G.Log(G.Must(G.HadamardProd(out, y))))))))
		costVal := new(G.Value)
		G.Read(cost, costVal)
		learn := G.Nodes{w0, w1, w1r, w2, w2r, w3, w4}
		mustGrad(cost, learn...)
		seedDropout(&net{g: c.g})
		solver := G.NewRMSPropSolver(G.WithBatchSize(float64(bs)))
		lets := func(t *testing.T, i int) {
			r := stepData(i)
			let(t, x, randT(r, dt, 1, bs, 1, 8, 8))
			let(t, y, onehot(r, dt, bs, classes))
		}
		return &realRun{g: c.g, learn: learn, final: learn,
			step: trainLoop(lets, []any{costVal, gradOf(learn)}, solverOn{solver, learn})}
	}},

	// A convolutional autoencoder: Conv2d, MaxPool2D, Upsample2D back, a
	// Sigmoid output, and the reconstruction error as Mean over all four
	// axes of a 4-D tensor at once (as users write it); Adam.
	"conv-autoencoder": {from: "pattern: convolutional autoencoders", dts: bothDtypes, steps: 3, build: func(dt tensor.Dtype) *realRun {
		c := &userCtx{g: G.NewGraph(), dt: dt, rng: rand.New(rand.NewSource(21))}
		x := G.NewTensor(c.g, dt, 4, G.WithShape(2, 1, 8, 8), G.WithName("x"))
		k1, k2 := c.leaf("k1", 0.3, 4, 1, 3, 3), c.leaf("k2", 0.3, 1, 4, 3, 3)
		h := G.Must(G.MaxPool2D(G.Must(G.Rectify(G.Must(G.Conv2d(x, k1, tensor.Shape{3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1})))), tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}))
		up := G.Must(G.Upsample2D(h, 2))
		out := G.Must(G.Sigmoid(G.Must(G.Conv2d(up, k2, tensor.Shape{3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}))))
		cost := G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(out, x))))))
		learn := G.Nodes{k1, k2}
		mustGrad(cost, learn...)
		solver := G.NewAdamSolver(G.WithLearnRate(0.01))
		lets := func(t *testing.T, i int) { let(t, x, randUnit(stepData(i), dt, 2, 1, 8, 8)) }
		return &realRun{g: c.g, learn: learn, final: learn,
			step: trainLoop(lets, []any{cost, gradOf(learn)}, solverOn{solver, learn})}
	}},

	// Adversarial training (FGSM): Grad also of the input; each step runs
	// the clean batch, reads the input's gradient (x.Grad() of a dual
	// value bound by BindDualValues), Lets x + eps * sign(grad), runs
	// again (Reset between) and steps the solver on the adversarial
	// gradients.
	"fgsm-adversarial": {from: "pattern: adversarial-example loops", dts: bothDtypes, steps: 2, build: func(dt tensor.Dtype) *realRun {
		c := &userCtx{g: G.NewGraph(), dt: dt, rng: rand.New(rand.NewSource(22))}
		const batch, in, hid, classes = 8, 6, 8, 4
		x := G.NewMatrix(c.g, dt, G.WithShape(batch, in), G.WithName("x"))
		y := G.NewMatrix(c.g, dt, G.WithShape(batch, classes), G.WithName("y"))
		w1, w2 := c.leaf("w1", 0.4, in, hid), c.leaf("w2", 0.4, hid, classes)
		cost := softmaxCE(G.Must(G.Mul(G.Must(G.Tanh(G.Must(G.Mul(x, w1)))), w2)), y)
		learn := G.Nodes{w1, w2}
		mustGrad(cost, w1, w2, x)
		solver := G.NewAdamSolver(G.WithLearnRate(0.01))
		return &realRun{g: c.g, learn: G.Nodes{w1, w2, x}, final: learn,
			step: func(t *testing.T, ms []G.VM, i int) [][]uint64 {
				r := stepData(i)
				clean := randT(r, dt, 1, batch, in)
				let(t, x, clean)
				let(t, y, onehot(r, dt, batch, classes))
				require.NoError(t, ms[0].RunAll())
				out := reads(t, cost, gradOf(G.Nodes{x}))
				gx, err := x.Grad()
				require.NoError(t, err)
				adv := tensor.New(tensor.Of(dt), tensor.WithShape(batch, in))
				for k := 0; k < batch*in; k++ {
					setAt(adv, k, at(clean, k)+0.1*math.Copysign(1, at(gx.(*tensor.Dense), k)))
				}
				ms[0].Reset()
				let(t, x, adv)
				require.NoError(t, ms[0].RunAll())
				out = append(out, reads(t, cost, gradOf(learn))...)
				require.NoError(t, solver.Step(G.NodesToValueGrads(learn)))
				ms[0].Reset()
				return out
			}}
	}},

	// Fine-tuning with a frozen layer: Grad only of the head, the
	// machine binding only the head's learnables, the frozen embedding
	// left as it is.
	"frozen-trunk-fine-tune": {from: "pattern: transfer learning", dts: bothDtypes, steps: 3, build: func(dt tensor.Dtype) *realRun {
		c := &userCtx{g: G.NewGraph(), dt: dt, rng: rand.New(rand.NewSource(23))}
		const batch, in, hid, classes = 8, 6, 8, 4
		x := G.NewMatrix(c.g, dt, G.WithShape(batch, in), G.WithName("x"))
		y := G.NewMatrix(c.g, dt, G.WithShape(batch, classes), G.WithName("y"))
		trunk, head, bias := c.leaf("trunk", 0.4, in, hid), c.leaf("head", 0.4, hid, classes), c.leaf("bias", 0.1, classes)
		logits := G.Must(G.BroadcastAdd(G.Must(G.Mul(G.Must(G.Rectify(G.Must(G.Mul(x, trunk)))), head)), bias, nil, []byte{0}))
		cost := softmaxCE(logits, y)
		learn := G.Nodes{head, bias}
		mustGrad(cost, learn...)
		solver := G.NewMomentum(G.WithLearnRate(0.05))
		lets := func(t *testing.T, i int) {
			r := stepData(i)
			let(t, x, randT(r, dt, 1, batch, in))
			let(t, y, onehot(r, dt, batch, classes))
		}
		return &realRun{g: c.g, learn: learn, final: G.Nodes{head, bias, trunk},
			step: trainLoop(lets, []any{cost, gradOf(learn)}, solverOn{solver, learn})}
	}},

	// A tutorial's loop that binds no dual values: NewTapeMachine(g)
	// alone, the solver stepping on NodesToValueGrads, which reads each
	// gradient from the node gorgonia.Grad made.
	"no-dual-values": {from: "pattern: tutorials (NewTapeMachine(g) without BindDualValues)", dts: bothDtypes, steps: 3, build: func(dt tensor.Dtype) *realRun {
		c := &userCtx{g: G.NewGraph(), dt: dt, rng: rand.New(rand.NewSource(24))}
		x := c.leaf("x", 1, 6, 8)
		y := G.NewMatrix(c.g, dt, G.WithShape(6, 4), G.WithName("y"), G.WithValue(onehot(c.rng, dt, 6, 4)))
		w, w2 := c.leaf("w", 0.3, 8, 8), c.leaf("w2", 0.3, 8, 4)
		cost := softmaxCE(G.Must(G.Mul(G.Must(G.Tanh(G.Must(G.Mul(x, w)))), w2)), y)
		params := G.Nodes{w, w2}
		mustGrad(cost, params...)
		solver := G.NewAdamSolver(G.WithLearnRate(0.01))
		return &realRun{g: c.g, final: params,
			step: trainLoop(nil, []any{cost, gradOf(params)}, solverOn{solver, params})}
	}},

	// A text CNN (Kim 2014): token ids Let
	// each step (an int vector) looked up with ByIndices, the embeddings
	// reshaped to (batch, seq, emb), transposed to channels-first and
	// reshaped to the 1-high image Conv1d takes, ReLU, max over time
	// (Max along the last axis), reshaped to rows, a classifier; AdaGrad.
	"text-cnn-max-over-time": {from: "pattern: text classifiers", dts: bothDtypes, steps: 3, build: func(dt tensor.Dtype) *realRun {
		c := &userCtx{g: G.NewGraph(), dt: dt, rng: rand.New(rand.NewSource(25))}
		const batch, seq, vocab, emb, filters, classes = 2, 6, 10, 4, 4, 3
		ids := G.NewVector(c.g, tensor.Int, G.WithShape(batch*seq), G.WithName("ids"))
		y := G.NewMatrix(c.g, dt, G.WithShape(batch, classes), G.WithName("y"))
		table, k, wc := c.leaf("emb", 0.5, vocab, emb), c.leaf("k", 0.4, filters, emb, 1, 3), c.leaf("wc", 0.4, filters, classes)
		e := G.Must(G.Reshape(G.Must(G.ByIndices(table, ids, 0)), tensor.Shape{batch, seq, emb}))
		img := G.Must(G.Reshape(G.Must(G.Transpose(e, 0, 2, 1)), tensor.Shape{batch, emb, 1, seq}))
		conv := G.Must(G.Rectify(G.Must(G.Conv1d(img, k, 3, 1, 1, 1))))
		pooled := G.Must(G.Reshape(G.Must(G.Max(conv, 3)), tensor.Shape{batch, filters}))
		cost := softmaxCE(G.Must(G.Mul(pooled, wc)), y)
		learn := G.Nodes{table, k, wc}
		mustGrad(cost, learn...)
		solver := G.NewAdaGradSolver(G.WithLearnRate(0.1))
		lets := func(t *testing.T, i int) {
			r := stepData(i)
			tok := make([]int, batch*seq)
			for j := range tok {
				tok[j] = r.Intn(vocab)
			}
			let(t, ids, tensor.New(tensor.WithShape(batch*seq), tensor.WithBacking(tok)))
			let(t, y, onehot(r, dt, batch, classes))
		}
		return &realRun{g: c.g, learn: learn, final: learn,
			step: trainLoop(lets, []any{cost, gradOf(learn)}, solverOn{solver, learn})}
	}},

	// A bidirectional RNN: the sequence read forwards and backwards (Slice
	// in reverse order) by two Elman cells, their states joined per step
	// with Concat on axis 1, a mean over the steps by adding and scaling,
	// a classifier; Momentum.
	"bidirectional-rnn": {from: "pattern: sequence taggers", dts: bothDtypes, steps: 3, build: func(dt tensor.Dtype) *realRun {
		c := &userCtx{g: G.NewGraph(), dt: dt, rng: rand.New(rand.NewSource(26))}
		const batch, steps, in, hid, classes = 4, 4, 5, 4, 3
		x := G.NewTensor(c.g, dt, 3, G.WithShape(steps, batch, in), G.WithName("x"))
		y := G.NewMatrix(c.g, dt, G.WithShape(batch, classes), G.WithName("y"))
		fx, fh := c.leaf("fx", 0.4, in, hid), c.leaf("fh", 0.4, hid, hid)
		bx, bh := c.leaf("bx", 0.4, in, hid), c.leaf("bh", 0.4, hid, hid)
		wo := c.leaf("wo", 0.4, 2*hid, classes)
		zero := func(name string) *G.Node {
			return G.NewMatrix(c.g, dt, G.WithShape(batch, hid), G.WithName(name), G.WithValue(tensor.New(tensor.Of(dt), tensor.WithShape(batch, hid))))
		}
		cell := func(xt, h, wx, wh *G.Node) *G.Node {
			return G.Must(G.Tanh(G.Must(G.Add(G.Must(G.Mul(xt, wx)), G.Must(G.Mul(h, wh))))))
		}
		fwd, bwd := make(G.Nodes, steps), make(G.Nodes, steps)
		hf, hb := zero("hf0"), zero("hb0")
		for s := 0; s < steps; s++ {
			hf = cell(G.Must(G.Slice(x, G.S(s))), hf, fx, fh)
			fwd[s] = hf
			hb = cell(G.Must(G.Slice(x, G.S(steps-1-s))), hb, bx, bh)
			bwd[steps-1-s] = hb
		}
		var sum *G.Node
		for s := 0; s < steps; s++ {
			both := G.Must(G.Concat(1, fwd[s], bwd[s]))
			if sum == nil {
				sum = both
			} else {
				sum = G.Must(G.Add(sum, both))
			}
		}
		mean := G.Must(G.Mul(sum, c.scalar(1.0/steps)))
		cost := softmaxCE(G.Must(G.Mul(mean, wo)), y)
		learn := G.Nodes{fx, fh, bx, bh, wo}
		mustGrad(cost, learn...)
		solver := G.NewMomentum(G.WithLearnRate(0.05))
		lets := func(t *testing.T, i int) {
			r := stepData(i)
			let(t, x, randT(r, dt, 1, steps, batch, in))
			let(t, y, onehot(r, dt, batch, classes))
		}
		return &realRun{g: c.g, learn: learn, final: learn,
			step: trainLoop(lets, []any{cost, gradOf(learn)}, solverOn{solver, learn})}
	}},
}

// TestRealProgramsBitForBit: the programs above train bit for bit as under
// TapeMachine, in core, at half the in-core peak where they plan there and
// at the least feasible budget.
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

// clobberNet is the residual block of a transformer: norm feeds a
// feed-forward through a Reshape and is added back. natural writes the
// residual as users do, Add(norm, ffn): TapeMachine's Add writes in place
// over norm's register, the memory Reshape(norm) shares, before the
// backward reads Reshape(norm) for the gradient of w1. Add(ffn, norm) is the
// same sum without the clobber.
func clobberNet(natural bool) realProgram { return clobberNetOf(natural, false) }

// clobberNetOf is clobberNet; with deadEnd the residual sum is computed
// and read by nothing (the cost is the feed-forward's alone), yet under
// TapeMachine it still writes over norm.
func clobberNetOf(natural, deadEnd bool) realProgram { return clobberNetWith(natural, deadEnd, false) }

// clobberNetWith is clobberNetOf; with read the script also reads the
// first layer's product through a gorgonia.Read, a statement the trace
// meets before the op that writes over norm.
func clobberNetWith(natural, deadEnd, read bool) realProgram {
	return realProgram{dts: bothDtypes, steps: 2, build: func(dt tensor.Dtype) *realRun {
		c := &userCtx{g: G.NewGraph(), dt: dt, rng: rand.New(rand.NewSource(19))}
		x := c.leaf("x", 1, 2, 5, 8)
		w0, w1 := c.leaf("w0", 0.3, 8, 8), c.leaf("w1", 0.3, 8, 8)
		rows := func(n *G.Node) *G.Node { return G.Must(G.Reshape(n, tensor.Shape{10, 8})) }
		back := func(n *G.Node) *G.Node { return G.Must(G.Reshape(n, tensor.Shape{2, 5, 8})) }
		product := G.Must(G.Mul(rows(x), w0))
		var readList []any
		if read {
			productValue := new(G.Value)
			G.Read(product, productValue)
			readList = append(readList, productValue)
		}
		norm := G.Must(G.Add(back(product), x))
		ffn := back(G.Must(G.Mul(rows(norm), w1)))
		out := G.Must(G.Add(ffn, norm))
		if natural {
			out = G.Must(G.Add(norm, ffn))
		}
		if deadEnd {
			out = ffn
		}
		cost := G.Must(G.Sum(G.Must(G.Sum(G.Must(G.Sum(G.Must(G.Square(out)), 2)), 1))))
		learn := G.Nodes{x, w0, w1}
		mustGrad(cost, learn...)
		solver := G.NewAdamSolver(G.WithLearnRate(0.01))
		return &realRun{g: c.g, learn: learn, final: learn,
			step: trainLoop(nil, append(readList, cost, gradOf(learn)), solverOn{solver, learn})}
	}}
}

// concatClobberNet is clobberNet's residual block with the feed-forward
// reading norm through a Concat of one operand (one attention head, say),
// whose Do returns norm's tensor itself: under TapeMachine the natural
// Add(norm, ffn) writes over it before the gradient of w1 (norm ⊙ the
// output's gradient) reads it.
func concatClobberNet(natural bool) realProgram {
	return realProgram{dts: bothDtypes, steps: 2, build: func(dt tensor.Dtype) *realRun {
		c := &userCtx{g: G.NewGraph(), dt: dt, rng: rand.New(rand.NewSource(19))}
		x := c.leaf("x", 1, 10, 8)
		w0, w1 := c.leaf("w0", 0.3, 8, 8), c.leaf("w1", 0.3, 10, 8)
		norm := G.Must(G.Add(G.Must(G.Mul(x, w0)), x))
		ffn := G.Must(G.HadamardProd(G.Must(G.Concat(1, norm)), w1))
		out := G.Must(G.Add(ffn, norm))
		if natural {
			out = G.Must(G.Add(norm, ffn))
		}
		cost := G.Must(G.Sum(G.Must(G.Sum(G.Must(G.Square(out)), 1))))
		learn := G.Nodes{x, w0, w1}
		mustGrad(cost, learn...)
		solver := G.NewAdamSolver(G.WithLearnRate(0.01))
		return &realRun{g: c.g, learn: learn, final: learn,
			step: trainLoop(nil, []any{cost, gradOf(learn)}, solverOn{solver, learn})}
	}}
}

// TestTapeMachineViewClobber: where TapeMachine reads memory an in-place op
// wrote over through a view's sharing (a Reshape's, a Concat of one
// operand's: its gradient of w1 differs from the same sum written the
// other way round), ooc reads what TapeMachine reads, bit for bit, in core
// and at the least feasible budget, also where the op writing over it is
// one the cost does not need (ooc computes it then), and where the script
// reads a node through a gorgonia.Read. (ooc read the values the graph
// means, and differed from TapeMachine: through the Concat, until isView
// knew it; with the Read, until the replay stopped giving up on a
// statement, whose size it asked for.)
func TestTapeMachineViewClobber(t *testing.T) {
	for _, dt := range bothDtypes {
		tapeOf := func(p realProgram) [][]uint64 {
			r := p.build(dt)
			tm := G.NewTapeMachine(r.g, G.BindDualValues(r.learn...))
			defer tm.Close()
			return r.run(t, []G.VM{tm}, p.steps)
		}
		require.NotEqual(t, tapeOf(clobberNet(true)), tapeOf(clobberNet(false)),
			"%v: TapeMachine no longer reads the clobbered reshape; the test shows nothing", dt)
		require.NotEqual(t, tapeOf(clobberNetOf(true, true)), tapeOf(clobberNetOf(false, true)),
			"%v: TapeMachine's dead-end sum no longer writes over the reshaped node; the test shows nothing", dt)
		require.NotEqual(t, tapeOf(concatClobberNet(true)), tapeOf(concatClobberNet(false)),
			"%v: TapeMachine no longer reads the clobbered Concat of one operand; the test shows nothing", dt)
	}
	checkRealPrograms(t, map[string]realProgram{
		"residual-add-over-reshaped": clobberNet(true), "residual-add-other-way": clobberNet(false),
		"dead-end-add-over-reshaped":      clobberNetOf(true, true),
		"residual-add-over-reshaped-read": clobberNetWith(true, false, true),
		"residual-add-over-concat":        concatClobberNet(true), "residual-add-other-way-concat": concatClobberNet(false),
	})
}

// TestMachineLetSet: the machine's Let and Set (gorgonia's TapeMachine
// methods) refuse nodes of another graph, and a Set from a node the run
// left unbound, saying how to bind it.
func TestMachineLetSet(t *testing.T) {
	c := &userCtx{g: G.NewGraph(), dt: tensor.Float64, rng: rand.New(rand.NewSource(1))}
	x, w := c.leaf("x", 1, 4, 4), c.leaf("w", 1, 4, 4)
	h := G.Must(G.Tanh(G.Must(G.Mul(x, w))))
	upd := G.Must(G.Sub(w, G.Must(G.Mul(c.scalar(0.1), h))))
	cost := G.Must(G.Sum(G.Must(G.Sum(h, 1))))
	mustGrad(cost, w)
	other := G.NewScalar(G.NewGraph(), tensor.Float64, G.WithName("other"))
	m, err := ooc.Compile(c.g, ooc.WithNodeValues(0))
	require.NoError(t, err)
	defer m.Close()
	require.NoError(t, m.RunAll())
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"let-other-graph", m.Let(other, 1.0), "not in this machine's graph"},
		{"set-other-graph", m.Set(w, other), "not in this machine's graph"},
		{"set-from-unbound", m.Set(w, upd), "ooc.WithOutputs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Error(t, tc.err)
			require.Contains(t, tc.err.Error(), tc.want)
		})
	}
	require.NoError(t, m.Let(x, randT(c.rng, tensor.Float64, 1, 4, 4)))
}
