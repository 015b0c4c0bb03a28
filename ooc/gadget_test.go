package ooc_test

// The offloading paper's hardness gadgets (Inria, sections 3.3 and 5.1),
// realized as gorgonia graphs and run on a simulated device whose times are
// exact integers of nanoseconds, so that the proofs' schedules can be
// checked to the nanosecond against their target makespans T.
//
// Reusable pieces (for other tests on chains, e.g. DynProg's):
//   - chainSpec, buildChain: a chain instance of the paper's section 3.1 as a
//     graph, with custom ops whose simulated times are exactly UF and UB;
//   - exactProfile, exactUnit, tinyBytes: the device on which they are exact;
//   - twoPartition, threePartition: the gadgets of Theorems 3 and 1;
//   - handScheduler: a Scheduler returning a hand-built *ooc.Schedule;
//   - (*builtChain).budget, .fIdx, .bIdx, .px, .varOf: indices and budgets.

import (
	"fmt"
	"hash"
	"hash/fnv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chewxy/hm"
	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm"
)

// tinyBytes is what the paper's size-0 data become: a 1-element float32
// vector (or the float32 scalar cost). The VM cannot hold a 0-byte
// variable, so every gadget budget gets an explicit slack for these (see
// builtChain.tinySlack).
const tinyBytes = 4

// exactUnit is the byte size of one unit of the gadgets' integers u_i and V.
// On exactProfile a copy of n bytes takes n/1e9 s, which the simulator turns
// into time.Duration(n/1e9 * 1e9), truncated: for most n (14, 29, 59, ...)
// the float round trip lands just below n and the result is n-1 ns. For n a
// multiple of 5^9 = 1953125, n/1e9 = k/2^9 is exact in binary and so is
// its product with 1e9, so copies and op times are exact; 4*5^9 is also a
// whole number of float32 elements. (TestChainExactProfile checks it.)
const exactUnit int64 = 4 * 1953125 // 7,812,500 bytes = 7.8125 ms on the link

// exactProfile is a simulated device on which times are exact integers of
// nanoseconds: 1e9 FLOP/s, so an op's FLOPs are its nanoseconds; a memory
// bandwidth so large the memory roof rounds to 0 (so does the optimizer's
// update, a memory-bound kernel: UpdateTime is 0 for every size used
// here); no launch cost; efficiency 1; a 1e9 B/s link, so copying n bytes
// takes n ns; and a capacity far above any budget, so the VA allocator's
// rounding of blocks to chunks never makes an allocation fail (the budget
// itself is checked on requested bytes, by both ooc.Verify and the
// machine).
func exactProfile() vm.Profile {
	return vm.Profile{
		Name:          "exact",
		Capacity:      1 << 50,
		PeakFLOPS:     1e9,
		MemBandwidth:  1e30,
		Efficiency:    1,
		LinkBandwidth: 1e9,
		Launch:        0,
		Source:        "test profile: 1 FLOP = 1 ns, 1 byte on the link = 1 ns, no memory roof, no launch",
	}
}

func exactSim(t testing.TB) *vm.Sim {
	t.Helper()
	sim, err := vm.NewSim(exactProfile())
	require.NoError(t, err)
	t.Cleanup(func() { _ = sim.Close() })
	return sim
}

// chainSpec is a chain instance in the notation of the paper's section 3.1:
// forward stages F_0..F_L, F_i reading x_i and writing x_{i+1}, then
// backward stages B_L..B_0, B_i reading x_i, x_{i+1} and y_{i+1} and
// writing y_i. buildChain realizes it as a graph with one function per
// stage, so trace function i is F_i and trace function 2L+1-i is B_i.
//
// x_0 is a learnable leaf: like every leaf it lives outside the budget and
// is never swapped, and y_0 is its gradient. x_{L+1} is the scalar cost.
// Every y_i is a 1-element vector (the paper's gadgets have |y_i| = 0);
// y_{L+1} is gorgonia's seed constant 1, a leaf.
type chainSpec struct {
	Name string
	// UF[i] and UB[i] are the simulated times of F_i and B_i, i = 0..L.
	UF, UB []time.Duration
	// X[i] is |x_i| in bytes, i = 0..L+1: a positive multiple of 4 (a
	// float32 vector of X[i]/4 elements); X[L+1] must be tinyBytes, the
	// scalar cost.
	X []int64
	// M and T, for gadgets: the paper's memory M_GPU in bytes (without the
	// slack for tiny tensors) and the makespan its proof reaches.
	M int64
	T time.Duration
}

