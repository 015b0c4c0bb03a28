package ooc

import (
	"fmt"
	"io"

	"gorgonia.org/gorgonia"

	"github.com/gorgonia-ooc/outofcore/vm"
)

// AllocatorKind selects how device memory is carved up.
type AllocatorKind int

const (
	// VA maps fixed-size physical chunks into contiguous virtual ranges: no
	// external fragmentation however the swapping interleaves. The default.
	VA AllocatorKind = iota
	// BestFit is a caching best-fit allocator as PyTorch's: fast, but it
	// fragments under heavy swapping. The baseline the paper compares with.
	BestFit
)

func (k AllocatorKind) String() string {
	switch k {
	case VA:
		return "va"
	case BestFit:
		return "bestfit"
	}
	return fmt.Sprintf("AllocatorKind(%d)", int(k))
}

// ParseAllocator turns "va" or "bestfit" into an AllocatorKind.
func ParseAllocator(s string) (AllocatorKind, error) {
	switch s {
	case "va":
		return VA, nil
	case "bestfit", "best-fit":
		return BestFit, nil
	}
	return 0, fmt.Errorf("ooc: unknown allocator %q (want va or bestfit)", s)
}

// An Option configures Compile.
type Option func(*settings)

type settings struct {
	budget         int64
	window         int64
	scheduler      Scheduler
	allocator      AllocatorKind
	chunk          int64
	chunkSet       bool // WithChunkSize was given
	wsLimit        int64
	wsSet          bool // WithWorkspaceLimit was given: no automatic tiling
	nodeValues     int64
	device         vm.Device
	bindAll        bool
	bind           []*gorgonia.Node
	outputs        []*gorgonia.Node
	baseline       bool
	inference      bool
	poison         bool
	model          *vm.Sim // op times measured on the device (see Compile)
	hostPers       bool    // HostPersistent
	reducer        AllReducer
	log            io.Writer
	replicaWorkers int
	replica        replicaPos // which replica CompileParallel plans for
	world          worldPos   // WithWorld
	errs           []error
}

func (s *settings) fail(format string, args ...interface{}) {
	s.errs = append(s.errs, fmt.Errorf("ooc: "+format, args...))
}

// WithBudget sets the device-memory budget in bytes: the most the program's
// activations, gradients and workspaces may hold on the device at once. 0
// (the default) means the device's capacity.
func WithBudget(bytes int64) Option {
	return func(s *settings) {
		if bytes < 0 {
			s.fail("WithBudget(%d): the budget must not be negative", bytes)
			return
		}
		s.budget = bytes
	}
}

// WithWorkspaceLimit caps the scratch memory of ops that can work in tiles
// (vm.TiledWorkspaceOp: the convolutions of models/layers) at bytes, never
// below the op's least workspace. Results are the same bits at any limit; a
// smaller one lowers each convolution's resident need, and with it the least
// feasible budget, at the cost of more and smaller GEMMs (a 3x3 forward in
// 256-pixel tiles took 1.5x its whole-image time; docs/results.md).
//
// Without this option the limit is automatic: every op gets its full
// workspace, unless the budget is too tight for a function to run, when
// Compile and Plan shrink the workspaces of the tiling functions that do not
// fit, each just enough (down to its least), and plan again. So a budget
// above the least feasible one with whole-image workspaces plans as before,
// and one below it plans wherever tiles make it feasible. WithWorkspaceLimit(0)
// gives every op its full workspace, never tiled.
func WithWorkspaceLimit(bytes int64) Option {
	return func(s *settings) {
		if bytes < 0 {
			s.fail("WithWorkspaceLimit(%d): the limit must not be negative", bytes)
			return
		}
		s.wsLimit, s.wsSet = bytes, true
	}
}

// DefaultNodeValueLimit is the most host memory, in bytes, that the
// forward's intermediate values may take for Compile to bind each to its
// node after RunAll, as TapeMachine leaves every node bound (see
// WithNodeValues).
const DefaultNodeValueLimit = 64 << 20

// WithNodeValues sets the most host memory, in bytes, that the forward's
// intermediate values (a SoftMax prediction the cost reads, say) may take
// together for each to be bound to its node after RunAll, as TapeMachine
// binds every node. Each gets a host tensor, made on the first run and
// reused, holding a copy of its op's result taken as the op produced it.
// The copies are host memory, as TapeMachine's own values are, and do not
// count in the device budget. The forward's nodes the cost does not read
// (dead ends: a second head, an accuracy's Bool mask) count too, and are
// computed only while they fit with the rest. When the forward needs more
// than limit none is bound: name the nodes a script reads with WithOutputs
// or gorgonia.Read. 0 binds none; the default is DefaultNodeValueLimit. On a
// device that computes on itself (CUDA) each is a download after its op
// (the host waits for it): the same values, at the cost of a copy and a
// stall per node and step; a script that reads only the loss passes 0.
func WithNodeValues(limit int64) Option {
	return func(s *settings) {
		if limit < 0 {
			s.fail("WithNodeValues(%d): the limit must not be negative", limit)
			return
		}
		s.nodeValues = limit
	}
}

