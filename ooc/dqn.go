package ooc

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"time"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/vm"
)

// DQN is the planner of the DQN paper (seeds/001): a deep Q-network that
// decides, per activation, whether to offload it (the paper's H0), drop it
// in the forward for recomputation (H1, recomputable functions only) or do
// nothing. Prefetching and rebuilding are not actions: the existing
// lowering does them (offloadSchedule brings each offloaded activation
// back as early as the budget allows, in the order the backward reuses
// them; a dropped one is rebuilt right before its first backward use, see
// recomputeTrace).
//
// State: the trace's device operations of the activations (for each, the
// write that makes it, the last forward read, the first backward read)
// plus a "nothing" node; nodes are joined when consecutive in time or on
// the same variable, the edge weight the time lag by the planning device's
// op times. Each node has the paper's six features, made scale-free so
// that a network trained on a small graph reads a large one alike: the
// variable's size as a fraction of the memory the plan must save (the
// budget's only way into the state), its transfer time, its recompute
// time and how soon it is reused, each in units of the mean compute time
// per candidate and squashed by x/(1+x), the node's action type, and
// whether the action is valid now (1), later (0.5: a candidate not
// visited yet), not any more (0), or was taken (-1: how the state records
// H0 and H1). The embedding is the paper's structure2vec (eq. 1, T
// rounds, p dimensions), the graph state its eq. 2, Q its eq. 3. One
// simplification: the agent visits the activations in forward order and
// takes one action for each (the paper's agent moves along the operations
// in time, too); a training episode ends when the plan fits the budget
// (the paper's terminal condition) or every activation was visited.
//
// Reward: minus the growth of the simulated step time (stall plus
// recompute) the action causes, in units of a bound on what any plan adds,
// and minus one more unit at an episode's end if the plan still does not
// fit.
// Training: fitted Q-iteration with experience replay (Algorithm 1),
// epsilon = 1 - episode/l, Adam on minibatches; the Q-network is a
// gorgonia graph run by gorgonia's TapeMachine on the CPU, trained with
// gorgonia's Adam solver. Everything is seeded: the same problem and
// weights give the same plan.
//
// Planning (see greedy): the network acts on every activation in forward
// order, evaluated in plain Go (infer: the same Q as the graph, cheaper
// on large graphs); the plan is the shortest prefix of its actions that
// fits. If none does, a repair pass turns the fewest of its choices into
// offloads that make it fit, least regretted first; if even offloading
// every activation does not fit (the activations are not all a step
// holds), the network's drops are kept and the window scheduler swaps
// the rest. Timing says which of these made the plan.
//
// With Weights nil, Plan uses the trained weights shipped in the package
// (DefaultDQNWeights); with Episodes > 0 it first fine-tunes them on the
// problem for that many seeded episodes, and if the network's plan then
// still does not fit it returns the fastest plan of those episodes.
//
// What holds (tests in dqn_test.go, dqn_internal_test.go): on elementwise
// chains of 2 and 3 layers (6 and 7 candidates), at budgets 30% and 70% of
// the way from the least any plan needs to the in-core peak, the greedy
// policy after 60 seeded episodes from new weights (150 for the 3-layer
// chain at 30%, OOC_DQN_LONG=1) plans as fast (simulated, gtx1080ti) as
// the best of all keep/offload/drop plans found by brute force. Its tapes
// pass the verifier and train bit for bit as TapeMachine; weights saved
// and reloaded plan the same tape. How the shipped weights do on
// ResNet-50, VGG-16, U-Net and the LSTM is in docs/results.md.
type DQN struct {
	Weights  *DQNWeights
	Episodes int // fine-tuning episodes on the problem before planning; 0: none
	Seed     int64
}

// DefaultDQNEpisodes is how many episodes ooc dqn-train trains for.
const DefaultDQNEpisodes = 60

// Name implements Scheduler.
func (DQN) Name() string { return "dqn" }

func (DQN) plansWithTimes() {}