// L is the index of the last stage.
func (s chainSpec) L() int { return len(s.UF) - 1 }

func (s chainSpec) check() error {
	l := len(s.UF)
	if l == 0 || len(s.UB) != l || len(s.X) != l+1 {
		return fmt.Errorf("chain %s: %d UF, %d UB, %d X (want L+1, L+1, L+2)", s.Name, len(s.UF), len(s.UB), len(s.X))
	}
	for i, x := range s.X {
		if x <= 0 || x%4 != 0 {
			return fmt.Errorf("chain %s: |x_%d| = %d is not a positive multiple of 4", s.Name, i, x)
		}
	}
	if s.X[l] != tinyBytes {
		return fmt.Errorf("chain %s: x_{L+1} is the scalar cost, so |x_{L+1}| must be %d", s.Name, tinyBytes)
	}
	return nil
}

// fromPaper turns a chain in the paper's indexing (F_0..F_Lp, sizes
// xp_0..xp_{Lp+1}, with 0 for "size 0") into a chainSpec. The paper's x_0
// is an activation that counts against M and may be offloaded; here a leaf
// is neither, so the paper's chain is shifted by one stage: x_0 is a tiny
// leaf, F_0 a zero-time stage writing the paper's x_0 as x_1, and the
// paper's F_p, B_p, x_p are F_{p+1}, B_{p+1}, x_{p+1} (builtChain.px,
// fIdx(p+1), bIdx(p+1)). The added B_0 takes no time and needs only what the
// paper's B_0 needed, so no schedule of one gets faster than the other.
func fromPaper(name string, ufp, ubp []time.Duration, xp []int64, m int64, t time.Duration) chainSpec {
	s := chainSpec{Name: name, UF: []time.Duration{0}, UB: []time.Duration{0}, X: []int64{tinyBytes}, M: m, T: t}
	s.UF = append(s.UF, ufp...)
	s.UB = append(s.UB, ubp...)
	for _, x := range xp {
		s.X = append(s.X, max(x, tinyBytes))
	}
	return s
}

// twoPartition is the instance of Theorem 3 (Figure 3) for 2-partition
// values u (sum 2V), in units of unit bytes: L = n+3 (paper indexing), the
// input of the first n stages of sizes u, |x_{n+2}| = V and every other
// x and y of size 0, F_n and B_n taking one time unit and every other stage
// none, beta = V per time unit, M = 2V, T = 2. With a 1 B/ns link, a time
// unit is V*unit ns.
func twoPartition(u []int64, unit int64) chainSpec {
	n := len(u)
	var sum int64
	for _, x := range u {
		sum += x
	}
	if sum%2 != 0 {
		panic(fmt.Sprintf("twoPartition%v: the sum must be even (2V)", u))
	}
	v := sum / 2 * unit
	tu := time.Duration(v) // one time unit: V bytes on the link
	lp := n + 3
	ufp, ubp := make([]time.Duration, lp+1), make([]time.Duration, lp+1)
	ufp[n], ubp[n] = tu, tu
	xp := make([]int64, lp+2)
	for i, x := range u {
		xp[i] = x * unit
	}
	xp[n+2] = v
	return fromPaper(fmt.Sprintf("2-partition%v", u), ufp, ubp, xp, 2*v, 2*tu)
}