// WithWindow sets the schedule-window W in bytes for the window scheduler.
// 0 (the default) picks it automatically.
func WithWindow(bytes int64) Option {
	return func(s *settings) {
		if bytes < 0 {
			s.fail("WithWindow(%d): the window must not be negative", bytes)
			return
		}
		s.window = bytes
	}
}

// WithScheduler sets the swap scheduler (default: Auto, the faster of
// Window and Hybrid for this graph and device by simulated makespan).
func WithScheduler(sc Scheduler) Option {
	return func(s *settings) {
		if sc == nil {
			s.fail("WithScheduler(nil)")
			return
		}
		s.scheduler = sc
	}
}

// WithAllocator selects the device allocator: VA (the default) or BestFit.
func WithAllocator(kind AllocatorKind) Option {
	return func(s *settings) {
		if kind != VA && kind != BestFit {
			s.fail("WithAllocator(%v): unknown allocator", kind)
			return
		}
		s.allocator = kind
	}
}

// WithChunkSize sets the VA allocator's physical chunk size in bytes: a
// positive multiple of the device memory's granularity (the host page, 4
// KiB, on the CPU device; 2 MiB on the simulated devices and today's GPUs).
// The paper uses 40 MiB, nnabla 20 MiB.
func WithChunkSize(bytes int64) Option {
	return func(s *settings) {
		if bytes <= 0 {
			s.fail("WithChunkSize(%d): the chunk size must be positive", bytes)
			return
		}
		s.chunk, s.chunkSet = bytes, true
	}
}

// WithDevice runs the program on the given device (default: a new CPU device).
func WithDevice(d vm.Device) Option {
	return func(s *settings) {
		if d == nil {
			s.fail("WithDevice(nil)")
			return
		}
		s.device = d
	}
}

// WithPlanningTimes makes the planners that time ops (Greedy, DynProg,
// VDNN, Hybrid) plan with the op and link times of the simulated device
// sim, whatever device the program runs on, instead of measuring a first
// step there: to plan for a GPU's balance of compute and link on a CPU,
// say.
func WithPlanningTimes(sim *vm.Sim) Option {
	return func(s *settings) {
		if sim == nil {
			s.fail("WithPlanningTimes(nil)")
			return
		}
		s.model = sim
	}
}

// BindDualValues makes the gradients of the given learnables accumulate
// across runs, as gorgonia.BindDualValues does for the TapeMachine, so that
// solver.Step(gorgonia.NodesToValueGrads(ps)) after RunAll sees them (the
// solvers zero them). With no nodes it applies to every learnable.
func BindDualValues(nodes ...*gorgonia.Node) Option {
	return func(s *settings) {
		if len(nodes) == 0 {
			s.bindAll = true
		}
		s.bind = append(s.bind, nodes...)
	}
}

// HostPersistent makes a simulated device hold only what the CPU device
// holds: the step's variables and workspaces, with the learnables, their
// gradients and the optimizer's state left in host memory. A simulated
// step then makes exactly the device allocations a CPU step makes, so it
// tells, without computing, whether an allocator serves a step in a CPU
// device of the simulated device's capacity.
func HostPersistent() Option {
	return func(s *settings) { s.hostPers = true }
}

// WithOutputs names nodes besides the cost whose values RunAll must leave
// readable (predictions for an accuracy count, say). A graph without a cost
// (inference only) needs at least one.
func WithOutputs(nodes ...*gorgonia.Node) Option {
	return func(s *settings) { s.outputs = append(s.outputs, nodes...) }
}

// Baseline compiles the in-core reference: no swapping, each variable freed
// right after its last use (liveness-based, as the paper's baseline framework).
func Baseline() Option {
	return func(s *settings) { s.baseline = true }
}

// Inference compiles a forward-only run: the backward that gorgonia.Grad
// added is left out (no gradients are computed or bound, and Read and Set
// statements of backward values are skipped), ops with a training mode
// (batch norm, dropout) run in inference mode, as under gorgonia's
// EvalMode, and what the forward holds goes out of core like a training
// step's activations. The cost, Read statements and WithOutputs say what to
// keep. A graph with no gradients runs forward only without this option,
// in training mode as gorgonia's TapeMachine would run it.
func Inference() Option {
	return func(s *settings) { s.inference = true }
}

// withPoison makes every device block start as 0xFF bytes (NaN), so a test
// sees any op that reads memory it did not write.
func withPoison() Option { return func(s *settings) { s.poison = true } }