// Plan implements Scheduler.
func (d DQN) Plan(p *Problem) (*Schedule, error) {
	if d.Episodes < 0 {
		return nil, fmt.Errorf("ooc: dqn: %d episodes", d.Episodes)
	}
	env, err := dqnEnvFor(p)
	if err != nil {
		return nil, err
	}
	w := d.Weights.clone()
	if w == nil {
		if w, err = DefaultDQNWeights(); err != nil {
			return nil, err
		}
	}
	agent, err := newDQNAgent(env, w)
	if err != nil {
		return nil, err
	}
	best, err := agent.train(d.Episodes, d.Seed)
	if err != nil {
		return nil, err
	}
	act, ok, note, err := agent.greedy()
	if err != nil {
		return nil, err
	}
	var s *Schedule
	switch {
	case ok:
		ev, err := env.eval(act)
		if err != nil {
			return nil, err
		}
		s = ev.sched
	case best != nil:
		s, note = best.sched, "the greedy plan did not fit: the fastest episode's plan"
	default:
		// No choice of the network's actions fits: the activations are not
		// enough to move. The network's drops stay, and the window
		// scheduler, which also swaps what no action can, plans the rest.
		if s, err = env.windowRest(act, p.Budget); err != nil {
			return nil, fmt.Errorf("ooc: dqn: no plan of the network fits %d bytes, nor its drops with the rest swapped by the window scheduler: %w", p.Budget, err)
		}
		note = "the greedy plan did not fit: its drops, the rest swapped by the window scheduler"
	}
	n, _ := s.tape.Count(vm.Recompute)
	s.Timing = fmt.Sprintf("simulated: profile %s (DQN, %s; %d recomputes)", env.sim.Name(), note, n)
	if p.Device != env.sim {
		s.Timing = p.timingNote() + fmt.Sprintf(" (DQN, %s; %d recomputes)", note, n)
	}
	return s, nil
}

// windowRest is the plan that drops what act drops and lets the window
// scheduler swap the rest on the derived trace.
func (e *dqnEnv) windowRest(act []int8, budget int64) (*Schedule, error) {
	var drop []int
	for k, a := range act {
		if a == dqnDrop {
			drop = append(drop, e.cands[k])
		}
	}
	r, err := e.t.withRecompute(drop)
	if err != nil {
		return nil, err
	}
	s, err := Window{}.Plan(&Problem{Trace: r.Trace, Budget: budget, Device: e.sim})
	if err != nil {
		return nil, err
	}
	if s, err = r.schedule(s); err != nil {
		return nil, err
	}
	if _, err := Verify(s.tape, budget); err != nil {
		return nil, err
	}
	return s, nil
}

// TrainDQN trains the network w (nil: new weights of p = 16, T = 4 drawn
// from seed) on the problem for the given number of episodes, seeded, and
// returns the trained weights (w itself is not changed). Weights trained
// on one problem plan another: the network's size does not depend on the
// graph's.
func TrainDQN(p *Problem, w *DQNWeights, episodes int, seed int64) (*DQNWeights, error) {
	if episodes < 0 {
		return nil, fmt.Errorf("ooc: dqn: %d episodes", episodes)
	}
	env, err := dqnEnvFor(p)
	if err != nil {
		return nil, err
	}
	if w = w.clone(); w == nil {
		w = NewDQNWeights(16, 4, seed)
	}
	agent, err := newDQNAgent(env, w)
	if err != nil {
		return nil, err
	}
	if _, err := agent.train(episodes, seed); err != nil {
		return nil, err
	}
	return agent.w, agent.saveWeights()
}

// Actions on an activation.
const (
	dqnKeep = iota
	dqnOffload
	dqnDrop
)

// dqnEnv is the simulator the agent learns in.
type dqnEnv struct {
	t      *Trace
	sim    *vm.Sim
	budget int64
	cands  []int // activations in forward order
	canDrp []bool
	scale  float64 // in-core compute time, seconds
	// unit is what rewards are counted in, seconds: a bound on the time
	// any plan adds (every candidate swapped both ways and recomputed),
	// plus the in-core compute time; an episode whose plan does not fit
	// loses one more unit.
	unit float64
	// The state graph: node 0 is "nothing"; candidate k has nodes
	// 1+3k (write: offload), 2+3k (last forward read: drop), 3+3k (first
	// backward read).
	n      int
	static [][6]float64 // features but validity
	adj    []float64    // n×n, 0/1
	wsum   []float64    // per node, the sum of its edges' weights
	nbr    [][]int      // adj as lists, for planning without gorgonia
	memo   map[string]*dqnEval
}

type dqnEval struct {
	act   []int8
	step  time.Duration
	fits  bool
	sched *Schedule
}

// dqnEnvFor is the environment of a problem, on its planning device's times.
func dqnEnvFor(p *Problem) (*dqnEnv, error) {
	sim, err := planningSim(p)
	if err != nil {
		return nil, err
	}
	return newDQNEnv(p.Trace, sim, p.Budget)
}

