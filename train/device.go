package train

import (
	"errors"
	"fmt"

	"github.com/gorgonia-ooc/outofcore/models"
	"github.com/gorgonia-ooc/outofcore/ooc"
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

// fitMemory picks the device and the scheduling budget for a budget of b
// bytes with ooc.FitDevice: it replays one step's allocations on an
// accounted device of the same size (a simulated step: no compute) and
// lowers the scheduling budget by 5% of b until the allocator serves every
// allocation, so that a real step cannot run out of the device's memory
// however the allocator rounds. A chunk chosen for the device
// (ooc.ChunkFor) is also halved, twice at most, at each budget before the
// budget is lowered: tensors that are no whole number of chunks (28x28
// images) waste less in smaller ones.
func fitMemory(cfg *Config, m *models.Model, b int64) (memoryPlan, error) {
	if cfg.Scheduler == "baseline" || b <= 0 {
		return memoryPlan{chunk: cfg.Chunk}, nil
	}
	f, err := ooc.FitDevice(m.Graph, b, cfg.leastOptions(m)...)
	p := memoryPlan{device: f.Device, chunk: f.Chunk, planned: f.Planned, tries: f.Tries,
		adaptive: cfg.allocator() == ooc.VA && cfg.Chunk == 0}
	if errors.Is(err, alloc.ErrOutOfMemory) {
		return p, &deviceTooSmallError{device: p.device, last: err}
	}
	return p, err
}

// deviceTooSmallError is a device in which the allocator serves no plan's
// step: the budget plans, but rounding blocks to the allocator's segments
// or chunks needs more memory than the device has.
type deviceTooSmallError struct {
	device int64
	last   error
}

func (e *deviceTooSmallError) Error() string {
	return fmt.Sprintf("a CPU device of %s: %v", FormatBytes(e.device), e.last)
}

// leastOptions are the options under which ooc.LeastBudget finds the least
// budget that fitMemory serves: the run's scheduler, allocator and chunk (or
// none: ooc.LeastBudget then tries ooc.ChunkFor's, as fitMemory does), on a
// device of the budget's size, holding what the CPU device holds.
func (c *Config) leastOptions(m *models.Model) []ooc.Option {
	return append(c.compileOptionsFor(memoryPlan{chunk: c.Chunk}), ooc.BindDualValues(m.Learnables...))
}
