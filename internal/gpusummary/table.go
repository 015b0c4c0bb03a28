package gpusummary

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/gorgonia-ooc/outofcore/sweep"
)

// Our rows and PyTorch's modes, in the table's order.
var (
	ourRows    = []string{"baseline", "window", "hybrid"}
	torchModes = []string{"in_core", "save_on_cpu", "checkpoint"}
)

// point is one cell: ok with images/s, failed (x), or absent.
type point struct {
	ok  bool
	ips float64
	err string
}

// table is our sweep (VA rows) and PyTorch's capped part, by batch.
type table struct {
	batches []int
	ours    map[string]map[int]point // scheduler -> batch
	torch   map[string]map[int]point // mode -> batch (capped only)
	// stopped says whether each of our rows reached a batch it failed at
	// (else the sweep ended before it ran out of memory).
	stopped map[string]bool
	// allocator is our rows': va, or bestfit where run.sh found no VMM.
	allocator string
}

// allocatorOf is the allocator of our points: va where any point has it.
func allocatorOf(rs []sweep.Result) string {
	for _, r := range rs {
		if r.Allocator == "va" {
			return "va"
		}
	}
	for _, r := range rs {
		return r.Allocator
	}
	return "va"
}

func newTable(in *Inputs) *table {
	t := &table{ours: map[string]map[int]point{}, torch: map[string]map[int]point{}, stopped: map[string]bool{}}
	seen := map[int]bool{}
	add := func(m map[string]map[int]point, row string, b int, p point) {
		if m[row] == nil {
			m[row] = map[int]point{}
		}
		m[row][b] = p
		if !seen[b] {
			seen[b] = true
			t.batches = append(t.batches, b)
		}
	}
	t.allocator = allocatorOf(in.Sweep)
	for _, r := range in.Sweep {
		if r.Allocator != t.allocator {
			continue
		}
		add(t.ours, r.Scheduler, r.Batch, point{r.OK, r.IPS, r.Error})
		if !r.OK {
			t.stopped[r.Scheduler] = true
		}
	}
	if in.Torch != nil {
		for _, r := range in.Torch.Results {
			if r.Capped {
				add(t.torch, r.Mode, r.Batch, point{r.OK, r.IPS, r.Error})
			}
		}
	}
	sort.Ints(t.batches)
	return t
}

func (p point) cell() string {
	switch {
	case p.ok:
		return fmt.Sprintf("%.1f", p.ips)
	case strings.HasPrefix(p.err, "skipped"):
		return "skipped"
	}
	return "x"
}

func (t *table) cell(m map[string]map[int]point, row string, b int) string {
	p, ok := m[row][b]
	if !ok {
		return ""
	}
	return p.cell()
}

// best is our best out-of-core images/s (window or hybrid) at batch b.
func (t *table) best(b int) (float64, string) {
	var ips float64
	var who string
	for _, s := range []string{"window", "hybrid"} {
		if p := t.ours[s][b]; p.ok && p.ips > ips {
			ips, who = p.ips, s
		}
	}
	return ips, who
}

func (t *table) torchBest(b int) float64 {
	var ips float64
	for _, m := range torchModes {
		if p := t.torch[m][b]; p.ok {
			ips = max(ips, p.ips)
		}
	}
	return ips
}

func ratio(a, b float64) string {
	if a <= 0 || b <= 0 {
		return ""
	}
	return fmt.Sprintf("%.2fx", a/b)
}

func (t *table) write(w io.Writer, in *Inputs) {
	fmt.Fprintf(w, "## Ours against PyTorch: %s, images/s\n\n", describeRun(in))
	if len(t.batches) == 0 {
		fmt.Fprintf(w, "No points: sweep %s; PyTorch %s.\n\n", whyNone(in.SweepErr, len(in.Sweep)), torchState(in))
		return
	}
	head := []string{"batch"}
	for _, s := range ourRows {
		head = append(head, "ours "+s)
	}
	for _, m := range torchModes {
		head = append(head, "PyTorch "+m)
	}
	head = append(head, "ours best / PyTorch best", "ours best / save_on_cpu")
	fmt.Fprintln(w, "| "+strings.Join(head, " | ")+" |")
	fmt.Fprintln(w, "|"+strings.Repeat("---|", len(head)))
	for _, b := range t.batches {
		line := []string{fmt.Sprint(b)}
		for _, s := range ourRows {
			line = append(line, t.cell(t.ours, s, b))
		}
		for _, m := range torchModes {
			line = append(line, t.cell(t.torch, m, b))
		}
		ours, _ := t.best(b)
		line = append(line, ratio(ours, t.torchBest(b)), ratio(ours, t.torch["save_on_cpu"][b].okIPS()))
		fmt.Fprintln(w, "| "+strings.Join(line, " | ")+" |")
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "x: failed (out of memory, or an error listed under Failures); skipped: see torch.json; empty: not run. "+
		"Ours: the "+t.allocator+" allocator; \"best\" is window or hybrid. PyTorch: under the same memory cap "+
		"(set_per_process_memory_fraction), in core while it fits, save_on_cpu and checkpoint beyond.")
	fmt.Fprintln(w)
	t.writeInCore(w)
	t.writeUncapped(w, in)
}

// writeInCore compares the largest batches in core under the budget.
func (t *table) writeInCore(w io.Writer) {
	ours, _, _ := t.inCore()
	theirs := 0
	for b, p := range t.torch["in_core"] {
		if p.ok {
			theirs = max(theirs, b)
		}
	}
	if ours > 0 || theirs > 0 {
		fmt.Fprintf(w, "Largest batch in core under the budget, of those run: ours %s, PyTorch %s.\n\n", batchOrDash(ours), batchOrDash(theirs))
	}
}

func batchOrDash(b int) string {
	if b == 0 {
		return "none"
	}
	return fmt.Sprint(b)
}

func (p point) okIPS() float64 {
	if p.ok {
		return p.ips
	}
	return 0
}

// writeUncapped lists PyTorch in core with the whole device, if it ran.
func (t *table) writeUncapped(w io.Writer, in *Inputs) {
	if in.Torch == nil {
		return
	}
	var cells []string
	for _, r := range in.Torch.Results {
		if !r.Capped && r.Mode == "in_core" {
			cells = append(cells, fmt.Sprintf("%d: %s", r.Batch, point{r.OK, r.IPS, r.Error}.cell()))
		}
	}
	if len(cells) > 0 {
		fmt.Fprintf(w, "PyTorch in core with the whole device (batch: images/s): %s.\n\n", strings.Join(cells, ", "))
	}
}

func describeRun(in *Inputs) string {
	for _, r := range in.Sweep {
		return fmt.Sprintf("%s %s on %s, budget %.2f GiB", r.Model, r.Size(), r.Device, float64(r.Capacity)/(1<<30))
	}
	return "budget " + orDash(in.Budget)
}

func whyNone(err error, n int) string {
	if err != nil {
		return "not measured (" + err.Error() + ")"
	}
	if n == 0 {
		return "ran no point"
	}
	return "ran"
}

// torchState says why PyTorch has no numbers, if it has none.
func torchState(in *Inputs) string {
	switch {
	case in.Torch == nil:
		return "not measured (" + in.TorchErr.Error() + ")"
	case in.Torch.Status == "skipped" || in.Torch.Status == "error":
		s := in.Torch.Status + ": " + in.Torch.Reason
		if in.Torch.Install != "" {
			s += " (install: " + in.Torch.Install + ")"
		}
		return s
	}
	return in.Torch.Status
}
