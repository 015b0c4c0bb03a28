package train

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/models"
	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm"
	"github.com/gorgonia-ooc/outofcore/vm/cuda"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/dispatch"
)

// isCUDA reports whether a device name is a CUDA device's.
func isCUDA(name string) bool { return name == "cuda" || strings.HasPrefix(name, "cuda:") }

// onCUDA reports whether the run computes on a CUDA device.
func (c *Config) onCUDA() bool { return c.parallelSpec() == "" && isCUDA(c.Device) }

// parallelSpec is the device list (vm.NewDevices) of a data-parallel run:
// Devices copies of Device, or a Device that is a list (cpu,cpu) or a count
// (cpu*2), or a rank's one device in a run across processes (WorldSize).
// Empty: one device.
func (c *Config) parallelSpec() string {
	switch {
	case c.WorldSize > 1:
		return c.Device
	case c.Devices > 1:
		return fmt.Sprintf("%s*%d", c.Device, c.Devices)
	case strings.ContainsAny(c.Device, ",*"):
		return c.Device
	}
	return ""
}

// deviceCount is how many devices the run trains on (Check has vetted the spec).
func (c *Config) deviceCount() int {
	spec := c.parallelSpec()
	if spec == "" {
		return 1
	}
	n := 0
	for _, part := range strings.Split(spec, ",") {
		k := 1
		if _, count, ok := strings.Cut(part, "*"); ok {
			k, _ = strconv.Atoi(strings.TrimSpace(count))
		}
		n += k
	}
	return n
}

// replicas is how many replicas share each batch: the devices of every
// rank.
func (c *Config) replicas() int { return c.deviceCount() * max(c.WorldSize, 1) }

// deviceCountOrOne is a saved run's replica count (its devices, of every
// rank): 1 for a run saved without its configuration (nil) or with a device
// list it cannot parse.
func (c *Config) deviceCountOrOne() int {
	if c == nil {
		return 1
	}
	return max(c.replicas(), 1)
}

// parallelOnCUDA reports whether a data-parallel run's devices are CUDA
// devices (Check refuses a list that mixes them with CPU devices).
func (c *Config) parallelOnCUDA() bool {
	spec := c.parallelSpec()
	if spec == "" {
		return false
	}
	name, _, _ := strings.Cut(strings.TrimSpace(strings.Split(spec, ",")[0]), "*")
	return isCUDA(name)
}

// usesCUDA reports whether the steps compute on one or several CUDA devices.
func (c *Config) usesCUDA() bool { return c.onCUDA() || c.parallelOnCUDA() }

// cudaList spells a data-parallel list of CUDA devices out one device each:
// cuda is cuda:0 and cuda*N is cuda:0 to cuda:N-1, as each replica needs a
// device of its own.
func cudaList(spec string) (string, error) {
	var out []string
	seen := map[string]bool{}
	for _, part := range strings.Split(spec, ",") {
		name, count, counted := strings.Cut(strings.TrimSpace(part), "*")
		var names []string
		switch {
		case counted && name != "cuda":
			return "", fmt.Errorf("%q: a count goes with cuda (cuda*2 is cuda:0,cuda:1), not with one device", part)
		case counted:
			k, err := strconv.Atoi(strings.TrimSpace(count))
			if err != nil || k < 1 {
				return "", fmt.Errorf("%q: want cuda*N with N a positive count", part)
			}
			for i := range k {
				names = append(names, fmt.Sprintf("cuda:%d", i))
			}
		case name == "cuda":
			names = []string{"cuda:0"}
		default:
			if i, err := strconv.Atoi(strings.TrimPrefix(name, "cuda:")); err != nil || i < 0 {
				return "", fmt.Errorf("%q: want cuda:N with N a device index", part)
			}
			names = []string{name}
		}
		for _, n := range names {
			if seen[n] {
				return "", fmt.Errorf("%s is listed twice: each replica needs a CUDA device of its own", n)
			}
			seen[n] = true
			out = append(out, n)
		}
	}
	return strings.Join(out, ","), nil
}

