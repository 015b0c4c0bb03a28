package sweep

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/gorgonia-ooc/outofcore/vm"
)

// WriteTable prints the sweep as the paper's Table 1: one row per scheduler
// and allocator, one column per batch size, images/s or x for out of
// memory, and each row's largest batch. The header says whether the
// figures are simulated (and with which profile) or measured here.
func WriteTable(w io.Writer, rs []Result) error {
	return writeGrid(w, rs, "images/s", false, ips)
}

// WriteMarkdownTable prints WriteTable's grid as a Markdown table, the layout of
// docs/results.md, so a run on a new machine (ooc doctor -sweep on a GPU) pastes there.
func WriteMarkdownTable(w io.Writer, rs []Result) error {
	return writeGrid(w, rs, "images/s", true, ips)
}

func ips(r Result) string { return fmt.Sprintf("%.0f", r.IPS) }

// WriteReservedTable prints, in the same layout, the GiB the allocator
// reserved at each point that trained (the paper's Fig. 5 as numbers).
func WriteReservedTable(w io.Writer, rs []Result) error {
	return writeGrid(w, rs, "GiB reserved by the allocator", false, func(r Result) string { return fmt.Sprintf("%.2f", gib(r.Reserved)) })
}

func writeGrid(w io.Writer, rs []Result, what string, markdown bool, cell func(Result) string) error {
	if len(rs) == 0 {
		_, err := fmt.Fprintln(w, "no results")
		return err
	}
	batchSet := map[int]bool{}
	type key struct {
		row   string
		batch int
	}
	cells := map[key]Result{}
	var rows []string
	seen := map[string]bool{}
	for _, r := range rs {
		batchSet[r.Batch] = true
		name := r.Scheduler + " + " + r.Allocator
		if !seen[name] {
			seen[name] = true
			rows = append(rows, name)
		}
		cells[key{name, r.Batch}] = r
	}
	var batches []int
	for b := range batchSet {
		batches = append(batches, b)
	}
	sort.Ints(batches)
	first := rs[0]
	where := "measured on the CPU device of this machine"
	timed := 0
	for _, r := range rs {
		timed = max(timed, r.TimedSteps)
	}
	if timed > 0 {
		where += fmt.Sprintf(" (each figure the median of %d timed steps after a warm-up step)", timed)
	}
	switch {
	case first.Simulated && strings.Contains(first.Device, "measured:"):
		where = "SIMULATED on " + first.Device + " (per-op times measured on a real device)"
	case first.Simulated:
		where = "SIMULATED on " + first.Device + " (" + vm.CalibrationNote + ")"
	case strings.HasPrefix(first.Device, "cuda"):
		where = "measured on " + first.Device + " of this machine (a fake driver's host kernels if run by the tests)"
	}
	fmt.Fprintf(w, "%s %s, %s, device memory %.2f GiB; %s\n", first.Model, first.Size(), what, float64(first.Capacity)/(1<<30), where)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(cells []string) { fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t") }
	head := []string{"batch"}
	if markdown {
		fmt.Fprintln(w)
		row = func(cells []string) { fmt.Fprintln(w, "| "+strings.Join(cells, " | ")+" |") }
		head[0] = "scheduler + allocator"
	}
	for _, b := range batches {
		head = append(head, fmt.Sprint(b))
	}
	head = append(head, "largest")
	row(head)
	if markdown {
		fmt.Fprintln(w, "|"+strings.Repeat("---|", len(head)))
	}
	for _, name := range rows {
		line := []string{name}
		largest := 0
		for _, b := range batches {
			r, ok := cells[key{name, b}]
			switch {
			case !ok:
				line = append(line, "")
			case r.OK:
				line = append(line, cell(r))
				largest = max(largest, b)
			default:
				line = append(line, "x")
			}
		}
		if largest == 0 {
			line = append(line, "-")
		} else {
			line = append(line, fmt.Sprint(largest))
		}
		row(line)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if markdown {
		fmt.Fprintln(w)
	}
	_, err := fmt.Fprintln(w, "x: no step completed: it ran out of device memory at every budget tried, or no schedule fits the device")
	return err
}
