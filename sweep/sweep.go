// Package sweep runs batch-size sweeps: for each scheduler, allocator and
// batch size, the largest scheduling budget at which a training step
// completes without running out of device memory, and the speed there, as
// in Table 1 and Fig. 3 of Sony's out-of-core paper.
//
// On the simulated device a step is planned and replayed through the same
// machine and allocator code against a device profile; every figure is
// labelled simulated with the profile's name. On the CPU and CUDA devices the
// steps run for real on this machine, and the device's memory is a hard
// limit. On a GPU a point can cost a minute, so a sweep can stop a row at its
// first failure (StopAtOOM), stop starting points after a TimeLimit, and hand
// each point out as it comes (OnPoint): the GPU bundle's run.sh uses all three.
package sweep

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/models"
	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm"
)

// Config is one sweep.
type Config struct {
	Model   string
	Image   int // height, and width unless Width is set
	Width   int // width (0: Image)
	Classes int
	Batches []int
	// Device is "cpu", "sim:PROFILE" or "cuda[:N]" (vm.NewDevice).
	Device string
	// Capacity is the device memory in bytes (0: the profile's, or for the
	// CPU device 64 MiB).
	Capacity int64
	// Schedulers are baseline (in core) and any of SchedulerNamed's
	// (window, lms, hybrid, ...).
	Schedulers []string
	Allocators []string // bestfit, va
	ChunkSize  int64    // VA chunk size (0: 40 MiB, the paper's)
	// Steps timed per point on a real (CPU) device, after one warm-up step:
	// a point's images/s is the batch over the median step time (0: 5).
	// The budget search runs one step per budget tried; only the budget
	// found is timed.
	Steps int
	// UntilStop extends the batch list (by the last step between batches)
	// until every row has run out of memory, up to MaxBatch.
	UntilStop bool
	MaxBatch  int
	// StopAtOOM tries a row (scheduler and allocator) at no batch larger
	// than the first it failed at: on a GPU a failed point costs a whole
	// budget search, and a larger batch needs more memory, not less.
	StopAtOOM bool
	// TimeLimit, when positive, starts no point after it has passed since
	// Run began; the points not run are left out and Run's Stopped says
	// so. A point under way runs to its end.
	TimeLimit time.Duration
	// OnPoint, when set, is called after each point with the results so
	// far (to write them out as they come, so a run killed from outside
	// keeps what it measured).
	OnPoint func(sofar []Result)
	// Log receives a progress line per point (nil: none).
	Log io.Writer
	// Verbose also logs every budget the search tried and why it failed.
	Verbose bool
	// Context, if set, ends the sweep between points once it is done ("ooc
	// doctor"'s deadline): Run returns the points measured so far.
	Context context.Context
}

// Result is one point of a sweep.
type Result struct {
	Model     string  `json:"model"`
	Image     int     `json:"image"`
	Width     int     `json:"width,omitempty"` // when not Image
	Batch     int     `json:"batch"`
	Scheduler string  `json:"scheduler"`
	Allocator string  `json:"allocator"`
	Device    string  `json:"device"`
	Simulated bool    `json:"simulated"`
	OK        bool    `json:"ok"`
	Error     string  `json:"error"`
	IPS       float64 `json:"ips"`
	Budget    int64   `json:"budget_bytes"`
	Peak      int64   `json:"peak_bytes"`
	Reserved  int64   `json:"reserved_bytes"`
	Swap      int64   `json:"swap_bytes"`
	StallS    float64 `json:"stall_s"`
	// Capacity is the device memory the point ran in (not in the JSON of
	// the schema; kept for tables and plots).
	Capacity int64 `json:"capacity_bytes"`
	// TimedSteps is how many timed steps IPS is the median of (real
	// devices; 0 on a simulated one, whose step time is computed).
	TimedSteps int `json:"timed_steps,omitempty"`
}

