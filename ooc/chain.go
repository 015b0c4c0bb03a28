package ooc

import (
	"fmt"
	"time"

	"github.com/gorgonia-ooc/outofcore/vm"
)

// Chain is the offloading paper's model of a training step (its section
// 3.1): forward stages F_0..F_L, where F_i reads x_i and writes x_{i+1},
// then backward stages B_L..B_0, where B_i reads x_i, x_{i+1} and y_{i+1}
// and writes y_i, after which x_{i+1} is no longer needed. Only the x_i may
// be offloaded.
//
// ChainOf derives a chain from a trace: the x_i are the trace's activations
// (forward variables the backward reads), in the order the forward makes
// them; F_i is the run of forward functions up to and including x_{i+1}'s
// producer, F_L the rest of the forward up to the cost. B_i is the run of
// backward functions ending at the last read of x_{i+1}, taking those last
// reads in order of decreasing index (on a DAG where a later activation is
// read after an earlier one, the earlier one's stage ends with the later
// read). B_0 also takes the backward's tail and the optimizer's update.
// The memory of each stage beyond the x it holds (temporaries, gradients,
// workspace) is its Ex: the most its functions hold at once in the in-core
// tape, less the activations the chain counts as held. Any DAG has such a
// chain; where a DAG frees an activation earlier than the chain says, the
// chain overstates memory, never understates it.
type Chain struct {
	// UF[i] and UB[i] are the times of F_i and B_i, i = 0..L.
	UF, UB []time.Duration
	// X[i] is |x_i| and Y[i] is |y_i| in bytes, i = 0..L+1. x_0 is the
	// input (0 when it is a leaf outside the budget).
	X, Y []int64
	// ExF[i] and ExB[i] are the extra bytes F_i and B_i need, i = 0..L.
	ExF, ExB []int64
	// Beta is the host link's bandwidth, bytes per second.
	Beta float64
	// Var[i] is the trace variable of x_i, or -1 (x_0 and x_{L+1} of a
	// derived chain, any x of a hand-made one).
	Var []int
}

// L is the index of the last stage.
func (c *Chain) L() int { return len(c.UF) - 1 }

// Peak is the paper's M_peak: the most memory, device and host together,
// any stage needs.
func (c *Chain) Peak() int64 {
	var peak, held int64
	for i := 0; i <= c.L(); i++ {
		held += c.X[i]
		peak = max(peak, c.ExF[i]+held+c.X[i+1], c.ExB[i]+c.Y[i]+c.Y[i+1]+held+c.X[i+1])
	}
	return peak
}

func (c *Chain) check() error {
	l := len(c.UF)
	if l == 0 || len(c.UB) != l || len(c.ExF) != l || len(c.ExB) != l || len(c.X) != l+1 || len(c.Y) != l+1 || len(c.Var) != l+1 {
		return fmt.Errorf("ooc: chain has %d/%d stage times, %d/%d extras and %d/%d/%d data sizes: want L+1, L+1 and L+2",
			len(c.UF), len(c.UB), len(c.ExF), len(c.ExB), len(c.X), len(c.Y), len(c.Var))
	}
	if c.Beta <= 0 {
		return fmt.Errorf("ooc: chain bandwidth %g bytes/s must be positive", c.Beta)
	}
	return nil
}

// ChainOf derives the chain of a trace (see Chain), with the times and link
// of dev if it is simulated, else of the model profile the offload planners
// assume (v100-pcie).
func ChainOf(t *Trace, dev vm.Device) (*Chain, error) {
	t = t.forDevice(dev)
	tm, err := deviceTiming(t, dev)
	if err != nil {
		return nil, err
	}
	return chainOf(t, tm)
}

func chainOf(t *Trace, tm timing) (*Chain, error) {
	acts := t.activations()
	end := t.forwardEnd()
	n := len(t.Funcs)
	l := len(acts)
	c := &Chain{
		UF: make([]time.Duration, l+1), UB: make([]time.Duration, l+1),
		X: make([]int64, l+2), Y: make([]int64, l+2),
		ExF: make([]int64, l+1), ExB: make([]int64, l+1),
		Var: make([]int, l+2), Beta: tm.beta,
	}
	c.Var[0], c.Var[l+1] = -1, -1
	for i, v := range acts {
		c.X[i+1] = t.DeviceBytes(v)
		c.Var[i+1] = v
	}
	need, err := execNeeds(t, baseline{}.plan(t))
	if err != nil {
		return nil, err
	}
	// held[i] = |x_0| + ... + |x_i|.
	held := make([]int64, l+2)
	for i := range held {
		held[i] = c.X[i]
		if i > 0 {
			held[i] += held[i-1]
		}
	}
	// Forward stages.
	stage := 0
	for k := 0; k <= end; k++ {
		for stage < l && k > t.Vars[acts[stage]].Producer {
			stage++
		}
		c.UF[stage] += tm.op[k]
		c.ExF[stage] = max(c.ExF[stage], need[k]-held[stage+1])
	}
	// Backward stages: B_i ends at lambda[i+1], the last read of x_{i+1}
	// made non-increasing in i.
	lambda := make([]int, l+2)
	lambda[l+1] = end
	for j := l; j >= 1; j-- {
		lambda[j] = max(lambda[j+1], t.Last[acts[j-1]])
	}
	stage = l
	for k := end + 1; k < n; k++ {
		for stage > 0 && k > lambda[stage+1] {
			stage--
		}
		c.UB[stage] += tm.op[k]
		c.ExB[stage] = max(c.ExB[stage], need[k]-held[stage+1])
	}
	c.UB[0] += tm.update
	return c, nil
}
