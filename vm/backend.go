package vm

import (
	"fmt"
	"sync"
	"time"

	"gorgonia.org/gorgonia"

	"github.com/gorgonia-ooc/outofcore/vm/alloc"
)

// Backend is a device that runs ops itself, on memory the host cannot
// address (a GPU). A Machine on such a device keeps every value in device
// memory: leaves (the input batch, learnables, constants) are uploaded at
// the start of a run into blocks held for the machine's lifetime, functions
// run through the Runner, swaps are the device's own asynchronous copies,
// and only what the user reads (the loss, gradients, Read statements, the
// node values bound after RunAll: Var.Bind) comes back to the host.
type Backend interface {
	// Bind plans every function of p on the device, once, when the machine
	// is made: an op the device has no implementation for is an error that
	// names the op and its node, never a silent trip through host memory.
	Bind(p *Program) (Runner, error)
}

// Runner runs the functions of one bound program. Work is queued in order
// on the device's compute stream; copies run on its copy streams.
type Runner interface {
	// Run queues function fi (an index into Program.Funcs): out is the
	// device address of its result, operands those of Func.Operands in
	// order, ws its workspace (0 when it has none).
	Run(fi int, out uintptr, operands []uintptr, ws uintptr) error
	// CopyOut starts copying len(dst) bytes at device address src to dst
	// after the compute work queued so far; CopyIn starts copying src to
	// dst after it. Neither touches the memory before the waiter says so.
	CopyOut(dst []byte, src uintptr) (Waiter, error)
	CopyIn(dst uintptr, src []byte) (Waiter, error)
	// WaitFor makes compute wait (on the device, not the host) for a copy.
	WaitFor(w Waiter) error
	// EndStep waits for all queued work of the step and reports how long
	// compute stalled on copies.
	EndStep() (stall time.Duration, err error)
	Close() error
}

// Reserver is implemented by backends that hold device memory of their own
// for a bound program's life (a CUDA device's cuBLAS workspace). The planner
// plans and verifies the program for the budget less Reserve, so that what
// the backend holds is inside the budget (Program.Reserve records it).
type Reserver interface {
	// Reserve is the device bytes the backend holds while a program is bound.
	Reserve() int64
}

// BackendReserve is the reserve of d's backend (0 without a backend, or for
// one that holds nothing).
func BackendReserve(d Device) int64 {
	b, ok := BackendFor(d)
	if !ok {
		return 0
	}
	if r, ok := b.(Reserver); ok {
		return r.Reserve()
	}
	return 0
}

// WorkspaceBackend is implemented by backends whose plan for an op needs
// device scratch for one call that the op does not declare (it is no
// WorkspaceOp): a CUDA backend's tensordot transposes its operands there.
// The trace asks it for every such function and records the bytes as the
// function's Workspace, so the planner counts them inside the budget, and
// Run is given them as ws.
type WorkspaceBackend interface {
	// Workspace is the scratch one call of f needs on the backend's device,
	// given its operands and result; 0 when none.
	Workspace(f *Func, operands []*Var, out *Var) int64
}

// BackendWorkspace is the workspace d's backend wants for f (0 without a
// backend, for one that plans no scratch, or for an op that declares its
// own: WorkspaceOp).
func BackendWorkspace(d Device, f *Func, operands []*Var, out *Var) int64 {
	if _, ok := f.Op.(WorkspaceOp); ok {
		return 0
	}
	b, ok := BackendFor(d)
	if !ok {
		return 0
	}
	if w, ok := b.(WorkspaceBackend); ok {
		return w.Workspace(f, operands, out)
	}
	return 0
}

// Waiter is an asynchronous copy: Wait blocks the host until it landed.
type Waiter interface{ Wait() error }

var (
	backendsMu sync.RWMutex
	backends   []func(Device) (Backend, bool)
)

// RegisterBackend adds a way to run ops on devices: find returns the
// backend of the devices it knows. Device packages register in an init
// function (vm/cuda/dispatch for CUDA devices), so package vm imports none.
func RegisterBackend(find func(Device) (Backend, bool)) {
	if find == nil {
		panic("vm: RegisterBackend(nil)")
	}
	backendsMu.Lock()
	defer backendsMu.Unlock()
	backends = append(backends, find)
}

