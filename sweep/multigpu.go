package sweep

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/models"
	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm"
)

// MultiGPUConfig is the multi-GPU paper's experiment (Kim et al., seed
// 002, Tables I-III) in the simulator: data-parallel replicas on devices
// that share their switches' host links.
type MultiGPUConfig struct {
	Model          string
	Image, Classes int
	// Profile names the simulated devices (titanxp-switch, p100-2switch):
	// its DevicesPerSwitch and SwitchBandwidth say which share a link.
	Profile string
	// Devices are the replica counts to run (the paper: 1, 2, 4).
	Devices []int
	// Step is the batch granularity of the largest-batch search (the
	// paper's constant C), MaxBatch its upper end.
	Step, MaxBatch int
	// Batches, per device, for the throughput tables (Tables II and III);
	// empty: five from the non-swap largest batch to the largest both
	// vDNN schemes train (on the first device count).
	Batches []int
	// TablesOnly skips the largest-batch search (Batches must be given).
	TablesOnly bool
	// Schemes are the schemes compared (empty: MultiSchemes, the paper's).
	Schemes []MultiScheme
	Log     io.Writer
}

func (c *MultiGPUConfig) schemes() []MultiScheme {
	if len(c.Schemes) == 0 {
		return MultiSchemes()
	}
	return c.Schemes
}

// A MultiScheme is one of the compared memory schemes.
type MultiScheme struct {
	Name      string
	Scheduler ooc.Scheduler // nil: no swapping (in-core)
	Allocator ooc.AllocatorKind
}

// MultiSchemes are the paper's three (non-swap, the original vDNN, vDNN
// with the transfer cap and trigger search, all over a best-fit allocator
// as TensorFlow's BFC) and this project's window scheduler with the VA
// allocator.
func MultiSchemes() []MultiScheme {
	return []MultiScheme{
		{"non-swap", nil, ooc.BestFit},
		{"vdnn", ooc.MultiVDNN{}, ooc.BestFit},
		{"vdnn-cap-tuned", ooc.MultiVDNN{Cap: true, Tune: true}, ooc.BestFit},
		{"window+va", ooc.Window{}, ooc.VA},
	}
}

// CapSchemes compare the transfer cap as an option of the offload planners
// and the window scheduler with plain per-device swapping: non-swap, then
// Greedy, DynProg and Window each without and with Cap, all over the VA
// allocator.
func CapSchemes() []MultiScheme {
	return []MultiScheme{
		{"non-swap", nil, ooc.BestFit},
		{"greedy", ooc.Greedy{}, ooc.VA},
		{"greedy-cap", ooc.Greedy{Cap: true}, ooc.VA},
		{"dynprog", ooc.DynProg{}, ooc.VA},
		{"dynprog-cap", ooc.DynProg{Cap: true}, ooc.VA},
		{"window", ooc.Window{}, ooc.VA},
		{"window-cap", ooc.Window{Cap: true}, ooc.VA},
	}
}

// MultiPoint is one simulated data-parallel step.
type MultiPoint struct {
	Scheme  string
	Devices int
	Batch   int // per device
	OK      bool
	Error   string
	// IPS is images/s per device (the paper's tables), StepS the step's
	// simulated seconds, AllReduceS the part spent averaging gradients.
	IPS, StepS, AllReduceS float64
	SwapMiB                int64 // swapped out per step, summed over the replicas
}

// MultiGPUResult is the whole experiment for one model.
type MultiGPUResult struct {
	Config  MultiGPUConfig
	Source  string       // the profile's sources
	Largest []MultiPoint // per scheme and device count: at the largest batch that runs
	Table   []MultiPoint // per device count, batch and scheme
}

func (c *MultiGPUConfig) logf(format string, args ...interface{}) {
	if c.Log != nil {
		fmt.Fprintf(c.Log, format+"\n", args...)
	}
}

// graphCache keeps the last model built: every replica of a simulated
// step shares one graph (nothing is computed on it).
type graphCache struct {
	cfg   *MultiGPUConfig
	batch int
	m     *models.Model
}

func (g *graphCache) get(batch int) (*models.Model, error) {
	if g.m != nil && g.batch == batch {
		return g.m, nil
	}
	g.m = nil
	m, err := models.Build(g.cfg.Model, models.Config{Batch: batch, Channels: 3, Height: g.cfg.Image, Width: g.cfg.Image,
		Classes: g.cfg.Classes, Dtype: tensor.Float32, Seed: 1})
	if err != nil {
		return nil, err
	}
	g.m, g.batch = m, batch
	return m, nil
}

