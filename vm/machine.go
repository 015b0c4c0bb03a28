package vm

import (
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"time"
	"unsafe"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/blas"
	"github.com/gorgonia-ooc/outofcore/vm/alloc"
	"github.com/gorgonia-ooc/outofcore/vm/prealloc"
)

// WorkspaceOp is implemented by ops that need scratch device memory while
// they run (im2col buffers, say). The machine allocates the workspace from the
// device allocator, so the budget counts it, and frees it when the op returns.
type WorkspaceOp interface {
	gorgonia.Op
	// WorkspaceBytes is the scratch memory one call needs.
	WorkspaceBytes(dt tensor.Dtype, inputs []tensor.Shape) int64
	// DoWorkspace computes the op's result into out, using ws as scratch.
	DoWorkspace(out gorgonia.Value, ws []byte, inputs ...gorgonia.Value) error
}

// TiledWorkspaceOp is a WorkspaceOp that also runs in less scratch, down to
// MinWorkspaceBytes, giving the same bits with any workspace from that to
// WorkspaceBytes (a convolution runs its im2col in tiles of what it is given).
// A scheduler sizes Func.Workspace between the two.
type TiledWorkspaceOp interface {
	WorkspaceOp
	MinWorkspaceBytes(dt tensor.Dtype, inputs []tensor.Shape) int64
}

// Stats is what a Machine measured, summed over the steps it ran.
type Stats struct {
	Steps int
	// PeakDeviceBytes is the most device memory the program's variables and
	// workspaces held at once (bytes requested from the allocator).
	PeakDeviceBytes int64
	// ReservedBytes is the most physical memory the allocator held at once;
	// MappedBytes the most it had mapped to live blocks. Reserved - Mapped is
	// external fragmentation, Mapped - requested internal fragmentation.
	ReservedBytes, MappedBytes int64
	// LeafBytes is the size of the leaf values (inputs, learnables, constants)
	// read in place from memory the user owns.
	LeafBytes int64
	// PersistentBytes is device memory held for the whole run outside the
	// budget: on a simulated device, the leaves and, per learnable, its
	// gradient and the optimizer's momentum, as a GPU would hold them.
	PersistentBytes int64
	// Simulated is set when the times come from a device profile (the
	// device's name says which), not from a clock.
	Simulated bool

	SwapIns, SwapOuts         int
	SwapInBytes, SwapOutBytes int64
	// ComputeTime is time spent running ops; StallTime is time compute spent
	// waiting for a copy engine; StepTime is wall time inside RunAll.
	ComputeTime, StallTime, StepTime time.Duration
	// Recomputes counts Recompute instructions run; RecomputeTime is the
	// part of ComputeTime they took.
	Recomputes    int
	RecomputeTime time.Duration
	// StagedInputs counts inputs a run took from StageNext's copies instead
	// of uploading them at its start; StagedAheadBytes are the bytes of
	// those copied during the run before, beside its tail (Machine.StageNext).
	StagedInputs     int
	StagedAheadBytes int64

	Allocator alloc.Stats
}

// Config sets up a Machine.
type Config struct {
	Device    Device
	Allocator alloc.Allocator // over Device.Memory(); the machine closes it
	// Budget caps the device bytes the program may hold at once (0: none
	// beyond the allocator's capacity). The machine enforces it at every
	// allocation, as a device with that much memory would.
	Budget int64
	// AccumulateGrads lists learnables whose gradients accumulate across runs
	// (gorgonia.BindDualValues semantics) until a solver zeroes them; all
	// others are overwritten by each run.
	AccumulateGrads map[*gorgonia.Node]bool
	// OwnDevice makes Close close the device too.
	OwnDevice bool
	// HostPersistent keeps a simulated device from placing the persistent
	// data (learnables, gradients, optimizer state) on it, as the CPU device
	// keeps them in host memory: a simulated step then replays exactly the
	// device allocations a CPU step makes.
	HostPersistent bool
	// Poison fills every block with 0xFF bytes (NaN for floats) when it is
	// allocated, so an op that reads memory it did not write shows up in
	// results. For tests; it costs a memset per allocation.
	Poison bool
	// Replan, when set, is called once after the first step on a device
	// that is not simulated, with the op times measured in it (as OpTimes
	// gives them); the program it returns, over the same variables and
	// functions, runs from the next step on. Planners that need op times
	// plan with the device's own this way. If it fails, the first program
	// stays, with the reason in its Timing.
	Replan func(opTimes map[string]time.Duration) (*Program, error)
}

// Machine runs a Program. It implements gorgonia.VM. A Machine is not safe
// for concurrent use; its copy engines are internal goroutines.
type Machine struct {
	prog   *Program
	dev    Device
	al     alloc.Allocator
	budget int64
	accum  map[*gorgonia.Node]bool
	ownDev bool
	poison bool

	vars    []varState
	leaves  []gorgonia.Value // by var index, for leaf variables
	results map[int]gorgonia.Value
	// scalars are the new values publish binds to scalar nodes each run.
	scalars scalarSlab
	// sharedAcc are the accumulated gradients of the learnables that share
	// their gradient node with another (Var.Shared), one each.
	sharedAcc map[*gorgonia.Node]gorgonia.Value
	// sinks[b] lists the variables published when b is computed: b and its
	// views that the user reads (outputs, gradients, Read and Set
	// statements). leafSinks are the leaves (and their views) the user
	// reads, published at the end of a run.
	sinks     [][]int
	leafSinks []int
	readsOf   map[int][]*Read
	// leafReads are the reads of leaves (and their views), by the function
	// after which they read (-1: at the start of a run).
	leafReads map[int][]*Read
	setsFrom  map[int][]int // var -> indices of Sets
	training  []gorgonia.TrainModeOp
	pool      hostPool
	d2h       *copyEngine
	h2d       *copyEngine
	live      int64 // requested device bytes held now
	peak      int64
	stats     Stats
	closed    bool
	// ran: a run finished and Reset has not been called since; RunAll
	// then does nothing, as TapeMachine's (its program counter stays at
	// the end of the tape until Reset).
	ran     bool
	scratch []gorgonia.Value
	hdrs    [][]header // per function: its operands' and output's tensor headers, kept across steps

	replan func(map[string]time.Duration) (*Program, error)
	runs   []prealloc.Func // per function: how it writes into device memory (nil: Do and a copy)
	// scalarRuns are, per function with a scalar result, how it writes that into device
	// memory (nil, or declining a call: Do and a copy).
	scalarRuns []prealloc.ScalarFunc
	sim        *Sim
	clock      simClock
	persistent []*alloc.Block
	opTimes    []time.Duration // per function, summed over steps
	opCalls    []int64         // per function, the calls opTimes sums
	// views are the view leaves' headers kept across steps (see leafView), by var index.
	views []leafView
	// freed are the blocks released since the last releaseAll, handed back to an
	// alloc.Recycler there, when no variable holds one any more: a step then takes its
	// blocks' Block structs from the allocator again instead of the heap.
	freed []*alloc.Block

	// run is the backend of a device that computes on itself (nil on CPU
	// and simulated devices); leafBlocks hold the leaves on it.
	run        Runner
	leafBlocks []*alloc.Block
	addrs      []uintptr // operand addresses, reused
	// downloaded holds the last download (see download), reused: what
	// publish reads of it is copied out before the next.
	downloaded []byte
	sink       GradientSink
	kept       map[int]bool // leaves the device's copy of counts: uploaded yet?

	// staged are the inputs StageNext moves early, by variable; leafIn their
	// copies compute has not waited for yet in this run. runNo counts runs
	// on a backend; lastRead caches lastReads for the program lastReadOf.
	staged     map[int]*staging
	leafIn     map[int]Waiter
	runNo      int
	lastRead   []int
	lastReadOf *Program

	// fuse is the program's functions run as one pass (planFusion; nil:
	// none), unless unfused (SetFusion).
	fuse    *fusion
	unfused bool
}

