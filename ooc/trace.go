package ooc

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/vm"
)

// Trace is a graph walked into the function-sequence and the
// variable-sequence the schedulers plan over.
type Trace struct {
	// Vars are the variables: leaves (inputs, learnables, constants) and the
	// output of every function.
	Vars []vm.Var
	// Funcs is the function-sequence F, in gorgonia's topological order.
	Funcs []vm.Func
	// Seq is the variable-sequence S = V(f_1) ++ ... ++ V(f_N), as variable
	// indices: each function's inputs in operand order, then its output.
	Seq []int
	// Start[i] is start(i), the index in Seq of the first entry of V(f_i).
	// Start has len(Funcs)+1 entries; the last is len(Seq).
	Start []int
	// First and Last are, per variable, the first and last function using it
	// (the producer counts as a use). Both are -1 for an unused leaf.
	First, Last []int
	// Uses lists, per variable, the functions reading it, in order.
	Uses [][]int

	// Reads and Sets are the graph's gorgonia.Read and gorgonia.Set
	// statements, which the machine carries out when their values are made.
	Reads []vm.Read
	Sets  []vm.Set
	// Inference marks a forward-only trace (Inference()).
	Inference bool
}

// DeviceBytes is the device memory a variable takes: its size, or 0 for a
// leaf, which the machine never allocates, and for a view, which lives in
// its base's memory.
func (t *Trace) DeviceBytes(v int) int64 {
	if x := &t.Vars[v]; x.IsLeaf() || x.View {
		return 0
	}
	return t.Vars[v].Bytes
}

// forDevice returns the trace as dev runs it (nil: a CPU device): the host
// result of each function the device cannot run into its own memory
// counts, as on the device it will (see vm.HostBytes). It returns t itself
// when nothing changes.
func (t *Trace) forDevice(dev vm.Device) *Trace {
	var funcs []vm.Func
	for i := range t.Funcs {
		f := &t.Funcs[i]
		if hb := vm.HostBytes(dev, f, &t.Vars[f.Output]); hb != f.HostBytes {
			if funcs == nil {
				funcs = slices.Clone(t.Funcs)
			}
			funcs[i].HostBytes = hb
		}
	}
	if funcs == nil {
		return t
	}
	c := *t
	c.Funcs = funcs
	return &c
}

// Need is the device memory function i cannot run without: its operands
// (each once), its output unless it takes over an operand's memory, and its
// transient memory. No budget below the largest Need is feasible.
func (t *Trace) Need(i int) int64 {
	f := &t.Funcs[i]
	need := f.Transient()
	if f.InPlace < 0 {
		need += t.DeviceBytes(f.Output)
	}
	for k, v := range f.Inputs {
		if !slices.Contains(f.Inputs[:k], v) {
			need += t.DeviceBytes(v)
		}
	}
	return need
}

// MaxNeed is the largest Need of any function, and that function's index.
func (t *Trace) MaxNeed() (need int64, at int) {
	at = -1
	for i := range t.Funcs {
		if n := t.Need(i); at < 0 || n > need {
			need, at = n, i
		}
	}
	return need, at
}

// V returns V(f_i), the slice of Seq for function i.
func (t *Trace) V(i int) []int { return t.Seq[t.Start[i]:t.Start[i+1]] }

// NextUse is the first function after i that reads v, or -1.
func (t *Trace) NextUse(v, i int) int {
	for _, u := range t.Uses[v] {
		if u > i {
			return u
		}
	}
	return -1
}