// RunMultiGPU runs the experiment: per scheme and device count the largest
// per-device batch that trains, and images/s per device there; then the
// throughput tables at common batches.
func RunMultiGPU(cfg MultiGPUConfig) (*MultiGPUResult, error) {
	if cfg.Step <= 0 {
		cfg.Step = 8
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 1024
	}
	if len(cfg.Devices) == 0 {
		cfg.Devices = []int{1, 2, 4}
	}
	prof, err := vm.LookupProfile(cfg.Profile)
	if err != nil {
		return nil, err
	}
	res := &MultiGPUResult{Config: cfg, Source: prof.Source}
	cache := &graphCache{cfg: &cfg}
	largest := map[string]int{}
	if cfg.TablesOnly && len(cfg.Batches) == 0 {
		return nil, fmt.Errorf("sweep: tables only, but no batches to run")
	}
	for _, n := range cfg.Devices {
		for _, s := range cfg.schemes() {
			if cfg.TablesOnly {
				break
			}
			p := cfg.largest(cache, s, n)
			res.Largest = append(res.Largest, p)
			if n == cfg.Devices[0] || largest[s.Name] == 0 {
				largest[s.Name] = p.Batch
			}
			cfg.logf("%s %s x%d: largest batch %d/device, %.2f images/s/device (simulated, %s)", cfg.Model, s.Name, n, p.Batch, p.IPS, cfg.Profile)
		}
	}
	batches := cfg.Batches
	if len(batches) == 0 {
		// From the non-swap largest to the largest every swapping scheme
		// trains, in four steps.
		lo, hi := max(largest["non-swap"], cfg.Step), cfg.MaxBatch
		for _, s := range cfg.schemes() {
			if s.Scheduler != nil {
				hi = min(hi, largest[s.Name])
			}
		}
		for k := 0; k <= 4 && hi >= lo; k++ {
			b := (lo + k*(hi-lo)/4) / cfg.Step * cfg.Step
			if k == 4 {
				b = hi
			}
			if len(batches) == 0 || b > batches[len(batches)-1] {
				batches = append(batches, b)
			}
		}
	}
	for _, n := range cfg.Devices {
		if n == 1 {
			continue
		}
		for _, b := range batches {
			for _, s := range cfg.schemes() {
				p := cfg.point(cache, s, n, b)
				res.Table = append(res.Table, p)
				cfg.logf("%s %s x%d batch %d: %s", cfg.Model, s.Name, n, b, p.describe())
			}
		}
	}
	return res, nil
}

func (p MultiPoint) describe() string {
	if !p.OK {
		return "x (" + firstLine(p.Error) + ")"
	}
	return fmt.Sprintf("%.2f images/s/device, step %.3fs (all-reduce %.3fs), swap %d MiB", p.IPS, p.StepS, p.AllReduceS, p.SwapMiB)
}

// largest searches the largest per-device batch (a multiple of Step) at
// which a step of n replicas runs: doubling, then bisection.
func (c *MultiGPUConfig) largest(cache *graphCache, s MultiScheme, n int) MultiPoint {
	best := MultiPoint{Scheme: s.Name, Devices: n, Error: "no batch runs"}
	lo, hi := 0, 0 // lo runs (0: none known), hi fails (0: none known)
	for b := c.Step; b <= c.MaxBatch; b *= 2 {
		p := c.point(cache, s, n, b)
		if !p.OK {
			hi = b
			break
		}
		best, lo = p, b
	}
	if hi == 0 {
		return best
	}
	for hi-lo > c.Step {
		mid := (lo + hi) / 2 / c.Step * c.Step
		if mid <= lo {
			mid = lo + c.Step
		}
		if p := c.point(cache, s, n, mid); p.OK {
			best, lo = p, mid
		} else {
			hi = mid
		}
	}
	return best
}