type varState struct {
	block *alloc.Block
	kind  valueKind
	host  []byte     // host copy written by a swap-out; valid until the step ends
	out   *copyEvent // swap-out in flight
	in    *copyEvent // swap-in in flight, not yet waited for
	// devOut and devIn are the same on a backend's copy streams.
	devOut, devIn Waiter
}

// New makes a Machine for a program. Leaf values are read from their nodes at
// every RunAll, so a training loop can gorgonia.Let new batches between runs.
func New(p *Program, cfg Config) (*Machine, error) {
	if p == nil {
		return nil, errors.New("vm: nil program")
	}
	if cfg.Device == nil || cfg.Allocator == nil {
		return nil, errors.New("vm: a machine needs a device and an allocator")
	}
	m := &Machine{
		prog:    p,
		dev:     cfg.Device,
		al:      cfg.Allocator,
		budget:  cfg.Budget,
		accum:   cfg.AccumulateGrads,
		ownDev:  cfg.OwnDevice,
		poison:  cfg.Poison,
		replan:  cfg.Replan,
		vars:    make([]varState, len(p.Vars)),
		leaves:  make([]gorgonia.Value, len(p.Vars)),
		results: make(map[int]gorgonia.Value),
		pool:    hostPool{free: make(map[int][][]byte)},
	}
	for i := range p.Vars {
		v := &p.Vars[i]
		if v.IsLeaf() && !v.View {
			m.stats.LeafBytes += v.Bytes
		}
		if isScalarNode(v) {
			m.scalars.per++
		}
	}
	if err := m.indexSinks(); err != nil {
		return nil, err
	}
	m.runs = make([]prealloc.Func, len(p.Funcs))
	m.scalarRuns = make([]prealloc.ScalarFunc, len(p.Funcs))
	for i := range p.Funcs {
		out := &p.Vars[p.Funcs[i].Output]
		m.runs[i] = deviceRun(&p.Funcs[i], out)
		if isScalarNode(out) {
			m.scalarRuns[i], _ = prealloc.ScalarFor(p.Funcs[i].Op)
		}
	}
	_, simulated := cfg.Device.(*Sim)
	for _, f := range p.Funcs {
		if op, ok := f.Op.(gorgonia.TrainModeOp); ok && !simulated {
			m.training = append(m.training, op)
		}
	}
	if err := m.setTraining(); err != nil {
		return nil, err
	}
	if err := m.bindBackend(); err != nil {
		m.dropBackend()
		return nil, err
	}
	if sim, ok := cfg.Device.(*Sim); ok {
		m.sim = sim
		// With HostPersistent nothing is placed: the CPU device's
		// persistent data is in host memory.
		if !cfg.HostPersistent {
			if err := m.placePersistent(); err != nil {
				_ = m.al.Close()
				return nil, err
			}
		}
	}
	m.d2h = newCopyEngine()
	m.h2d = newCopyEngine()
	m.planFusion()
	return m, nil
}

// indexSinks finds, per variable, what the user reads of it.
func (m *Machine) indexSinks() error {
	p := m.prog
	m.sinks = make([][]int, len(p.Vars))
	m.readsOf = map[int][]*Read{}
	m.leafReads = map[int][]*Read{}
	m.setsFrom = map[int][]int{}
	for k := range p.Reads {
		r := &p.Reads[k]
		if r.Var < 0 || r.Var >= len(p.Vars) || r.Into == nil || r.After < -1 || r.After >= len(p.Funcs) {
			return fmt.Errorf("vm: read statement %d is malformed", k)
		}
		if p.Vars[r.Var].IsLeaf() {
			m.leafReads[r.After] = append(m.leafReads[r.After], r)
			continue
		}
		m.readsOf[r.Var] = append(m.readsOf[r.Var], r)
	}
	for k, st := range p.Sets {
		if st.To < 0 || st.To >= len(p.Vars) || st.From < 0 || st.From >= len(p.Vars) || !p.Vars[st.To].IsLeaf() {
			return fmt.Errorf("vm: set statement %d is malformed", k)
		}
		m.setsFrom[st.From] = append(m.setsFrom[st.From], k)
	}
	for i := range p.Vars {
		v := &p.Vars[i]
		if v.Role == Intermediate && !v.Bind && len(m.readsOf[i]) == 0 && len(m.setsFrom[i]) == 0 {
			continue
		}
		if v.IsLeaf() {
			m.leafSinks = append(m.leafSinks, i)
			continue
		}
		b := i
		if v.View {
			b = v.Base
		}
		m.sinks[b] = append(m.sinks[b], i)
	}
	return nil
}

// setTraining puts the ops with a training mode in the program's mode, as
// gorgonia's TapeMachine does when it is made (EvalMode for inference);
// a script may switch them afterwards. A machine on a simulated device runs
// no op, so it leaves them alone (m.training is empty there): the planners
// time and replay tapes on such machines over the user's own ops, and
// gorgonia's BatchNormOp resets its running statistics on
// SetTraining(true), so a replan after a machine's first step lost that
// step's statistics.
func (m *Machine) setTraining() error {
	for _, op := range m.training {
		if err := op.SetTraining(!m.prog.Inference); err != nil {
			return fmt.Errorf("vm: %v: %w", op, err)
		}
	}
	return nil
}