// checkDevice checks Device, Devices and the options that need a CUDA device.
func (c *Config) checkDevice() error {
	spec := c.parallelSpec()
	if c.WorldSize > 1 {
		if err := c.checkWorld(); err != nil {
			return err
		}
	}
	if spec == "" {
		switch {
		case strings.HasPrefix(c.Device, "sim:"):
			return configErrorf("-device %s: training runs real steps: use cpu or cuda (sweep, plan and compare take sim:PROFILE)", c.Device)
		case c.Device != "cpu" && !isCUDA(c.Device):
			return configErrorf("-device %s: unknown device (want cpu, cuda or cuda:N; or several devices: cpu,cpu, cpu*N, cuda:0,cuda:1 or cuda*N)", c.Device)
		}
	} else {
		var cpus, cudas int
		for _, part := range strings.Split(spec, ",") {
			name, count, counted := strings.Cut(strings.TrimSpace(part), "*")
			switch {
			case strings.HasPrefix(name, "sim:"):
				return configErrorf("-device %s: training runs real steps; ooc multigpu simulates data-parallel steps on sim:PROFILE*N", spec)
			case name == "cpu":
				cpus++
			case isCUDA(name):
				cudas++
			default:
				return configErrorf("-device %s: data-parallel training runs on CPU devices (cpu,cpu or cpu*N) or CUDA devices (cuda:0,cuda:1 or cuda*N), not %q", spec, name)
			}
			if k, err := strconv.Atoi(strings.TrimSpace(count)); name == "cpu" && counted && (err != nil || k < 1) {
				return configErrorf("-device %s: %q: want cpu*N with N a positive count", spec, part)
			}
		}
		if cpus > 0 && cudas > 0 {
			return configErrorf("-device %s: one data-parallel run trains on CPU devices or on CUDA devices, not both", spec)
		}
		if cudas > 0 {
			if _, err := cudaList(spec); err != nil {
				return configErrorf("-device %s: %v", spec, err)
			}
		}
	}
	switch {
	case c.HostUpdate && !c.usesCUDA():
		return configErrorf("-host-update: the update runs on the host already: it moves it off a CUDA device (-device cuda), and -device is %s", c.deviceName())
	case c.LaunchTable != "" && !c.usesCUDA():
		return configErrorf("-launch-table %s: launches are a CUDA device's (-device cuda), and -device is %s", c.LaunchTable, c.deviceName())
	}
	return nil
}

// checkWorld checks a rank's device: one CUDA device, its update on it.
func (c *Config) checkWorld() error {
	switch {
	case !isCUDA(c.Device) || strings.ContainsAny(c.Device, ",*") || c.Devices > 1:
		return configErrorf("-world-size %d: each rank trains on one CUDA device (-device cuda, or cuda:N for the rank's own GPU of the machine), "+
			"its gradients averaged with the other ranks' by NCCL; not -device %s", c.WorldSize, c.deviceName())
	case c.HostUpdate:
		return configErrorf("-host-update with -world-size %d: across processes the update runs on each rank's device", c.WorldSize)
	}
	return nil
}

// deviceName is the device or devices the run trains on, as flags give them.
func (c *Config) deviceName() string {
	if s := c.parallelSpec(); s != "" {
		return s
	}
	return c.Device
}

// openCUDA opens the run's CUDA device; its machines compute on it through
// vm/cuda/dispatch.
func openCUDA(name string) (vm.Device, error) {
	d, err := vm.NewDevice(name, 0)
	if err != nil {
		return nil, fmt.Errorf("-device %s: %w", name, err)
	}
	if _, ok := vm.BackendFor(d); !ok {
		_ = d.Close()
		return nil, fmt.Errorf("-device %s: %s opened, but no backend runs ops on it", name, d.Name())
	}
	return d, nil
}

// cudaName names a CUDA device with the driver's name for it, so that a
// run on the fake driver says so ("Fake CUDA Device 0 (fakecuda)").
func cudaName(d vm.Device) string {
	if c, ok := d.(interface{ Info() cuda.Info }); ok && c.Info().Name != "" {
		return fmt.Sprintf("%s, %s,", d.Name(), c.Info().Name)
	}
	return d.Name()
}

// deviceUpdate is the optimizer of a run on a CUDA device: by default the
// update runs on the device (dispatch.Solver: weights and optimizer state
// stay there, nothing but the loss crosses the link per step) and the host
// copies are brought up to date only for evaluation and checkpoints;
// HostUpdate runs gorgonia's solver on the host instead (gradients down,
// weights up, every step). A nil *deviceUpdate is the host solver.
type deviceUpdate struct {
	ds *dispatch.Solver
	gs G.Solver
	ls G.Nodes
	// rep, in a data-parallel run on CUDA devices, is every replica's
	// update (ds is replica 0's) and the gradients' all-reduce.
	rep *replicaUpdates
}

