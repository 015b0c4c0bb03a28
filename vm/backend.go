package vm

import (
	"fmt"
	"sync"
	"time"

	"github.com/gorgonia-ooc/outofcore/vm/alloc"
)

// Backend is a device that runs ops itself, on memory the host cannot
// address (a GPU). A Machine on such a device keeps every value in device
// memory: leaves (the input batch, learnables, constants) are uploaded at
// the start of a run into blocks held for the machine's lifetime, functions
// run through the Runner, swaps are the device's own asynchronous copies,
// and only what the user reads (the loss, gradients, Read statements) comes
// back to the host.
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

// uploadLeaves copies every leaf's host value into its device block; compute
// waits for the copies on the device.
func (m *Machine) uploadLeaves() error {
	for i, blk := range m.leafBlocks {
		if blk == nil {
			continue
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
// host synchronisation of what the user reads.
func (m *Machine) download(i int) ([]byte, error) {
	v := &m.prog.Vars[i]
	a, err := m.addr(i)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, v.Bytes)
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