// String prints the function-sequence with each function's variables.
func (t *Trace) String() string {
	var b strings.Builder
	var dev int64
	for v := range t.Vars {
		dev += t.DeviceBytes(v)
	}
	fmt.Fprintf(&b, "trace: %d functions, %d variables (%d device bytes in all), |S| = %d\n",
		len(t.Funcs), len(t.Vars), dev, len(t.Seq))
	for i, f := range t.Funcs {
		fmt.Fprintf(&b, "f%-4d %s\n", i, f.Node.Name())
		for k, v := range t.V(i) {
			x := &t.Vars[v]
			kind := "var"
			switch {
			case x.IsLeaf():
				kind = "leaf"
			case v == f.Output:
				kind = "out"
			}
			view := ""
			if k < len(f.Inputs) {
				if a := f.Operands()[k]; a != v {
					view = fmt.Sprintf(" (read as %v through a view)", t.Vars[a].Shape)
				}
			}
			if v == f.Output && f.InPlace >= 0 {
				view = " (in place of " + shortName(t.Vars[f.InPlace].Name) + ")"
			}
			fmt.Fprintf(&b, "      %-4s %-10s %v %v %d B, uses f%d..f%d%s\n",
				kind, shortName(x.Name), x.Dtype, x.Shape, x.Bytes, t.First[v], t.Last[v], view)
		}
		if f.Workspace > 0 {
			fmt.Fprintf(&b, "      workspace %d B\n", f.Workspace)
		}
		if f.HostBytes > 0 {
			fmt.Fprintf(&b, "      host result %d B (the op has no way to write into device memory)\n", f.HostBytes)
		}
	}
	return b.String()
}

func shortName(s string) string {
	if len(s) > 40 {
		return s[:37] + "..."
	}
	return s
}

// errNoCost is returned for a graph with nothing to compute.
var errNoCost = errors.New("ooc: the graph computes nothing: call gorgonia.Grad(cost, learnables...) before Compile, or name what to compute with WithOutputs or gorgonia.Read")

// Trace building options beyond the graph.
type traceConfig struct {
	outputs   []*gorgonia.Node
	inference bool
	device    vm.Device // where the trace will run (nil: a CPU device)
	wsLimit   int64     // most workspace a tiling op gets (0: its full need)
	// nodeValues is the most host memory the forward's intermediates may
	// take to be bound after a run (0: none beyond the scalars).
	nodeValues int64
	// noDeadEnds leaves out the forward's non-scalar dead ends (their
	// values did not fit nodeValues).
	noDeadEnds bool
}

// NewTrace walks a graph into a trace, pruned to what the cost, the
// learnables' gradients, the graph's Read and Set statements and the extra
// outputs need.
func NewTrace(g *gorgonia.ExprGraph, outputs ...*gorgonia.Node) (*Trace, error) {
	return newTrace(g, traceConfig{outputs: outputs, nodeValues: DefaultNodeValueLimit})
}