// newDeviceUpdate moves the update to the device the machine computes on,
// starting from the state the gorgonia solver holds (a resumed checkpoint's).
func newDeviceUpdate(machine *vm.Machine, gs G.Solver, ls G.Nodes) (*deviceUpdate, error) {
	if _, ok := machine.Runner().(*dispatch.Runner); !ok {
		return nil, nil
	}
	ds, err := dispatch.NewSolver(machine, gs, ls...)
	if err != nil {
		return nil, fmt.Errorf("the update on the device (-host-update runs it on the host): %w", err)
	}
	st, err := exportSolver(gs, ls)
	if err == nil && st.Slots != nil {
		err = ds.SetState(st.Iter, st.Slots)
	}
	if err != nil {
		_ = ds.Close()
		return nil, err
	}
	return &deviceUpdate{ds: ds, gs: gs, ls: ls}, nil
}

// step runs one optimizer step.
func (u *deviceUpdate) step(gs G.Solver, ls G.Nodes) error {
	if u == nil {
		return gs.Step(G.NodesToValueGrads(ls))
	}
	if u.rep != nil {
		return u.rep.step()
	}
	return u.ds.Step()
}

// weightsToHost copies the device's weights into the learnables (before an
// evaluation or the caller reads them).
func (u *deviceUpdate) weightsToHost() error {
	if u == nil {
		return nil
	}
	if err := u.ds.SyncToHost(); err != nil {
		return err
	}
	return u.rep.toScript(u.ls)
}

