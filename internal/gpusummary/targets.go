package gpusummary

import (
	"fmt"
	"io"
	"strings"
)

// Verdict is one target's outcome.
type Verdict struct {
	Target string
	State  string // met, missed, not measured
	Detail string
}

func (v Verdict) String() string {
	if v.State == "met" {
		return "met: " + v.Detail
	}
	return v.State + " (" + v.Detail + ")"
}

// Targets checks the targets against a run's files.
func Targets(in *Inputs) []Verdict {
	return newTable(in).targets(in)
}

func (t *table) targets(in *Inputs) []Verdict {
	vs := []Verdict{t.batchTarget(in), t.torchTarget(in)}
	if t.allocator != "va" {
		for i := range vs {
			if vs[i].State != "not measured" {
				vs[i].Detail += "; ours with the " + t.allocator + " allocator, not VA (the doctor found no VMM)"
			}
		}
	}
	return vs
}

func writeTargets(w io.Writer, in *Inputs, t *table) {
	fmt.Fprintln(w, "## Targets")
	fmt.Fprintln(w)
	for _, v := range t.targets(in) {
		fmt.Fprintf(w, "- %s: **%s**", v.Target, v.State)
		if v.State == "met" {
			fmt.Fprintf(w, ": %s\n", v.Detail)
		} else {
			fmt.Fprintf(w, " (%s)\n", v.Detail)
		}
	}
	fmt.Fprintln(w)
}

// inCore is our baseline's largest batch and its images/s.
func (t *table) inCore() (batch int, ips float64, failedFirst bool) {
	for _, b := range t.batches {
		if p, ok := t.ours["baseline"][b]; ok {
			if p.ok {
				batch, ips = b, p.ips
			} else if batch == 0 {
				failedFirst = true
			}
		}
	}
	return batch, ips, failedFirst
}

// batchTarget: window + VA or hybrid trains >= BatchFactor x the in-core
// batch at >= SpeedShare of the in-core images/s.
func (t *table) batchTarget(in *Inputs) Verdict {
	v := Verdict{Target: fmt.Sprintf("window + VA or hybrid trains >= %.1fx the in-core batch in %s at >= %.0f%% of in-core images/s",
		BatchFactor, orDash(in.Budget), 100*SpeedShare), State: "not measured"}
	if len(in.Sweep) == 0 {
		v.Detail = "our sweep " + whyNone(in.SweepErr, 0)
		return v
	}
	inB, inIPS, failedFirst := t.inCore()
	switch {
	case inB == 0 && failedFirst:
		v.Detail = "the in-core baseline trained at no batch swept: no in-core batch to compare with; sweep smaller batches"
		return v
	case inB == 0:
		v.Detail = "the sweep has no baseline point"
		return v
	}
	var largest int
	var largestIPS float64
	var met []string
	for _, b := range t.batches {
		ips, who := t.best(b)
		if ips == 0 {
			continue
		}
		largest, largestIPS = b, ips
		if float64(b) >= BatchFactor*float64(inB) && ips >= SpeedShare*inIPS {
			met = append(met, fmt.Sprintf("%s at batch %d (%.1fx the in-core %d) at %.1f images/s (%.0f%% of in-core's %.1f)",
				who, b, float64(b)/float64(inB), inB, ips, 100*ips/inIPS, inIPS))
		}
	}
	if len(met) > 0 {
		v.State, v.Detail = "met", met[len(met)-1]
		return v
	}
	v.State = "missed"
	if largest == 0 {
		v.Detail = fmt.Sprintf("window and hybrid trained at no batch; in core up to %d", inB)
	} else {
		v.Detail = fmt.Sprintf("largest batch trained out of core %d = %.1fx the in-core %d, at %.1f images/s = %.0f%% of in-core's %.1f",
			largest, float64(largest)/float64(inB), inB, largestIPS, 100*largestIPS/inIPS, inIPS)
	}
	if !t.stopped["window"] && !t.stopped["hybrid"] {
		v.Detail += "; the sweep ended before window or hybrid ran out of memory (its time limit or -max-batch)"
	}
	return v
}

// torchTarget: ours >= TorchFactor x PyTorch's save_on_cpu images/s at the
// same batch, the largest batch both trained.
func (t *table) torchTarget(in *Inputs) Verdict {
	v := Verdict{Target: fmt.Sprintf("window + VA or hybrid >= %.1fx PyTorch's save_on_cpu images/s at the same batch", TorchFactor),
		State: "not measured"}
	if in.Torch == nil || in.Torch.Status == "skipped" || in.Torch.Status == "error" {
		v.Detail = "PyTorch " + torchState(in)
		return v
	}
	var common int
	var ours, theirs float64
	var who string
	for _, b := range t.batches {
		o, w := t.best(b)
		s := t.torch["save_on_cpu"][b].okIPS()
		if o > 0 && s > 0 {
			common, ours, theirs, who = b, o, s, w
		}
	}
	if common == 0 {
		v.Detail = "no batch where both ours (window or hybrid) and PyTorch's save_on_cpu trained"
		if len(t.torch["save_on_cpu"]) == 0 {
			v.Detail += "; save_on_cpu ran at no batch (it runs where in core does not fit under the cap)"
		}
		return v
	}
	v.State = "missed"
	if ours >= TorchFactor*theirs {
		v.State = "met"
	}
	v.Detail = fmt.Sprintf("at batch %d, %s %.1f images/s against save_on_cpu %.1f: %.2fx", common, who, ours, theirs, ours/theirs)
	return v
}

// writeFailures lists what failed other than by running out of memory.
func writeFailures(w io.Writer, in *Inputs) {
	var fs []string
	for _, p := range in.Parts {
		if p.Exit != 0 {
			fs = append(fs, fmt.Sprintf("part %s: %s after %d s", p.Name, p.status(), p.Seconds))
		}
	}
	for _, l := range failLines(in.Doctor) {
		fs = append(fs, "doctor: "+l)
	}
	for _, r := range in.Sweep {
		if !r.OK && !isOOM(r.Error) {
			fs = append(fs, fmt.Sprintf("sweep batch %d %s + %s: %s", r.Batch, r.Scheduler, r.Allocator, firstLine(r.Error)))
		}
	}
	if in.Torch != nil {
		switch in.Torch.Status {
		case "error":
			fs = append(fs, "PyTorch: error: "+in.Torch.Reason)
		case "running":
			fs = append(fs, "PyTorch: the script did not finish (stopped from outside, at its share's end?): its results so far are shown")
		}
		for _, r := range in.Torch.Results {
			if !r.OK && !r.OOM && !strings.HasPrefix(r.Error, "skipped") {
				fs = append(fs, fmt.Sprintf("PyTorch %s batch %d: %s", r.Mode, r.Batch, r.Error))
			}
		}
		for _, n := range in.Torch.Notes {
			fs = append(fs, "PyTorch: "+n)
		}
	}
	fmt.Fprintln(w, "## Failures")
	fmt.Fprintln(w)
	if len(fs) == 0 {
		fmt.Fprintln(w, "none")
		return
	}
	for _, f := range fs {
		fmt.Fprintf(w, "- %s\n", f)
	}
}

// isOOM is whether a sweep point failed for memory: out of device memory at
// run time, or no schedule fits the budget.
func isOOM(s string) bool {
	return strings.Contains(s, "out of memory") || strings.Contains(s, "is infeasible") || strings.Contains(s, "no plan fits")
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