// threePartition is the instance of Theorem 1 (Figure 2) for 3-partition
// values u (3m of them, sum mV), in units of unit bytes: L = 5m,
// beta = V per time unit, M = mV, T = 2m. Stages F_{3m+2k}, k < m, take one
// time unit and B_{3m} takes m; every other stage none.
//
// The paper's list of sizes does not fit its own proof under section 3.1's
// convention (F_i writes x_{i+1}): read literally, F_{3m} would write an
// x of size V while memory is full. The sizes below are the ones the proof
// uses: x_0..x_{3m-1} of sizes u, x_{3m} of size 0, and per k < m the
// time-1 stage F_{3m+2k} writes x_{3m+2k+1} of size 0 while F_{3m+2k+1}
// writes x_{3m+2k+2} of size V ("the memory used at the end of F_{3m+2k}
// is (m-1)V, which allows to immediately start F_{3m+2k+1}"); the cost
// x_{5m+1} has size 0. B_{3m} then reads only size-0 data, so every u can
// be prefetched while it runs, as the proof says.
func threePartition(u []int64, unit int64) chainSpec {
	m := len(u) / 3
	var sum int64
	for _, x := range u {
		sum += x
	}
	if m == 0 || len(u)%3 != 0 || sum%int64(m) != 0 {
		panic(fmt.Sprintf("threePartition%v: want 3m values summing to mV", u))
	}
	v := sum / int64(m) * unit
	tu := time.Duration(v)
	lp := 5 * m
	ufp, ubp := make([]time.Duration, lp+1), make([]time.Duration, lp+1)
	xp := make([]int64, lp+2)
	for i, x := range u {
		xp[i] = x * unit
	}
	for k := 0; k < m; k++ {
		ufp[3*m+2*k] = tu
		xp[3*m+2*k+2] = v
	}
	ubp[3*m] = time.Duration(m) * tu
	return fromPaper(fmt.Sprintf("3-partition%v", u), ufp, ubp, xp, int64(m)*v, time.Duration(2*m)*tu)
}

// builtChain is a chainSpec realized as a graph. F_i is the node x[i+1];
// B_i is the node y[i].
type builtChain struct {
	spec chainSpec
	g    *G.ExprGraph
	x, y []*G.Node // x_0..x_{L+1}, y_0..y_{L+1}
}

// fIdx and bIdx are the trace function indices of F_i and B_i.
func (c *builtChain) fIdx(i int) int { return i }
func (c *builtChain) bIdx(i int) int { return 2*c.spec.L() + 1 - i }

// px is the paper's x_p of a gadget built by fromPaper (see there).
func (c *builtChain) px(p int) *G.Node { return c.x[p+1] }

// varOf is the trace variable of a node.
func (c *builtChain) varOf(tr *ooc.Trace, n *G.Node) int {
	for i := range tr.Vars {
		if tr.Vars[i].Node == n {
			return i
		}
	}
	panic(fmt.Sprintf("chain %s: node %s is not in the trace", c.spec.Name, n.Name()))
}

// tinySlack is the device memory of every tiny (size-0 in the paper)
// variable of the trace taken together: a bound on what they add to any
// moment's live bytes. It is far below exactUnit, the smallest real size,
// so adding it to M cannot let one more real activation fit.
func (c *builtChain) tinySlack(tr *ooc.Trace) int64 {
	var s int64
	for v := range tr.Vars {
		if b := tr.DeviceBytes(v); b == tinyBytes {
			s += b
		}
	}
	return s
}

// budget is the gadget's M plus the slack for tiny tensors.
func (c *builtChain) budget(tr *ooc.Trace) int64 { return c.spec.M + c.tinySlack(tr) }

var chainOpSeq atomic.Int64

// buildChain realizes a chainSpec as a gorgonia graph with its backward:
// gorgonia.Grad(cost, x_0) builds B_L..B_0 through chainFwdOp.SymDiff.
func buildChain(t testing.TB, s chainSpec) *builtChain {
	t.Helper()
	require.NoError(t, s.check())
	l := s.L()
	id := chainOpSeq.Add(1) // ops of different graphs never hash alike
	g := G.NewGraph()
	c := &builtChain{spec: s, g: g, x: make([]*G.Node, l+2), y: make([]*G.Node, l+2)}
	c.x[0] = G.NewVector(g, tensor.Float32, G.WithShape(int(s.X[0]/4)), G.WithName("x0"), G.WithInit(G.Zeroes()))
	for i := 0; i <= l; i++ {
		op := &chainFwdOp{id: fmt.Sprintf("%d/%d", id, i), i: i, ns: int64(s.UF[i]), bwdNs: int64(s.UB[i]),
			in: c.x[i].Type(), out: tensor.Shape{int(s.X[i+1] / 4)}}
		if i == l {
			op.out = tensor.ScalarShape()
		}
		var err error
		c.x[i+1], err = G.ApplyOpWithName(op, fmt.Sprintf("x%d", i+1), c.x[i])
		require.NoError(t, err)
	}
	grads, err := G.Grad(c.x[l+1], c.x[0])
	require.NoError(t, err)
	require.Len(t, grads, 1)
	for i := range c.x {
		c.y[i] = c.x[i].Deriv()
		require.NotNil(t, c.y[i], "y_%d", i)
	}
	require.Equal(t, grads[0], c.y[0])
	return c
}