func newDQNEnv(t *Trace, sim *vm.Sim, budget int64) (*dqnEnv, error) {
	tm, err := deviceTiming(t, sim)
	if err != nil {
		return nil, err
	}
	e := &dqnEnv{t: t, sim: sim, budget: budget, memo: map[string]*dqnEval{}}
	drop := map[int]bool{}
	for _, v := range t.droppable() {
		drop[v] = true
	}
	for _, v := range t.activations() {
		if x := &t.Vars[v]; x.View || x.Role != vm.Intermediate {
			continue
		}
		e.cands = append(e.cands, v)
		e.canDrp = append(e.canDrp, drop[v])
	}
	nf := len(t.Funcs)
	start := make([]time.Duration, nf+1)
	for i := range nf {
		start[i+1] = start[i] + tm.op[i]
	}
	e.scale = max(start[nf].Seconds(), 1e-9)
	end := t.forwardEnd()
	inCore, err := tracePeak(t)
	if err != nil {
		return nil, err
	}
	// The features are scale-free, so that weights trained on a small
	// graph read a large one alike: sizes count against what the plan
	// must save (the budget's only way into the state), times against the
	// mean compute time per candidate, both squashed into [0, 1).
	need := float64(max(inCore-budget, 1))
	perCand := e.scale / float64(max(len(e.cands), 1))
	squash := func(x float64) float64 { return x / (1 + x) }
	e.unit += e.scale
	e.n = 1 + 3*len(e.cands)
	e.static = make([][6]float64, e.n)
	at := make([]float64, e.n) // each node's time, in units of scale
	for k, v := range e.cands {
		x := &t.Vars[v]
		lastF := x.Producer
		for _, u := range t.Uses[v] {
			if u <= end {
				lastF = max(lastF, u)
			}
		}
		use := t.NextUse(v, end)
		times := []float64{start[x.Producer+1].Seconds(), start[lastF+1].Seconds(), start[max(use, 0)].Seconds()}
		redo := 0.0
		if e.canDrp[k] {
			redo = tm.op[x.Producer].Seconds()
		}
		copyT := tm.copyTime(t.DeviceBytes(v)).Seconds()
		e.unit += 2*copyT + redo
		for j := range 3 {
			i := 1 + 3*k + j
			at[i] = times[j] / e.scale
			f := &e.static[i]
			f[0] = min(float64(t.DeviceBytes(v))/need, 1)
			f[1] = squash(copyT / perCand)
			f[2] = squash(redo / perCand)
			f[3] = squash(max(times[2]-times[j], 0) / perCand) // how soon it is reused
			f[4] = []float64{0.5, 1, 0}[j]                     // action type: offload, drop, none
		}
	}
	e.adj = make([]float64, e.n*e.n)
	e.wsum = make([]float64, e.n)
	e.nbr = make([][]int, e.n)
	link := func(a, b int) {
		if a == b || e.adj[a*e.n+b] != 0 {
			return
		}
		w := math.Abs(at[a] - at[b])
		e.adj[a*e.n+b], e.adj[b*e.n+a] = 1, 1
		e.nbr[a], e.nbr[b] = append(e.nbr[a], b), append(e.nbr[b], a)
		e.wsum[a] += w
		e.wsum[b] += w
	}
	order := make([]int, e.n)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return at[order[a]] < at[order[b]] })
	for i := 1; i < len(order); i++ {
		link(order[i-1], order[i])
	}
	for k := range e.cands {
		link(1+3*k, 2+3*k)
		link(2+3*k, 3+3*k)
	}
	return e, nil
}

// features are the nodes' features in state (act, k): the agent is at
// candidate k, with act the actions taken so far.
func (e *dqnEnv) features(act []int8, k int) []float64 {
	out := make([]float64, 0, e.n*6)
	for i := range e.n {
		f := e.static[i]
		switch {
		case i == 0:
			f[5] = 1
		default:
			c, j := (i-1)/3, (i-1)%3
			switch {
			case c < k && ((j == 0 && act[c] == dqnOffload) || (j == 1 && act[c] == dqnDrop)):
				f[5] = -1
			case c == k && (j == 0 || (j == 1 && e.canDrp[c])):
				f[5] = 1
			case c > k && (j == 0 || (j == 1 && e.canDrp[c])):
				f[5] = 0.5
			}
		}
		out = append(out, f[:]...)
	}
	return out
}