// BackendFor returns the registered backend that runs ops on d, if any.
// CPU and simulated devices have none: the machine runs them itself.
func BackendFor(d Device) (Backend, bool) {
	if d == nil {
		return nil, false
	}
	backendsMu.RLock()
	defer backendsMu.RUnlock()
	for _, find := range backends {
		if b, ok := find(d); ok {
			return b, true
		}
	}
	return nil, false
}

// DeviceComputer is implemented by devices whose memory the host cannot
// address: they compute only through a Backend, and a machine refuses them
// when none is registered.
type DeviceComputer interface {
	// ComputesOnDevice is true for such devices.
	ComputesOnDevice() bool
}

// bindBackend finds the device's backend and binds the program to it; a
// device that computes only on itself without one is an error.
func (m *Machine) bindBackend() error {
	b, ok := BackendFor(m.dev)
	if !ok {
		if dc, isDC := m.dev.(DeviceComputer); isDC && dc.ComputesOnDevice() {
			return fmt.Errorf("vm: device %s runs ops only through its backend, and none is linked in (import _ \"github.com/gorgonia-ooc/outofcore/vm/cuda/dispatch\")", m.dev.Name())
		}
		return nil
	}
	r, err := b.Bind(m.prog)
	if err != nil {
		return err
	}
	m.run = r
	// Leaves live on the device for the machine's lifetime, outside the
	// budget, as on a GPU.
	m.leafBlocks = make([]*alloc.Block, len(m.prog.Vars))
	for i := range m.prog.Vars {
		v := &m.prog.Vars[i]
		if !v.IsLeaf() || v.View || v.Bytes == 0 {
			continue
		}
		blk, err := m.al.Alloc(v.Bytes)
		if err != nil {
			return fmt.Errorf("vm: %s cannot hold %s (%d bytes) beside the model's other leaves: %w", m.dev.Name(), v.Name, v.Bytes, err)
		}
		m.leafBlocks[i] = blk
		m.persistent = append(m.persistent, blk)
		m.stats.PersistentBytes += v.Bytes
	}
	return nil
}

// uploadLeaves copies every leaf's host value into its device block, but
// for the staged inputs in skip (StageNext); compute waits for the copies on
// the device.
func (m *Machine) uploadLeaves(skip map[int]bool) error {
	for i, blk := range m.leafBlocks {
		if blk == nil || skip[i] {
			continue
		}
		if up, kept := m.kept[i]; kept {
			if up {
				continue // the device's copy counts
			}
			m.kept[i] = true
		}
		src, err := rawBytes(m.leaves[i])
		if err != nil {
			return fmt.Errorf("vm: leaf %s: %w", m.prog.Vars[i].Name, err)
		}
		w, err := m.run.CopyIn(blk.Addr(), src)
		if err != nil {
			return fmt.Errorf("vm: upload of %s: %w", m.prog.Vars[i].Name, err)
		}
		if err := m.run.WaitFor(w); err != nil {
			return err
		}
	}
	return nil
}

// addr is the device address of a variable's value on a backend.
func (m *Machine) addr(i int) (uintptr, error) {
	v := &m.prog.Vars[i]
	b := i
	if v.View {
		b = v.Base
	}
	if m.prog.Vars[b].IsLeaf() {
		if w, ok := m.leafIn[b]; ok {
			// A staged input: compute waits for its copy at its first read.
			delete(m.leafIn, b)
			if err := m.run.WaitFor(w); err != nil {
				return 0, err
			}
		}
		if blk := m.leafBlocks[b]; blk != nil {
			return blk.Addr(), nil
		}
		return 0, nil // an empty leaf
	}
	s := &m.vars[b]
	if s.devIn != nil {
		if err := m.run.WaitFor(s.devIn); err != nil {
			return 0, err
		}
		s.devIn = nil
	}
	if s.block == nil {
		return 0, fmt.Errorf("%s is not resident on the device", v.Name)
	}
	return s.block.Addr(), nil
}

// execBackend runs function fi through the backend, on operands at ops.
func (m *Machine) execBackend(fi int, blk, ws *alloc.Block, ops []uintptr) error {
	var wa uintptr
	if ws != nil {
		wa = ws.Addr()
	}
	m.addrs = ops[:0]
	return m.run.Run(fi, blk.Addr(), ops, wa)
}