func newTrace(g *gorgonia.ExprGraph, cfg traceConfig) (t *Trace, err error) {
	defer func() {
		if r := recover(); r != nil {
			t, err = nil, fmt.Errorf("ooc: tracing the graph panicked: %v", r)
		}
	}()
	if g == nil {
		return nil, errors.New("ooc: nil graph")
	}
	if nodeChildrenErr != nil {
		return nil, nodeChildrenErr
	}
	sorted, err := sortGraph(g)
	if err != nil {
		return nil, err
	}
	// sortGraph returns roots first; execution order is the reverse.
	order := make([]*gorgonia.Node, len(sorted))
	for i, n := range sorted {
		order[len(sorted)-1-i] = n
	}

	// In a forward-only run, what the backward computes is left out:
	// gradient nodes and everything computed from them.
	backward := map[*gorgonia.Node]bool{}
	if cfg.inference {
		for _, n := range order {
			if len(n.DerivOf()) > 0 && n.Op() != nil {
				backward[n] = true
				continue
			}
			for _, c := range operands(n) {
				if backward[c] {
					backward[n] = true
					break
				}
			}
		}
	}

	roles := map[*gorgonia.Node]vm.Role{}
	learnableOf := map[*gorgonia.Node]*gorgonia.Node{}
	sharedBy := map[*gorgonia.Node][]*gorgonia.Node{} // further learnables with the same gradient node
	type read struct {
		n    *gorgonia.Node
		into *gorgonia.Value
		pos  int // the statement's place in order
	}
	type set struct{ stmt, to, from *gorgonia.Node }
	var reads []read
	var sets []set
	var roots []*gorgonia.Node
	statement := map[*gorgonia.Node]bool{}
	for pos, n := range order {
		into, err := readTarget(n.Op())
		if err != nil {
			return nil, fmt.Errorf("%w (node %s)", err, n.Name())
		}
		ops := operands(n)
		switch {
		case into != nil:
			statement[n] = true
			if len(ops) != 1 {
				return nil, fmt.Errorf("ooc: statement %s reads %d nodes, want 1", n.Name(), len(ops))
			}
			if backward[ops[0]] {
				continue // a forward-only run has no gradients to read
			}
			reads = append(reads, read{ops[0], into, pos})
			roots = append(roots, ops[0])
		case isSet(n.Op()):
			statement[n] = true
			if len(ops) != 2 {
				return nil, fmt.Errorf("ooc: statement %s has %d operands, want 2", n.Name(), len(ops))
			}
			if backward[ops[1]] {
				continue // an update computed from gradients: training only
			}
			sets = append(sets, set{n, ops[0], ops[1]})
			roots = append(roots, ops[0], ops[1])
		case isCost(n):
			roles[n] = vm.Output
		}
	}
	for _, n := range cfg.outputs {
		if n == nil || n.Graph() != g {
			return nil, fmt.Errorf("ooc: output %v is not a node of this graph", n)
		}
		if backward[n] {
			return nil, fmt.Errorf("ooc: output %s is computed by the backward; an inference run has none", n.Name())
		}
		roles[n] = vm.Output
	}
	// A leaf's gradient is computed whatever made it: gorgonia.Grad of a
	// scalar cost, or gorgonia.Backpropagate from outputs of any shape
	// with gradients of the script's choosing (no cost node then).
	if !cfg.inference {
		for _, n := range order {
			if n.Op() == nil && n.Deriv() != nil {
				d := n.Deriv()
				if l, ok := learnableOf[d]; ok && l != n {
					sharedBy[d] = append(sharedBy[d], n)
					continue
				}
				if _, taken := roles[d]; taken {
					return nil, fmt.Errorf("ooc: %s is the gradient of %s and also an output", d.Name(), n.Name())
				}
				roles[d] = vm.Gradient
				learnableOf[d] = n
			}
		}
	}
	// A read node is bound to its value after a run, as gorgonia does.
	for _, r := range reads {
		if _, ok := roles[r.n]; !ok {
			roles[r.n] = vm.Output
		}
	}
	if len(roles) == 0 && len(sets) == 0 {
		// Nothing named: a forward graph's results are what nothing else
		// reads, as TapeMachine leaves every node's value bound.
		read := map[*gorgonia.Node]bool{}
		for _, n := range order {
			for _, c := range operands(n) {
				read[c] = true
			}
		}
		for _, n := range order {
			if !read[n] && !statement[n] && !isLeaf(n) && !backward[n] {
				roles[n] = vm.Output
			}
		}
	}
	if len(roles) == 0 && len(sets) == 0 {
		return nil, errNoCost
	}

	keep := map[*gorgonia.Node]bool{}
	var mark func(n *gorgonia.Node)
	mark = func(n *gorgonia.Node) {
		if keep[n] {
			return
		}
		keep[n] = true
		for _, c := range operands(n) {
			mark(c)
		}
	}
	for n := range roles {
		mark(n)
	}
	for _, n := range roots {
		mark(n)
	}
	// TapeMachine computes and binds every node of its graph, so the
	// forward's nodes the cost does not read (an accuracy, a loss term the
	// cost leaves out, a second head, a thresholded prediction, an Int
	// class vector) are computed and bound too (see Var.Bind): a scalar
	// always, costing nothing to keep; the others while the forward's
	// values fit the node-value limit (below), as computing one that is
	// not bound would only cost time. What the backward leaves dangling is
	// not computed: gorgonia.Grad leaves such nodes (products of a
	// gradient with an operand nothing differentiates), which TapeMachine
	// computes but no script reads, and each would take device memory.
	fromGrad := map[*gorgonia.Node]bool{}
	for _, n := range order {
		for _, c := range operands(n) {
			fromGrad[n] = fromGrad[n] || fromGrad[c]
		}
		if len(n.DerivOf()) > 0 && n.Op() != nil {
			fromGrad[n] = true
		}
	}
	deadEnds := false
	for _, n := range order {
		if keep[n] || statement[n] || isLeaf(n) || backward[n] || fromGrad[n] {
			continue
		}
		if n.IsScalar() && bindableScalar(n.Dtype()) {
			mark(n)
		} else if cfg.nodeValues > 0 && !cfg.noDeadEnds {
			mark(n)
			deadEnds = true
		}
	}
	// What a kept function reads in TapeMachine's clobbered registers is
	// computed too (readAsTapeMachine), except what only the backward
	// computes when there is none.
	clobbers := tapeClobbers(g, order)
	for changed := true; changed; {
		changed = false
		for n, sub := range clobbers {
			for k, w := range sub {
				switch {
				case backward[w]:
					delete(sub, k)
				case keep[n] && !keep[w]:
					mark(w)
					changed = true
				}
			}
		}
	}

	t = &Trace{}
	index := map[*gorgonia.Node]int{}
	// funcsBefore[pos] is how many functions precede order[pos]: a Read
	// statement reads there (see vm.Read.After).
	funcsBefore := make([]int, len(order))
	for pos, n := range order {
		funcsBefore[pos] = len(t.Funcs)
		if !keep[n] {
			continue
		}
		if statement[n] {
			return nil, fmt.Errorf("ooc: statement %s is an operand of another node", n.Name())
		}
		if isYOLO(n.Op()) {
			return nil, fmt.Errorf("ooc: %s is gorgonia.YOLOv3, whose op rewrites its operand in place and returns that operand "+
				"as its result (gorgonia op_yolo.go): the operand's value changes under its other readers and TapeMachine's "+
				"registers for the two alias; ooc assumes an op leaves its operands as they were and refuses it", n.Name())
		}
		if isAt(n.Op()) {
			return nil, fmt.Errorf("ooc: %s is gorgonia.At, whose op gorgonia marks as a statement that TapeMachine never executes "+
				"(its users read At's operand instead, or fail): ooc refuses it rather than compute what TapeMachine does not; "+
				"take the element with Slice", n.Name())
		}
		v := vm.Var{
			Node:     n,
			Name:     n.Name(),
			Shape:    n.Shape(),
			Dtype:    n.Dtype(),
			Producer: -1,
			Role:     roles[n],
		}
		if v.Role == vm.Gradient {
			v.Learnable, v.Shared = learnableOf[n], sharedBy[n]
		}
		// TapeMachine leaves every node bound; a scalar costs nothing to
		// keep, and scripts print theirs (the terms of a cost). On a device
		// that computes on itself each is a download of a few bytes.
		v.Bind = v.Role == vm.Intermediate && n.IsScalar() && !isLeaf(n) && bindableScalar(v.Dtype)
		size := int64(v.Dtype.Size())
		if !n.IsScalar() {
			size *= int64(v.Shape.TotalSize())
		}
		v.Bytes = size
		vi := len(t.Vars)
		index[n] = vi
		if isLeaf(n) {
			t.Vars = append(t.Vars, v)
			continue
		}
		ops := operands(n)
		if isView(n) {
			base := index[ops[0]]
			if b := &t.Vars[base]; b.View {
				base = b.Base
			}
			v.View, v.Base, v.Producer = true, base, t.Vars[base].Producer
			t.Vars = append(t.Vars, v)
			continue
		}
		f := vm.Func{Node: n, Op: n.Op(), Output: vi, InPlace: -1}
		hasView := false
		for _, c := range ops {
			ci, ok := index[c]
			if !ok {
				return nil, fmt.Errorf("ooc: node %s reads %s, which the topological order puts later", n.Name(), c.Name())
			}
			f.Args = append(f.Args, ci)
			if x := &t.Vars[ci]; x.View {
				ci = x.Base
				hasView = true
			}
			f.Inputs = append(f.Inputs, ci)
		}
		if !hasView {
			f.Args = nil
		}
		if w, ok := f.Op.(vm.WorkspaceOp); ok {
			shapes := make([]tensor.Shape, len(f.Inputs))
			for k, ci := range f.Operands() {
				shapes[k] = t.Vars[ci].Shape
			}
			f.Workspace = w.WorkspaceBytes(v.Dtype, shapes)
			if tw, ok := w.(vm.TiledWorkspaceOp); ok && cfg.wsLimit > 0 && f.Workspace > cfg.wsLimit {
				f.Workspace = max(cfg.wsLimit, tw.MinWorkspaceBytes(v.Dtype, shapes))
			}
		} else {
			// A device backend's own scratch for the op (CUDA's tensordot
			// transposes, CTC's tables), inside the budget.
			ops := make([]*vm.Var, 0, len(f.Inputs))
			for _, ci := range f.Operands() {
				ops = append(ops, &t.Vars[ci])
			}
			f.Workspace = vm.BackendWorkspace(cfg.device, &f, ops, &v)
		}
		f.HostBytes = vm.HostBytes(cfg.device, &f, &v)
		f.Recomputable = recomputable(f.Op)
		v.Producer = len(t.Funcs)
		t.Vars = append(t.Vars, v)
		t.Funcs = append(t.Funcs, f)
	}
	// TapeMachine leaves every node bound. The forward's other
	// intermediates are bound too when their host copies are affordable
	// (cfg.nodeValues): each is copied out right after its op, before an
	// in-place op can write over its memory. On a device that computes on
	// itself (CUDA) each copy is a download, made the same way, with the
	// same limit (see vm.Machine's publish).
	// The backward's intermediates (a gradient of the logits a script
	// inspects) are bound after the forward's, when both fit.
	if cfg.nodeValues > 0 {
		var total, backTotal int64
		var bind, backBind []int
		for i := range t.Vars {
			v := &t.Vars[i]
			if v.Role != vm.Intermediate || v.Bind || (!v.View && v.IsLeaf()) {
				continue
			}
			if fromGrad[v.Node] {
				backTotal += v.Bytes
				backBind = append(backBind, i)
			} else {
				total += v.Bytes
				bind = append(bind, i)
			}
		}
		if total > cfg.nodeValues && deadEnds {
			// Too much with the dead ends: trace again without them, and
			// bind the rest if it fits alone.
			cfg.noDeadEnds = true
			return newTrace(g, cfg)
		}
		if total <= cfg.nodeValues {
			if total+backTotal <= cfg.nodeValues {
				bind = append(bind, backBind...)
			}
			for _, i := range bind {
				t.Vars[i].Bind = true
			}
		}
	}
	for _, r := range reads {
		t.Reads = append(t.Reads, vm.Read{Var: index[r.n], Into: r.into, After: funcsBefore[r.pos] - 1})
	}
	setFrom := map[*gorgonia.Node]bool{}
	for _, s := range sets {
		if err := checkSet(s.stmt, s.to, s.from); err != nil {
			return nil, err
		}
		if setFrom[s.from] {
			return nil, fmt.Errorf("ooc: statement %s: %s is assigned by more than one gorgonia.Set", s.stmt.Name(), s.from.Name())
		}
		setFrom[s.from] = true
		t.Sets = append(t.Sets, vm.Set{To: index[s.to], From: index[s.from]})
	}
	if len(t.Funcs) == 0 && len(t.Reads) == 0 && len(t.Sets) == 0 {
		return nil, errNoCost
	}
	t.Inference = cfg.inference
	if err := t.readAsTapeMachine(clobbers, index); err != nil {
		return nil, err
	}
	t.index()
	t.markInPlace()
	return t, nil
}