// OpTimes returns, per op and operand shapes (OpKey), the mean time one
// call took over the calls so far, for a measured device profile
// (WriteOpTimes). It is empty on a simulated device. A function run fused
// with the one before it (Fused) has no time of its own: the pair's is the
// head's.
func (m *Machine) OpTimes() map[string]time.Duration {
	sum := map[string]time.Duration{}
	n := map[string]int64{}
	for fi, d := range m.opTimes {
		if m.opCalls[fi] == 0 && m.fuse != nil && m.fuse.away[fi] {
			continue // run fused every time: its time is its head's
		}
		k := OpKey(m.prog, &m.prog.Funcs[fi])
		sum[k] += d
		n[k] += m.opCalls[fi]
	}
	for k := range sum {
		if n[k] > 0 {
			sum[k] /= time.Duration(n[k])
		}
	}
	return sum
}

// Program returns the tape the machine runs.
func (m *Machine) Program() *Program { return m.prog }

// Device returns the device the machine runs on.
func (m *Machine) Device() Device { return m.dev }

// Stats returns what the machine measured so far.
func (m *Machine) Stats() Stats {
	s := m.stats
	s.PeakDeviceBytes = m.peak
	s.Simulated = m.sim != nil
	s.Allocator = m.al.Stats()
	s.ReservedBytes = s.Allocator.PeakReserved
	s.MappedBytes = s.Allocator.PeakMapped
	return s
}

// Reset implements gorgonia.VM: the next RunAll runs the tape again, as
// TapeMachine's Reset rewinds its program counter. It also drops whatever a
// failed run left behind on the device.
func (m *Machine) Reset() {
	m.ran = false
	m.releaseAll()
}

// Let is TapeMachine's Let: gorgonia.Let, for a node of the machine's graph.
func (m *Machine) Let(n *gorgonia.Node, be interface{}) error {
	if err := m.ownNode(n); err != nil {
		return err
	}
	return gorgonia.Let(n, be)
}

// Set is TapeMachine's Set: a takes b's value as it is now (b computed by
// the last run, or a leaf). TapeMachine binds b's own value, which its next
// run after Reset leaves alone, making new ones; this machine reuses the
// values it binds, so a takes a copy.
func (m *Machine) Set(a, b *gorgonia.Node) error {
	if err := errors.Join(m.ownNode(a), m.ownNode(b)); err != nil {
		return err
	}
	if b.Value() == nil {
		return fmt.Errorf("vm: Set(%s, %s): %s has no value: run the machine first, or name it with ooc.WithOutputs", a.Name(), b.Name(), b.Name())
	}
	v, err := gorgonia.CloneValue(b.Value())
	if err != nil {
		return fmt.Errorf("vm: Set(%s, %s): %w", a.Name(), b.Name(), err)
	}
	return gorgonia.UnsafeLet(a, v)
}

// ownNode refuses a node of another graph, as TapeMachine's Let and Set do.
func (m *Machine) ownNode(n *gorgonia.Node) error {
	if n == nil {
		return errors.New("vm: nil node")
	}
	for i := range m.prog.Vars {
		if x := m.prog.Vars[i].Node; x != nil {
			if x.Graph() != n.Graph() {
				return fmt.Errorf("vm: node %s is not in this machine's graph", n.Name())
			}
			return nil
		}
	}
	return nil
}

// Close implements gorgonia.VM: it stops the copy engines and returns all
// device memory.
func (m *Machine) Close() error {
	if m.closed {
		return nil
	}
	m.releaseAll()
	// Copies of staged inputs may still be writing into the leaves' blocks.
	runErr := m.closeStaged()
	for _, b := range m.persistent {
		_ = m.al.Free(b)
	}
	m.persistent = nil
	if m.run != nil {
		runErr = errors.Join(runErr, m.run.Close())
	}
	m.closed = true
	m.d2h.stop()
	m.h2d.stop()
	err := errors.Join(runErr, m.al.Close())
	if m.ownDev {
		err = errors.Join(err, m.dev.Close())
	}
	return err
}

// RunAll implements gorgonia.VM: it runs the tape once (one training step).
// Afterwards the outputs' nodes hold their values and each learnable's Grad()
// its gradient. As under gorgonia's TapeMachine, a RunAll after a run that
// finished does nothing and returns nil until Reset is called: a training
// loop calls Reset after each step. A failed run leaves nothing to resume
// (TapeMachine would resume at the failed instruction): the next RunAll
// runs the whole tape. No panic escapes: a panic inside an op comes back as
// an error naming the node.
func (m *Machine) RunAll() (err error) {
	if m.closed {
		return errors.New("vm: RunAll on a closed machine")
	}
	if m.ran {
		return nil
	}
	defer func() {
		m.ran = err == nil
	}()
	start := time.Now()
	pc := -1
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("vm: panic at %s: %v\n%s", m.where(pc), r, debug.Stack())
		}
		if err != nil {
			m.failStaged()
			m.releaseAll()
		}
	}()
	if m.sim != nil {
		m.clock = simClock{}
		m.sim.beginStep()
	} else if err = m.loadLeaves(); err != nil {
		return err
	} else if m.run != nil {
		m.runNo++
		staged, err := m.startStaged()
		if err != nil {
			return err
		}
		if err = m.uploadLeaves(staged); err != nil {
			return err
		}
	}
	if m.sim == nil {
		if err = m.publishLeafReads(-1); err != nil {
			return err
		}
	}
	for pc = range m.prog.Instrs {
		if m.sim != nil {
			err = m.simStep(m.prog.Instrs[pc])
		} else {
			err = m.step(m.prog.Instrs[pc])
		}
		if err == nil && m.run != nil {
			err = m.sendStaged(pc)
		}
		if err != nil {
			return fmt.Errorf("vm: %s: %w", m.where(pc), err)
		}
	}
	pc = -1
	if m.sim != nil {
		m.simUpdate()
		m.sim.endStep()
		m.stats.Steps++
		m.stats.StepTime += m.clock.end()
		return m.endStep()
	}
	if err = m.publishLeaves(); err != nil {
		return err
	}
	if err = m.endStep(); err != nil {
		return err
	}
	m.endStaged()
	m.stats.Steps++
	m.stats.StepTime += time.Since(start)
	if m.replan != nil {
		m.replanFromTimes()
	}
	return nil
}

