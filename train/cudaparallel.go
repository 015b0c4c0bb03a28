package train

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm"
	"github.com/gorgonia-ooc/outofcore/vm/cuda"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/dispatch"
)

// openError is a device that did not open: explaining the budget would
// mislead.
type openError struct{ error }

func (e *openError) Unwrap() error { return e.error }

// openParallel opens a data-parallel run's devices: CPU devices of the
// memory plan's capacity, or CUDA devices (each its whole memory; the
// budget bounds what the machine allocates), each with a backend.
func openParallel(cfg *Config, mem memoryPlan) ([]vm.Device, error) {
	spec := cfg.parallelSpec()
	if !cfg.parallelOnCUDA() {
		devs, err := vm.NewDevices(spec, mem.device)
		if err != nil {
			return nil, &openError{configErrorf("-device %s: %v", spec, err)}
		}
		return devs, nil
	}
	list, err := cudaList(spec)
	if err != nil {
		return nil, &openError{configErrorf("-device %s: %v", spec, err)}
	}
	devs, err := vm.NewDevices(list, 0)
	if err != nil {
		return nil, &openError{fmt.Errorf("-device %s: %w", spec, err)}
	}
	for _, d := range devs {
		if _, ok := vm.BackendFor(d); !ok {
			for _, d := range devs {
				_ = d.Close()
			}
			return nil, &openError{fmt.Errorf("-device %s: %s opened, but no backend runs ops on it", spec, d.Name())}
		}
	}
	return devs, nil
}

// joinWorld makes a rank's device its rank of the run's NCCL communicator
// (Config.WorldSize), waiting for every rank to join.
func joinWorld(cfg *Config, d vm.Device) (*cuda.NCCL, error) {
	cd, ok := d.(*cuda.Device)
	switch {
	case !ok:
		return nil, configErrorf("-world-size %d: %s is not a CUDA device; the ranks average with NCCL", cfg.WorldSize, d.Name())
	case cfg.NCCLID == cuda.UniqueID{}:
		return nil, configErrorf("-world-size %d: rank %d has no NCCL id: rank 0 makes it (cuda.NewUniqueID) and every rank needs it (ooc train -nccl-id FILE; Config.NCCLID)",
			cfg.WorldSize, cfg.Rank)
	}
	c, err := cuda.JoinNCCL(cd, cfg.Rank, cfg.WorldSize, cfg.NCCLID)
	if err != nil {
		return nil, fmt.Errorf("rank %d of %d: joining the other ranks (NCCL): %w", cfg.Rank, cfg.WorldSize, err)
	}
	return c, nil
}

// ErrOtherRankStopped is an InterruptedError's Err on a rank of a run across
// processes whose own context went on, when another rank's was cancelled.
var ErrOtherRankStopped = errors.New("another rank of the run was interrupted")

// stopError is stopNow's answer to stop: the rank's context error, or
// ErrOtherRankStopped.
type stopError struct{ err error }

func (e *stopError) Error() string { return e.err.Error() }

// stopNow says whether the run stops before its next step (a *stopError),
// or why it cannot go on: its context is done or, across processes, any
// rank's is. The ranks agree (an all-reduce of one float per step), so that
// all stop after the same step, which rank 0's checkpoint holds, instead of
// the others failing on the one that left.
func (t *Trainer) stopNow(ctx context.Context) error {
	err := ctx.Err()
	if t.par == nil || t.par.nccl == nil {
		if err != nil {
			return &stopError{err}
		}
		return nil
	}
	var v float32
	if err != nil {
		v = 1
	}
	b := binary.NativeEndian.AppendUint32(nil, math.Float32bits(v))
	if rerr := t.par.nccl.AllReduceMean(tensor.Float32, [][]byte{b}); rerr != nil {
		return fmt.Errorf("step %d: agreeing with the other ranks whether to stop: %w", t.step+1, rerr)
	}
	switch {
	case err != nil:
		return &stopError{err}
	case math.Float32frombits(binary.NativeEndian.Uint32(b)) > 0:
		return &stopError{ErrOtherRankStopped}
	}
	return nil
}