func (c *Config) logf(format string, args ...interface{}) {
	if c.Log != nil {
		fmt.Fprintf(c.Log, format+"\n", args...)
	}
}

// verbosef logs the search's details when Verbose is set.
func (c *Config) verbosef(format string, args ...interface{}) {
	if c.Verbose {
		c.logf(format, args...)
	}
}

// median is the middle duration (the mean of the middle two for an even count).
func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// width is the input width.
func (c *Config) width() int {
	if c.Width > 0 {
		return c.Width
	}
	return c.Image
}

// Size is the input size as HxW.
func (r Result) Size() string {
	w := r.Width
	if w == 0 {
		w = r.Image
	}
	return fmt.Sprintf("%dx%d", r.Image, w)
}

// Check reports what in the configuration Run would refuse (no batch sizes,
// an unknown scheduler or allocator), before any work.
func (c Config) Check() error { return c.defaults() }

func (c *Config) defaults() error {
	if c.Classes == 0 {
		c.Classes = 1000
	}
	if len(c.Schedulers) == 0 {
		c.Schedulers = []string{"baseline", "lms", "window"}
	}
	if len(c.Allocators) == 0 {
		c.Allocators = []string{"bestfit", "va"}
	}
	if c.ChunkSize == 0 {
		c.ChunkSize = 40 << 20
	}
	if c.Steps <= 0 {
		c.Steps = 5
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = 4096
	}
	if len(c.Batches) == 0 {
		return errors.New("sweep: no batch sizes")
	}
	for _, s := range c.Schedulers {
		if s == "baseline" {
			continue
		}
		if _, err := SchedulerNamed(s); err != nil {
			return fmt.Errorf("sweep: unknown scheduler %q (want baseline or one of %s)", s, strings.Join(AllSchedulerNames(), ", "))
		}
	}
	if c.TimeLimit < 0 {
		return fmt.Errorf("sweep: negative time limit %v", c.TimeLimit)
	}
	for _, a := range c.Allocators {
		if _, err := ooc.ParseAllocator(a); err != nil {
			return fmt.Errorf("sweep: %w", err)
		}
	}
	return nil
}

// newDevice makes a fresh device for one point, so that no allocator's
// cache carries over between points.
func (c *Config) newDevice() (vm.Device, error) {
	capacity := c.Capacity
	if capacity == 0 && (c.Device == "cpu" || c.Device == "") {
		capacity = 64 << 20
	}
	return vm.NewDevice(c.Device, capacity)
}

// row is one scheduler and allocator: a row of the table.
type row struct{ sched, alloc string }

// Run performs the sweep. With a TimeLimit it may return the points that
// ran and a *TimeLimitError.
func Run(cfg Config) ([]Result, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	var rows []row
	for _, s := range cfg.Schedulers {
		for _, a := range cfg.Allocators {
			rows = append(rows, row{s, a})
		}
	}
	alive := map[row]bool{}
	for _, r := range rows {
		alive[r] = true
	}
	var out []Result
	start := time.Now()
	batches := append([]int(nil), cfg.Batches...)
	for bi := 0; bi < len(batches); bi++ {
		batch := batches[bi]
		if !cfg.anyToRun(rows, alive) {
			break
		}
		if cfg.TimeLimit > 0 && time.Since(start) >= cfg.TimeLimit {
			return out, &TimeLimitError{Limit: cfg.TimeLimit, Points: len(out), Batch: batch}
		}
		m, err := models.Build(cfg.Model, models.Config{Batch: batch, Channels: 3, Height: cfg.Image, Width: cfg.width(), Classes: cfg.Classes, Dtype: tensor.Float32, Seed: 1})
		if err != nil {
			return out, err
		}
		if !strings.HasPrefix(cfg.Device, "sim:") {
			if err := m.BindRandom(int64(batch)); err != nil {
				return out, err
			}
		}
		for _, r := range rows {
			if cfg.StopAtOOM && !alive[r] {
				continue
			}
			if cfg.TimeLimit > 0 && time.Since(start) >= cfg.TimeLimit {
				return out, &TimeLimitError{Limit: cfg.TimeLimit, Points: len(out), Batch: batch}
			}
			if cfg.Context != nil && cfg.Context.Err() != nil {
				return out, nil
			}
			res := cfg.point(m, batch, r.sched, r.alloc)
			if !res.OK {
				alive[r] = false
			}
			cfg.logf("%s batch %d %s+%s: %s", cfg.Model, batch, r.sched, r.alloc, describe(res))
			out = append(out, res)
			if cfg.OnPoint != nil {
				cfg.OnPoint(out)
			}
		}
		anyAlive := false
		for _, r := range rows {
			anyAlive = anyAlive || alive[r]
		}
		if cfg.UntilStop && bi == len(batches)-1 && anyAlive {
			stepB := batch
			if len(batches) > 1 {
				stepB = batch - batches[len(batches)-2]
			}
			if next := batch + max(stepB, 1); next <= cfg.MaxBatch {
				batches = append(batches, next)
			}
		}
	}
	return out, nil
}