// replanFromTimes swaps in the program Config.Replan makes from the first
// step's op times.
func (m *Machine) replanFromTimes() {
	f := m.replan
	m.replan = nil
	defer m.planFusion()
	p, err := f(m.OpTimes())
	if err == nil && (p == nil || len(p.Vars) != len(m.prog.Vars) || len(p.Funcs) != len(m.prog.Funcs)) {
		err = errors.New("the new program is not over the same variables and functions")
	}
	if err != nil {
		m.prog.Timing += fmt.Sprintf("; replanning from the measured times failed, so this tape stays: %v", err)
		return
	}
	p.Budget = m.prog.Budget
	m.prog = p
	m.hdrs = nil // slots are per function of the old program
}

func (m *Machine) where(pc int) string {
	if pc < 0 || pc >= len(m.prog.Instrs) {
		return "end of step"
	}
	in := m.prog.Instrs[pc]
	return fmt.Sprintf("instruction %d (%s %s)", pc, in.Op, m.prog.Vars[in.Var].Name)
}

func (m *Machine) loadLeaves() error {
	for i := range m.prog.Vars {
		v := &m.prog.Vars[i]
		if !v.IsLeaf() {
			continue
		}
		var val gorgonia.Value
		var err error
		if v.View {
			val, err = m.leafView(i, v)
		} else {
			val, err = leafValue(v.Node)
		}
		if err != nil {
			return err
		}
		if !val.Shape().Eq(v.Shape) || val.Dtype() != v.Dtype {
			return fmt.Errorf("vm: %s holds a %v %v value; the graph was compiled for %v %v",
				v.Name, val.Shape(), val.Dtype(), v.Shape, v.Dtype)
		}
		m.leaves[i] = val
	}
	return nil
}

// leafView is view leaf i over its base's value, as gorgonia makes it: the view op on the
// base's value (a header over the same data). The header made at an earlier step is used
// again while the base is the same tensor over the same memory and the header is as it was
// made (an op may transpose or reshape its operand's header in place): the view op built a
// new header, with its shape and strides, every step.
func (m *Machine) leafView(i int, v *Var) (gorgonia.Value, error) {
	base := m.leaves[v.Base]
	if m.views == nil {
		m.views = make([]leafView, len(m.prog.Vars))
	}
	c := &m.views[i]
	if c.val != nil && c.base == base && c.unchanged() {
		return c.val, nil
	}
	val, err := v.Node.Op().Do(base)
	if err != nil {
		return nil, err
	}
	*c = leafView{}
	bd, ok1 := base.(*tensor.Dense)
	vd, ok2 := val.(*tensor.Dense)
	if ok1 && ok2 && bd.IsNativelyAccessible() && vd.IsNativelyAccessible() {
		*c = leafView{base: base, bd: bd, val: vd, baseAt: bd.Uintptr(), baseLen: len(bd.Raw),
			baseShape: slices.Clone(bd.Shape()), shape: slices.Clone(vd.Shape()),
			strides: slices.Clone(vd.Strides()), order: vd.DataOrder(), at: vd.Uintptr()}
	}
	return val, nil
}

// leafView is a view leaf's header as made, and what it was made over.
type leafView struct {
	base             gorgonia.Value
	bd, val          *tensor.Dense
	baseAt, at       uintptr
	baseLen          int
	baseShape, shape tensor.Shape
	strides          []int
	order            tensor.DataOrder
}

func (c *leafView) unchanged() bool {
	return c.bd.Uintptr() == c.baseAt && len(c.bd.Raw) == c.baseLen && slices.Equal(c.bd.Shape(), c.baseShape) &&
		c.val.Uintptr() == c.at && slices.Equal(c.val.Shape(), c.shape) &&
		slices.Equal(c.val.Strides(), c.strides) && c.val.DataOrder() == c.order
}

// leafValue is what an input, learnable or constant node holds.
func leafValue(n *gorgonia.Node) (gorgonia.Value, error) {
	if n.Op() != nil {
		if c, ok := n.Op().(interface{ Value() gorgonia.Value }); ok {
			return c.Value(), nil
		}
		return nil, fmt.Errorf("vm: leaf %s has op %v, which is not a constant", n.Name(), n.Op())
	}
	val := n.Value()
	if val == nil {
		return nil, fmt.Errorf("vm: input %s has no value: gorgonia.Let it before RunAll", n.Name())
	}
	return val, nil
}

func (m *Machine) step(in Instr) error {
	switch in.Op {
	case Exec:
		return m.exec(in.Func, false)
	case Recompute:
		return m.exec(in.Func, true)
	case SwapOut:
		return m.swapOut(in.Var)
	case SwapIn:
		return m.swapIn(in.Var)
	case Wait:
		m.waitIn(in.Var)
		return nil
	case Free:
		return m.free(in.Var)
	}
	return fmt.Errorf("unknown instruction %v", in.Op)
}

// label names what an allocation is for, in its errors. It is put together
// only for an error: "workspace of "+name on every exec was an allocation
// per op per step.
type label struct{ prefix, name string }

func (l label) String() string { return l.prefix + l.name }

// named labels a variable's own memory.
func named(name string) label { return label{name: name} }

// allocate takes device memory, enforcing the budget before the allocator
// enforces the physical capacity.
func (m *Machine) allocate(size int64, what label) (*alloc.Block, error) {
	if m.budget > 0 && m.live+size > m.budget {
		return nil, fmt.Errorf("%w: %s needs %d bytes, %d of the %d-byte budget are in use",
			alloc.ErrOutOfMemory, what, size, m.live, m.budget)
	}
	b, err := m.al.Alloc(size)
	if err != nil {
		return nil, fmt.Errorf("%s needs %d bytes: %w", what, size, err)
	}
	if m.poison {
		for i, bs := 0, b.Bytes(); i < len(bs); i++ {
			bs[i] = 0xFF
		}
	}
	m.live += size
	if m.live > m.peak {
		m.peak = m.live
	}
	return b, nil
}

// holdHost counts host memory an op takes while it runs against the
// budget, as if it were device memory; the caller gives it back.
func (m *Machine) holdHost(size int64, what string) error {
	if size == 0 {
		return nil
	}
	if m.budget > 0 && m.live+size > m.budget {
		return fmt.Errorf("%w: %s needs %d bytes for its host result, %d of the %d-byte budget are in use",
			alloc.ErrOutOfMemory, what, size, m.live, m.budget)
	}
	m.live += size
	m.peak = max(m.peak, m.live)
	return nil
}

func (m *Machine) release(b *alloc.Block) error {
	m.live -= b.Size()
	if err := m.al.Free(b); err != nil {
		return err
	}
	m.freed = append(m.freed, b)
	return nil
}