// valid are the action nodes open in state k, with the action each takes.
func (e *dqnEnv) valid(k int) (nodes []int, acts []int8) {
	nodes, acts = []int{0, 1 + 3*k}, []int8{dqnKeep, dqnOffload}
	if e.canDrp[k] {
		nodes, acts = append(nodes, 2+3*k), append(acts, dqnDrop)
	}
	return nodes, acts
}

// eval lowers the plan act (one action per candidate; missing ones keep)
// and simulates it: the derived trace drops what act drops, the
// offloading planner's schedule swaps what it offloads.
func (e *dqnEnv) eval(act []int8) (*dqnEval, error) {
	key := string(int8sBytes(act))
	if ev, ok := e.memo[key]; ok {
		return ev, nil
	}
	var drop, off []int
	for k, a := range act {
		switch a {
		case dqnOffload:
			off = append(off, e.cands[k])
		case dqnDrop:
			drop = append(drop, e.cands[k])
		}
	}
	r, err := e.t.withRecompute(drop)
	if err != nil {
		return nil, err
	}
	tm, err := deviceTiming(r.Trace, e.sim)
	if err != nil {
		return nil, err
	}
	s, err := offloadSchedule(r.Trace, off, e.budget, tm)
	if err != nil {
		return nil, err
	}
	if s, err = r.schedule(s); err != nil {
		return nil, err
	}
	peak, err := Verify(s.tape, 0)
	if err != nil {
		return nil, err
	}
	step, err := simulate(s.tape, e.sim, peak)
	if err != nil {
		return nil, err
	}
	ev := &dqnEval{act: slices.Clone(act), step: step, fits: peak <= e.budget, sched: s}
	e.memo[key] = ev
	return ev, nil
}

func int8sBytes(a []int8) []byte {
	b := make([]byte, len(a))
	for i, x := range a {
		b[i] = byte(x)
	}
	return b
}

// transition is one step of experience.
type transition struct {
	act    []int8 // actions before the step
	k      int
	node   int
	r      float64
	done   bool
	actOut []int8 // actions after
}

// dqnAgent holds the Q-network, a gorgonia graph of dqnBatch copies that
// share the weights: copy 0 also gives every node's Q for planning.
type dqnAgent struct {
	env *dqnEnv
	w   *DQNWeights
	g   *G.ExprGraph
	ws  []*G.Node
	in  [dqnBatch]struct{ x, c, a, y *G.Node }
	// qAll[b] (n×1) plus qG[b] (1×1) is Q of every node in copy b, read
	// out by Read statements (the tape machine reuses the memory of
	// values it does not read out).
	qAll, qG [dqnBatch]G.Value
	m        G.VM
	loss     *G.Node
	solver   *G.AdamSolver
	replay   []transition
	best     *dqnEval
	// target is the network the targets are computed with: a copy of
	// this one's weights, synced every dqnSync minibatch steps (a moving
	// target, bootstrapped from itself, does not converge here).
	target *dqnAgent
	fits   int
}

const (
	dqnBatch = 8
	// dqnFits is how many minibatch steps follow each action.
	dqnFits = 2
	dqnSync = 40
)