// point simulates two steps of n replicas at a per-device batch and
// reports the second.
func (c *MultiGPUConfig) point(cache *graphCache, s MultiScheme, n, batch int) MultiPoint {
	p := MultiPoint{Scheme: s.Name, Devices: n, Batch: batch}
	m, err := cache.get(batch)
	if err != nil {
		p.Error = err.Error()
		return p
	}
	prof, err := vm.LookupProfile(c.Profile)
	if err != nil {
		p.Error = err.Error()
		return p
	}
	sims, err := vm.NewSimGroup(prof, n)
	if err != nil {
		p.Error = err.Error()
		return p
	}
	devs := make([]vm.Device, n)
	for i, d := range sims {
		devs[i] = d
		defer d.Close()
	}
	build := func(int) (ooc.Replica, error) {
		return ooc.Replica{Graph: m.Graph, Inputs: G.Nodes{m.Input, m.Labels}, Learnables: m.Learnables, Loss: m.Loss}, nil
	}
	opts := []ooc.Option{ooc.WithAllocator(s.Allocator), ooc.WithChunkSize(2 << 20)}
	if s.Scheduler == nil {
		opts = append(opts, ooc.Baseline())
	} else {
		opts = append(opts, ooc.WithScheduler(s.Scheduler))
	}
	// The budget is what the planners may use: the device less what it
	// holds for the whole run (weights, their gradients and momenta, the
	// batch). Where the allocator then fragments, try 5% less, twice.
	free := prof.Capacity - persistentBytes(m)
	var par *ooc.Parallel
	var first ooc.ParallelStats
	for k := int64(0); k < 3; k++ {
		budget := free - k*prof.Capacity/20
		if budget <= 0 {
			break
		}
		if par != nil {
			_ = par.Close()
		}
		par, err = ooc.CompileParallel(build, batch*n, devs, append(opts, ooc.WithBudget(budget))...)
		// Two steps: a caching allocator's second step starts from what
		// the first left cached, and may run out of memory where it did not.
		for k := 0; k < 2 && err == nil; k++ {
			first = par.Stats()
			par.Reset() // as TapeMachine's, RunAll runs again only after Reset
			err = par.RunAll()
		}
		if err == nil || s.Scheduler == nil {
			break
		}
	}
	if par != nil {
		defer par.Close()
	}
	if err != nil {
		p.Error = err.Error()
		return p
	}
	st := par.Stats()
	st.StepTime -= first.StepTime
	st.AllReduceTime -= first.AllReduceTime
	p.OK = true
	p.StepS, p.AllReduceS = st.StepTime.Seconds(), st.AllReduceTime.Seconds()
	p.IPS = float64(batch) / p.StepS
	for _, mm := range par.Machines() {
		p.SwapMiB += mm.Stats().SwapOutBytes / 2 >> 20
	}
	return p
}

// WriteMultiGPU prints the experiment as the paper's tables, each figure
// labelled simulated with the profile.
func WriteMultiGPU(w io.Writer, r *MultiGPUResult) {
	c := r.Config
	fmt.Fprintf(w, "%s %dx%d, %d classes, simulated on sim:%s (%s)\n", c.Model, c.Image, c.Image, c.Classes, c.Profile, r.Source)
	if len(r.Largest) > 0 {
		fmt.Fprintf(w, "\nLargest batch per device (step %d) and images/s per device there:\n", c.Step)
		fmt.Fprintf(w, "%-8s", "devices")
		for _, s := range c.schemes() {
			fmt.Fprintf(w, " | %-24s", s.Name)
		}
		fmt.Fprintln(w)
	}
	for _, n := range c.Devices {
		if len(r.Largest) == 0 {
			break
		}
		fmt.Fprintf(w, "%-8d", n)
		for _, p := range r.Largest {
			if p.Devices != n {
				continue
			}
			cell := "x"
			if p.OK {
				cell = fmt.Sprintf("%d (%.2f img/s)", p.Batch, p.IPS)
			}
			fmt.Fprintf(w, " | %-24s", cell)
		}
		fmt.Fprintln(w)
	}
	for _, n := range c.Devices {
		var rows []MultiPoint
		for _, p := range r.Table {
			if p.Devices == n {
				rows = append(rows, p)
			}
		}
		if len(rows) == 0 {
			continue
		}
		fmt.Fprintf(w, "\nImages/s per device with %d devices (simulated, sim:%s):\n%-6s", n, c.Profile, "batch")
		for _, s := range c.schemes() {
			fmt.Fprintf(w, " | %-14s", s.Name)
		}
		fmt.Fprintln(w)
		for i := 0; i < len(rows); i += len(c.schemes()) {
			fmt.Fprintf(w, "%-6d", rows[i].Batch)
			for _, p := range rows[i : i+len(c.schemes())] {
				cell := "out of memory"
				if p.OK {
					cell = fmt.Sprintf("%.2f", p.IPS)
				} else if !strings.Contains(p.Error, "memory") && !strings.Contains(p.Error, "infeasible") && !strings.Contains(p.Error, "budget") {
					cell = "x"
				}
				fmt.Fprintf(w, " | %-14s", cell)
			}
			fmt.Fprintln(w)
		}
	}
}

// persistentBytes is what a simulated device holds outside the budget
// (vm's placePersistent): the leaves, and per learnable its gradient and
// momentum.
func persistentBytes(m *models.Model) int64 {
	size := func(n *G.Node) int64 { return int64(n.Shape().TotalSize()) * int64(n.Dtype().Size()) }
	total := size(m.Input) + size(m.Labels)
	for _, l := range m.Learnables {
		total += 3 * size(l)
	}
	return total
}