// value is the gorgonia value of a variable, as an op's operand; h is the
// operand's header slot (nil: a fresh header).
func (m *Machine) value(i int, h *header) (gorgonia.Value, error) {
	v := &m.prog.Vars[i]
	if v.IsLeaf() {
		return m.leaves[i], nil
	}
	if v.View {
		s := &m.vars[v.Base]
		if s.in != nil {
			m.waitIn(v.Base)
		}
		if s.block == nil {
			return nil, fmt.Errorf("%s (a view of %s) is not resident on the device", v.Name, m.prog.Vars[v.Base].Name)
		}
		return h.over(s.block.Bytes(), v.Dtype, v.Shape), nil
	}
	s := &m.vars[i]
	if s.in != nil {
		m.waitIn(i) // the verifier puts a Wait first; this only guards hand-made tapes
	}
	if s.block == nil {
		return nil, fmt.Errorf("%s is not resident on the device", v.Name)
	}
	if s.kind == kindScalar {
		return scalarOver(s.block.Bytes(), v.Dtype)
	}
	return h.over(s.block.Bytes(), v.Dtype, v.Shape), nil
}

// headers are function fi's header slots: one per operand, then its output.
func (m *Machine) headers(fi int) []header {
	if m.hdrs == nil {
		m.hdrs = make([][]header, len(m.prog.Funcs))
	}
	if n := len(m.prog.Funcs[fi].Operands()) + 1; len(m.hdrs[fi]) != n {
		m.hdrs[fi] = make([]header, n)
	}
	return m.hdrs[fi]
}

// HostBytes is the host memory the machine takes on device dev (nil: a
// CPU device) to run a function whose op cannot write into device memory:
// Do's result, copied in afterwards. A simulated device models a GPU, and a
// device with a Backend is one: every op writes into device memory.
func HostBytes(dev Device, f *Func, out *Var) int64 {
	if dev != nil && dev.Simulated() {
		return 0
	}
	if _, ok := BackendFor(dev); ok || deviceRun(f, out) != nil {
		return 0
	}
	if _, ok := f.Op.(WorkspaceOp); ok && f.Workspace > 0 && !isScalarNode(out) {
		return 0
	}
	return out.Bytes
}

func isScalarNode(v *Var) bool { return v.Node != nil && v.Node.IsScalar() }

// deviceRun returns how the CPU device runs a function with its result
// written straight into device memory, or nil when it runs Do and copies
// the result in: gorgonia's ops through package prealloc (each made equal to
// Do), other ops (models/layers) through their UsePreallocDo, whose contract
// they promise. Ops that declare workspace run DoWorkspace instead.
func deviceRun(f *Func, out *Var) prealloc.Func {
	if isScalarNode(out) {
		return nil
	}
	if run, ok := prealloc.For(f.Op); ok {
		return run
	}
	pd, ok := f.Op.(gorgonia.UsePreallocDoer)
	if !ok || strings.HasPrefix(strings.TrimPrefix(fmt.Sprintf("%T", f.Op), "*"), "gorgonia.") {
		return nil
	}
	return func(dst *tensor.Dense, ins ...gorgonia.Value) error {
		res, err := pd.UsePreallocDo(dst, ins...)
		if err != nil {
			return err
		}
		src, err := rawBytes(res)
		if err != nil {
			return err
		}
		if len(src) != len(dst.Raw) {
			return fmt.Errorf("UsePreallocDo returned %d bytes into a %d-byte tensor", len(src), len(dst.Raw))
		}
		if !sameMemory(src, dst.Raw) {
			copy(dst.Raw, src)
		}
		return nil
	}
}

// exec runs function fi. A recompute runs it again to rebuild its dropped
// output: out of place (the operand an exec overwrote may be needed again),
// with any running statistics of the op restored afterwards, and without
// handing the value to the user a second time.
func (m *Machine) exec(fi int, recompute bool) (err error) {
	f := &m.prog.Funcs[fi]
	out := &m.prog.Vars[f.Output]
	st := &m.vars[f.Output]
	if st.block != nil {
		return fmt.Errorf("%s is already resident", out.Name)
	}
	if recompute {
		if !f.Recomputable {
			return fmt.Errorf("%s: op %v is not recomputable", out.Name, f.Op)
		}
		if rs, ok := f.Op.(RunningStatser); ok {
			mean, variance := rs.RunningStats()
			defer func() {
				if e := rs.SetRunningStats(mean, variance); e != nil && err == nil {
					err = e
				}
			}()
		}
	}
	hs := m.headers(fi)
	ins, ops, err := m.operands(f, hs)
	if err != nil {
		return err
	}
	blk, err := m.outputBlock(f, recompute)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = m.release(blk)
		}
	}()
	var ws *alloc.Block
	if f.Workspace > 0 {
		if ws, err = m.allocate(f.Workspace, label{"workspace of ", out.Name}); err != nil {
			return err
		}
		defer func() {
			if e := m.release(ws); e != nil && err == nil {
				err = e
			}
		}()
	}
	if err = m.holdHost(f.HostBytes, out.Name); err != nil {
		return err
	}
	defer func() { m.live -= f.HostBytes }()

	t0 := time.Now()
	kind, err := m.run1(fi, blk, ws, ins, ops, &hs[len(hs)-1])
	if err != nil {
		return err
	}
	d := time.Since(t0)
	m.stats.ComputeTime += d
	st.block, st.kind = blk, kind
	if recompute {
		m.stats.Recomputes++
		m.stats.RecomputeTime += d
		return nil
	}
	if m.opTimes == nil {
		m.opTimes = make([]time.Duration, len(m.prog.Funcs))
		m.opCalls = make([]int64, len(m.prog.Funcs))
	}
	if _, away := m.fused(fi); !away {
		// A fused tail's time is its head's: it has none of its own.
		m.opTimes[fi] += d
		m.opCalls[fi]++
	}
	for _, i := range m.sinks[f.Output] {
		if err := m.publish(i); err != nil {
			return err
		}
	}
	return m.publishLeafReads(fi)
}

// operands are function f's operands: device addresses for a backend that
// runs the op itself, else gorgonia values over the device bytes, each in its
// header slot of hs.
func (m *Machine) operands(f *Func, hs []header) (ins []gorgonia.Value, ops []uintptr, err error) {
	ins, ops = m.scratch[:0], m.addrs[:0]
	defer func() { m.scratch = ins[:0] }()
	for k, vi := range f.Operands() {
		if m.run != nil {
			// The backend reads device addresses, taken before an
			// in-place output takes its operand's block.
			a, err := m.addr(vi)
			if err != nil {
				return nil, nil, err
			}
			ops = append(ops, a)
			continue
		}
		v, err := m.value(vi, &hs[k])
		if err != nil {
			return nil, nil, err
		}
		ins = append(ins, v)
	}
	return ins, ops, nil
}

