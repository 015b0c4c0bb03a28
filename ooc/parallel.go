package ooc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"time"
	"unsafe"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/blas"
	"github.com/gorgonia-ooc/outofcore/vm"
	"github.com/gorgonia-ooc/outofcore/vm/cuda"
)

// Replica is one copy of a model graph, as a Builder makes it.
type Replica struct {
	Graph *gorgonia.ExprGraph
	// Inputs are what a script feeds with gorgonia.Let (images, labels).
	// A replica's input whose first axis is the script's divided by the
	// number of replicas gets its share of the batch (rows r*b/N to
	// (r+1)*b/N); one of the script's very shape gets the whole value.
	Inputs gorgonia.Nodes
	// Learnables are the nodes gorgonia.Grad differentiated, in the same
	// order in every copy.
	Learnables gorgonia.Nodes
	// Loss is the scalar cost: a mean over the batch, so that the mean of
	// the replicas' losses and gradients is the whole batch's.
	Loss *gorgonia.Node
}

// A Builder makes the model graph for a batch size, gorgonia.Grad
// included. CompileParallel calls it once for the script's whole batch
// (the nodes the script feeds, reads and steps) and once per replica.
type Builder func(batch int) (Replica, error)

// replicaPos is where a program sits among CompileParallel's replicas.
type replicaPos struct{ index, count, group int }

// worldPos is this process's place among the ranks of a run across processes (WithWorld);
// the zero value is a run of one process.
type worldPos struct{ rank, size int }

// An AllReducer averages the replicas' gradients. AllReduceMean gets one
// buffer per replica, in replica order, each the raw bytes of one
// learnable's gradient (all of one dtype and length), and leaves their
// elementwise mean in every one.
type AllReducer interface {
	Name() string
	AllReduceMean(dt tensor.Dtype, bufs [][]byte) error
}

// HostAllReduce averages in host memory, in this process: it sums the
// replicas' buffers in replica order and divides by their number, so the
// same inputs give the same bits on every run (and one replica's gradient
// comes back unchanged).
type HostAllReduce struct{}

// Name implements AllReducer.
func (HostAllReduce) Name() string { return "host" }

// AllReduceMean implements AllReducer.
func (HostAllReduce) AllReduceMean(dt tensor.Dtype, bufs [][]byte) error {
	if len(bufs) == 0 {
		return errors.New("ooc: all-reduce of no buffers")
	}
	for _, b := range bufs[1:] {
		if len(b) != len(bufs[0]) {
			return fmt.Errorf("ooc: all-reduce of buffers of %d and %d bytes", len(bufs[0]), len(b))
		}
	}
	switch dt {
	case tensor.Float64:
		meanOf[float64](bufs)
	case tensor.Float32:
		meanOf[float32](bufs)
	default:
		return fmt.Errorf("ooc: all-reduce of %v gradients is not supported (float32 and float64 are)", dt)
	}
	return nil
}

func meanOf[T float32 | float64](bufs [][]byte) {
	view := func(b []byte) []T {
		if len(b) == 0 {
			return nil
		}
		return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), len(b)/int(unsafe.Sizeof(T(0))))
	}
	acc := view(bufs[0])
	for _, b := range bufs[1:] {
		for i, x := range view(b) {
			acc[i] += x
		}
	}
	n := T(len(bufs))
	for i := range acc {
		acc[i] /= n
	}
	for _, b := range bufs[1:] {
		copy(b, bufs[0])
	}
}

// WithAllReducer sets how CompileParallel averages gradients. By default
// it is HostAllReduce, except on several CUDA devices, where it is NCCL
// (cuda.NewNCCL) when libnccl.so.2 loads. Compile ignores it.
func WithAllReducer(r AllReducer) Option {
	return func(s *settings) {
		if r == nil {
			s.fail("WithAllReducer(nil)")
			return
		}
		s.reducer = r
	}
}

// WithLog sets where CompileParallel writes its notes (default os.Stderr):
// that NCCL is missing on CUDA devices and gradients are averaged on the
// host instead, said once per process. Compile ignores it.
func WithLog(w io.Writer) Option {
	return func(s *settings) {
		if w == nil {
			s.fail("WithLog(nil)")
			return
		}
		s.log = w
	}
}