// chainFwdOp is F_i: x_i -> x_{i+1}, taking exactly ns nanoseconds on
// exactProfile (FLOPs = ns at 1e9 FLOP/s). Its value is zeros: the gadgets
// are about time and memory, and the simulator never runs Do.
type chainFwdOp struct {
	id        string // unique per op, so gorgonia's CSE never merges two
	i         int
	ns, bwdNs int64
	in        hm.Type
	out       tensor.Shape
}

func outType(s tensor.Shape) hm.Type {
	if s.IsScalar() {
		return tensor.Float32
	}
	return G.TensorType{Dims: s.Dims(), Of: tensor.Float32}
}

func zeroValue(s tensor.Shape) G.Value {
	if s.IsScalar() {
		return G.NewF32(0)
	}
	return tensor.New(tensor.WithShape(s.Clone()...), tensor.Of(tensor.Float32))
}

func fnvHash(op interface{ WriteHash(hash.Hash) }) uint32 {
	h := fnv.New32a()
	op.WriteHash(h)
	return h.Sum32()
}

func (op *chainFwdOp) Arity() int { return 1 }

// Type is built afresh at each call: gorgonia returns the function type it
// gets to hm's pool.
func (op *chainFwdOp) Type() hm.Type { return hm.NewFnType(op.in, outType(op.out)) }
func (op *chainFwdOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	return op.out.Clone(), nil
}
func (op *chainFwdOp) Do(...G.Value) (G.Value, error) { return zeroValue(op.out), nil }
func (op *chainFwdOp) ReturnsPtr() bool               { return false }
func (op *chainFwdOp) CallsExtern() bool              { return false }
func (op *chainFwdOp) OverwritesInput() int           { return -1 }
func (op *chainFwdOp) WriteHash(h hash.Hash)          { fmt.Fprintf(h, "chainF{%s}", op.id) }
func (op *chainFwdOp) Hashcode() uint32               { return fnvHash(op) }
func (op *chainFwdOp) String() string                 { return fmt.Sprintf("F%d", op.i) }
func (op *chainFwdOp) FLOPs(in []tensor.Shape) int64  { return op.ns }
func (op *chainFwdOp) DiffWRT(int) []bool             { return []bool{true} }

// SymDiff makes B_i(x_i, x_{i+1}, y_{i+1}) -> y_i, a 1-element vector
// whatever the size of x_i: gorgonia's Backpropagate never compares a
// gradient's shape with its node's (TestChainTrace checks the trace and a
// run accept it), and the paper's gadgets want |y_i| = 0.
func (op *chainFwdOp) SymDiff(inputs G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	b := &chainBwdOp{id: op.id, i: op.i, ns: op.bwdNs, in: []hm.Type{inputs[0].Type(), output.Type(), grad.Type()}}
	y, err := G.ApplyOpWithName(b, fmt.Sprintf("y%d", op.i), inputs[0], output, grad)
	if err != nil {
		return nil, err
	}
	return G.Nodes{y}, nil
}

// chainBwdOp is B_i: (x_i, x_{i+1}, y_{i+1}) -> y_i, taking exactly ns
// nanoseconds on exactProfile. It is not differentiable itself.
type chainBwdOp struct {
	id string
	i  int
	ns int64
	in []hm.Type
}

var gradShape = tensor.Shape{tinyBytes / 4}

