package sweep

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	gorgonia "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/models"
	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm"
)

// CompareConfig is one comparison of schedulers (the offloading paper's
// Fig. 5): for budgets between the least memory the model can run in and
// its in-core peak, the makespan of each scheduler over the lower bound.
type CompareConfig struct {
	Model          string
	Image, Classes int
	Batch          int
	Device         string // sim:PROFILE
	// Percents place budgets between the least memory (0%) and the peak (100%).
	Percents   []int
	Schedulers []string // window, lms, greedy, vdnn
	ChunkSize  int64
	Log        io.Writer
}

// CompareResult is one scheduler at one budget.
type CompareResult struct {
	Model     string  `json:"model"`
	Image     int     `json:"image"`
	Batch     int     `json:"batch"`
	Device    string  `json:"device"`
	Scheduler string  `json:"scheduler"`
	Percent   int     `json:"percent"`
	Budget    int64   `json:"budget_bytes"`
	OK        bool    `json:"ok"`
	Error     string  `json:"error"`
	Makespan  float64 `json:"makespan_s"`
	LB        float64 `json:"lb_s"`
	Ratio     float64 `json:"ratio"`
	Least     int64   `json:"least_bytes"`
	Peak      int64   `json:"peak_bytes"`
	// The DQN paper's Fig. 5 axes: the device memory the step held
	// (PeakUsed), Saved = 1 - PeakUsed / Peak, and Overhead = Makespan /
	// InCore - 1, InCore being the simulated in-core (Baseline) step.
	PeakUsed int64   `json:"peak_used_bytes"`
	InCore   float64 `json:"in_core_s"`
	Saved    float64 `json:"saved"`
	Overhead float64 `json:"overhead"`
}

// SchedulerNames are the schedulers SchedulerNamed knows, in the order
// tables list them.
var SchedulerNames = []string{"window", "lms", "greedy", "dynprog", "vdnn", "checkpoint", "hybrid"}

// OnRequestSchedulers are schedulers SchedulerNamed knows that run only
// when named: the DQN (with the weights shipped in package ooc) takes
// seconds per plan on the larger models, more than the others; auto
// (ooc's default, the faster of window and hybrid) repeats their plans.
var OnRequestSchedulers = []string{"dqn", "auto"}

// AllSchedulerNames are SchedulerNames and then OnRequestSchedulers.
func AllSchedulerNames() []string {
	return append(slices.Clone(SchedulerNames), OnRequestSchedulers...)
}

// SchedulerNamed returns the scheduler of that name (see SchedulerNames),
// each with its automatic settings.
func SchedulerNamed(name string) (ooc.Scheduler, error) {
	switch name {
	case "window":
		return ooc.Window{}, nil
	case "lms":
		return ooc.LMS{}, nil
	case "greedy":
		return ooc.Greedy{}, nil
	case "dynprog":
		return ooc.DynProg{}, nil
	case "vdnn":
		return ooc.VDNN{}, nil
	case "checkpoint":
		return ooc.Checkpoint{}, nil
	case "hybrid":
		return ooc.Hybrid{}, nil
	case "dqn":
		return ooc.DQN{}, nil
	case "auto":
		return ooc.Auto{}, nil
	}
	return nil, fmt.Errorf("sweep: unknown scheduler %q (want one of %s)", name, strings.Join(AllSchedulerNames(), ", "))
}

// Compare runs the comparison. Memory here is the scheduling budget alone:
// the device is given room for the budget plus what stays resident (the
// batch, weights, gradients, momentum) and the allocator's rounding, so
// that only the schedules differ.
func Compare(cfg CompareConfig) ([]CompareResult, error) {
	if !strings.HasPrefix(cfg.Device, "sim:") {
		return nil, errors.New("sweep: compare needs a simulated device (sim:PROFILE): the bound and makespans are simulated")
	}
	if cfg.ChunkSize == 0 {
		cfg.ChunkSize = 2 << 20
	}
	if cfg.Classes == 0 {
		cfg.Classes = 1000
	}
	if len(cfg.Schedulers) == 0 {
		cfg.Schedulers = slices.Clone(SchedulerNames)
	}
	scheds := make([]ooc.Scheduler, len(cfg.Schedulers))
	for i, n := range cfg.Schedulers {
		s, err := SchedulerNamed(n)
		if err != nil {
			return nil, err
		}
		scheds[i] = s
	}
	mc := models.Config{Batch: cfg.Batch, Channels: 3, Height: cfg.Image, Width: cfg.Image, Classes: cfg.Classes, Dtype: tensor.Float32, Seed: 1}
	if cfg.Model == "lstm" {
		// A sequence is a 1 x Image "image" of token ids over Classes words.
		mc.Channels, mc.Height = 1, 1
	}
	m, err := models.Build(cfg.Model, mc)
	if err != nil {
		return nil, err
	}
	tr, err := ooc.NewTrace(m.Graph)
	if err != nil {
		return nil, err
	}
	peak, err := ooc.InCorePeak(m.Graph)
	if err != nil {
		return nil, err
	}
	// The least budget that any schedule can run in: bisect on the window
	// scheduler's plans (its step 2 evicts until only f_i's operands remain).
	lo, least := int64(0), peak
	for least-lo > peak/2000+1 {
		mid := (lo + least) / 2
		if _, err := (ooc.Window{}).Plan(&ooc.Problem{Trace: tr, Budget: mid}); err == nil {
			least = mid
		} else {
			lo = mid
		}
	}
	inCore, err := inCoreStep(cfg, m.Graph, peak)
	if err != nil {
		return nil, err
	}
	var out []CompareResult
	for _, pct := range cfg.Percents {
		budget := least + (peak-least)*int64(pct)/100
		prof, err := vm.LookupProfile(strings.TrimPrefix(cfg.Device, "sim:"))
		if err != nil {
			return nil, err
		}
		prof.Capacity = 2*budget + 4<<30
		dev, err := vm.NewSim(prof)
		if err != nil {
			return nil, err
		}
		lb, err := ooc.LowerBound(tr, dev, budget)
		if err != nil {
			return nil, err
		}
		for _, sc := range scheds {
			r := CompareResult{Model: cfg.Model, Image: cfg.Image, Batch: cfg.Batch, Device: cfg.Device, Scheduler: sc.Name(),
				Percent: pct, Budget: budget, LB: lb.Seconds(), Least: least, Peak: peak, InCore: inCore.Seconds()}
			machine, err := ooc.Compile(m.Graph, ooc.WithDevice(dev), ooc.WithBudget(budget), ooc.WithScheduler(sc), ooc.WithChunkSize(cfg.ChunkSize))
			if err == nil {
				err = machine.RunAll()
				if err == nil {
					r.OK = true
					st := machine.Stats()
					r.Makespan = st.StepTime.Seconds()
					r.Ratio = r.Makespan / r.LB
					r.PeakUsed = st.PeakDeviceBytes
					r.Saved = 1 - float64(r.PeakUsed)/float64(peak)
					r.Overhead = r.Makespan/r.InCore - 1
				}
				machine.Close()
			}
			if err != nil {
				r.Error = err.Error()
			}
			if cfg.Log != nil {
				fmt.Fprintf(cfg.Log, "%s %d%%: %s ratio %.3f %s\n", cfg.Model, pct, r.Scheduler, r.Ratio, firstLine(r.Error))
			}
			out = append(out, r)
		}
		dev.Close()
	}
	return out, nil
}