// replicaUpdates is the update of a data-parallel run on CUDA devices:
// every replica keeps its weights and optimizer state on its own device
// (a dispatch.Solver each, started from the same state), and a step
// averages the replicas' gradient buffers in place, with NCCL on the
// devices when it can (cuda.NCCL.AllReduceMeanDevice), otherwise through
// the host (each buffer down, the Parallel's AllReducer, the mean up),
// before every replica updates. Same weights, same mean gradient and the
// same kernels keep the replicas' weights equal bit for bit, so replica
// 0's are the run's.
type replicaUpdates struct {
	solvers []*dispatch.Solver // replica order
	runners []vm.Runner        // the host path's copies
	nccl    *cuda.NCCL         // nil: through the host
	host    ooc.AllReducer
	par     *ooc.Parallel // where the all-reduce's time is counted
	dts     []tensor.Dtype
	bufs    [][][]byte // the host path's buffers: [learnable][replica]
	local   G.Nodes    // replica 0's learnables
}

// newParallelUpdate moves the update of a data-parallel run on CUDA
// devices to them, starting from the state gs holds (a resumed
// checkpoint's); ls are the script's learnables.
func newParallelUpdate(pr *parallelRun, gs G.Solver, ls G.Nodes) (_ *deviceUpdate, err error) {
	st, err := exportSolver(gs, ls)
	if err != nil {
		return nil, err
	}
	ms := pr.p.Machines()
	ru := &replicaUpdates{host: pr.p.AllReducer(), par: pr.p, local: pr.learnables[0]}
	defer func() {
		if err != nil {
			_ = ru.close()
		}
	}()
	for i, m := range ms {
		ds, err := dispatch.NewSolver(m, gs, pr.learnables[i]...)
		if err != nil {
			return nil, fmt.Errorf("replica %d of %d (%s): the update on the device (-host-update runs it on the host): %w", i, len(ms), m.Device().Name(), err)
		}
		ru.solvers = append(ru.solvers, ds)
		ru.runners = append(ru.runners, m.Runner())
		if st.Slots != nil {
			if err := ds.SetState(st.Iter, st.Slots); err != nil {
				return nil, fmt.Errorf("replica %d of %d: %w", i, len(ms), err)
			}
		}
	}
	if c, ok := ru.host.(*cuda.NCCL); ok && c.AveragesOnDevice() {
		ru.nccl = c
	}
	for _, l := range ls {
		ru.dts = append(ru.dts, l.Dtype())
		if ru.nccl == nil {
			b := make([][]byte, len(ms))
			for i := range b {
				b[i] = make([]byte, l.Shape().TotalSize()*int(l.Dtype().Size()))
			}
			ru.bufs = append(ru.bufs, b)
		}
	}
	pr.p.GradientsOnDevices()
	return &deviceUpdate{ds: ru.solvers[0], gs: gs, ls: ls, rep: ru}, nil
}

// step averages the gradients and runs every replica's update.
func (ru *replicaUpdates) step() error {
	t0 := time.Now()
	if err := ru.allReduce(); err != nil {
		return err
	}
	ru.par.CountAllReduce(time.Since(t0))
	for i, ds := range ru.solvers {
		if err := ds.Step(); err != nil {
			return fmt.Errorf("replica %d: %w", i, err)
		}
	}
	return nil
}

// allReduce leaves the replicas' mean gradient in every replica's buffers.
func (ru *replicaUpdates) allReduce() error {
	addrs := make([]uintptr, len(ru.solvers))
	for k, dt := range ru.dts {
		var n int64
		for i, ds := range ru.solvers {
			addrs[i], n = ds.Gradient(k)
		}
		if ru.nccl != nil {
			if err := ru.nccl.AllReduceMeanDevice(dt, addrs, int(n)); err != nil {
				return fmt.Errorf("all-reduce (nccl) of gradient %d: %w", k, err)
			}
			continue
		}
		bufs := ru.bufs[k]
		for i, r := range ru.runners {
			if err := wait(r.CopyOut(bufs[i], addrs[i])); err != nil {
				return fmt.Errorf("replica %d: gradient %d to the host: %w", i, k, err)
			}
		}
		if err := ru.host.AllReduceMean(dt, bufs); err != nil {
			return fmt.Errorf("all-reduce (%s) of gradient %d: %w", ru.host.Name(), k, err)
		}
		for i, r := range ru.runners {
			if err := wait(r.CopyIn(addrs[i], bufs[i])); err != nil {
				return fmt.Errorf("replica %d: gradient %d to the device: %w", i, k, err)
			}
		}
	}
	return nil
}