// WithWorld makes CompileParallel one rank of a data-parallel run across worldSize
// processes, on one machine or several, that each call it with the same builder, the same
// global batch, the same options and as many devices; this process is rank `rank`. Replica
// i of rank r is replica r*n+i of all n*worldSize (n = len(devices)), and each RunAll gives
// it that replica's rows of the global batch the script's inputs hold (every rank feeds
// the whole batch), so the ranks together compute the step one process computes with all
// the replicas on its own devices. The AllReducer, which WithAllReducer must give, averages
// over every replica of every rank, as a cuda.NCCL all the ranks joined (cuda.JoinNCCL)
// does; the replicas' losses are averaged through it too, so every rank reads the same
// loss. Compile ignores it.
func WithWorld(rank, worldSize int) Option {
	return func(s *settings) {
		if worldSize < 1 || rank < 0 || rank >= worldSize {
			s.fail("WithWorld(%d, %d): want rank 0 to worldSize-1 of a positive worldSize", rank, worldSize)
			return
		}
		s.world = worldPos{rank: rank, size: worldSize}
	}
}

// WithReplicaWorkers sets how many goroutines each replica's GEMMs and
// convolutions split over while the replicas of a CompileParallel run
// (package blas's SetWorkers, for the run's duration): by default (0) the
// replicas share GOMAXPROCS evenly, at least one each, as they would fight
// over every core otherwise; a negative n leaves each all of them. Results
// are the same bits either way. Compile ignores it.
func WithReplicaWorkers(n int) Option {
	return func(s *settings) { s.replicaWorkers = n }
}

// ncclNote makes the NCCL fallback's note once per process, not once per
// model or device.
var ncclNote sync.Once

// defaultReducer is NCCL on two or more CUDA devices when it loads, else
// HostAllReduce.
func defaultReducer(devices []vm.Device, log io.Writer) AllReducer {
	var cds []*cuda.Device
	for _, d := range devices {
		c, ok := d.(*cuda.Device)
		if !ok {
			return HostAllReduce{}
		}
		cds = append(cds, c)
	}
	if len(cds) < 2 {
		return HostAllReduce{}
	}
	c, err := cuda.NewNCCL(cds)
	if err != nil {
		ncclNote.Do(func() {
			if log == nil {
				log = os.Stderr
			}
			fmt.Fprintf(log, "ooc: CompileParallel on %d CUDA devices: %v; averaging gradients on the host instead\n", len(cds), err)
		})
		return HostAllReduce{}
	}
	return c
}

// Parallel trains one model data parallel on several devices: a machine
// per device, each compiled by Compile for its share of the batch. It
// implements gorgonia.VM. A Parallel is not safe for concurrent use; its
// replicas run concurrently inside RunAll.
type Parallel struct {
	model    Replica
	batch    int
	replicas []*replica
	reducer  AllReducer
	owned    io.Closer // the reducer, when CompileParallel made it
	accum    bool
	workers  int              // WithReplicaWorkers
	grads    []gorgonia.Value // the script's gradient values, by learnable
	loss     gorgonia.Value
	sim      bool
	onDevice bool // GradientsOnDevices
	world    worldPos
	total    int // replicas of every rank: len(replicas) * world size
	stats    ParallelStats
	closed   bool
	ran      bool // a step finished and Reset has not been called: RunAll does nothing, as TapeMachine's
}

type replica struct {
	r      Replica
	m      *vm.Machine
	inputs []gorgonia.Value // this replica's input values (its shares)
	params []gorgonia.Value // its copy of the learnables
	last   vm.Stats         // the machine's stats after the previous step
}

// ParallelStats is what a Parallel measured.
type ParallelStats struct {
	Steps int
	// StepTime is wall time inside RunAll (simulated time on simulated
	// devices: the slowest replica's step plus the all-reduce), and
	// AllReduceTime the part of it spent averaging gradients.
	StepTime, AllReduceTime time.Duration
	// Simulated is set when the times come from device profiles.
	Simulated bool
}