// toHost brings weights and optimizer state to the host (before a checkpoint).
func (u *deviceUpdate) toHost() error {
	if u == nil {
		return nil
	}
	if err := u.weightsToHost(); err != nil {
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

func (u *deviceUpdate) close() error {
	if u == nil {
		return nil
	}
	if u.rep != nil {
		return u.rep.close()
	}
	return u.ds.Close()
}

// writeLaunchTable writes the kernel launch table of a machine on a CUDA
// device (Config.LaunchTable).
func writeLaunchTable(path string, machine *vm.Machine) error {
	ls, ok := dispatch.LaunchesOf(machine)
	if !ok {
		return fmt.Errorf("-launch-table %s: the run was not on a CUDA device (-device cuda)", path)
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

// parallelRun is a data-parallel run's replicas. The Trainer's model is the
// script's graph at the whole batch (ooc.Parallel.Model): the loop feeds its
// inputs, reads its loss and steps its learnables, as on one device. Each
// replica's batch norms keep running statistics of their own share; as
// PyTorch's DistributedDataParallel broadcasts rank 0's buffers, the run's
// statistics (evaluated, saved) are replica 0's, and a restored run starts
// every replica from the saved ones. Evaluation runs a model of one
// replica's batch, under one device's budget, on a device of its own, with
// the script's weights and replica 0's statistics copied in.
type parallelRun struct {
	p       *ooc.Parallel
	devs    []vm.Device
	nccl    *cuda.NCCL // a rank's communicator with the other ranks (Config.WorldSize)
	world   int        // processes (Config.WorldSize; 1 for one)
	rank    int
	bns     [][]batchNorm // per replica
	eval    *models.Model
	evalBNs []batchNorm
	// learnables are each replica's, in replica order.
	learnables []G.Nodes
	// reserve is what each CUDA device's backend holds beside the program
	// (cuBLAS's workspace), added to a percentage budget.
	reserve int64
}

// replicaModel rebuilds m for a share of its batch (models.Build with m's
// configuration), as a Builder for ooc.CompileParallel needs.
func replicaModel(m *models.Model, batch int) (*models.Model, error) {
	c := m.Config
	c.Batch = batch
	return models.Build(m.Name, c)
}

// compileParallel compiles m's step on the run's devices, one replica each
// with its share of the batch, every device of the plan's capacity.
// eval is a model of one replica's batch that no replica uses.
func compileParallel(cfg *Config, m, eval *models.Model, mem memoryPlan, opts []ooc.Option) (*parallelRun, error) {
	devs, err := openParallel(cfg, mem)
	if err != nil {
		return nil, err
	}
	pr := &parallelRun{devs: devs, eval: eval, evalBNs: modelBatchNorms(eval), world: max(cfg.WorldSize, 1), rank: cfg.Rank}
	if cfg.WorldSize > 1 {
		if pr.nccl, err = joinWorld(cfg, devs[0]); err != nil {
			pr.close()
			return nil, err
		}
		opts = append(opts, ooc.WithAllReducer(pr.nccl), ooc.WithWorld(cfg.Rank, cfg.WorldSize))
	}
	if cfg.parallelOnCUDA() {
		if r := vm.BackendReserve(devs[0]); r > 0 && cfg.Budget.Percent > 0 && cfg.Scheduler != "baseline" {
			// As on one CUDA device: a percentage is of the replica's
			// in-core peak, and each device's budget also holds the
			// backend's reserve.
			pr.reserve = r
			opts = append(opts, ooc.WithBudget(mem.planned+r))
		}
	}
	built := 0
	build := func(batch int) (ooc.Replica, error) {
		r := m // the first call is the script's graph: the Trainer's model
		if built++; built > 1 {
			var err error
			if r, err = replicaModel(m, batch); err != nil {
				return ooc.Replica{}, err
			}
			pr.bns = append(pr.bns, modelBatchNorms(r))
			pr.learnables = append(pr.learnables, r.Learnables)
		}
		return ooc.Replica{Graph: r.Graph, Inputs: G.Nodes{r.Input, r.Labels}, Learnables: r.Learnables, Loss: r.Loss}, nil
	}
	if pr.p, err = ooc.CompileParallel(build, cfg.Batch, devs, opts...); err != nil {
		pr.close()
		return nil, err
	}
	return pr, nil
}

// statsTo brings replica 0's batch-norm statistics to the script's (before
// an evaluation or a checkpoint reads them).
func (pr *parallelRun) statsTo(script []batchNorm) error {
	if pr == nil || len(pr.bns) == 0 {
		return nil
	}
	s, err := snapshotBN(pr.bns[0])
	if err != nil {
		return err
	}
	return s.restore(script)
}

// toEval readies the evaluation model: the script's weights, replica 0's
// batch-norm statistics.
func (pr *parallelRun) toEval(learnables G.Nodes) error {
	for i, l := range learnables {
		dst, ok1 := pr.eval.Learnables[i].Value().(*tensor.Dense)
		src, ok2 := l.Value().(*tensor.Dense)
		if !ok1 || !ok2 {
			return fmt.Errorf("learnable %s holds a %T", l.Name(), l.Value())
		}
		if err := tensor.Copy(dst, src); err != nil {
			return fmt.Errorf("learnable %s: %w", l.Name(), err)
		}
	}
	return pr.statsTo(pr.evalBNs)
}

// statsFrom gives every replica the script's batch-norm statistics (after
// a restore).
func (pr *parallelRun) statsFrom(script []batchNorm) error {
	if pr == nil {
		return nil
	}
	for _, bns := range pr.bns {
		s, err := snapshotBN(script)
		if err != nil {
			return err
		}
		if err := s.restore(bns); err != nil {
			return err
		}
	}
	return nil
}

// stats is replica 0's machine's, with the swaps of all replicas summed and
// the device peak the largest.
func (pr *parallelRun) stats() vm.Stats {
	ms := pr.p.Machines()
	st := ms[0].Stats()
	for _, m := range ms[1:] {
		s := m.Stats()
		st.SwapInBytes += s.SwapInBytes
		st.SwapOutBytes += s.SwapOutBytes
		st.SwapIns += s.SwapIns
		st.SwapOuts += s.SwapOuts
		st.PeakDeviceBytes = max(st.PeakDeviceBytes, s.PeakDeviceBytes)
	}
	return st
}

// replicas is how many replicas share each batch: this process's devices,
// times the ranks.
func (pr *parallelRun) replicas() int { return len(pr.devs) * pr.world }

func (pr *parallelRun) close() error {
	if pr == nil {
		return nil
	}
	var err error
	if pr.p != nil {
		err = pr.p.Close()
	}
	if pr.nccl != nil {
		if e := pr.nccl.Close(); err == nil {
			err = e
		}
	}
	for _, d := range pr.devs {
		if e := d.Close(); err == nil {
			err = e
		}
	}
	return err
}