func newDQNAgent(env *dqnEnv, w *DQNWeights) (a *dqnAgent, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("ooc: dqn: building the Q-network: %v", r)
		}
	}()
	if err := w.check(); err != nil {
		return nil, err
	}
	a = &dqnAgent{env: env, w: w, g: G.NewGraph()}
	g, n := a.g, env.n
	shapes := w.shapes()
	for i, sh := range shapes {
		t := tensor.New(tensor.WithShape(sh...), tensor.WithBacking(slices.Clone(w.W[i])))
		a.ws = append(a.ws, G.NewMatrix(g, G.Float64, G.WithShape(sh...), G.WithName(fmt.Sprintf("W%d", i+1)), G.WithValue(t)))
	}
	W1, W2, W3, W4, W5, W6, W7a, W7b, W8 := a.ws[0], a.ws[1], a.ws[2], a.ws[3], a.ws[4], a.ws[5], a.ws[6], a.ws[7], a.ws[8]
	adj := G.NewMatrix(g, G.Float64, G.WithShape(n, n), G.WithName("A"),
		G.WithValue(tensor.New(tensor.WithShape(n, n), tensor.WithBacking(slices.Clone(env.adj)))))
	wsum := G.NewMatrix(g, G.Float64, G.WithShape(n, 1), G.WithName("wsum"),
		G.WithValue(tensor.New(tensor.WithShape(n, 1), tensor.WithBacking(slices.Clone(env.wsum)))))
	ones := G.NewMatrix(g, G.Float64, G.WithShape(1, n), G.WithName("ones"),
		G.WithValue(tensor.New(tensor.WithShape(1, n), tensor.WithBacking(slices.Repeat([]float64{1}, n)))))
	// Eq. 1's edge term: sum over edges of ReLU(W4 w) is (sum of w) ReLU(W4), w >= 0.
	edge := G.Must(G.Mul(G.Must(G.Mul(wsum, G.Must(G.Rectify(W4)))), W3))
	var loss *G.Node
	for b := range dqnBatch {
		in := &a.in[b]
		in.x = G.NewMatrix(g, G.Float64, G.WithShape(n, 6), G.WithName(fmt.Sprintf("x%d", b)), G.WithInit(G.Zeroes()))
		in.c = G.NewMatrix(g, G.Float64, G.WithShape(1, n), G.WithName(fmt.Sprintf("c%d", b)), G.WithInit(G.Zeroes()))
		in.a = G.NewMatrix(g, G.Float64, G.WithShape(1, n), G.WithName(fmt.Sprintf("a%d", b)), G.WithInit(G.Zeroes()))
		in.y = G.NewMatrix(g, G.Float64, G.WithShape(1, 1), G.WithName(fmt.Sprintf("y%d", b)), G.WithInit(G.Zeroes()))
		base := G.Must(G.Add(G.Must(G.Mul(in.x, W1)), edge))
		s := G.Must(G.Rectify(base)) // round 1: s^0 = 0
		for range w.T - 1 {
			s = G.Must(G.Rectify(G.Must(G.Add(base, G.Must(G.Mul(G.Must(G.Mul(adj, s)), W2))))))
		}
		// Eq. 2: g = [W5 sum s, W6 s_c]; eq. 3: Q = W7 ReLU([g, W8 s_a]).
		gs := G.Must(G.Concat(1, G.Must(G.Mul(G.Must(G.Mul(ones, s)), W5)), G.Must(G.Mul(G.Must(G.Mul(in.c, s)), W6))))
		qg := G.Must(G.Mul(G.Must(G.Rectify(gs)), W7a))
		q := G.Must(G.Add(qg, G.Must(G.Mul(G.Must(G.Rectify(G.Must(G.Mul(G.Must(G.Mul(in.a, s)), W8)))), W7b))))
		sq := G.Must(G.Square(G.Must(G.Sub(q, in.y))))
		G.Read(qg, &a.qG[b])
		G.Read(G.Must(G.Mul(G.Must(G.Rectify(G.Must(G.Mul(s, W8)))), W7b)), &a.qAll[b])
		if loss == nil {
			loss = sq
		} else {
			loss = G.Must(G.Add(loss, sq))
		}
	}
	loss = G.Must(G.Sum(G.Must(G.Div(loss, G.NewConstant(float64(dqnBatch))))))
	a.loss = loss
	if _, err := G.Grad(loss, a.ws...); err != nil {
		return nil, fmt.Errorf("ooc: dqn: gradient of the Q-network: %w", err)
	}
	a.m = G.NewTapeMachine(g, G.BindDualValues(a.ws...))
	a.solver = G.NewAdamSolver(G.WithLearnRate(3e-3))
	return a, nil
}

// sync copies the weights into the target network, building it first.
func (a *dqnAgent) sync() error {
	if a.target == nil {
		t, err := newDQNAgent(a.env, a.w)
		if err != nil {
			return err
		}
		a.target = t
	}
	for i, n := range a.ws {
		copy(a.target.ws[i].Value().Data().([]float64), n.Value().Data().([]float64))
	}
	return nil
}

// forward runs the network; samples[b] fills copy b (copies beyond the
// samples repeat the first, with weight in the loss only through y).
func (a *dqnAgent) run(xs [][]float64, cs, as []int, ys []float64) error {
	n := a.env.n
	for b := range dqnBatch {
		j := b % len(xs)
		in := &a.in[b]
		c, act := make([]float64, n), make([]float64, n)
		c[cs[j]], act[as[j]] = 1, 1
		for _, l := range []struct {
			node *G.Node
			v    []float64
			sh   []int
		}{{in.x, xs[j], []int{n, 6}}, {in.c, c, []int{1, n}}, {in.a, act, []int{1, n}}, {in.y, []float64{ys[j]}, []int{1, 1}}} {
			if err := G.Let(l.node, tensor.New(tensor.WithShape(l.sh...), tensor.WithBacking(l.v))); err != nil {
				return err
			}
		}
	}
	a.m.Reset()
	return a.m.RunAll()
}