func (op *chainBwdOp) Arity() int { return 3 }
func (op *chainBwdOp) Type() hm.Type {
	return hm.NewFnType(op.in[0], op.in[1], op.in[2], outType(gradShape))
}
func (op *chainBwdOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	return gradShape.Clone(), nil
}
func (op *chainBwdOp) Do(...G.Value) (G.Value, error) { return zeroValue(gradShape), nil }
func (op *chainBwdOp) ReturnsPtr() bool               { return false }
func (op *chainBwdOp) CallsExtern() bool              { return false }
func (op *chainBwdOp) OverwritesInput() int           { return -1 }
func (op *chainBwdOp) WriteHash(h hash.Hash)          { fmt.Fprintf(h, "chainB{%s}", op.id) }
func (op *chainBwdOp) Hashcode() uint32               { return fnvHash(op) }
func (op *chainBwdOp) String() string                 { return fmt.Sprintf("B%d", op.i) }
func (op *chainBwdOp) FLOPs(in []tensor.Shape) int64  { return op.ns }
func (op *chainBwdOp) DiffWRT(n int) []bool           { return make([]bool, n) }
func (op *chainBwdOp) SymDiff(G.Nodes, *G.Node, *G.Node) (G.Nodes, error) {
	return nil, fmt.Errorf("chainBwdOp: no second derivatives")
}

// handScheduler returns a hand-built schedule for the trace it is given.
type handScheduler struct {
	name string
	plan func(*ooc.Trace) *ooc.Schedule
}

func (h handScheduler) Name() string { return h.name }
func (h handScheduler) Plan(p *ooc.Problem) (*ooc.Schedule, error) {
	return h.plan(p.Trace), nil
}

// gadgetRun is one compiled and simulated step.
type gadgetRun struct {
	prog  *vm.Program
	stats vm.Stats
}

// runChain compiles a built chain with a scheduler under a budget on sim and
// runs one step.
func runChain(t *testing.T, c *builtChain, sim *vm.Sim, budget int64, sc ooc.Scheduler) (gadgetRun, error) {
	t.Helper()
	m, err := ooc.Compile(c.g, ooc.WithDevice(sim), ooc.WithBudget(budget), ooc.WithScheduler(sc))
	if err != nil {
		return gadgetRun{}, err
	}
	defer func() { require.NoError(t, m.Close()) }()
	require.NoError(t, m.RunAll())
	return gadgetRun{prog: m.Program(), stats: m.Stats()}, nil
}

// sampleChains are the chains the structural tests look at: a small generic
// one with distinct sizes and times, and each gadget.
func sampleChains() []chainSpec {
	return []chainSpec{
		{
			Name: "generic",
			UF:   []time.Duration{3, 0, 7, 1},
			UB:   []time.Duration{2, 5, 0, 11},
			X:    []int64{8, 4 * exactUnit, 12, 2 * exactUnit, tinyBytes},
		},
		twoPartition([]int64{3, 1, 1, 2, 2, 1}, exactUnit),
		threePartition([]int64{3, 3, 4, 2, 4, 4}, exactUnit),
	}
}

