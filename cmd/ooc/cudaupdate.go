package main

import (
	"fmt"
	"os"

	G "gorgonia.org/gorgonia"

	"github.com/gorgonia-ooc/outofcore/vm"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/dispatch"
)

// deviceUpdate is the optimizer of a run on a CUDA device: by default the
// update runs on the device (dispatch.Solver: weights and optimizer state
// stay there, nothing but the loss crosses the link per step) and the host
// copies are brought up to date only for evaluation and checkpoints;
// -host-update runs gorgonia's solver on the host instead (gradients down,
// weights up, every step). A nil *deviceUpdate is the host solver.
type deviceUpdate struct {
	ds *dispatch.Solver
	gs G.Solver
	ls G.Nodes
}

// newDeviceUpdate moves the update to the device when the machine computes
// on a CUDA device and -host-update is off, starting from the state the
// gorgonia solver holds (a resumed checkpoint's).
func newDeviceUpdate(hostUpdate bool, machine *vm.Machine, gs G.Solver, ls G.Nodes) (*deviceUpdate, error) {
	if hostUpdate {
		return nil, nil
	}
	if _, ok := machine.Runner().(*dispatch.Runner); !ok {
		return nil, nil
	}
	ds, err := dispatch.NewSolver(machine, gs, ls...)
	if err != nil {
		return nil, fmt.Errorf("the update on the device (-host-update runs it on the host): %w", err)
	}
	u := &deviceUpdate{ds: ds, gs: gs, ls: ls}
	st, err := exportSolver(gs)
	if err == nil && st.Slots != nil {
		err = ds.SetState(st.Iter, st.Slots)
	}
	if err != nil {
		_ = ds.Close()
		return nil, err
	}
	return u, nil
}

// step runs one optimizer step.
func (u *deviceUpdate) step(gs G.Solver, ls G.Nodes) error {
	if u == nil {
		return gs.Step(G.NodesToValueGrads(ls))
	}
	return u.ds.Step()
}

// weightsToHost copies the device's weights into the learnables (before an
// evaluation reads them).
func (u *deviceUpdate) weightsToHost() error {
	if u == nil {
		return nil
	}
	return u.ds.SyncToHost()
}

// toHost brings weights and optimizer state to the host (before a checkpoint).
func (u *deviceUpdate) toHost() error {
	if u == nil {
		return nil
	}
	if err := u.ds.SyncToHost(); err != nil {
		return err
	}
	iter, slots, err := u.ds.State()
	if err != nil {
		return err
	}
	if len(slots) > 0 && len(slots[0]) == 0 {
		return nil // sgd: no state
	}
	return importSolver(u.gs, solverState{Iter: iter, Slots: slots}, u.ls)
}

func (u *deviceUpdate) close() {
	if u != nil {
		_ = u.ds.Close()
	}
}

// writeLaunchTable writes the kernel launch table of a machine on a CUDA
// device (-launch-table).
func writeLaunchTable(path string, machine *vm.Machine) error {
	ls, ok := dispatch.LaunchesOf(machine)
	if !ok {
		return fmt.Errorf("-launch-table: the run was not on a CUDA device (-device cuda)")
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := dispatch.WriteLaunchTable(f, ls); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// openRunDevice opens -device for the machines of train and eval when it is
// not the CPU (whose device Compile makes for each machine); closeRunDevice
// closes it after them.
func (m *memoryOptions) openRunDevice() error {
	if m.Device == "cpu" || m.Device == "" {
		return nil
	}
	d, err := openDevice(m.Device, 0)
	if err != nil {
		return err
	}
	m.dev = d
	return nil
}

func (m *memoryOptions) closeRunDevice() {
	if m.dev != nil {
		_ = m.dev.Close()
		m.dev = nil
	}
}
