package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/gorgonia-ooc/outofcore/vm"
)

// A breakdown is one side's milliseconds a step per op name (ours: the op's String() up to its
// parameters; PyTorch's: the aten op), with how the side measured them.
type breakdown struct {
	ms     map[string]float64
	calls  map[string]float64 // calls a step, where known
	wallMs float64            // the step's wall time over the same steps
}

// categories match op names of both sides to one row of the table: the first pattern that
// occurs in a name wins, so backward patterns come before their forward's.
var categories = []struct{ name, ours, torch string }{
	{"convolution backward", "Conv2DData|Conv2DFilter", "convolution_backward|ConvolutionBackward|conv2d_backward|Conv2DBackward"},
	{"convolution forward", "Conv2D", "convolution|conv2d"},
	{"batch norm backward", "BatchNormGrad|ChannelSum", "batch_norm_backward|BatchNormBackward"},
	{"batch norm forward", "BatchNorm", "batch_norm"},
	{"ReLU backward", "ReLUGrad", "threshold_backward|ReluBackward"},
	{"ReLU forward", "ReLU", "relu|clamp_min"},
	{"pooling backward", "PoolGrad|Pool2DGrad", "pool2d_with_indices_backward|pool2d_backward|PoolBackward|Pool2DWithIndicesBackward|MeanBackward"},
	{"pooling forward", "Pool", "pool2d|aten::mean"},
	{"linear (matmul)", "×", "addmm|aten::mm|AddmmBackward|MmBackward|aten::linear"},
	{"loss (softmax, cross-entropy)", "Softmax", "softmax|nll_loss|cross_entropy|SoftmaxBackward|NllLossBackward"},
	{"optimizer (Adam)", "optimizer (Adam)", "optimizer"},
	{"outside ops (engine)", "outside ops (engine)", "\x00"},
}

func category(name string, torch bool) string {
	for _, c := range categories {
		pats := c.ours
		if torch {
			pats = c.torch
		}
		for _, p := range strings.Split(pats, "|") {
			if strings.Contains(name, p) {
				return c.name
			}
		}
	}
	return "other ops"
}

// opLabel is an op's name without its parameters: "Conv2DFilter{s(1,1) ...}" is "Conv2DFilter".
func opLabel(op fmt.Stringer) string {
	s := op.String()
	if i := strings.IndexAny(s, "{("); i > 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

// opTotals is the time the machine's op timers (vm.Machine.OpTimes) have counted so far per op
// label, and calls a step: OpTimes is a mean per call, so a label's total is that mean times the
// functions with its key times the steps. A function run fused with the one before it has no
// time or call of its own (its time is in the head's label: a ReLU in its batch norm's).
func opTotals(m *vm.Machine) (total map[string]time.Duration, calls map[string]float64) {
	p := m.Program()
	times := m.OpTimes()
	steps := time.Duration(m.Stats().Steps)
	tail := map[int]bool{}
	for _, f := range m.Fused() {
		tail[f.Tail] = true
	}
	total, calls = map[string]time.Duration{}, map[string]float64{}
	for i := range p.Funcs {
		if tail[i] {
			continue
		}
		f := &p.Funcs[i]
		l := opLabel(f.Op)
		total[l] += times[vm.OpKey(p, f)] * steps
		calls[l]++
	}
	return total, calls
}

// ourBreakdown is the per-op time a step between two opTotals snapshots over steps steps, with
// the solver's time and the rest of the step (the engine outside its ops) as their own rows.
func ourBreakdown(before, after map[string]time.Duration, calls map[string]float64, steps int, solver, wall time.Duration) breakdown {
	b := breakdown{ms: map[string]float64{}, calls: calls, wallMs: ms(wall) / float64(steps)}
	var ops float64
	for l, t := range after {
		v := ms(t-before[l]) / float64(steps)
		b.ms[l] = v
		ops += v
	}
	b.ms["optimizer (Adam)"] = ms(solver) / float64(steps)
	b.ms["outside ops (engine)"] = max(0, b.wallMs-ops-b.ms["optimizer (Adam)"])
	return b
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// torchBreakdown parses bench.py's "prof" answer.
func torchBreakdown(line string) (breakdown, error) {
	var r struct {
		Steps  int                `json:"steps"`
		WallMs float64            `json:"wall_ms"`
		Ops    map[string]float64 `json:"ops"`
	}
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		return breakdown{}, fmt.Errorf("python's profile %q: %w", line, err)
	}
	if r.Steps < 1 || len(r.Ops) == 0 {
		return breakdown{}, fmt.Errorf("python's profile has no steps or ops: %q", line)
	}
	return breakdown{ms: r.Ops, wallMs: r.WallMs}, nil
}

// byCategory sums a breakdown's ops into categories.
func (b breakdown) byCategory(torch bool) map[string]float64 {
	out := map[string]float64{}
	for n, v := range b.ms {
		out[category(n, torch)] += v
	}
	return out
}

// top is the n largest ops, largest first.
func (b breakdown) top(n int) []string {
	names := make([]string, 0, len(b.ms))
	for k := range b.ms {
		names = append(names, k)
	}
	slices.SortFunc(names, func(x, y string) int {
		if b.ms[x] != b.ms[y] {
			if b.ms[x] > b.ms[y] {
				return -1
			}
			return 1
		}
		return strings.Compare(x, y)
	})
	return names[:min(n, len(names))]
}

// printBreakdown writes the two sides' categories as a table, then each side's largest ops.
func printBreakdown(out io.Writer, title string, ours, theirs breakdown, profSteps int) {
	fmt.Fprintf(out, "\n%s, per op (ms a step). This project: the machine's op timers over the timed steps. "+
		"PyTorch: torch.profiler's self CPU time over %d profiled steps run after the timed ones (the profiler slows them). "+
		"Categories are matched by op name.\n\n", title, profSteps)
	fmt.Fprintln(out, "| category | this project | PyTorch |\n|---|---|---|")
	oc, tc := ours.byCategory(false), theirs.byCategory(true)
	var os, ts float64
	for _, c := range append(categoryNames(), "other ops") {
		o, t := oc[c], tc[c]
		os, ts = os+o, ts+t
		fmt.Fprintf(out, "| %s | %.1f | %.1f |\n", c, o, t)
	}
	fmt.Fprintf(out, "| sum | %.1f | %.1f |\n| step wall time over the same steps | %.1f | %.1f |\n", os, ts, ours.wallMs, theirs.wallMs)
	for _, side := range []struct {
		name string
		b    breakdown
	}{{"this project", ours}, {"PyTorch", theirs}} {
		var parts []string
		for _, n := range side.b.top(8) {
			p := fmt.Sprintf("%s %.1f", n, side.b.ms[n])
			if c := side.b.calls[n]; c > 0 {
				p += fmt.Sprintf(" (%g calls)", c)
			}
			parts = append(parts, p)
		}
		fmt.Fprintf(out, "\nlargest ops, %s (ms a step): %s\n", side.name, strings.Join(parts, "; "))
	}
}

func categoryNames() []string {
	var n []string
	for _, c := range categories {
		n = append(n, c.name)
	}
	return n
}