// checkSet refuses the gorgonia.Set statements that gorgonia's TapeMachine
// does not carry out as written. TapeMachine has no assignment: it lets the
// op computing `from` write its result over its operand `to` in place (a
// Set(w, Sub(w, d)) updates w), which happens only when that op overwrites
// that operand and writes into memory it is given. Any other Set leaves
// `to` as it was, or overwrites another operand; ooc refuses those rather
// than differ from TapeMachine silently.
func checkSet(stmt, to, from *gorgonia.Node) error {
	if to.Op() != nil {
		return fmt.Errorf("ooc: statement %s: gorgonia.Set can assign to inputs and learnables only, and %s is computed by %v", stmt.Name(), to.Name(), to.Op())
	}
	if to.Dtype() != from.Dtype() || !to.Shape().Eq(from.Shape()) || to.IsScalar() != from.IsScalar() {
		return fmt.Errorf("ooc: statement %s: %s (%v %v) cannot take the value of %s (%v %v)", stmt.Name(),
			to.Name(), to.Dtype(), to.Shape(), from.Name(), from.Dtype(), from.Shape())
	}
	op := from.Op()
	k := -1
	if op != nil {
		k = op.OverwritesInput()
	}
	ops := operands(from)
	_, prealloc := op.(gorgonia.UsePreallocDoer)
	if k < 0 || k >= len(ops) || ops[k] != to || !prealloc || op.CallsExtern() || to.IsScalar() {
		return fmt.Errorf("ooc: statement %s: gorgonia's TapeMachine carries out gorgonia.Set(a, b) only by letting b's op "+
			"write over its operand a in place, as in Set(w, Sub(w, d)) for a tensor w; %v does not write over %s, so TapeMachine "+
			"would leave it unchanged or change another operand: write the update so that it does, or assign the value yourself after RunAll",
			stmt.Name(), op, to.Name())
	}
	return nil
}