// TestChainTrace: the trace of a built chain is F_0..F_L then B_L..B_0,
// each reading what section 3.1 says, with the sizes asked for; y_0 is the
// gradient of the leaf x_0; and an in-core step takes exactly the sum of
// the stage times.
func TestChainTrace(t *testing.T) {
	sim := exactSim(t)
	for _, s := range sampleChains() {
		t.Run(s.Name, func(t *testing.T) {
			c := buildChain(t, s)
			tr, err := ooc.NewTrace(c.g)
			require.NoError(t, err)
			l := s.L()
			require.Len(t, tr.Funcs, 2*l+2)
			v := func(n *G.Node) int { return c.varOf(tr, n) }
			for i := 0; i <= l; i++ {
				f := tr.Funcs[c.fIdx(i)]
				require.Equal(t, c.x[i+1], f.Node, "function %d is F_%d", c.fIdx(i), i)
				require.Equal(t, []int{v(c.x[i])}, f.Inputs, "F_%d reads x_%d", i, i)
				b := tr.Funcs[c.bIdx(i)]
				require.Equal(t, c.y[i], b.Node, "function %d is B_%d", c.bIdx(i), i)
				require.Equal(t, []int{v(c.x[i]), v(c.x[i+1]), v(c.y[i+1])}, b.Inputs, "B_%d reads x_%d, x_%d, y_%d", i, i, i+1, i+1)
				require.Equal(t, -1, f.InPlace)
				require.Equal(t, -1, b.InPlace)
			}
			for i, n := range c.x {
				require.Equal(t, s.X[i], tr.Vars[v(n)].Bytes, "|x_%d|", i)
			}
			for i := 0; i <= l; i++ {
				require.Equal(t, int64(tinyBytes), tr.Vars[v(c.y[i])].Bytes, "|y_%d|", i)
			}
			require.True(t, tr.Vars[v(c.x[0])].IsLeaf())
			require.True(t, tr.Vars[v(c.y[l+1])].IsLeaf(), "y_{L+1} is gorgonia's seed constant")
			require.Equal(t, vm.Gradient, tr.Vars[v(c.y[0])].Role)
			require.Equal(t, c.x[0], tr.Vars[v(c.y[0])].Learnable)
			require.Equal(t, vm.Output, tr.Vars[v(c.x[l+1])].Role)

			m, err := ooc.Compile(c.g, ooc.WithDevice(sim), ooc.Baseline())
			require.NoError(t, err)
			require.NoError(t, m.RunAll())
			var want time.Duration
			for i := 0; i <= l; i++ {
				want += s.UF[i] + s.UB[i]
			}
			require.Equal(t, want, m.Stats().StepTime)
			require.Zero(t, m.Stats().StallTime)
			require.NoError(t, m.Close())
		})
	}
}

// TestChainExactProfile: on exactProfile every stage takes exactly its
// UF/UB, every copy of an x exactly |x| ns, and the optimizer's update of
// the tiny gradient y_0 nothing, so makespans can be compared exactly.
func TestChainExactProfile(t *testing.T) {
	sim := exactSim(t)
	for _, s := range sampleChains() {
		t.Run(s.Name, func(t *testing.T) {
			c := buildChain(t, s)
			tr, err := ooc.NewTrace(c.g)
			require.NoError(t, err)
			p := &vm.Program{Vars: tr.Vars, Funcs: tr.Funcs}
			for i := 0; i <= s.L(); i++ {
				require.Equal(t, s.UF[i], sim.OpTime(p, &p.Funcs[c.fIdx(i)]), "F_%d", i)
				require.Equal(t, s.UB[i], sim.OpTime(p, &p.Funcs[c.bIdx(i)]), "B_%d", i)
			}
			for i, x := range s.X {
				require.Equal(t, time.Duration(x), sim.CopyTime(x), "copy of x_%d", i)
			}
			require.Zero(t, sim.UpdateTime(tr.Vars[c.varOf(tr, c.y[0])].Bytes))
			// The slack for tiny tensors is far below one unit, the
			// smallest real size.
			require.Less(t, c.tinySlack(tr), exactUnit)
		})
	}
	// The reason for exactUnit: a 1e9 B/s link is not exact for all sizes.
	require.Equal(t, 14*time.Nanosecond, sim.CopyTime(15))
}

