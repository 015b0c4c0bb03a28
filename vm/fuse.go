package vm

import "gorgonia.org/gorgonia"

// Fuser is implemented by ops that can also compute the op after them on a
// tape, in the same pass over memory (a batch norm and the ReLU that
// follows it: each channel is normalised and rectified while in cache).
//
// FuseNext returns an op that takes this op's operands and workspace and
// writes, into the memory of this op's output, what next computes from that
// output: next(op(operands...)), with the bits each would give on its own.
// It returns nil when it cannot fuse next. The result must implement
// WorkspaceOp; the machine calls only its DoWorkspace.
//
// The machine asks only where fusing cannot be told from running the two
// apart (the package doc lists the conditions): next's one operand is this
// op's output, nothing else reads that output or is handed it, and next
// writes over it in place.
type Fuser interface {
	FuseNext(next gorgonia.Op) gorgonia.Op
}

// Fusion is a pair of functions (indices in Program.Funcs) the machine runs
// as one pass: Head's exec computes Tail's output too, and Tail's exec only
// takes over the memory, as its in-place output, and publishes it.
type Fusion struct{ Head, Tail int }

// fusion is what the machine fuses in the program it runs: per function,
// the op to run in its place (a head) or whether it was computed already
// (a tail).
type fusion struct {
	pairs []Fusion
	op    []WorkspaceOp
	away  []bool
}

// Fused returns the pairs of functions the machine runs fused in its
// current program (none on a simulated device or one with a Backend, or
// while SetFusion(false)).
func (m *Machine) Fused() []Fusion {
	if m.fuse == nil || m.unfused {
		return nil
	}
	return append([]Fusion(nil), m.fuse.pairs...)
}

// SetFusion turns run-time fusion (Fuser) on, as a machine starts, or off,
// for the runs after the call (a Machine is not used concurrently, so no run
// is in progress). Results are the same bits either way; it is there to
// compare the two.
func (m *Machine) SetFusion(on bool) { m.unfused = !on }

// planFusion finds the pairs to fuse in the machine's program: only where
// the machine runs the ops itself on memory the host addresses (not on a
// simulated device, not through a Backend), and not before a replan (the
// first step's op times are each function's own).
func (m *Machine) planFusion() {
	m.fuse = nil
	if m.sim != nil || m.run != nil || m.replan != nil {
		return
	}
	p := m.prog
	c := fusionCensus(p)
	var f *fusion
	for pc, in := range p.Instrs {
		if in.Op != Exec {
			continue
		}
		fu, ok := p.Funcs[in.Func].Op.(Fuser)
		if !ok {
			continue
		}
		tail, ok := c.fusable(m, pc)
		if !ok {
			continue
		}
		op, ok := fu.FuseNext(p.Funcs[tail].Op).(WorkspaceOp)
		if !ok {
			continue
		}
		if f == nil {
			f = &fusion{op: make([]WorkspaceOp, len(p.Funcs)), away: make([]bool, len(p.Funcs))}
		}
		f.pairs = append(f.pairs, Fusion{Head: in.Func, Tail: tail})
		f.op[in.Func] = op
		f.away[tail] = true
	}
	m.fuse = f
}

// census counts, over a program, what fusable checks: per variable, the
// functions that read it and the instructions that name it, and per
// function whether a Recompute runs it.
type census struct {
	readers   []int
	named     []int
	recompute []bool
}

func fusionCensus(p *Program) census {
	c := census{readers: make([]int, len(p.Vars)), named: make([]int, len(p.Vars)), recompute: make([]bool, len(p.Funcs))}
	for i := range p.Funcs {
		f := &p.Funcs[i]
		for _, v := range f.Inputs {
			c.readers[v]++
		}
	}
	for i := range p.Vars {
		if v := &p.Vars[i]; v.View {
			c.readers[v.Base]++ // read through the view: never fused
		}
	}
	for _, in := range p.Instrs {
		c.named[in.Var]++
		if in.Op == Recompute {
			c.recompute[in.Func] = true
		}
	}
	return c
}

// fusable finds the function the exec at pc may be fused with: the next
// exec, with only swaps, waits and frees between (of other variables: see
// named); its one operand is the head's output y and it writes over y in
// place, and it is never recomputed. y is read by no other function or view,
// named by no instruction but the head's exec (never swapped, freed or
// recomputed), and handed to nobody (no output, bound value, Read or Set).
// The head has workspace (the fused op runs through DoWorkspace). Then
// nothing sees y between the two, so computing the tail's result at the
// head's exec gives every reader the same bits.
func (c census) fusable(m *Machine, pc int) (tail int, ok bool) {
	p := m.prog
	hf := &p.Funcs[p.Instrs[pc].Func]
	y := hf.Output
	if hf.Workspace <= 0 || c.readers[y] != 1 || c.named[y] != 1 || len(m.sinks[y]) != 0 || p.Vars[y].View {
		return -1, false
	}
	for _, in := range p.Instrs[pc+1:] {
		switch in.Op {
		case Exec:
			tf := &p.Funcs[in.Func]
			ok := tf.InPlace == y && len(tf.Operands()) == 1 && tf.Operands()[0] == y && !c.recompute[in.Func] &&
				p.Vars[tf.Output].Bytes == p.Vars[y].Bytes
			return in.Func, ok
		case Recompute:
			return -1, false
		}
	}
	return -1, false
}

// fused says how the machine runs function fi now: in place of its op, a
// fused op that computes the next function's result too (a head), or
// nothing, its result computed already (a tail).
func (m *Machine) fused(fi int) (op WorkspaceOp, away bool) {
	if m.fuse == nil || m.unfused {
		return nil, false
	}
	return m.fuse.op[fi], m.fuse.away[fi]
}