// CompileParallel compiles a model for data-parallel training on the
// given devices, one replica each: build(batch) makes the graph the
// script feeds and steps, and build(batch/len(devices)) each replica's,
// compiled with opts (budget, scheduler, allocator) for its own device.
// Each RunAll splits the inputs' batch among the replicas, runs them
// concurrently, averages their gradients with the AllReducer into the
// script's learnables (accumulated across runs under BindDualValues, as
// Compile does, overwritten otherwise) and sets the script's loss to the
// replicas' mean, so a solver steps once, on the script's learnables.
// Before each run the script's learnables are copied to every replica.
//
// On simulated devices nothing is computed: the builder is called once
// per replica (it may hand every replica one graph), Model is replica 0's
// graph, and RunAll times a step (Stats) with the replicas' transfers
// sharing their switches' host links (vm.CoSimulate).
//
// With one device the step is bit for bit Compile's on the whole batch;
// with more, the gradients differ from it only by float rounding. Batch
// statistics (batch norm) are each replica's own. The devices are the
// caller's: Close does not close them.
func CompileParallel(build Builder, batch int, devices []vm.Device, opts ...Option) (p *Parallel, err error) {
	defer func() {
		if r := recover(); r != nil {
			p, err = nil, fmt.Errorf("ooc: CompileParallel panicked: %v\n%s", r, debug.Stack())
		}
	}()
	if build == nil {
		return nil, errors.New("ooc: CompileParallel: nil builder")
	}
	n := len(devices)
	if n == 0 {
		return nil, errors.New("ooc: CompileParallel: no devices")
	}
	s, err := configure(opts)
	if err != nil {
		return nil, err
	}
	world, total, err := s.worldOf(batch, n)
	if err != nil {
		return nil, err
	}
	if len(s.outputs) > 0 {
		return nil, errors.New("ooc: CompileParallel: WithOutputs names nodes of one graph; read the script's Loss instead")
	}
	if s.device != nil {
		return nil, errors.New("ooc: CompileParallel: pass the devices as its argument, not WithDevice")
	}
	p = &Parallel{batch: batch, reducer: s.reducer, accum: s.bindAll || len(s.bind) > 0, workers: s.replicaWorkers, world: world, total: total}
	simulated := 0
	for i, d := range devices {
		if d == nil {
			return nil, fmt.Errorf("ooc: CompileParallel: device %d is nil", i)
		}
		if d.Simulated() {
			simulated++
		}
	}
	if simulated != 0 && simulated != n {
		return nil, errors.New("ooc: CompileParallel: simulated and real devices cannot train together")
	}
	if simulated != 0 && world.size > 1 {
		return nil, errors.New("ooc: CompileParallel: WithWorld: simulated devices train in one process (ooc multigpu simulates more of them)")
	}
	p.sim = simulated == n
	if !p.sim {
		if p.model, err = buildReplica(build, batch, "the script's graph"); err != nil {
			return nil, err
		}
	}
	made := p
	defer func() {
		if err != nil {
			_ = made.Close()
		}
	}()
	if p.reducer == nil {
		p.reducer = defaultReducer(devices, s.log)
		p.owned, _ = p.reducer.(io.Closer)
	}
	group := total
	if sim, ok := devices[0].(*vm.Sim); ok && sim.GroupSize() > 0 {
		group = sim.GroupSize()
	}
	for i, d := range devices {
		g := world.rank*n + i // the replica's place among every rank's
		r, err := buildReplica(build, batch/total, fmt.Sprintf("replica %d of %d", g, total))
		if err != nil {
			return nil, err
		}
		if p.sim && i == 0 {
			p.model = r
		}
		if err := p.matches(r, g, total); err != nil && !p.sim {
			return nil, err
		}
		rs := *s
		rs.device, rs.bind, rs.bindAll = d, nil, false
		rs.replica = replicaPos{index: g, count: total, group: group}
		m, err := compile(r.Graph, &rs)
		if err != nil {
			return nil, fmt.Errorf("ooc: replica %d of %d (%s): %w", g, total, d.Name(), err)
		}
		rep := &replica{r: r, m: m}
		p.replicas = append(p.replicas, rep)
		if p.sim {
			continue // nothing is computed: no values to hand out
		}
		for k, in := range r.Inputs {
			v := tensor.New(tensor.Of(in.Dtype()), tensor.WithShape(in.Shape().Clone()...))
			if err := gorgonia.Let(in, v); err != nil {
				return nil, fmt.Errorf("ooc: replica %d: input %s: %w", i, p.model.Inputs[k].Name(), err)
			}
			rep.inputs = append(rep.inputs, v)
		}
		for _, l := range r.Learnables {
			v, err := hostLike(l)
			if err != nil {
				return nil, err
			}
			if err := gorgonia.Let(l, v); err != nil {
				return nil, fmt.Errorf("ooc: replica %d: learnable %s: %w", i, l.Name(), err)
			}
			rep.params = append(rep.params, v)
		}
	}
	return p, nil
}

