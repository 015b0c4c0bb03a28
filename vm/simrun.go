package vm

import (
	"fmt"
	"time"

	"gorgonia.org/gorgonia"

	"github.com/gorgonia-ooc/outofcore/vm/alloc"
)

// simClock is the virtual time of one step: when the compute stream and
// each copy engine become free, and when each variable's copies land.
type simClock struct {
	compute, h2d, d2h time.Duration
	outAt, inAt       map[int]time.Duration
	onHost            map[int]bool
}

func (c *simClock) end() time.Duration {
	return max(c.compute, c.h2d, c.d2h)
}

// stallUntil makes compute wait for time t, counting the wait as a stall.
func (m *Machine) stallUntil(t time.Duration) {
	if t > m.clock.compute {
		m.stats.StallTime += t - m.clock.compute
		m.clock.compute = t
	}
}

// placePersistent allocates, on a simulated device, what a GPU keeps
// resident for the whole run: every leaf (input batch, learnables,
// constants), and per learnable its gradient and the optimizer's momentum.
func (m *Machine) placePersistent() error {
	take := func(n int64, what string) error {
		if n == 0 {
			return nil
		}
		b, err := m.al.Alloc(n)
		if err != nil {
			return fmt.Errorf("vm: %s cannot hold %s (%d bytes) beside the model's other persistent data: %w", m.dev.Name(), what, n, err)
		}
		m.persistent = append(m.persistent, b)
		m.stats.PersistentBytes += n
		return nil
	}
	for i := range m.prog.Vars {
		v := &m.prog.Vars[i]
		if v.IsLeaf() && !v.View {
			if err := take(v.Bytes, v.Name); err != nil {
				return err
			}
		}
		if v.Role == Gradient {
			for _, l := range append([]*gorgonia.Node{v.Learnable}, v.Shared...) {
				if err := take(2*v.Bytes, "the gradient and momentum of "+l.Name()); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// simStep runs one instruction against the virtual clock. Memory goes
// through the same allocator calls as on a real device, so out-of-memory
// and fragmentation are the allocator's own.
func (m *Machine) simStep(in Instr) error {
	c := &m.clock
	if c.outAt == nil {
		c.outAt, c.inAt, c.onHost = map[int]time.Duration{}, map[int]time.Duration{}, map[int]bool{}
	}
	s := &m.vars[in.Var]
	v := &m.prog.Vars[in.Var]
	switch in.Op {
	case Exec, Recompute:
		f := &m.prog.Funcs[in.Func]
		for _, u := range f.Inputs {
			if t, ok := c.inAt[u]; ok {
				m.stallUntil(t)
				delete(c.inAt, u)
			}
			if !m.prog.Vars[u].IsLeaf() && m.vars[u].block == nil {
				return fmt.Errorf("%s is not resident on the device", m.prog.Vars[u].Name)
			}
		}
		if s.block != nil {
			return fmt.Errorf("%s is already resident", v.Name)
		}
		blk, err := m.outputBlock(f, in.Op == Recompute)
		if err != nil {
			return err
		}
		var ws *alloc.Block
		if f.Workspace > 0 {
			if ws, err = m.allocate(f.Workspace, label{"workspace of ", v.Name}); err != nil {
				_ = m.release(blk)
				return err
			}
		}
		if err := m.holdHost(f.HostBytes, v.Name); err != nil {
			_ = m.release(blk)
			if ws != nil {
				_ = m.release(ws)
			}
			return err
		}
		m.live -= f.HostBytes
		d := m.sim.OpTime(m.prog, f)
		c.compute += d
		m.stats.ComputeTime += d
		if in.Op == Recompute {
			m.stats.Recomputes++
			m.stats.RecomputeTime += d
		}
		if ws != nil {
			if err := m.release(ws); err != nil {
				return err
			}
		}
		s.block = blk
	case SwapOut:
		if s.block == nil {
			return fmt.Errorf("swap-out of %s, which is not resident", v.Name)
		}
		if c.onHost[in.Var] {
			return nil
		}
		start := max(c.d2h, c.compute)
		c.d2h = m.sim.transfer(dirD2H, start, v.Bytes)
		c.outAt[in.Var] = c.d2h
		c.onHost[in.Var] = true
		m.stats.SwapOuts++
		m.stats.SwapOutBytes += v.Bytes
	case SwapIn:
		if s.block != nil {
			return fmt.Errorf("swap-in of %s, which is already resident", v.Name)
		}
		if !c.onHost[in.Var] {
			return fmt.Errorf("swap-in of %s, which has no host copy", v.Name)
		}
		blk, err := m.allocate(v.Bytes, named(v.Name))
		if err != nil {
			return err
		}
		s.block = blk
		start := max(c.h2d, c.compute, c.outAt[in.Var])
		c.h2d = m.sim.transfer(dirH2D, start, v.Bytes)
		c.inAt[in.Var] = c.h2d
		m.stats.SwapIns++
		m.stats.SwapInBytes += v.Bytes
	case Wait:
		if t, ok := c.inAt[in.Var]; ok {
			m.stallUntil(t)
			delete(c.inAt, in.Var)
		}
	case Free:
		if s.block == nil {
			return fmt.Errorf("free of %s, which is not resident", v.Name)
		}
		// Memory under a copy is busy until the copy lands.
		if t, ok := c.outAt[in.Var]; ok {
			m.stallUntil(t)
			delete(c.outAt, in.Var)
		}
		if t, ok := c.inAt[in.Var]; ok {
			m.stallUntil(t)
			delete(c.inAt, in.Var)
		}
		err := m.release(s.block)
		s.block = nil
		return err
	default:
		return fmt.Errorf("unknown instruction %v", in.Op)
	}
	return nil
}

// simUpdate adds the optimizer's update of every learnable to the step:
// the paper's step is forward, backward and update.
func (m *Machine) simUpdate() {
	for i := range m.prog.Vars {
		if v := &m.prog.Vars[i]; v.Role == Gradient {
			d := m.sim.UpdateTime(v.Bytes)
			m.clock.compute += d
			m.stats.ComputeTime += d
		}
	}
}