// notRecomputable are gorgonia's ops whose forward a second run would not
// repeat exactly: batch and group norm save statistics for their backward
// (and batch norm resets or advances running ones), pooling saves its
// argmax mask, dropout and the random ops draw from a clock-seeded RNG.
var notRecomputable = map[string]bool{
	"gorgonia.BatchNormOp": true, "gorgonia.batchnormDiffOp": true,
	"gorgonia.GroupNormOp": true, "gorgonia.groupNormDiffOp": true,
	"gorgonia.maxPoolOp": true, "gorgonia.maxPoolDiffOp": true,
	"gorgonia.avgPoolOp": true, "gorgonia.avgPoolDiffOp": true,
	"gorgonia.dropoutOp": true, "gorgonia.dropoutDiffOp": true,
	"gorgonia.randomOp": true,
}

// Recomputer is implemented by ops that say themselves whether a tape may
// run them again to rebuild a dropped output (see vm.Func.Recomputable).
type Recomputer interface {
	Recomputable() bool
}

// recomputable reports whether running op again on the same operands gives
// the same bits and leaves no trace: not for gorgonia's stateful and random
// ops, nor for an op with a training mode unless its only state is running
// statistics the machine restores (vm.RunningStatser).
func recomputable(op gorgonia.Op) bool {
	if r, ok := op.(Recomputer); ok {
		return r.Recomputable()
	}
	if notRecomputable[strings.TrimPrefix(fmt.Sprintf("%T", op), "*")] {
		return false
	}
	if _, ok := op.(gorgonia.TrainModeOp); ok {
		_, restorable := op.(vm.RunningStatser)
		return restorable
	}
	return true
}