// CPUReplicas is a measured comparison on this machine's CPU: steps of
// one device on a whole batch against steps of Replicas CPU devices, one
// replica each, on the same batch split among them: with the replicas'
// GEMMs and convolutions splitting GOMAXPROCS among them (ooc's default)
// and with each splitting over every core.
type CPUReplicas struct {
	Model                string
	Batch, Image, Steps  int
	Replicas             int
	Single, Parallel     time.Duration // mean step time, after one warm-up step each
	Shared               time.Duration // the replicas, each GEMM on every core
	SingleLoss, ParaLoss float64       // the last step's loss (they differ by rounding and batch norm statistics)
	// Ceiling is what the machine gives concurrency meanwhile: the time of
	// n loops of plain arithmetic one after another over their time on n
	// goroutines at once (n on an idle n-core machine, about 1 when every
	// core is busy with other work), measured between the steps.
	Ceiling float64
}

// spin is plain arithmetic for about a few tens of milliseconds, what the
// ceiling measurement runs.
func spin() float64 {
	x := 0.0
	for i := 0; i < 30_000_000; i++ {
		x += float64(i%7) * 1.0000001
	}
	return x
}

var spinSink atomic.Uint64

// concurrency times n spins in a row and n at once.
func concurrency(n int) (serial, parallel time.Duration) {
	t0 := time.Now()
	for range n {
		spinSink.Add(uint64(spin()))
	}
	serial = time.Since(t0)
	t0 = time.Now()
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			spinSink.Add(uint64(spin()))
		}()
	}
	wg.Wait()
	return serial, time.Since(t0)
}

// MeasureCPUReplicas times steps of one CPU device and of n CPU replicas
// (split and shared cores), alternating one step of each so all see the
// same machine load.
func MeasureCPUReplicas(model string, batch, image, classes, steps, n int) (*CPUReplicas, error) {
	build := func(b int) (ooc.Replica, error) {
		m, err := models.Build(model, models.Config{Batch: b, Channels: 3, Height: image, Width: image, Classes: classes, Seed: 1})
		if err != nil {
			return ooc.Replica{}, err
		}
		return ooc.Replica{Graph: m.Graph, Inputs: G.Nodes{m.Input, m.Labels}, Learnables: m.Learnables, Loss: m.Loss}, nil
	}
	one, err := models.Build(model, models.Config{Batch: batch, Channels: 3, Height: image, Width: image, Classes: classes, Seed: 1})
	if err != nil {
		return nil, err
	}
	if err := one.BindRandom(1); err != nil {
		return nil, err
	}
	single, err := ooc.Compile(one.Graph, ooc.BindDualValues(one.Learnables...))
	if err != nil {
		return nil, err
	}
	defer single.Close()
	replicas := func(workers int) (*ooc.Parallel, error) {
		devs, err := vm.NewDevices(fmt.Sprintf("cpu*%d", n), 0)
		if err != nil {
			return nil, err
		}
		par, err := ooc.CompileParallel(build, batch, devs, ooc.BindDualValues(), ooc.WithReplicaWorkers(workers))
		if err != nil {
			return nil, err
		}
		pm := par.Model()
		if err := (&models.Model{Input: pm.Inputs[0], Labels: pm.Inputs[1]}).BindRandom(1); err != nil {
			_ = par.Close()
			return nil, err
		}
		return par, nil
	}
	par, err := replicas(0)
	if err != nil {
		return nil, err
	}
	defer par.Close()
	shared, err := replicas(-1)
	if err != nil {
		return nil, err
	}
	defer shared.Close()
	r := &CPUReplicas{Model: model, Batch: batch, Image: image, Steps: steps, Replicas: n}
	timeStep := func(vm G.VM) (time.Duration, error) {
		t0 := time.Now()
		err := vm.RunAll()
		vm.Reset()
		return time.Since(t0), err
	}
	var serial, parallel time.Duration
	for s := 0; s <= steps; s++ {
		var ts [3]time.Duration
		for k, m := range []G.VM{single, par, shared} {
			if ts[k], err = timeStep(m); err != nil {
				return nil, err
			}
		}
		if s > 0 {
			r.Single += ts[0] / time.Duration(steps)
			r.Parallel += ts[1] / time.Duration(steps)
			r.Shared += ts[2] / time.Duration(steps)
			a, b := concurrency(n)
			serial, parallel = serial+a, parallel+b
		}
	}
	r.Ceiling = serial.Seconds() / parallel.Seconds()
	r.SingleLoss = float64(one.Loss.Value().Data().(float32))
	r.ParaLoss = float64(par.Model().Loss.Value().Data().(float32))
	return r, nil
}