// checkGadget runs a hand-built schedule of a gadget and checks it reaches
// exactly the proof's makespan T, within the budget, without a stall; and
// that the lower bound is at most T. It returns the trace and budget.
func checkGadget(t *testing.T, c *builtChain, plan func(*ooc.Trace) *ooc.Schedule) (*ooc.Trace, int64) {
	t.Helper()
	s := c.spec
	sim := exactSim(t)
	tr, err := ooc.NewTrace(c.g)
	require.NoError(t, err)
	budget := c.budget(tr)
	// The instance needs offloading: in core it does not fit.
	inCore, err := ooc.InCorePeak(c.g)
	require.NoError(t, err)
	require.Greater(t, inCore, budget)

	run, err := runChain(t, c, sim, budget, handScheduler{name: "hand", plan: plan})
	require.NoError(t, err)
	peak, err := ooc.Verify(run.prog, budget)
	require.NoError(t, err)
	// The schedule uses the paper's M to the byte, never more than M plus
	// the tiny tensors.
	require.GreaterOrEqual(t, peak, s.M)
	require.LessOrEqual(t, peak, budget)
	require.Equal(t, peak, run.stats.PeakDeviceBytes, "the machine's requested-bytes peak is the verifier's")
	require.Equal(t, s.T, run.stats.StepTime, "makespan of the proof's schedule")
	require.Zero(t, run.stats.StallTime, "the proof's schedule never idles")

	lb, err := ooc.LowerBound(tr, sim, budget)
	require.NoError(t, err)
	require.LessOrEqual(t, lb, run.stats.StepTime)
	t.Logf("%s: M = %d B (+%d B slack), in-core peak %d B, T = %v, hand-built makespan %v, lower bound %v",
		s.Name, s.M, budget-s.M, inCore, s.T, run.stats.StepTime, lb)

	// For the record: what the existing planners make of it.
	for _, sc := range []ooc.Scheduler{ooc.Greedy{}, ooc.DynProg{}, ooc.VDNN{}, ooc.Window{}} {
		r, err := runChain(t, c, sim, budget, sc)
		if err != nil {
			t.Logf("  %s: %v", sc.Name(), err)
			continue
		}
		require.LessOrEqual(t, lb, r.stats.StepTime, sc.Name())
		t.Logf("  %s: makespan %v (%.3f T)", sc.Name(), r.stats.StepTime, float64(r.stats.StepTime)/float64(s.T))
	}
	return tr, budget
}

// TestGadgetTwoPartition: Theorem 3's schedule for a YES instance offloads
// S_1 while F_n runs (its copies, V bytes, land exactly when F_n ends), frees
// it then, and prefetches it while B_n runs: makespan exactly T = 2 units.
func TestGadgetTwoPartition(t *testing.T) {
	for _, tc := range []struct {
		u  []int64
		s1 []int // indices into u of a half summing to V
	}{
		{u: []int64{3, 1, 1, 2, 2, 1}, s1: []int{0, 1, 2}},
		{u: []int64{2, 5, 1, 4, 3, 1}, s1: []int{2, 3, 4}},
		{u: []int64{1, 2, 3, 2}, s1: []int{1, 3}}, // S_1 holds x_{n-1}, which F_{n-1} reads
	} {
		s := twoPartition(tc.u, exactUnit)
		t.Run(s.Name, func(t *testing.T) {
			var half int64
			for _, i := range tc.s1 {
				half += tc.u[i] * exactUnit
			}
			require.Equal(t, s.M/2, half, "S_1 sums to V")
			c := buildChain(t, s)
			n := len(tc.u)
			checkGadget(t, c, func(tr *ooc.Trace) *ooc.Schedule {
				sc := ooc.NewSchedule(len(tr.Funcs))
				// Paper indices: the u are x_0..x_{n-1}, all made by
				// time 0; F_n (time 1) reads and writes size 0; F_{n+1}
				// writes x_{n+2} of size V; B_n (time 1) reads size 0.
				out := c.fIdx(n - 1 + 1) // after F_{n-1}, at time 0
				free := c.fIdx(n + 1 + 1)
				in := c.bIdx(n + 1)
				for _, i := range tc.s1 {
					v := c.varOf(tr, c.px(i))
					sc.SwapOut[out] = append(sc.SwapOut[out], v) // lands by time 1
					sc.Release[free] = append(sc.Release[free], v)
				}
				// Prefetch in the order B_{n-1}..B_0 read them; all land
				// by time 2, when B_n ends.
				for k := len(tc.s1) - 1; k >= 0; k-- {
					sc.SwapIn[in] = append(sc.SwapIn[in], c.varOf(tr, c.px(tc.s1[k])))
				}
				return sc
			})
		})
	}
}