// worldOf is the run's place among the ranks (WithWorld; one rank without it)
// and how many replicas share each batch, n devices on each rank; it checks
// the batch splits among them and a run across ranks has a reducer across
// them.
func (s *settings) worldOf(batch, n int) (worldPos, int, error) {
	world := s.world
	if world.size == 0 {
		world.size = 1
	}
	total := n * world.size
	_, host := s.reducer.(HostAllReduce)
	switch {
	case (batch <= 0 || batch%n != 0) && world.size == 1:
		return world, total, fmt.Errorf("ooc: CompileParallel: a batch of %d does not split evenly among %d devices", batch, n)
	case batch <= 0 || batch%total != 0:
		return world, total, fmt.Errorf("ooc: CompileParallel: a batch of %d does not split evenly among %d replicas (%d devices on each of %d ranks)", batch, total, n, world.size)
	case world.size > 1 && s.reducer == nil:
		return world, total, fmt.Errorf("ooc: CompileParallel: WithWorld(%d, %d) needs WithAllReducer with a reducer across the ranks (cuda.JoinNCCL)", world.rank, world.size)
	case world.size > 1 && host:
		return world, total, fmt.Errorf("ooc: CompileParallel: WithWorld(%d, %d): HostAllReduce averages in this process only; give a reducer across the ranks (cuda.JoinNCCL)", world.rank, world.size)
	}
	return world, total, nil
}

func buildReplica(build Builder, batch int, what string) (r Replica, err error) {
	defer func() {
		if x := recover(); x != nil {
			err = fmt.Errorf("ooc: CompileParallel: the builder panicked for %s (batch %d): %v", what, batch, x)
		}
	}()
	if r, err = build(batch); err != nil {
		return r, fmt.Errorf("ooc: CompileParallel: building %s (batch %d): %w", what, batch, err)
	}
	if r.Graph == nil || r.Loss == nil {
		return r, fmt.Errorf("ooc: CompileParallel: the builder gave %s no graph or no loss", what)
	}
	for _, l := range r.Learnables {
		if l == nil || l.Deriv() == nil {
			return r, fmt.Errorf("ooc: CompileParallel: a learnable of %s has no gradient node: the builder must call gorgonia.Grad on it", what)
		}
	}
	return r, nil
}

// matches checks a replica's graph has the script's inputs and learnables,
// shaped for its share of the batch.
func (p *Parallel) matches(r Replica, i, n int) error {
	m := p.model
	if len(r.Inputs) != len(m.Inputs) || len(r.Learnables) != len(m.Learnables) {
		return fmt.Errorf("ooc: replica %d of %d has %d inputs and %d learnables; the script's graph has %d and %d",
			i, n, len(r.Inputs), len(r.Learnables), len(m.Inputs), len(m.Learnables))
	}
	for k, in := range r.Inputs {
		whole := m.Inputs[k].Shape()
		if in.Dtype() != m.Inputs[k].Dtype() || !in.Shape().Eq(whole) && !isShare(in.Shape(), whole, n) {
			return fmt.Errorf("ooc: replica %d of %d: input %s is %v %v, neither the script's %v %v nor its share of the batch",
				i, n, in.Name(), in.Dtype(), in.Shape(), m.Inputs[k].Dtype(), whole)
		}
	}
	for k, l := range r.Learnables {
		if ml := m.Learnables[k]; l.Dtype() != ml.Dtype() || !l.Shape().Eq(ml.Shape()) {
			return fmt.Errorf("ooc: replica %d of %d: learnable %d (%s) is %v %v; the script's (%s) is %v %v",
				i, n, k, l.Name(), l.Dtype(), l.Shape(), ml.Name(), ml.Dtype(), ml.Shape())
		}
	}
	return nil
}

func isShare(part, whole tensor.Shape, n int) bool {
	if len(part) != len(whole) || len(part) == 0 || part[0]*n != whole[0] {
		return false
	}
	return part[1:].Eq(whole[1:]) || len(part) == 1
}

