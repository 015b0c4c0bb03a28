package train

import (
	"errors"
	"fmt"

	"github.com/gorgonia-ooc/outofcore/models"
	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm"
	"github.com/gorgonia-ooc/outofcore/vm/alloc"
)

// memoryPlan is how a budget becomes a device: on the CPU device a budget of
// B bytes is a device of B bytes, as a GPU's memory is, so the allocator
// can never reserve more; the scheduler then plans under the largest budget
// (at most B) whose step the allocator serves in that device.
type memoryPlan struct {
	device   int64 // the training device's capacity (0: the default CPU device)
	chunk    int64 // VA chunk size (0: ooc's default)
	planned  int64 // the scheduler's budget
	adaptive bool  // the chunk was chosen for the budget, not given
	tries    int   // simulated steps tried (budgets times chunks) before one fitted
}

// chunkFor is the VA chunk size for a CPU device of b bytes when none is
// given: the paper's 40 MiB on a GPU-sized device; on a smaller one the
// largest power of two up to b/24, down to the host page (the CPU device's
// granularity), so that the device holds many chunks (about 24 to 48). A
// power of two because a model's tensors mostly are whole multiples of one
// (ResNet-18's at batch 32 on 32x32 images: 512 KiB to 8 MiB), so a large
// block fills its chunks: b/24 itself (say 600 KiB) wastes a partial chunk
// on every block, and made ResNet-18's least device 81% of its peak instead
// of 64%.
func chunkFor(b int64) int64 {
	if b/24 >= alloc.DefaultChunkSize {
		return alloc.DefaultChunkSize
	}
	c := alloc.HostGranularity()
	for 2*c <= b/24 {
		c *= 2
	}
	return c
}

// bestFitSegment is the least memory the best-fit allocator can serve
// anything from: PyTorch's 2 MiB small-pool segment.
const bestFitSegment = 2 << 20

// fitMemory picks the device and the scheduling budget for a budget of b
// bytes. It replays one step's allocations on an accounted device of the
// same size (a simulated step: no compute) and lowers the scheduling budget
// by 5% of b until the allocator serves every allocation, so that a real
// step cannot run out of the device's memory however the allocator rounds.
// A chunk chosen for the device is also halved, twice at most, at each
// budget before the budget is lowered: tensors that are no whole number of
// chunks (28x28 images) waste less in smaller ones.
func fitMemory(cfg *Config, m *models.Model, b int64) (memoryPlan, error) {
	if cfg.Scheduler == "baseline" || b <= 0 {
		return memoryPlan{chunk: cfg.Chunk}, nil
	}
	p := memoryPlan{chunk: cfg.Chunk, planned: b}
	chunks := []int64{p.chunk}
	if cfg.allocator() == ooc.VA && p.chunk == 0 {
		c := chunkFor(b)
		p.adaptive, chunks = true, []int64{c}
		for i := 0; i < 2 && c/2 >= alloc.HostGranularity(); i++ {
			c /= 2
			chunks = append(chunks, c)
		}
	}
	// The device holds at least one chunk (a 2 MiB segment for best-fit's
	// small pool): nothing smaller can serve an allocation.
	p.device = max(b, chunks[0], alloc.HostGranularity())
	if cfg.allocator() == ooc.BestFit {
		p.device = max(p.device, bestFitSegment)
	}
	var last error
	for budgets := 1; budgets <= 12 && p.planned > 0; budgets++ {
		for _, c := range chunks {
			p.chunk = c
			p.tries++
			err := replayStep(cfg, m, p)
			switch {
			case err == nil:
				return p, nil
			case errors.Is(err, alloc.ErrOutOfMemory):
				last = err
			case budgets == 1:
				return p, err // the budget itself does not plan: the caller explains it
			default:
				// Lowered until no plan exists: the allocator cannot serve
				// any plan in this device.
				return p, &deviceTooSmallError{device: p.device, chunk: chunks[0], last: last}
			}
		}
		p.planned -= b / 20
	}
	return p, &deviceTooSmallError{device: p.device, chunk: chunks[0], last: last}
}

// deviceTooSmallError is a device in which the allocator serves no plan's
// step: the budget plans, but rounding blocks to the allocator's segments
// or chunks needs more memory than the device has.
type deviceTooSmallError struct {
	device, chunk int64
	last          error
}

func (e *deviceTooSmallError) Error() string {
	return fmt.Sprintf("a CPU device of %s cannot hold a step: the budget plans, but the allocator, rounding blocks to its chunks or segments, runs out of the device's memory under every budget tried (%v)",
		FormatBytes(e.device), e.last)
}

// leastDevice finds, by bisection between b (which fails) and the larger of
// twice the in-core peak and the peak plus 16 best-fit segments (a small
// model's rounding to best-fit's 2 MiB segments can cost more than its whole
// peak), about the smallest budget whose device serves a step, or 0 when
// none up there does.
func leastDevice(cfg *Config, m *models.Model, b, inCore int64) int64 {
	fits := func(d int64) bool { _, err := fitMemory(cfg, m, d); return err == nil }
	lo, hi := b, max(2*inCore, inCore+16*bestFitSegment, b+bestFitSegment)
	if !fits(hi) {
		return 0
	}
	for i := 0; i < 10 && hi-lo > hi/100; i++ {
		if mid := lo + (hi-lo)/2; fits(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// replayStep runs one simulated step of the plan on an accounted device of
// the plan's size that maps memory as the CPU device does (page
// granularity), holding what the CPU device holds (ooc.HostPersistent).
func replayStep(cfg *Config, m *models.Model, p memoryPlan) error {
	prof, err := vm.LookupProfile("v100-pcie")
	if err != nil {
		return err
	}
	prof.Capacity, prof.Granularity = p.device, alloc.HostGranularity()
	dev, err := vm.NewSim(prof)
	if err != nil {
		return err
	}
	defer dev.Close()
	opts := append(cfg.compileOptionsFor(p), ooc.WithDevice(dev), ooc.HostPersistent(), ooc.BindDualValues(m.Learnables...))
	machine, err := ooc.Compile(m.Graph, opts...)
	if err != nil {
		return err
	}
	defer machine.Close()
	return machine.RunAll()
}