// download copies a computed variable's value to the host: the explicit
// host synchronisation of what the user reads. It is synchronous: the
// copy is queued on the copy stream after the compute work queued so far
// (the op that made the value) and the host waits for it, so the value has
// landed before the next op can free its memory, write over it in place or
// swap it out, with no bookkeeping. The bytes are the machine's one
// download buffer, valid until the next download (publish copies them into
// the node's host tensor, reused across steps), so a download allocates
// no buffer of its own at each step.
func (m *Machine) download(i int) ([]byte, error) {
	v := &m.prog.Vars[i]
	a, err := m.addr(i)
	if err != nil {
		return nil, err
	}
	if int64(cap(m.downloaded)) < v.Bytes {
		m.downloaded = make([]byte, v.Bytes)
	}
	buf := m.downloaded[:v.Bytes]
	if v.Bytes == 0 {
		return buf, nil
	}
	w, err := m.run.CopyOut(buf, a)
	if err != nil {
		return nil, err
	}
	return buf, w.Wait()
}

// dropBackend undoes bindBackend when New fails.
func (m *Machine) dropBackend() {
	for _, b := range m.persistent {
		_ = m.al.Free(b)
	}
	m.persistent = nil
	if m.run != nil {
		_ = m.run.Close()
		m.run = nil
	}
}

// Runner returns the backend runner the machine computes through (nil on
// CPU and simulated devices), for what a backend reports beyond Stats.
func (m *Machine) Runner() Runner { return m.run }

// GradientSink takes learnables' gradients where a backend computed them,
// for an optimizer that updates the weights on the device: a gradient it
// takes is not downloaded to the learnable's Grad on the host.
type GradientSink interface {
	// TakeGradient is called when the gradient of learnable is computed, at
	// device address addr, before anything may overwrite it. It reports
	// whether it took the gradient.
	TakeGradient(learnable *gorgonia.Node, addr uintptr) (bool, error)
}

// SetGradientSink hands learnables' gradients to s on the device (nil: back
// to the host). Only a machine computing through a backend has them there.
func (m *Machine) SetGradientSink(s GradientSink) error {
	if m.run == nil && s != nil {
		return fmt.Errorf("vm: %s computes on the host: gradients are on the host already", m.dev.Name())
	}
	m.sink = s
	return nil
}

// leafIndex is the variable of a leaf node held in a device block.
func (m *Machine) leafIndex(n *gorgonia.Node) (int, error) {
	if m.run == nil {
		return 0, fmt.Errorf("vm: %s keeps no leaves on a device", m.dev.Name())
	}
	for i := range m.prog.Vars {
		if m.prog.Vars[i].Node == n && m.leafBlocks[i] != nil {
			return i, nil
		}
	}
	return 0, fmt.Errorf("vm: %s is not a leaf of the program held on %s", n.Name(), m.dev.Name())
}

// KeepOnDevice makes the device copy of the given leaves (learnables whose
// optimizer runs on the device) the one that counts: they are uploaded at
// the next run and never again, so what the device did to them stays.
// SyncToHost brings them back.
func (m *Machine) KeepOnDevice(nodes ...*gorgonia.Node) error {
	for _, n := range nodes {
		i, err := m.leafIndex(n)
		if err != nil {
			return err
		}
		if m.kept == nil {
			m.kept = map[int]bool{}
		}
		m.kept[i] = false // not uploaded yet
	}
	return nil
}

// LeafAddr is the device address of a leaf's value.
func (m *Machine) LeafAddr(n *gorgonia.Node) (uintptr, error) {
	i, err := m.leafIndex(n)
	if err != nil {
		return 0, err
	}
	return m.leafBlocks[i].Addr(), nil
}

// SyncToHost copies the device values of the given leaves into their
// nodes' host values, after the work queued so far: the explicit host
// synchronisation of weights updated on the device.
func (m *Machine) SyncToHost(nodes ...*gorgonia.Node) error {
	for _, n := range nodes {
		i, err := m.leafIndex(n)
		if err != nil {
			return err
		}
		val, err := leafValue(n)
		if err != nil {
			return err
		}
		dst, err := rawBytes(val)
		if err != nil {
			return err
		}
		if int64(len(dst)) != m.prog.Vars[i].Bytes {
			return fmt.Errorf("vm: %s holds %d bytes, its device copy %d", n.Name(), len(dst), m.prog.Vars[i].Bytes)
		}
		w, err := m.run.CopyOut(dst, m.leafBlocks[i].Addr())
		if err != nil {
			return err
		}
		if err := w.Wait(); err != nil {
			return err
		}
	}
	return nil
}