// hostLike is a new zero value of a node's type and shape.
func hostLike(n *gorgonia.Node) (gorgonia.Value, error) {
	if n.IsScalar() {
		switch n.Dtype() {
		case tensor.Float64:
			return gorgonia.NewF64(0), nil
		case tensor.Float32:
			return gorgonia.NewF32(0), nil
		}
		return nil, fmt.Errorf("ooc: %s is a %v scalar; float32 and float64 are supported", n.Name(), n.Dtype())
	}
	return tensor.New(tensor.Of(n.Dtype()), tensor.WithShape(n.Shape().Clone()...)), nil
}

// rawOf views a value's data as bytes (materialising a view first).
func rawOf(v gorgonia.Value) ([]byte, error) {
	switch t := v.(type) {
	case *tensor.Dense:
		if t.IsMaterializable() {
			t = t.Materialize().(*tensor.Dense)
		}
		return t.Raw, nil
	case *gorgonia.F64:
		return unsafe.Slice((*byte)(unsafe.Pointer(t)), 8), nil
	case *gorgonia.F32:
		return unsafe.Slice((*byte)(unsafe.Pointer(t)), 4), nil
	}
	return nil, fmt.Errorf("ooc: values of type %T are not supported", v)
}

// Model is the script's graph at the whole batch: Let its Inputs, step a
// solver on its Learnables, read its Loss. CompileParallel runs it never;
// RunAll fills its gradients and loss.
func (p *Parallel) Model() Replica { return p.model }

// Machines are the replicas' machines, in replica order.
func (p *Parallel) Machines() []*vm.Machine {
	out := make([]*vm.Machine, len(p.replicas))
	for i, r := range p.replicas {
		out[i] = r.m
	}
	return out
}

// AllReducer is how the gradients are averaged.
func (p *Parallel) AllReducer() AllReducer { return p.reducer }

// Stats returns what the Parallel measured so far.
func (p *Parallel) Stats() ParallelStats {
	s := p.stats
	s.Simulated = p.sim
	return s
}

// GradientsOnDevices is for an optimizer that updates each replica's
// weights on its own device (vm/cuda/dispatch.Solver, a vm.GradientSink on
// every machine): from now on RunAll sets the script's loss but does not
// average the gradients into the script's learnables, as the machines no
// longer download them; the caller averages the sinks' device buffers
// (AllReducer, or cuda.NCCL.AllReduceMeanDevice) before each replica's
// update. The script's learnables are still copied to the replicas before
// each run, which a machine that keeps them on its device uploads once.
func (p *Parallel) GradientsOnDevices() { p.onDevice = true }

// CountAllReduce adds d, time the caller spent averaging the gradients
// outside RunAll (after GradientsOnDevices), to Stats' all-reduce and step
// times.
func (p *Parallel) CountAllReduce(d time.Duration) {
	p.stats.AllReduceTime += d
	p.stats.StepTime += d
}

// Reset implements gorgonia.VM: the next RunAll runs a step.
func (p *Parallel) Reset() {
	p.ran = false
	for _, r := range p.replicas {
		r.m.Reset()
	}
}

// Close implements gorgonia.VM: it closes every replica's machine.
func (p *Parallel) Close() error {
	if p.closed {
		return nil
	}
	p.closed = true
	var errs []error
	if p.owned != nil {
		errs = append(errs, p.owned.Close())
	}
	for _, r := range p.replicas {
		errs = append(errs, r.m.Close())
	}
	return errors.Join(errs...)
}

// RunAll implements gorgonia.VM: one data-parallel step. A replica that
// fails (out of device memory, say) fails the step with its index and
// device named; the script's gradients and loss are then left as they
// were, and the Parallel can run again. As TapeMachine's RunAll, and
// Compile's machine's, a RunAll after a step that finished does nothing
// until Reset is called.
func (p *Parallel) RunAll() (err error) {
	if p.closed {
		return errors.New("ooc: RunAll on a closed Parallel")
	}
	if p.ran {
		return nil
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("ooc: Parallel.RunAll panicked: %v\n%s", r, debug.Stack())
		}
		if err != nil {
			p.Reset()
		}
		p.ran = err == nil
	}()
	for _, r := range p.replicas {
		r.m.Reset()
	}
	if p.sim {
		return p.simulate()
	}
	start := time.Now()
	if err := p.scatter(); err != nil {
		return err
	}
	errs := make([]error, len(p.replicas))
	if w := p.replicaWorkers(); w > 0 {
		defer blas.SetWorkers(blas.SetWorkers(w))
	}
	var wg sync.WaitGroup
	for i, r := range p.replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = r.m.RunAll()
		}()
	}
	wg.Wait()
	if err := p.replicaErrors(errs); err != nil {
		return err
	}
	reduce := time.Now()
	if p.onDevice {
		if err := p.meanLoss(); err != nil {
			return err
		}
	} else if err := p.gather(); err != nil {
		return err
	}
	p.stats.AllReduceTime += time.Since(reduce)
	p.stats.StepTime += time.Since(start)
	p.stats.Steps++
	return nil
}