// q returns Q of each valid action in state (act, k).
func (a *dqnAgent) q(act []int8, k int) ([]float64, error) {
	qs, err := a.qs([][]int8{act}, []int{k})
	if err != nil {
		return nil, err
	}
	return qs[0], nil
}

// qs returns, for each state (acts[j], ks[j]) (at most dqnBatch), Q of
// each valid action, in one run of the network.
func (a *dqnAgent) qs(acts [][]int8, ks []int) ([][]float64, error) {
	xs, cs, zs := make([][]float64, len(ks)), make([]int, len(ks)), make([]int, len(ks))
	for j, k := range ks {
		xs[j], cs[j] = a.env.features(acts[j], k), 1+3*k
	}
	if err := a.run(xs, cs, zs, make([]float64, len(ks))); err != nil {
		return nil, err
	}
	// The run also backpropagated towards its dummy targets, and the tape
	// machine adds gradients up until a solver step zeroes them: zero them
	// here, so that the next step follows the minibatch alone.
	for _, vg := range G.NodesToValueGrads(a.ws) {
		g, err := vg.Grad()
		if err != nil {
			return nil, err
		}
		if z, ok := g.(tensor.Tensor); ok {
			z.Zero()
		}
	}
	out := make([][]float64, len(ks))
	for j, k := range ks {
		nodes, _ := a.env.valid(k)
		all := a.qAll[j].Data().([]float64)
		g := a.qG[j].Data().([]float64)[0]
		out[j] = make([]float64, len(nodes))
		for i, nd := range nodes {
			out[j][i] = g + all[nd]
		}
	}
	return out, nil
}

func argmax(x []float64) int {
	best := 0
	for i := range x {
		if x[i] > x[best] {
			best = i
		}
	}
	return best
}

// step applies action i of the valid ones in state (act, k).
func (a *dqnAgent) step(act []int8, k, i int, cur *dqnEval) (next []int8, ev *dqnEval, tr transition, err error) {
	nodes, acts := a.env.valid(k)
	next = append(slices.Clone(act), acts[i])
	if ev, err = a.env.eval(next); err != nil {
		return nil, nil, tr, err
	}
	r := -(ev.step - cur.step).Seconds() / a.env.unit
	done := ev.fits || len(next) == len(a.env.cands)
	if done && !ev.fits {
		r--
	}
	return next, ev, transition{act: act, k: k, node: nodes[i], r: r, done: done, actOut: next}, nil
}

// train runs Algorithm 1 for episodes episodes and returns the fastest
// plan that fit.
func (a *dqnAgent) train(episodes int, seed int64) (*dqnEval, error) {
	rng := rand.New(rand.NewSource(seed))
	env := a.env
	start, err := env.eval(nil)
	if err != nil {
		return nil, err
	}
	if start.fits || len(env.cands) == 0 {
		return nil, nil
	}
	for ep := range episodes {
		eps := 1 - float64(ep)/float64(episodes)
		act, cur := []int8{}, start
		for k := 0; ; k++ {
			nodes, _ := env.valid(k)
			var i int
			if rng.Float64() < eps {
				i = rng.Intn(len(nodes))
			} else {
				qs, err := a.q(act, k)
				if err != nil {
					return nil, err
				}
				i = argmax(qs)
			}
			next, ev, tr, err := a.step(act, k, i, cur)
			if err != nil {
				return nil, err
			}
			a.replay = append(a.replay, tr)
			for range dqnFits {
				if err := a.fit(rng); err != nil {
					return nil, err
				}
			}
			act, cur = next, ev
			if tr.done {
				break
			}
		}
		if cur.fits && (a.best == nil || cur.step < a.best.step) {
			a.best = cur
		}
	}
	return a.best, a.saveWeights()
}