// TestGadgetThreePartition: Theorem 1's schedule for a YES instance:
// F_{3m+2k} runs from time k to k+1 while the activations of S_k (V bytes)
// are copied out, which are freed as F_{3m+2k+1} (writing V bytes) starts at
// k+1; B_{3m} runs from m to 2m while every activation is prefetched.
// Makespan exactly T = 2m units.
func TestGadgetThreePartition(t *testing.T) {
	for _, tc := range []struct {
		u     []int64
		parts [][]int // indices into u of m triples summing to V each
	}{
		{u: []int64{3, 3, 4, 2, 4, 4}, parts: [][]int{{0, 1, 2}, {3, 4, 5}}},
		{u: []int64{5, 4, 3, 4, 4, 3, 3, 4, 6}, parts: [][]int{{0, 2, 7}, {1, 3, 4}, {5, 6, 8}}},
	} {
		s := threePartition(tc.u, exactUnit)
		t.Run(s.Name, func(t *testing.T) {
			m := len(tc.parts)
			for _, part := range tc.parts {
				var sum int64
				for _, i := range part {
					sum += tc.u[i] * exactUnit
				}
				require.Equal(t, s.M/int64(m), sum, "each part sums to V")
			}
			c := buildChain(t, s)
			checkGadget(t, c, func(tr *ooc.Trace) *ooc.Schedule {
				sc := ooc.NewSchedule(len(tr.Funcs))
				// Paper indices throughout, shifted by one (fromPaper).
				for k, part := range tc.parts {
					// Issued after F_{3m+2k-1}, which ends at time k: for
					// k = 0 the last u-stage, else the V-writer before.
					out := c.fIdx(3*m + 2*k - 1 + 1)
					free := c.fIdx(3*m + 2*k + 1 + 1) // starts at k+1
					for _, i := range part {
						v := c.varOf(tr, c.px(i))
						sc.SwapOut[out] = append(sc.SwapOut[out], v)
						sc.Release[free] = append(sc.Release[free], v)
					}
				}
				in := c.bIdx(3*m + 1)
				for i := len(tc.u) - 1; i >= 0; i-- { // in the order B_{3m-1}..B_0 read them
					sc.SwapIn[in] = append(sc.SwapIn[in], c.varOf(tr, c.px(i)))
				}
				return sc
			})
		})
	}
}

// TestGadgetTwoPartitionNo: on a NO instance no schedule reaches T = 2 (it
// must move more than V bytes each way), so every planner's makespan, when
// it finds a schedule within the budget, is above T.
func TestGadgetTwoPartitionNo(t *testing.T) {
	for _, u := range [][]int64{
		{2, 2, 2, 2, 2}, // V = 5, every subset sum even
		{1, 1, 1, 1, 6}, // V = 5: 4 or less, 6 or more
		{3, 3, 3, 3, 4}, // V = 8: 7 or 9, never 8
	} {
		s := twoPartition(u, exactUnit)
		t.Run(s.Name, func(t *testing.T) {
			require.False(t, hasHalf(u), "a NO instance")
			c := buildChain(t, s)
			sim := exactSim(t)
			tr, err := ooc.NewTrace(c.g)
			require.NoError(t, err)
			budget := c.budget(tr)
			lb, err := ooc.LowerBound(tr, sim, budget)
			require.NoError(t, err)
			ran := 0
			for _, sc := range []ooc.Scheduler{ooc.Greedy{}, ooc.DynProg{}, ooc.VDNN{}, ooc.Window{}} {
				r, err := runChain(t, c, sim, budget, sc)
				if err != nil {
					t.Logf("%s: no schedule within the budget: %v", sc.Name(), err)
					continue
				}
				ran++
				require.Greater(t, r.stats.StepTime, s.T, sc.Name())
				require.LessOrEqual(t, lb, r.stats.StepTime, sc.Name())
				t.Logf("%s: makespan %v (%.3f T), lower bound %v", sc.Name(), r.stats.StepTime, float64(r.stats.StepTime)/float64(s.T), lb)
			}
			require.Positive(t, ran, "some planner finds a schedule")
		})
	}
}

// hasHalf reports whether some subset of u sums to half its total.
func hasHalf(u []int64) bool {
	var sum int64
	for _, x := range u {
		sum += x
	}
	if sum%2 != 0 {
		return false
	}
	reach := map[int64]bool{0: true}
	for _, x := range u {
		next := map[int64]bool{}
		for s := range reach {
			next[s], next[s+x] = true, true
		}
		reach = next
	}
	return reach[sum/2]
}
