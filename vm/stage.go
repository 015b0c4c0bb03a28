package vm

import (
	"errors"
	"fmt"
	"slices"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Stager is implemented by runners that can copy a value in for the next
// step while the current one runs (vm/cuda/dispatch's). Machine.StageNext
// uses it for input batches.
type Stager interface {
	// HostBuffer returns n bytes of host memory the device copies from
	// asynchronously (pinned, page-locked), and the function that gives
	// them back.
	HostBuffer(n int64) (buf []byte, put func() error, err error)
	// CopyInNext is CopyIn for the next step: it starts after the compute
	// work queued so far, the step's EndStep does not wait for it, and its
	// Waiter stays good for WaitFor through the next step.
	CopyInNext(dst uintptr, src []byte) (Waiter, error)
}

// staging is what StageNext keeps for one input: the value staged for a
// coming run and the one whose copy the last run queued, each in one of two
// host buffers, so that staging the batch after next never writes the
// buffer a copy in flight reads.
type staging struct {
	node *gorgonia.Node
	// ahead's copy was queued in the last run, from bufs[aheadBuf].
	ahead    *tensor.Dense
	aheadW   Waiter
	aheadBuf int
	// next is staged in bufs[buf]; its copy is not queued yet.
	next *tensor.Dense
	buf  int
	// taken is the staged value the current run took, from bufs[takenBuf]:
	// staged again if the run fails.
	taken    *tensor.Dense
	takenBuf int
	bufs     [2][]byte
	puts     [2]func() error
	// busy[k] is a copy that may still read bufs[k], free after the run
	// numbered freeAt[k] ends.
	busy   [2]Waiter
	freeAt [2]int
}

// StageNext hands the machine the value an input node will hold in a coming
// run (the next batch), so that on a device with copy streams its upload
// overlaps the run before that one. The script still binds it with
// gorgonia.Let before that run, as always; StageNext only moves it early.
//
// On a CUDA device, StageNext copies v into pinned host memory (two buffers
// per input, alternating). In the next RunAll, right after the last
// instruction that reads the input (in a training step usually the first
// convolution's weight gradient), the copy into the input's device memory is
// queued on the host-to-device stream behind an event on the compute
// stream, so it runs beside the rest of the backward and whatever the host
// queues after the run (an optimizer update on the device). In the run whose
// input is v, compute waits on the copy's event before the first
// instruction that reads the input, and nothing is uploaded at its start.
// Ordering is by events only; the host does not wait.
//
// A run whose input is not v (the script let another value) uploads its
// value at its start as without staging, and keeps v staged for a later
// run. A run whose input is v but whose copy was not queued yet (StageNext
// called after the previous run) uploads it at its start from the pinned
// buffer. Staging again replaces the staged value. On devices without copy
// streams (the CPU device, simulated devices) StageNext only checks its
// arguments: leaves are read where the script keeps them.
//
// v must be a dense tensor of the node's shape and type, and must not
// change after StageNext (the copy reads it then, and the machine recognises
// the run it is for by identity). The node must be an input of the program:
// not a learnable, constant, view, leaf kept on the device (KeepOnDevice) or
// the target of a Set statement.
func (m *Machine) StageNext(n *gorgonia.Node, v gorgonia.Value) error {
	if m.closed {
		return errors.New("vm: StageNext on a closed machine")
	}
	i, err := m.inputIndex(n)
	if err != nil {
		return err
	}
	pv := &m.prog.Vars[i]
	d, ok := v.(*tensor.Dense)
	if !ok || d == nil {
		return fmt.Errorf("vm: StageNext(%s): a %T value; an input batch is a *tensor.Dense", pv.Name, v)
	}
	if d.IsMaterializable() {
		return fmt.Errorf("vm: StageNext(%s): a view of a tensor; stage a tensor with its own data (Materialize it)", pv.Name)
	}
	if !d.Shape().Eq(pv.Shape) || d.Dtype() != pv.Dtype {
		return fmt.Errorf("vm: StageNext(%s): a %v %v value; the graph was compiled for %v %v", pv.Name, d.Shape(), d.Dtype(), pv.Shape, pv.Dtype)
	}
	if int64(len(d.Raw)) != pv.Bytes {
		return fmt.Errorf("vm: StageNext(%s): %d bytes of data; the graph's %v %v value holds %d", pv.Name, len(d.Raw), pv.Shape, pv.Dtype, pv.Bytes)
	}
	st, ok := m.run.(Stager)
	if !ok || m.leafBlocks[i] == nil {
		return nil // the leaf is read in place: nothing to move
	}
	s := m.staged[i]
	if s == nil {
		if m.staged == nil {
			m.staged = map[int]*staging{}
		}
		s = &staging{node: n}
		m.staged[i] = s
	}
	if d == s.ahead {
		s.next = nil // its copy is on the way already
		return nil
	}
	k, err := s.freeBuffer(st, pv.Bytes)
	if err != nil {
		return fmt.Errorf("vm: StageNext(%s): %w", pv.Name, err)
	}
	copy(s.bufs[k], d.Raw)
	s.next, s.buf = d, k
	return nil
}

// freeBuffer returns a buffer no copy in flight reads and the queued copy
// does not come from (the staged value's own when there is one), and
// allocates buffers as needed.
func (s *staging) freeBuffer(st Stager, n int64) (int, error) {
	if s.next != nil {
		if s.busy[s.buf] != nil {
			// Only after a failed run: its copy may still read the buffer.
			_ = s.busy[s.buf].Wait() // a failed copy shows at the step's end
			s.busy[s.buf] = nil
		}
		return s.buf, nil
	}
	k := -1
	for j := range s.bufs {
		if s.busy[j] == nil && (s.ahead == nil || j != s.aheadBuf) {
			k = j
			break
		}
	}
	if k < 0 {
		// Only after a failed run: wait for the copy that is not ahead's.
		k = 0
		if s.ahead != nil && s.aheadBuf == 0 {
			k = 1
		}
		_ = s.busy[k].Wait() // a failed copy shows at the step's end
		s.busy[k] = nil
	}
	if s.bufs[k] == nil {
		b, put, err := st.HostBuffer(n)
		if err != nil {
			return 0, err
		}
		s.bufs[k], s.puts[k] = b[:n], put
	}
	return k, nil
}

// inputIndex is the variable of an input node, or an error saying why the
// node is not one.
func (m *Machine) inputIndex(n *gorgonia.Node) (int, error) {
	if n == nil {
		return 0, errors.New("vm: StageNext of a nil node")
	}
	p := m.prog
	at := -1
	for i := range p.Vars {
		v := &p.Vars[i]
		if v.Node == n && !v.View {
			at = i
		}
		if v.Role == Gradient && (v.Learnable == n || slices.Contains(v.Shared, n)) {
			return 0, fmt.Errorf("vm: StageNext(%s): a learnable, not an input", n.Name())
		}
	}
	switch {
	case at < 0:
		return 0, fmt.Errorf("vm: StageNext(%s): the node is not a variable of the program", n.Name())
	case !p.Vars[at].IsLeaf():
		return 0, fmt.Errorf("vm: StageNext(%s): the node is computed by the graph (op %v), not an input", n.Name(), n.Op())
	case n.Op() != nil:
		return 0, fmt.Errorf("vm: StageNext(%s): a constant, not an input", n.Name())
	}
	if _, kept := m.kept[at]; kept {
		return 0, fmt.Errorf("vm: StageNext(%s): the device's copy is kept (KeepOnDevice), so it is not uploaded", n.Name())
	}
	for _, st := range p.Sets {
		if st.To == at {
			return 0, fmt.Errorf("vm: StageNext(%s): a Set statement assigns it during the run", n.Name())
		}
	}
	return at, nil
}

// lastReads gives, per leaf variable, the instruction after which nothing
// of the current program reads it on the device (-1: none reads it).
func (m *Machine) lastReads() []int {
	if m.lastReadOf == m.prog {
		return m.lastRead
	}
	p := m.prog
	last := make([]int, len(p.Vars))
	for i := range last {
		last[i] = -1
	}
	base := func(vi int) int {
		if p.Vars[vi].View {
			return p.Vars[vi].Base
		}
		return vi
	}
	for pc, in := range p.Instrs {
		if in.Op != Exec && in.Op != Recompute {
			continue
		}
		f := &p.Funcs[in.Func]
		for _, vi := range append(f.Inputs[:len(f.Inputs):len(f.Inputs)], f.Operands()...) {
			last[base(vi)] = pc
		}
	}
	m.lastRead, m.lastReadOf = last, p
	return last
}

// startStaged takes, at the start of a run, the staged inputs the script
// let: compute waits for the copy queued in the last run at the input's
// first read (or the copy is queued now, from the staged buffer), and the
// input is not uploaded again. It returns the leaves it took care of.
func (m *Machine) startStaged() (map[int]bool, error) {
	if len(m.staged) == 0 {
		return nil, nil
	}
	done := map[int]bool{}
	for i, s := range m.staged {
		cur, _ := s.node.Value().(*tensor.Dense)
		var w Waiter
		s.taken = nil
		switch {
		case cur == nil:
		case cur == s.ahead:
			w = s.aheadW
			s.taken, s.takenBuf = s.ahead, s.aheadBuf
			m.stats.StagedAheadBytes += m.prog.Vars[i].Bytes
		case cur == s.next:
			s.taken, s.takenBuf = s.next, s.buf
			var err error
			if w, err = m.run.CopyIn(m.leafBlocks[i].Addr(), s.bufs[s.buf]); err != nil {
				return nil, fmt.Errorf("vm: upload of %s: %w", m.prog.Vars[i].Name, err)
			}
			s.busy[s.buf], s.freeAt[s.buf] = w, m.runNo
			s.next = nil
		}
		if s.ahead != nil && cur != s.ahead && s.next == nil {
			// The script let another value: the copy queued for this one
			// is stale (the upload comes after it on the stream), and it
			// waits in its buffer for a later run.
			s.next, s.buf = s.ahead, s.aheadBuf
		}
		s.ahead, s.aheadW = nil, nil
		if w == nil {
			continue
		}
		m.stats.StagedInputs++
		if m.leafIn == nil {
			m.leafIn = map[int]Waiter{}
		}
		m.leafIn[i] = w
		done[i] = true
	}
	return done, nil
}

// sendStaged queues, right after instruction pc, the copies of staged
// inputs whose last read in this run that was.
func (m *Machine) sendStaged(pc int) error {
	if len(m.staged) == 0 {
		return nil
	}
	last := m.lastReads()
	for i, s := range m.staged {
		if s.next == nil || last[i] != pc {
			continue
		}
		w, err := m.run.(Stager).CopyInNext(m.leafBlocks[i].Addr(), s.bufs[s.buf])
		if err != nil {
			return fmt.Errorf("vm: staging %s for the next run: %w", m.prog.Vars[i].Name, err)
		}
		s.ahead, s.aheadW, s.aheadBuf = s.next, w, s.buf
		s.busy[s.buf], s.freeAt[s.buf] = w, m.runNo+1
		s.next = nil
	}
	return nil
}

// endStaged frees, after a run's end, the buffers no copy reads any more.
func (m *Machine) endStaged() {
	for _, s := range m.staged {
		s.taken = nil
		for k := range s.busy {
			if s.busy[k] != nil && s.freeAt[k] <= m.runNo {
				s.busy[k] = nil
			}
		}
	}
}

// failStaged forgets, after a failed run, which copies the device has. The
// batch the run took (its retry's, most likely), or else the one queued for
// the run after, stays staged, to be uploaded from its buffer at the start
// of its run; a value staged since wins.
func (m *Machine) failStaged() {
	clear(m.leafIn)
	for _, s := range m.staged {
		switch {
		case s.next != nil:
		case s.taken != nil:
			s.next, s.buf = s.taken, s.takenBuf
		case s.ahead != nil:
			s.next, s.buf = s.ahead, s.aheadBuf
		}
		s.ahead, s.aheadW, s.taken = nil, nil, nil
	}
}

// closeStaged waits for copies still reading the buffers and gives the
// buffers back.
func (m *Machine) closeStaged() error {
	var errs []error
	for _, s := range m.staged {
		for k := range s.bufs {
			if s.busy[k] != nil {
				_ = s.busy[k].Wait() // its error was the step's
			}
			if s.puts[k] != nil {
				errs = append(errs, s.puts[k]())
			}
		}
	}
	m.staged = nil
	return errors.Join(errs...)
}