// fit takes one Adam step on a minibatch sampled from the replay, towards
// eq. 5's targets y = r + max Q(s', a') (no discount: episodes are short
// and the objective is the total time).
func (a *dqnAgent) fit(rng *rand.Rand) error {
	if len(a.replay) < dqnBatch {
		return nil
	}
	var xs [][]float64
	var cs, as []int
	var ys []float64
	var nextActs [][]int8
	var nextKs, nextOf []int
	for b := range dqnBatch {
		tr := a.replay[rng.Intn(len(a.replay))]
		if !tr.done {
			nextActs, nextKs, nextOf = append(nextActs, tr.actOut), append(nextKs, tr.k+1), append(nextOf, b)
		}
		xs = append(xs, a.env.features(tr.act, tr.k))
		cs, as, ys = append(cs, 1+3*tr.k), append(as, tr.node), append(ys, tr.r)
	}
	if a.fits%dqnSync == 0 {
		if err := a.sync(); err != nil {
			return err
		}
	}
	a.fits++
	if len(nextKs) > 0 {
		qs, err := a.target.qs(nextActs, nextKs)
		if err != nil {
			return err
		}
		for j, b := range nextOf {
			// What is still to come lies between the worst (a plan that
			// adds a unit and fails) and nothing: bootstrapping from a
			// network that overestimates would otherwise drift upward.
			ys[b] += min(max(qs[j][argmax(qs[j])], -2), 0)
		}
	}
	if err := a.run(xs, cs, as, ys); err != nil {
		return err
	}
	return a.solver.Step(G.NodesToValueGrads(a.ws))
}

// infer is the Q-network of w evaluated in plain Go on the state whose
// node features are x (n×6, row-major) with the agent at node c: Q of
// node i is qg + all[i]. It computes what the gorgonia graph of
// newDQNAgent computes (TestDQNInferMatchesGraph), with the adjacency as
// lists: planning a large graph takes one pass per candidate, and the
// graph's dense n×n products and dqnBatch copies cost 0.17 s a pass on
// ResNet-50 (n = 325) here.
func (w *DQNWeights) infer(e *dqnEnv, x []float64, c int) (qg float64, all []float64) {
	p, n := w.P, e.n
	// mul returns a (rows×k) times b (k×p), all row-major.
	mul := func(a []float64, rows, k int, b []float64, cols int) []float64 {
		out := make([]float64, rows*cols)
		for i := range rows {
			o := out[i*cols : (i+1)*cols]
			for j := range k {
				if v := a[i*k+j]; v != 0 {
					for l, bv := range b[j*cols : (j+1)*cols] {
						o[l] += v * bv
					}
				}
			}
		}
		return out
	}
	relu := func(a []float64) []float64 {
		out := make([]float64, len(a))
		for i, v := range a {
			out[i] = max(v, 0)
		}
		return out
	}
	edge := mul(relu(w.W[3]), 1, p, w.W[2], p) // ReLU(W4) W3, times each node's wsum
	base := mul(x, n, 6, w.W[0], p)
	for i := range n {
		for l := range p {
			base[i*p+l] += e.wsum[i] * edge[l]
		}
	}
	s := relu(base)
	for range w.T - 1 {
		as := make([]float64, n*p)
		for i, nb := range e.nbr {
			for _, j := range nb {
				for l := range p {
					as[i*p+l] += s[j*p+l]
				}
			}
		}
		next := mul(as, n, p, w.W[1], p)
		for i := range next {
			next[i] += base[i]
		}
		s = relu(next)
	}
	sum := make([]float64, p)
	for i := range n {
		for l := range p {
			sum[l] += s[i*p+l]
		}
	}
	gs := append(mul(sum, 1, p, w.W[4], p), mul(s[c*p:(c+1)*p], 1, p, w.W[5], p)...)
	qg = mul(relu(gs), 1, 2*p, w.W[6], 1)[0]
	all = mul(relu(mul(s, n, p, w.W[8], p)), n, p, w.W[7], 1)
	return qg, all
}