// bindableScalar tells the dtypes of the scalars bound after a run (those
// the machine can hold as a gorgonia scalar value).
func bindableScalar(dt tensor.Dtype) bool {
	switch dt {
	case tensor.Float64, tensor.Float32, tensor.Int, tensor.Int64, tensor.Int32, tensor.Uint8, tensor.Bool:
		return true
	}
	return false
}

// isAt recognises gorgonia.At's op.
func isAt(op gorgonia.Op) bool {
	return op != nil && fmt.Sprintf("%T", op) == "gorgonia.atOp"
}

// isYOLO recognises gorgonia.YOLOv3's op.
func isYOLO(op gorgonia.Op) bool {
	return op != nil && fmt.Sprintf("%T", op) == "*gorgonia.yoloOp"
}

// isView recognises the nodes whose value shares their operand's memory,
// every such op gorgonia has (v0.9.18; TestGorgoniaViews checks each op
// that might): Reshape and Ravel (Do returns a header over the operand's
// data) and Concat of a single operand (Do returns the operand's tensor
// itself). Transpose and Slice copy.
func isView(n *gorgonia.Node) bool {
	if n.Op() == nil {
		return false
	}
	switch fmt.Sprintf("%T", n.Op()) {
	case "gorgonia.reshapeOp":
		return len(operands(n)) == 1
	case "gorgonia.concatOp":
		return len(operands(n)) == 1
	}
	return false
}