// replicaWorkers is the GEMM worker cap while the replicas run (0: none).
func (p *Parallel) replicaWorkers() int {
	switch {
	case p.workers > 0:
		return p.workers
	case p.workers < 0 || len(p.replicas) < 2:
		return 0
	}
	return max(runtime.GOMAXPROCS(0)/len(p.replicas), 1)
}

func (p *Parallel) replicaErrors(errs []error) error {
	var failed []error
	for i, e := range errs {
		if e != nil {
			failed = append(failed, fmt.Errorf("ooc: replica %d of %d (%s): %w", i, len(p.replicas), p.replicas[i].m.Device().Name(), e))
		}
	}
	return errors.Join(failed...)
}

// scatter hands each replica its share of the inputs and a copy of the
// script's learnables.
func (p *Parallel) scatter() error {
	n := p.total
	first := p.world.rank * len(p.replicas) // the global index of this rank's first replica
	for k, in := range p.model.Inputs {
		v := in.Value()
		if v == nil {
			return fmt.Errorf("ooc: input %s has no value: gorgonia.Let it before RunAll", in.Name())
		}
		if !v.Shape().Eq(in.Shape()) || v.Dtype() != in.Dtype() {
			return fmt.Errorf("ooc: input %s holds a %v %v value; the graph was built for %v %v", in.Name(), v.Shape(), v.Dtype(), in.Shape(), in.Dtype())
		}
		src, err := rawOf(v)
		if err != nil {
			return fmt.Errorf("ooc: input %s: %w", in.Name(), err)
		}
		for i, r := range p.replicas {
			dst, err := rawOf(r.inputs[k])
			if err != nil {
				return err
			}
			if len(dst) == len(src) {
				copy(dst, src)
			} else {
				g := first + i
				copy(dst, src[g*len(src)/n:(g+1)*len(src)/n])
			}
		}
	}
	for k, l := range p.model.Learnables {
		src, err := rawOf(l.Value())
		if err != nil {
			return fmt.Errorf("ooc: learnable %s: %w", l.Name(), err)
		}
		for _, r := range p.replicas {
			dst, err := rawOf(r.params[k])
			if err != nil {
				return err
			}
			copy(dst, src)
		}
	}
	return nil
}

// gather averages the replicas' gradients and losses into the script's.
func (p *Parallel) gather() error {
	bufs := make([][]byte, len(p.replicas))
	if p.grads == nil {
		p.grads = make([]gorgonia.Value, len(p.model.Learnables))
	}
	for k, l := range p.model.Learnables {
		for i, r := range p.replicas {
			g, err := r.r.Learnables[k].Grad()
			if err != nil {
				return fmt.Errorf("ooc: replica %d: gradient of %s: %w", i, l.Name(), err)
			}
			if bufs[i], err = rawOf(g); err != nil {
				return err
			}
		}
		if err := p.reducer.AllReduceMean(l.Dtype(), bufs); err != nil {
			return fmt.Errorf("ooc: all-reduce (%s) of %s: %w", p.reducer.Name(), l.Name(), err)
		}
		// Solvers zero this value in place after a step, which is what
		// makes accumulation across runs start again from zero.
		if p.grads[k] == nil {
			v, err := hostLike(l)
			if err != nil {
				return err
			}
			p.grads[k] = v
		}
		dst, _ := rawOf(p.grads[k])
		if p.accum {
			addInto(l.Dtype(), dst, bufs[0])
		} else {
			copy(dst, bufs[0])
		}
		if err := gorgonia.UnsafeLet(l.Deriv(), p.grads[k]); err != nil {
			return fmt.Errorf("ooc: gradient of %s: %w", l.Name(), err)
		}
	}
	return p.meanLoss()
}