// greedy is the plan the network's policy makes, made to fit when it can.
// The policy acts on every candidate in forward order (Q by infer); the
// plan is the shortest prefix of those actions that fits the budget (the
// paper's terminal condition: the episode ends when nothing more need
// move), found by bisection, the candidates after it kept. If all of them
// together do not fit, a repair pass turns the fewest choices that fit
// into offloads (bisection again), those whose Q loses least by it
// first. note says which of these made the plan; ok is false if none
// fits.
func (a *dqnAgent) greedy() (act []int8, ok bool, note string, err error) {
	env := a.env
	nc := len(env.cands)
	act = make([]int8, 0, nc)
	regret := make([]float64, nc) // Q(the choice) - Q(offload): how much the network minds offloading
	for k := range nc {
		// The graph-state term of Q is the same for every action of a
		// state: the per-node term ranks them.
		_, all := a.w.infer(env, env.features(act, k), 1+3*k)
		nodes, acts := env.valid(k)
		best := 0
		for i := range nodes {
			if all[nodes[i]] > all[nodes[best]] {
				best = i
			}
		}
		act = append(act, acts[best])
		regret[k] = all[nodes[best]] - all[1+3*k]
	}
	fitsWith := func(plan []int8) (bool, error) {
		ev, err := env.eval(plan)
		if err != nil {
			return false, err
		}
		return ev.fits, nil
	}
	// least returns the least m in [lo, hi] for which try(m) fits, given
	// that try(hi) fits, by bisection.
	least := func(lo, hi int, try func(int) []int8) (int, error) {
		for lo < hi {
			mid := (lo + hi) / 2
			f, err := fitsWith(try(mid))
			if err != nil {
				return 0, err
			}
			if f {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		return hi, nil
	}
	full, err := fitsWith(act)
	if err != nil {
		return nil, false, "", err
	}
	if full {
		j, err := least(0, nc, func(m int) []int8 { return act[:m] })
		if err != nil {
			return nil, false, "", err
		}
		return act[:j], true, "greedy policy", nil
	}
	// Repair: offloading is the action that always frees memory (a drop
	// can make a rebuild chain longer), so the candidates not offloaded
	// turn to offloads, the ones whose Q loses least by it first.
	var moved []int
	for k, x := range act {
		if x != dqnOffload {
			moved = append(moved, k)
		}
	}
	sort.SliceStable(moved, func(i, j int) bool { return regret[moved[i]] < regret[moved[j]] })
	flip := func(m int) []int8 {
		out := slices.Clone(act)
		for _, k := range moved[:m] {
			out[k] = dqnOffload
		}
		return out
	}
	if f, err := fitsWith(flip(len(moved))); err != nil || !f {
		return act, false, "", err
	}
	m, err := least(0, len(moved), flip)
	if err != nil {
		return nil, false, "", err
	}
	return flip(m), true, fmt.Sprintf("greedy policy, %d of its %d other choices turned to offloads by the repair pass", m, len(moved)), nil
}

// saveWeights copies the network's weights back into a.w.
func (a *dqnAgent) saveWeights() error {
	for i, n := range a.ws {
		d, ok := n.Value().Data().([]float64)
		if !ok {
			return fmt.Errorf("ooc: dqn: weight %s is not float64", n.Name())
		}
		a.w.W[i] = slices.Clone(d)
	}
	return nil
}

// DQNWeights are a Q-network's parameters: W1..W8 of the paper's eqs. 1-3
// (W7 split in the part that multiplies the graph state and the part that
// multiplies the action node), for p embedding dimensions and T rounds.
// They do not depend on the graph's size, so weights trained on one graph
// plan another.
type DQNWeights struct {
	P, T int
	W    [9][]float64
}

// NewDQNWeights returns Glorot-uniform weights drawn from seed.
func NewDQNWeights(p, T int, seed int64) *DQNWeights {
	w := &DQNWeights{P: p, T: T}
	rng := rand.New(rand.NewSource(seed))
	for i, sh := range w.shapes() {
		lim := math.Sqrt(6 / float64(sh[0]+sh[1]))
		w.W[i] = make([]float64, sh[0]*sh[1])
		for j := range w.W[i] {
			w.W[i][j] = (2*rng.Float64() - 1) * lim
		}
	}
	return w
}

// shapes are the weights' shapes in the row convention the graph uses
// (node states are rows).
func (w *DQNWeights) shapes() [9][]int {
	p := w.P
	return [9][]int{{6, p}, {p, p}, {p, p}, {1, p}, {p, p}, {p, p}, {2 * p, 1}, {p, 1}, {p, p}}
}

func (w *DQNWeights) clone() *DQNWeights {
	if w == nil {
		return nil
	}
	c := *w
	for i := range c.W {
		c.W[i] = slices.Clone(w.W[i])
	}
	return &c
}

func (w *DQNWeights) check() error {
	if w.P < 1 || w.T < 1 || w.P > 1024 || w.T > 64 {
		return fmt.Errorf("ooc: dqn: weights with p = %d, T = %d (want 1..1024 and 1..64)", w.P, w.T)
	}
	var bad []string
	for i, sh := range w.shapes() {
		if len(w.W[i]) != sh[0]*sh[1] {
			bad = append(bad, fmt.Sprintf("W%d has %d values, want %d", i+1, len(w.W[i]), sh[0]*sh[1]))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("ooc: dqn: %s", strings.Join(bad, "; "))
	}
	return nil
}