// run1 runs function fi's op into blk (the backend's plan, DoWorkspace, a
// prealloc strategy, or Do and a copy) and says what kind of value it made.
func (m *Machine) run1(fi int, blk, ws *alloc.Block, ins []gorgonia.Value, ops []uintptr, outHdr *header) (kind valueKind, err error) {
	f := &m.prog.Funcs[fi]
	out := &m.prog.Vars[f.Output]
	kind = kindDense
	scalarNode := out.Node.IsScalar()
	fop, away := m.fused(fi)
	switch {
	case m.run != nil:
		if scalarNode {
			kind = kindScalar
		}
		if err = m.execBackend(fi, blk, ws, ops); err != nil {
			return kind, fmt.Errorf("op %v: %w", f.Op, err)
		}
	case away:
		// The function before computed this one's result into blk (Fusion).
	case fop != nil:
		if err = fop.DoWorkspace(outHdr.over(blk.Bytes(), out.Dtype, out.Shape), ws.Bytes(), ins...); err != nil {
			return kind, fmt.Errorf("op %v: %w", fop, err)
		}
	case ws != nil && !scalarNode:
		wop, ok := f.Op.(WorkspaceOp)
		if !ok {
			return kind, fmt.Errorf("op %v declares workspace but does not implement DoWorkspace", f.Op)
		}
		if err = wop.DoWorkspace(outHdr.over(blk.Bytes(), out.Dtype, out.Shape), ws.Bytes(), ins...); err != nil {
			return kind, fmt.Errorf("op %v: %w", f.Op, err)
		}
	case m.runs[fi] != nil:
		if err = m.runs[fi](outHdr.over(blk.Bytes(), out.Dtype, out.Shape), ins...); err != nil {
			return kind, fmt.Errorf("op %v: %w", f.Op, err)
		}
	default:
		if scalarNode && m.scalarRuns[fi] != nil {
			done, err := m.scalarRuns[fi](blk.Bytes(), ins...)
			if err != nil {
				return kind, fmt.Errorf("op %v: %w", f.Op, err)
			}
			if done {
				return kindScalar, nil
			}
		}
		var res gorgonia.Value
		if res, err = f.Op.Do(ins...); err != nil {
			return kind, fmt.Errorf("op %v: %w", f.Op, err)
		}
		if kind, err = kindOf(res); err != nil {
			return kind, fmt.Errorf("op %v: %w", f.Op, err)
		}
		src, err := rawBytes(res)
		if err != nil {
			return kind, fmt.Errorf("op %v: %w", f.Op, err)
		}
		if int64(len(src)) != out.Bytes {
			return kind, fmt.Errorf("op %v returned %d bytes (shape %v); the graph says %v, %d bytes",
				f.Op, len(src), res.Shape(), out.Shape, out.Bytes)
		}
		if !sameMemory(src, blk.Bytes()) {
			copy(blk.Bytes(), src)
		}
	}
	return kind, nil
}

// RunningStatser is implemented by ops whose forward updates running
// statistics held in the op (models/layers' batch norm): the machine saves
// them before a Recompute of the op and restores them after, so a step
// advances them once, as TapeMachine's does.
type RunningStatser interface {
	RunningStats() (mean, variance []float64)
	SetRunningStats(mean, variance []float64) error
}

// outputBlock is the device memory for a function's result: new, or the
// memory of the operand it overwrites in place. That operand is read for
// the last time, so it gives up its block (after any copy out of it lands).
// A recompute always takes new memory.
func (m *Machine) outputBlock(f *Func, recompute bool) (*alloc.Block, error) {
	out := &m.prog.Vars[f.Output]
	if f.InPlace < 0 || recompute {
		return m.allocate(out.Bytes, named(out.Name))
	}
	s := &m.vars[f.InPlace]
	if s.block == nil || s.block.Size() != out.Bytes {
		return nil, fmt.Errorf("%s cannot be computed in place of %s", out.Name, m.prog.Vars[f.InPlace].Name)
	}
	m.waitOut(f.InPlace)
	m.waitIn(f.InPlace)
	if m.sim != nil {
		if t, ok := m.clock.outAt[f.InPlace]; ok {
			m.stallUntil(t)
			delete(m.clock.outAt, f.InPlace)
		}
	}
	blk := s.block
	s.block = nil
	return blk, nil
}

// publish hands a variable's value to the user, the way gorgonia's
// TapeMachine does: outputs bound to their node, gradients to the learnable
// (accumulated under BindDualValues), Read statements into their
// destination, and Set statements into the leaf they assign, in place and at
// once, so that what reads the leaf later in the run sees the new value (as
// in TapeMachine, whose Set is its op writing over the leaf).
func (m *Machine) publish(i int) error {
	v := &m.prog.Vars[i]
	if m.sink != nil && v.Role == Gradient && !v.IsLeaf() {
		a, err := m.addr(i)
		if err != nil {
			return err
		}
		took, err := m.sink.TakeGradient(v.Learnable, a)
		for _, l := range v.Shared {
			if err != nil || !took {
				break
			}
			took, err = m.sink.TakeGradient(l, a)
		}
		if took || err != nil {
			return err
		}
	}
	src, kind, err := m.hostBytes(i)
	if err != nil {
		return err
	}
	// A leaf named as an output already holds its value: binding a copy
	// would take the node's value away from the script.
	if (v.Role != Intermediate || v.Bind) && (v.View || !v.IsLeaf() || v.Role == Gradient) {
		host, ok := m.results[i]
		if ok && isScalarNode(v) && v.Role != Gradient {
			// TapeMachine makes a new value at each run after Reset, so a
			// loss a script keeps (append(losses, cost.Value())) is not
			// overwritten by the next run. A scalar costs nothing to make;
			// tensors stay reused (ooc's doc).
			host, ok = nil, false
		}
		if !ok {
			if v.Role == Gradient && m.accum[v.Learnable] {
				// A TapeMachine that ran on the graph bound the learnable
				// to a dual value: Grad() returns its gradient, so that is
				// where this one accumulates.
				if d := dualGradient(v.Learnable); d != nil {
					if _, fits := writableLike(d, kind, v); fits {
						host = d
					}
				}
			}
			if host == nil {
				if kind == kindScalar {
					host, err = m.scalars.next(v.Dtype)
				} else {
					host, err = newHostValue(kind, v.Dtype, v.Shape)
				}
				if err != nil {
					return err
				}
			}
			m.results[i] = host
		}
		dst, err := rawBytes(host)
		if err != nil {
			return err
		}
		if v.Role == Gradient && m.accum[v.Learnable] {
			if err := accumulate(host, src, v); err != nil {
				return err
			}
		} else {
			copy(dst, src)
		}
		target := v.Node
		if v.Role == Gradient {
			target = v.Learnable.Deriv()
		}
		if err := let(target, host, kind); err != nil {
			return err
		}
		if v.Role == Gradient {
			if d := dualGradient(v.Learnable); d != nil && d != host {
				// Bound to a dual value by a TapeMachine, without
				// BindDualValues here: Grad() must still see this run's.
				if err := bindGradient(v.Learnable, host); err != nil {
					return err
				}
			}
		}
	}
	if err := m.publishShared(v, src); err != nil {
		return err
	}
	for _, r := range m.readsOf[i] {
		if err := storeRead(r, src, kind, v); err != nil {
			return err
		}
	}
	for _, k := range m.setsFrom[i] {
		to := &m.prog.Vars[m.prog.Sets[k].To]
		dst, ok := writableLike(m.leaves[m.prog.Sets[k].To], kind, to)
		if !ok {
			return fmt.Errorf("vm: set %s = %s: %s holds a value that cannot be written in place (%T)", to.Name, v.Name, to.Name, m.leaves[m.prog.Sets[k].To])
		}
		copy(dst, src)
	}
	return nil
}