// meanLoss sets the script's loss to the replicas' mean, summed in replica
// order; across ranks (WithWorld), the AllReducer's mean of every rank's.
func (p *Parallel) meanLoss() error {
	if p.world.size > 1 {
		return p.worldLoss()
	}
	var sum float64
	for i, r := range p.replicas {
		v := r.r.Loss.Value()
		if v == nil {
			return fmt.Errorf("ooc: replica %d computed no loss", i)
		}
		switch x := v.Data().(type) {
		case float64:
			sum += x
		case float32:
			// Summed in float32, as one device would hold it.
			sum = float64(float32(sum) + x)
		default:
			return fmt.Errorf("ooc: the loss %s is a %T, not a float scalar", r.r.Loss.Name(), v.Data())
		}
	}
	n := float64(len(p.replicas))
	switch p.model.Loss.Dtype() {
	case tensor.Float32:
		p.loss = gorgonia.NewF32(float32(sum) / float32(n))
	default:
		p.loss = gorgonia.NewF64(sum / n)
	}
	return gorgonia.UnsafeLet(p.model.Loss, p.loss)
}

// worldLoss sets the script's loss to the mean of every rank's replicas' losses: each
// local replica's loss is its buffer of the AllReducer's mean, which sums in replica order
// where it keeps one (NCCL's rings and trees need not), as meanLoss does in one process.
func (p *Parallel) worldLoss() error {
	dt := p.model.Loss.Dtype()
	if dt != tensor.Float32 && dt != tensor.Float64 {
		return fmt.Errorf("ooc: the loss %s is a %v, not a float scalar", p.model.Loss.Name(), dt)
	}
	bufs := make([][]byte, len(p.replicas))
	for i, r := range p.replicas {
		v := r.r.Loss.Value()
		if v == nil {
			return fmt.Errorf("ooc: replica %d computed no loss", i)
		}
		var x float64
		switch d := v.Data().(type) {
		case float64:
			x = d
		case float32:
			x = float64(d)
		default:
			return fmt.Errorf("ooc: the loss %s is a %T, not a float scalar", r.r.Loss.Name(), v.Data())
		}
		if dt == tensor.Float32 {
			bufs[i] = binary.NativeEndian.AppendUint32(nil, math.Float32bits(float32(x)))
		} else {
			bufs[i] = binary.NativeEndian.AppendUint64(nil, math.Float64bits(x))
		}
	}
	if err := p.reducer.AllReduceMean(dt, bufs); err != nil {
		return fmt.Errorf("ooc: all-reduce (%s) of the loss across %d ranks: %w", p.reducer.Name(), p.world.size, err)
	}
	if dt == tensor.Float32 {
		p.loss = gorgonia.NewF32(math.Float32frombits(binary.NativeEndian.Uint32(bufs[0])))
	} else {
		p.loss = gorgonia.NewF64(math.Float64frombits(binary.NativeEndian.Uint64(bufs[0])))
	}
	return gorgonia.UnsafeLet(p.model.Loss, p.loss)
}

func addInto(dt tensor.Dtype, dst, src []byte) {
	switch dt {
	case tensor.Float64:
		add[float64](dst, src)
	case tensor.Float32:
		add[float32](dst, src)
	}
}

func add[T float32 | float64](dst, src []byte) {
	if len(dst) == 0 {
		return
	}
	size := int(unsafe.Sizeof(T(0)))
	d := unsafe.Slice((*T)(unsafe.Pointer(&dst[0])), len(dst)/size)
	s := unsafe.Slice((*T)(unsafe.Pointer(&src[0])), len(src)/size)
	for i := range d {
		d[i] += s[i]
	}
}

// simulate runs one step of every replica against the virtual clocks of
// their devices, co-simulating the host links they share (vm.CoSimulate),
// then the all-reduce over those links.
func (p *Parallel) simulate() error {
	ms := p.Machines()
	times, err := vm.CoSimulate(ms)
	if err != nil {
		var re *vm.ReplicaError
		if errors.As(err, &re) {
			return fmt.Errorf("ooc: replica %d of %d (%s): %w", re.Replica, len(ms), ms[re.Replica].Device().Name(), re.Err)
		}
		return err
	}
	var slowest time.Duration
	for _, t := range times {
		slowest = max(slowest, t)
	}
	ar := vm.AllReduceTime(ms)
	p.stats.AllReduceTime += ar
	p.stats.StepTime += slowest + ar
	p.stats.Steps++
	return nil
}