func wait(w vm.Waiter, err error) error {
	if err != nil {
		return err
	}
	return w.Wait()
}

// toScript copies replica 0's weights, synchronised to its host values,
// into the script's learnables (nil: one device, where they are the
// script's).
func (ru *replicaUpdates) toScript(script G.Nodes) error {
	if ru == nil {
		return nil
	}
	for k, l := range script {
		dst, ok1 := l.Value().(*tensor.Dense)
		src, ok2 := ru.local[k].Value().(*tensor.Dense)
		if !ok1 || !ok2 {
			return fmt.Errorf("learnable %s holds a %T", l.Name(), l.Value())
		}
		if err := tensor.Copy(dst, src); err != nil {
			return fmt.Errorf("learnable %s: %w", l.Name(), err)
		}
	}
	return nil
}

func (ru *replicaUpdates) close() error {
	var errs []error
	for _, ds := range ru.solvers {
		errs = append(errs, ds.Close())
	}
	return errors.Join(errs...)
}

// newUpdate is the run's device-side update: replica by replica on the
// CUDA devices of a data-parallel run, or on the one CUDA device.
func (t *Trainer) newUpdate() (*deviceUpdate, error) {
	if t.par != nil {
		return newParallelUpdate(t.par, t.solver, t.model.Learnables)
	}
	return newDeviceUpdate(t.machine, t.solver, t.model.Learnables)
}

// evalDevice is where a run on CUDA evaluates: its device, or replica 0's
// (nil: a CPU device of its own).
func (t *Trainer) evalDevice() vm.Device {
	switch {
	case t.par != nil && t.cfg.parallelOnCUDA():
		return t.par.devs[0]
	case t.cfg.onCUDA():
		return t.dev
	}
	return nil
}

// parallelLine says how a data-parallel run computes, for the summary.
func (t *Trainer) parallelLine() string {
	if w := t.par.world; w > 1 {
		return fmt.Sprintf("rank %d of %d processes (-world-size %d), one CUDA device each (-device %s here): batch %d split %d per rank, "+
			"this rank's share its rows %d to %d; gradients and loss averaged across the ranks by NCCL %s before each update on every rank's device; "+
			"rank 0 evaluates and writes the checkpoint",
			t.par.rank, w, w, t.cfg.Device, t.cfg.Batch, t.cfg.Batch/w, t.par.rank*t.cfg.Batch/w, (t.par.rank+1)*t.cfg.Batch/w-1, t.par.nccl.Version())
	}
	n := len(t.par.devs)
	kind := "CPU"
	if t.cfg.parallelOnCUDA() {
		kind = "CUDA"
	}
	s := fmt.Sprintf("data parallel on %d %s devices (-device %s): batch %d split %d per device, gradients averaged (%s all-reduce) before each update",
		n, kind, t.cfg.deviceName(), t.cfg.Batch, t.cfg.Batch/n, t.par.p.AllReducer().Name())
	c, nccl := t.par.p.AllReducer().(*cuda.NCCL)
	switch {
	case kind == "CPU":
	case t.cfg.HostUpdate:
		s += ", on the host (-host-update: gorgonia's solver; gradients down and weights up every step)"
	case nccl && c.AveragesOnDevice():
		s += ", on each device (weights and optimizer state on every device; gradients averaged there by NCCL)"
	default:
		s += ", on each device (weights and optimizer state on every device; gradients averaged through the host)"
	}
	return s
}