// let binds host, a value publish made to match node n (its dtype, and its
// shape or a scalar), to n. UnsafeLet's shape check clones the node's
// shape: an allocation per call, and publish binds every result and
// gradient each run. A tensor is bound once (from the second step on, n's
// value already is host) and a scalar is a new value each run (see
// publish), bound by letScalar.
func let(n *gorgonia.Node, host gorgonia.Value, kind valueKind) error {
	if kind == kindScalar {
		return letScalar(n, host)
	}
	if d, ok := host.(*tensor.Dense); ok {
		if cur, ok := n.Value().(*tensor.Dense); ok && cur == d {
			return nil
		}
	}
	return gorgonia.UnsafeLet(n, host)
}

// publishShared accumulates a shared gradient node's value into the own
// gradient of each further learnable it is the gradient of, under
// BindDualValues, as TapeMachine does (see bindGradient). Without
// BindDualValues their Grad() is the gradient node's value, as under
// TapeMachine.
func (m *Machine) publishShared(v *Var, src []byte) error {
	for _, l := range v.Shared {
		if !m.accum[l] {
			continue
		}
		acc, ok := m.sharedAcc[l]
		if !ok {
			kind := kindDense
			if isScalarNode(v) {
				kind = kindScalar
			}
			var err error
			if acc, err = newHostValue(kind, v.Dtype, v.Shape); err != nil {
				return err
			}
			if m.sharedAcc == nil {
				m.sharedAcc = map[*gorgonia.Node]gorgonia.Value{}
			}
			m.sharedAcc[l] = acc
		}
		if err := accumulate(acc, src, v); err != nil {
			return err
		}
		if err := bindGradient(l, acc); err != nil {
			return fmt.Errorf("gradient of %s: %w", l.Name(), err)
		}
	}
	return nil
}

// storeRead stores a read value into the statement's destination: the
// first run clones, later runs copy into the value the reader holds, as
// TapeMachine's read instruction does.
func storeRead(r *Read, src []byte, kind valueKind, v *Var) error {
	if dst, ok := writableLike(*r.Into, kind, v); ok {
		copy(dst, src)
		return nil
	}
	host, err := newHostValue(kind, v.Dtype, v.Shape)
	if err != nil {
		return err
	}
	dst, _ := rawBytes(host)
	copy(dst, src)
	*r.Into = host
	return nil
}

// publishLeafReads carries out the reads of leaves that stand right after
// function fi (-1: before any) in the program: a leaf a Set assigns later
// in the run is read as it is now.
func (m *Machine) publishLeafReads(fi int) error {
	for _, r := range m.leafReads[fi] {
		src, kind, err := m.hostBytes(r.Var)
		if err != nil {
			return err
		}
		if err := storeRead(r, src, kind, &m.prog.Vars[r.Var]); err != nil {
			return err
		}
	}
	return nil
}

// hostBytes is a variable's value as bytes the host can read, and its kind:
// on a backend, computed values are downloaded first.
func (m *Machine) hostBytes(i int) ([]byte, valueKind, error) {
	v := &m.prog.Vars[i]
	if m.run != nil && !v.IsLeaf() {
		b, err := m.download(i)
		kind := kindDense
		if isScalarNode(v) {
			kind = kindScalar
		}
		return b, kind, err
	}
	if s := &m.vars[i]; !v.IsLeaf() && !v.View && s.kind == kindDense {
		// A dense result's bytes are its block's: no tensor header to make (and
		// allocate) only to read them back out of it.
		if s.in != nil {
			m.waitIn(i)
		}
		if s.block != nil {
			return s.block.Bytes(), kindDense, nil
		}
	}
	if !v.IsLeaf() && v.View && v.Bytes == m.prog.Vars[v.Base].Bytes {
		// A view of a computed variable of its base's size is a dense header over its base's
		// whole block (value): the block's bytes, again without the header.
		if s := &m.vars[v.Base]; s.block != nil || s.in != nil {
			if s.in != nil {
				m.waitIn(v.Base)
			}
			if s.block != nil {
				return s.block.Bytes(), kindDense, nil
			}
		}
	}
	val, err := m.value(i, nil)
	if err != nil {
		return nil, 0, err
	}
	src, err := rawBytes(val)
	if err != nil {
		return nil, 0, err
	}
	kind, err := kindOf(val)
	return src, kind, err
}

// writableLike returns the bytes of val when a value of the given kind and
// variable can be copied into them in place.
func writableLike(val gorgonia.Value, kind valueKind, v *Var) ([]byte, bool) {
	switch t := val.(type) {
	case nil:
		return nil, false
	case *tensor.Dense:
		if kind != kindDense || t.IsMaterializable() || t.Dtype() != v.Dtype || int64(len(t.Raw)) != v.Bytes {
			return nil, false
		}
		return t.Raw, true
	case gorgonia.Scalar:
		if kind != kindScalar || t.Dtype() != v.Dtype {
			return nil, false
		}
		b, err := rawBytes(t)
		return b, err == nil
	}
	return nil, false
}

// publishLeaves hands the user what it reads of the leaves (and their
// views), at the end of a run.
func (m *Machine) publishLeaves() error {
	for _, i := range m.leafSinks {
		if err := m.publish(i); err != nil {
			return err
		}
	}
	return nil
}

