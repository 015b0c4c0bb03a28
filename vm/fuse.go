package vm

import (
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/vm/alloc"
)

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

// Primer is implemented by a fused op (Fuser's result) that computes only
// the first op's output, and in the same pass readies what the next op
// computes from it (a batch norm's gradient sums after a ReLU's gradient,
// which the next op finds keyed on its operands' memory and takes instead
// of computing them: the same bits). The next function then runs as
// planned. Such an op is given the next function's operands other than the
// first op's output after the first op's own, and the machine asks only
// where none of those is named by an instruction between the two.
type Primer interface {
	PrimesNext() bool
}

// Fusion is a pair of functions (indices in Program.Funcs) the machine runs
// as one pass: Head's exec computes Tail's output too, and Tail's exec only
// takes over the memory, as its in-place output, and publishes it; or, with
// Primed, Head's exec readies what Tail computes from its output (Primer),
// and Tail runs as planned.
type Fusion struct {
	Head, Tail int
	Primed     bool
}

// fusion is what the machine fuses in the program it runs: per function,
// the op to run in its place (a head), the further operands it takes (a
// primer's), or whether it was computed already (a tail).
type fusion struct {
	pairs []Fusion
	op    []WorkspaceOp
	extra [][]int
	hdrs  [][]header         // header slots of the extra operands, kept across steps
	args  [][]gorgonia.Value // the operands passed, reused
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
		tail := c.nextExec(pc)
		if tail < 0 {
			continue
		}
		op, ok := fu.FuseNext(p.Funcs[tail].Op).(WorkspaceOp)
		if !ok {
			continue
		}
		pr, primes := op.(Primer)
		primes = primes && pr.PrimesNext()
		var extra []int
		if primes {
			extra, ok = c.primable(p, pc, tail)
		} else {
			ok = c.fusable(m, pc, tail)
		}
		if !ok || !fitsWorkspace(p, in.Func, op, extra) {
			continue
		}
		if f == nil {
			n := len(p.Funcs)
			f = &fusion{op: make([]WorkspaceOp, n), extra: make([][]int, n), hdrs: make([][]header, n),
				args: make([][]gorgonia.Value, n), away: make([]bool, n)}
		}
		f.pairs = append(f.pairs, Fusion{Head: in.Func, Tail: tail, Primed: primes})
		f.op[in.Func] = op
		f.extra[in.Func] = extra
		f.hdrs[in.Func] = make([]header, len(extra))
		f.away[tail] = !primes
	}
	m.fuse = f
}

// fitsWorkspace tells whether the fused op runs in the workspace planned for
// the head.
func fitsWorkspace(p *Program, head int, op WorkspaceOp, extra []int) bool {
	f := &p.Funcs[head]
	var shapes []tensor.Shape
	for _, v := range append(f.Operands()[:len(f.Operands()):len(f.Operands())], extra...) {
		shapes = append(shapes, p.Vars[v].Shape)
	}
	return op.WorkspaceBytes(p.Vars[f.Output].Dtype, shapes) <= f.Workspace
}

// census counts, over a program, what fusable checks: per variable, the
// functions that read it and the instructions that name it, and per
// function whether a Recompute runs it.
type census struct {
	p         *Program
	readers   []int
	named     []int
	recompute []bool
}

func fusionCensus(p *Program) census {
	c := census{p: p, readers: make([]int, len(p.Vars)), named: make([]int, len(p.Vars)), recompute: make([]bool, len(p.Funcs))}
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

// nextExec is the function of the first exec after pc, with only swaps,
// waits and frees between; -1 if a recompute or the tape's end comes first.
func (c census) nextExec(pc int) int {
	for _, in := range c.p.Instrs[pc+1:] {
		switch in.Op {
		case Exec:
			return in.Func
		case Recompute:
			return -1
		}
	}
	return -1
}

// fusable tells whether the exec at pc may compute the tail's output too:
// the tail's one operand is the head's output y, it writes over y in place,
// and it is never recomputed. y is read by no other function or view, named
// by no instruction but the head's exec (never swapped, freed or
// recomputed: so the swaps, waits and frees between are of other
// variables), and handed to nobody (no output, bound value, Read or Set).
// Then nothing sees y between the two, so computing the tail's result at the
// head's exec gives every reader the same bits.
func (c census) fusable(m *Machine, pc, tail int) bool {
	p := c.p
	y := p.Funcs[p.Instrs[pc].Func].Output
	tf := &p.Funcs[tail]
	return c.readers[y] == 1 && c.named[y] == 1 && len(m.sinks[y]) == 0 && !p.Vars[y].View &&
		tf.InPlace == y && len(tf.Operands()) == 1 && tf.Operands()[0] == y && !c.recompute[tail] &&
		p.Vars[tf.Output].Bytes == p.Vars[y].Bytes
}

// primable tells whether the exec at pc may ready what the tail computes
// from its output y, and returns the tail's other operands (extra) the
// fused op then takes: neither function is recomputed, the tail reads y,
// and no instruction between the two names y or the memory of an extra
// operand, so each is resident at the head's exec (the tail reads it
// there: the verifier saw to it) with the value the tail reads.
func (c census) primable(p *Program, pc, tail int) (extra []int, ok bool) {
	head := p.Instrs[pc].Func
	y := p.Funcs[head].Output
	tf := &p.Funcs[tail]
	if c.recompute[head] || c.recompute[tail] || p.Vars[y].View {
		return nil, false
	}
	reads := false
	for k, v := range tf.Operands() {
		if v == y {
			reads = true
			continue
		}
		// A view of y has no memory before the head's exec ends.
		if tf.Inputs[k] == y || c.namedBetween(pc, tf.Inputs[k]) {
			return nil, false
		}
		extra = append(extra, v)
	}
	return extra, reads && !c.namedBetween(pc, y)
}

// namedBetween tells whether an instruction after pc and before the next
// exec names variable v.
func (c census) namedBetween(pc, v int) bool {
	for _, in := range c.p.Instrs[pc+1:] {
		if in.Op == Exec || in.Op == Recompute {
			return false
		}
		if in.Var == v {
			return true
		}
	}
	return false
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

// runFused runs head fi's fused op into out, on the head's operands ins and
// any extra operands (a Primer's).
func (m *Machine) runFused(fi int, op WorkspaceOp, out gorgonia.Value, ws *alloc.Block, ins []gorgonia.Value) error {
	args := ins
	if extra := m.fuse.extra[fi]; len(extra) > 0 {
		args = append(m.fuse.args[fi][:0], ins...)
		for k, v := range extra {
			val, err := m.value(v, &m.fuse.hdrs[fi][k])
			if err != nil {
				return err
			}
			args = append(args, val)
		}
		m.fuse.args[fi] = args
	}
	var scratch []byte
	if ws != nil {
		scratch = ws.Bytes()
	}
	return op.DoWorkspace(out, scratch, args...)
}