// inPlaceOps are gorgonia's elementwise ops: each output element depends
// only on the operands' elements at the same index, so the result may be
// written where a same-shaped operand was.
var inPlaceOps = map[string]bool{
	"gorgonia.elemBinOp":   true,
	"gorgonia.elemUnaryOp": true,
}

// InPlacer is implemented by ops that may write their result over an operand
// (models/layers' ReLU and batch-norm gradients): they read every element of
// it that an output element depends on before writing that output element.
type InPlacer interface {
	InPlaceSafe(operand int) bool
}

func inPlaceSafe(op gorgonia.Op, operand int) bool {
	if ip, ok := op.(InPlacer); ok {
		return ip.InPlaceSafe(operand)
	}
	if operand > 0 && isComparison(op) {
		return false
	}
	return inPlaceOps[fmt.Sprintf("%T", op)]
}

// isComparison recognises gorgonia's elementwise comparisons (Lt, Gt, Lte,
// Gte, Eq, Ne). Their retSame forms run through the tensor engine's
// same-type path, which copies the first operand into the result and then
// compares it with the second in place (tensor v0.9.24,
// defaultengine_cmp.go): a result written over the second operand
// overwrites that operand before it is read, so they may take over the
// first operand's memory only.
func isComparison(op gorgonia.Op) bool {
	if fmt.Sprintf("%T", op) != "gorgonia.elemBinOp" {
		return false
	}
	sym, _, _ := strings.Cut(op.String(), " ")
	switch sym {
	case "<", ">", "<=", ">=", "==", "!=":
		return true
	}
	return false
}

// markInPlace lets an elementwise function take over the memory of an
// operand it reads last, when they have the same size and dtype.
func (t *Trace) markInPlace() {
	for i := range t.Funcs {
		f := &t.Funcs[i]
		out := &t.Vars[f.Output]
		for k, v := range f.Inputs {
			in := &t.Vars[v]
			// Shapes may differ (an operand read through a reshape): an
			// elementwise op only needs the same elements in the same order.
			if !inPlaceSafe(f.Op, k) || in.IsLeaf() || in.Role != vm.Intermediate || t.Last[v] != i || in.Bytes != out.Bytes ||
				in.Dtype != out.Dtype || in.Node.IsScalar() || out.Node.IsScalar() || count(f.Inputs, v) != 1 {
				continue
			}
			f.InPlace = v
			break
		}
	}
}

func count(s []int, v int) int {
	n := 0
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}

// index fills Seq, Start, First, Last and Uses from Vars and Funcs.
func (t *Trace) index() {
	n := len(t.Vars)
	t.First, t.Last, t.Uses = make([]int, n), make([]int, n), make([][]int, n)
	for i := range t.First {
		t.First[i], t.Last[i] = -1, -1
	}
	t.Seq, t.Start = t.Seq[:0], t.Start[:0]
	for i, f := range t.Funcs {
		t.Start = append(t.Start, len(t.Seq))
		t.Seq = append(t.Seq, f.Inputs...)
		t.Seq = append(t.Seq, f.Output)
		for _, v := range append(f.Inputs, f.Output) {
			if t.First[v] < 0 {
				t.First[v] = i
			}
			t.Last[v] = i
			if v != f.Output {
				if u := t.Uses[v]; len(u) == 0 || u[len(u)-1] != i {
					t.Uses[v] = append(u, i)
				}
			}
		}
	}
	t.Start = append(t.Start, len(t.Seq))
}

// isLeaf reports whether the node is an input, a learnable or a constant.
func isLeaf(n *gorgonia.Node) bool {
	if n.Op() == nil {
		return true
	}
	_, isConst := n.Op().(interface{ Value() gorgonia.Value })
	return isConst && len(operands(n)) == 0
}

// isCost recognises the cost of gorgonia.Grad: a scalar op node whose
// gradient is the constant 1 that Grad seeds the backward with.
func isCost(n *gorgonia.Node) bool {
	d := n.Deriv()
	if n.Op() == nil || !n.IsScalar() || d == nil || isLeaf(n) {
		return false
	}
	_, isConst := d.Op().(interface{ Value() gorgonia.Value })
	return isConst
}