// anyToRun is whether a batch has a row left to run: with StopAtOOM, a
// row stops at its first failure, and the sweep when every row has.
func (c *Config) anyToRun(rows []row, alive map[row]bool) bool {
	if !c.StopAtOOM {
		return true
	}
	for _, r := range rows {
		if alive[r] {
			return true
		}
	}
	return false
}

// TimeLimitError is Run's error when Config.TimeLimit passed before every
// point ran; Run returns the points that did run with it.
type TimeLimitError struct {
	Limit  time.Duration
	Points int // points run
	Batch  int // the batch size the sweep stopped at
}

func (e *TimeLimitError) Error() string {
	return fmt.Sprintf("sweep: time limit %v reached after %d points; batch %d and larger not run (or not for every row)", e.Limit, e.Points, e.Batch)
}

func describe(r Result) string {
	if !r.OK {
		return "x (" + firstLine(r.Error) + ")"
	}
	return fmt.Sprintf("%.1f images/s at budget %d MiB (peak %d MiB, reserved %d MiB, swap %d MiB, stall %.3fs)",
		r.IPS, r.Budget>>20, r.Peak>>20, r.Reserved>>20, r.Swap>>20, r.StallS)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// point finds, for one scheduler and allocator at one batch size, the
// largest scheduling budget at which a step completes, and measures it.
// The baseline is tried once, with the whole device; the others start
// from the whole device and step down by 5% of it until a step runs, then
// bisect between that and the last budget that failed.
func (c *Config) point(m *models.Model, batch int, sched, allocName string) Result {
	res := Result{Model: c.Model, Image: c.Image, Batch: batch, Scheduler: sched, Allocator: allocName, Device: c.Device}
	if c.width() != c.Image {
		res.Width = c.width()
	}
	dev, err := c.newDevice()
	if err != nil {
		res.Error = err.Error()
		return res
	}
	res.Device, res.Simulated, res.Capacity = dev.Name(), dev.Simulated(), dev.Capacity()
	dev.Close()
	if sched == "baseline" {
		return c.try(m, res, dev.Capacity(), c.Steps)
	}
	capacity := dev.Capacity()
	var best, last Result
	failed := capacity + 1 // the least budget known to run out of memory at run time
	infeasible := int64(0) // the greatest budget known to be unplannable
	for k := 0; k < 20; k++ {
		b := capacity - int64(k)*capacity/20
		r := c.try(m, res, b, 0)
		if r.OK {
			best = r
			break
		}
		last = r
		if isBudgetError(r.Error) {
			infeasible = b
			break
		}
		failed = b
	}
	// Between a budget too small to plan and one whose plan runs out of
	// memory there may be budgets that work: bisect for one.
	for i := 0; !best.OK && i < 8 && failed <= capacity && failed-infeasible > capacity/1000; i++ {
		mid := (infeasible + failed) / 2
		r := c.try(m, res, mid, 0)
		switch {
		case r.OK:
			best = r
		case isBudgetError(r.Error):
			infeasible, last = mid, r
		default:
			failed, last = mid, r
		}
	}
	if !best.OK {
		return last
	}
	lo := best.Budget
	for i := 0; i < 4 && failed-lo > capacity/200; i++ {
		mid := (lo + failed) / 2
		if r := c.try(m, res, mid, 0); r.OK {
			best, lo = r, mid
		} else {
			failed = mid
		}
	}
	if !best.Simulated {
		// Time the budget found: the search ran one untimed step per budget.
		if r := c.try(m, res, best.Budget, c.Steps); r.OK {
			best = r
		}
	}
	return best
}

func isBudgetError(s string) bool { return strings.Contains(s, "is infeasible") }

// try compiles and runs one step at one budget; on a real device, with
// timed > 0, that step is a warm-up and timed more steps follow, and the
// images/s is the batch over their median step time.
func (c *Config) try(m *models.Model, res Result, budget int64, timed int) Result {
	res.Budget = budget
	dev, err := c.newDevice()
	if err != nil {
		res.Error = err.Error()
		return res
	}
	defer dev.Close()
	kind, _ := ooc.ParseAllocator(res.Allocator)
	// A sweep times steps and reads the loss: no host copies of activations.
	opts := []ooc.Option{ooc.WithDevice(dev), ooc.WithAllocator(kind), ooc.WithChunkSize(c.ChunkSize), ooc.WithBudget(budget), ooc.WithNodeValues(0)}
	if res.Scheduler == "baseline" {
		opts = append(opts, ooc.Baseline())
	} else {
		sc, err := SchedulerNamed(res.Scheduler)
		if err != nil {
			res.Error = err.Error()
			return res
		}
		opts = append(opts, ooc.WithScheduler(sc))
	}
	opts = append(opts, ooc.BindDualValues(m.Learnables...))
	machine, err := ooc.Compile(m.Graph, opts...)
	if err != nil {
		res.Error = err.Error()
		c.verbosef("  budget %d: %s", budget, firstLine(res.Error))
		return res
	}
	defer machine.Close()
	res.Peak = machine.Program().Peak
	start := time.Now()
	if err := machine.RunAll(); err != nil {
		res.Error = err.Error()
		c.verbosef("  budget %d: %s", budget, firstLine(res.Error))
		return res
	}
	elapsed := time.Since(start)
	if dev.Simulated() {
		elapsed = machine.Stats().StepTime
	} else if timed > 0 {
		// Each timed step is a solver update and a forward and backward pass,
		// as in training; the median is robust to a shared machine's noise.
		solver := G.NewVanillaSolver(G.WithLearnRate(1e-3))
		times := make([]time.Duration, 0, timed)
		for i := 0; i < timed; i++ {
			t0 := time.Now()
			if err := solver.Step(G.NodesToValueGrads(m.Learnables)); err != nil {
				res.Error = err.Error()
				return res
			}
			machine.Reset()
			if err := machine.RunAll(); err != nil {
				res.Error = err.Error()
				return res
			}
			times = append(times, time.Since(t0))
		}
		elapsed = median(times)
		res.TimedSteps = timed
	}
	st := machine.Stats()
	res.OK = true
	res.IPS = float64(res.Batch) / elapsed.Seconds()
	// The allocator's peak reservation: on a simulated device it includes
	// the persistent weights, gradients and momentum.
	res.Reserved = st.ReservedBytes
	res.Swap = (st.SwapInBytes + st.SwapOutBytes) / int64(st.Steps)
	res.StallS = st.StallTime.Seconds() / float64(st.Steps)
	res.Peak = st.PeakDeviceBytes
	return res
}