// inCoreStep is the simulated in-core step of the graph on the compared
// profile, with room for its peak.
func inCoreStep(cfg CompareConfig, g *gorgonia.ExprGraph, peak int64) (time.Duration, error) {
	prof, err := vm.LookupProfile(strings.TrimPrefix(cfg.Device, "sim:"))
	if err != nil {
		return 0, err
	}
	prof.Capacity = 2*peak + 4<<30
	dev, err := vm.NewSim(prof)
	if err != nil {
		return 0, err
	}
	defer dev.Close()
	machine, err := ooc.Compile(g, ooc.WithDevice(dev), ooc.Baseline(), ooc.WithChunkSize(cfg.ChunkSize))
	if err != nil {
		return 0, err
	}
	defer machine.Close()
	if err := machine.RunAll(); err != nil {
		return 0, err
	}
	return machine.Stats().StepTime, nil
}

// WriteOverheadTable prints the DQN paper's Fig. 5 as a table: per
// scheduler (rows) and budget (columns), the memory saved against the
// in-core peak and the overhead against the in-core step, both simulated.
func WriteOverheadTable(w io.Writer, rs []CompareResult) error {
	if len(rs) == 0 {
		_, err := fmt.Fprintln(w, "no results")
		return err
	}
	f := rs[0]
	fmt.Fprintf(w, "%s %d batch %d, memory saved / overhead (makespan / in-core makespan - 1, in-core %.1f ms), SIMULATED on %s; budget as %% from the least memory (%.2f GiB) to the in-core peak (%.2f GiB)\n",
		f.Model, f.Image, f.Batch, 1e3*f.InCore, f.Device, gib(f.Least), gib(f.Peak))
	return writeCompareGrid(w, rs, func(r CompareResult) string {
		return fmt.Sprintf("%.0f%% / %.1f%%", 100*r.Saved, 100*r.Overhead)
	})
}

// WriteCompareTable prints makespan / LB per scheduler (rows) and budget
// (columns), the budget as % of the way from the least memory to the peak.
func WriteCompareTable(w io.Writer, rs []CompareResult) error {
	if len(rs) == 0 {
		_, err := fmt.Fprintln(w, "no results")
		return err
	}
	f := rs[0]
	fmt.Fprintf(w, "%s %dx%d batch %d, makespan / lower bound, SIMULATED on %s; budget as %% from the least memory (%.2f GiB) to the in-core peak (%.2f GiB)\n",
		f.Model, f.Image, f.Image, f.Batch, f.Device, gib(f.Least), gib(f.Peak))
	return writeCompareGrid(w, rs, func(r CompareResult) string { return fmt.Sprintf("%.3f", r.Ratio) })
}

// writeGrid prints one cell per scheduler (rows) and budget (columns).
func writeCompareGrid(w io.Writer, rs []CompareResult, cellText func(CompareResult) string) error {
	var pcts []int
	seen := map[int]bool{}
	var rows []string
	rowSeen := map[string]bool{}
	cell := map[string]CompareResult{}
	for _, r := range rs {
		if !seen[r.Percent] {
			seen[r.Percent] = true
			pcts = append(pcts, r.Percent)
		}
		if !rowSeen[r.Scheduler] {
			rowSeen[r.Scheduler] = true
			rows = append(rows, r.Scheduler)
		}
		cell[fmt.Sprintf("%s/%d", r.Scheduler, r.Percent)] = r
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "budget"
	for _, p := range pcts {
		head += fmt.Sprintf("\t%d%%", p)
	}
	fmt.Fprintln(tw, head+"\t")
	for _, row := range rows {
		line := row
		for _, p := range pcts {
			r := cell[fmt.Sprintf("%s/%d", row, p)]
			if r.OK {
				line += "\t" + cellText(r)
			} else {
				line += "\tx"
			}
		}
		fmt.Fprintln(tw, line+"\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, "x: the scheduler found no schedule within the budget")
	return err
}