// accumulate adds a gradient into the learnable's running sum in place,
// with the same arithmetic as gorgonia's dual-value accumulation.
func accumulate(acc gorgonia.Value, src []byte, v *Var) error {
	switch a := acc.(type) {
	case *tensor.Dense:
		if addInto(a, src, v) {
			return nil
		}
		g := denseOver(src, v.Dtype, v.Shape)
		_, err := tensor.Add(a, g, tensor.UseUnsafe())
		return err
	case *gorgonia.F64:
		g, _ := scalarOver(src, v.Dtype)
		*a += *(g.(*gorgonia.F64))
	case *gorgonia.F32:
		g, _ := scalarOver(src, v.Dtype)
		*a += *(g.(*gorgonia.F32))
	default:
		return fmt.Errorf("cannot accumulate a gradient of type %T", acc)
	}
	return nil
}

// addInto is accumulate's tensor.Add(a, g, UseUnsafe()) for a plain float tensor of the
// gradient's dtype and shape: tensor's kernel is a[i] += g[i], a scalar loop (most of a step's
// time outside ops for ResNet-18's 11 million parameters); blas.Add is the same sum in AVX with
// a as the first operand, so the bits, NaN payloads too, are tensor's. It reports whether it
// added; anything else is left to tensor.
func addInto(a *tensor.Dense, src []byte, v *Var) bool {
	if (v.Dtype != tensor.Float32 && v.Dtype != tensor.Float64) || a.Dtype() != v.Dtype ||
		a.IsMaterializable() || !a.Shape().Eq(v.Shape) || len(a.Raw) != len(src) || len(src) == 0 {
		return false
	}
	if v.Dtype == tensor.Float32 {
		blas.Add(floatsOf[float32](a.Raw), floatsOf[float32](src))
	} else {
		blas.Add(floatsOf[float64](a.Raw), floatsOf[float64](src))
	}
	return true
}

// floatsOf is b's elements.
func floatsOf[T float32 | float64](b []byte) []T {
	var zero T
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/int(unsafe.Sizeof(zero)))
}

func (m *Machine) swapOut(i int) error {
	s := &m.vars[i]
	v := &m.prog.Vars[i]
	if s.block == nil {
		return fmt.Errorf("swap-out of %s, which is not resident", v.Name)
	}
	if s.host != nil || s.out != nil || s.devOut != nil {
		return nil // the host copy made earlier is still good: values never change
	}
	if m.run != nil {
		s.host = m.pool.get(int(v.Bytes))
		w, err := m.run.CopyOut(s.host, s.block.Addr())
		if err != nil {
			return err
		}
		s.devOut = w
	} else {
		s.host = m.pool.get(len(s.block.Bytes()))
		s.out = m.d2h.submit(s.host, s.block.Bytes())
	}
	m.stats.SwapOuts++
	m.stats.SwapOutBytes += v.Bytes
	return nil
}

func (m *Machine) swapIn(i int) error {
	s := &m.vars[i]
	v := &m.prog.Vars[i]
	if s.block != nil {
		return fmt.Errorf("swap-in of %s, which is already resident", v.Name)
	}
	if s.host == nil {
		return fmt.Errorf("swap-in of %s, which has no host copy", v.Name)
	}
	m.waitOut(i)
	blk, err := m.allocate(v.Bytes, named(v.Name))
	if err != nil {
		return err
	}
	s.block = blk
	if m.run != nil {
		w, err := m.run.CopyIn(blk.Addr(), s.host)
		if err != nil {
			return err
		}
		s.devIn = w
	} else {
		s.in = m.h2d.submit(blk.Bytes(), s.host)
	}
	m.stats.SwapIns++
	m.stats.SwapInBytes += v.Bytes
	return nil
}

func (m *Machine) waitIn(i int) {
	s := &m.vars[i]
	m.waitDev(&s.devIn)
	if s.in == nil {
		return
	}
	m.stats.StallTime += s.in.wait()
	m.h2d.reuse(s.in)
	s.in = nil
}

func (m *Machine) waitOut(i int) {
	s := &m.vars[i]
	m.waitDev(&s.devOut)
	if s.out == nil {
		return
	}
	m.stats.StallTime += s.out.wait()
	m.d2h.reuse(s.out)
	s.out = nil
}

// free releases a variable's device memory once any copy out of it has
// landed. Its host copy, if any, stays for a later swap-in.
func (m *Machine) free(i int) error {
	s := &m.vars[i]
	if s.block == nil {
		return fmt.Errorf("free of %s, which is not resident", m.prog.Vars[i].Name)
	}
	m.waitOut(i)
	m.waitIn(i)
	err := m.release(s.block)
	s.block = nil
	return err
}

// waitDev makes the host wait for a backend copy; the time counts as stall.
// A failed copy shows again at the step's end (EndStep), where it is reported.
func (m *Machine) waitDev(w *Waiter) {
	if *w == nil {
		return
	}
	t := time.Now()
	_ = (*w).Wait()
	m.stats.StallTime += time.Since(t)
	*w = nil
}

// endStep checks the tape left the device empty and recycles host copies.
func (m *Machine) endStep() error {
	if m.run != nil {
		stall, err := m.run.EndStep()
		m.stats.StallTime += stall
		if err != nil {
			m.releaseAll()
			return fmt.Errorf("vm: end of step on %s: %w", m.dev.Name(), err)
		}
	}
	var leaked []string
	for i := range m.vars {
		if m.vars[i].block != nil {
			leaked = append(leaked, m.prog.Vars[i].Name)
		}
	}
	m.releaseAll()
	if len(leaked) > 0 {
		return fmt.Errorf("vm: the tape left %d variables on the device: %v", len(leaked), leaked)
	}
	return nil
}

// releaseAll returns every device block and host copy, after in-flight copies land.
func (m *Machine) releaseAll() {
	for i := range m.vars {
		s := &m.vars[i]
		m.waitOut(i)
		m.waitIn(i)
		if s.block != nil {
			_ = m.release(s.block)
			s.block = nil
		}
		if s.host != nil {
			m.pool.put(s.host)
			s.host = nil
		}
	}
	// No variable holds a block now, and the step's locals are gone: what was freed may be
	// reused. (A block released twice, as a failed function's output can be, fails its second
	// Free and is listed once.)
	if r, ok := m.al.(alloc.Recycler); ok && len(m.freed) > 0 {
		r.Recycle(m.freed)
	}
	clear(m.freed)
	m.freed = m.freed[:0]
}
