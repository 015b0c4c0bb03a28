package gpusummary

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gorgonia-ooc/outofcore/sweep"
)

// The targets (the Sony paper's Table 1 on a 16 GiB V100): window +
// VA or hybrid trains at least BatchFactor times the in-core batch at no
// less than SpeedShare of the in-core images/s, and at least TorchFactor
// times PyTorch's save_on_cpu images/s at the same batch.
const (
	BatchFactor = 7.5
	SpeedShare  = 0.55
	TorchFactor = 1.5
)

// Part is how one part of run.sh ended.
type Part struct {
	Name    string
	Exit    int
	Seconds int
}

// ParseParts reads run.sh's record of its parts, "name:exit:seconds" joined
// by commas.
func ParseParts(s string) ([]Part, error) {
	var ps []Part
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		f := strings.Split(item, ":")
		if len(f) != 3 {
			return nil, fmt.Errorf("part %q: want name:exit:seconds", item)
		}
		exit, err1 := strconv.Atoi(f[1])
		secs, err2 := strconv.Atoi(f[2])
		if f[0] == "" || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("part %q: want name:exit:seconds with whole numbers", item)
		}
		ps = append(ps, Part{f[0], exit, secs})
	}
	return ps, nil
}

func (p Part) status() string {
	switch p.Exit {
	case 0:
		return "ok"
	case 124, 137:
		return fmt.Sprintf("**timed out** (exit %d: its share ran out)", p.Exit)
	}
	return fmt.Sprintf("**failed** (exit %d)", p.Exit)
}

// TorchResult is one point of torch_resnet50.py.
type TorchResult struct {
	Mode   string  `json:"mode"` // in_core, save_on_cpu, checkpoint
	Capped bool    `json:"capped"`
	Batch  int     `json:"batch"`
	OK     bool    `json:"ok"`
	IPS    float64 `json:"ips"`
	Error  string  `json:"error"`
	OOM    bool    `json:"oom"`
}

// Torch is torch_resnet50.py's JSON.
type Torch struct {
	Status  string        `json:"status"` // ok, partial, skipped, error, running
	Reason  string        `json:"reason"`
	Install string        `json:"install"`
	Version string        `json:"torch"`
	GPU     string        `json:"gpu"`
	CUDA    string        `json:"cuda"`
	Results []TorchResult `json:"results"`
	Notes   []string      `json:"notes"`
}

// Inputs are the files of one run, as read.
type Inputs struct {
	Parts  []Part
	Budget string
	Env    string // env.md
	Doctor string // doctor.md
	// DoctorJSON says whether doctor.json exists.
	DoctorJSON bool
	// Sweep is sweep.json's points (baseline, window) and hybrid.json's.
	Sweep     []sweep.Result
	SweepErr  error // why sweep.json was not read
	HybridErr error // why hybrid.json was not read
	Torch     *Torch
	TorchErr  error
}

// Read reads a run's files from dir; a missing or unreadable file is kept
// as the reason its part is not measured.
func Read(dir string, parts []Part, budget string) (*Inputs, error) {
	if st, err := os.Stat(dir); err != nil {
		return nil, err
	} else if !st.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", dir)
	}
	in := &Inputs{Parts: parts, Budget: budget}
	in.Env, _ = readText(filepath.Join(dir, "env.md"))
	in.Doctor, _ = readText(filepath.Join(dir, "doctor.md"))
	_, err := os.Stat(filepath.Join(dir, "doctor.json"))
	in.DoctorJSON = err == nil
	in.SweepErr = readJSON(filepath.Join(dir, "sweep.json"), &in.Sweep)
	var hybrid []sweep.Result
	if in.HybridErr = readJSON(filepath.Join(dir, "hybrid.json"), &hybrid); in.HybridErr == nil {
		in.Sweep = append(in.Sweep, hybrid...)
	}
	var t Torch
	if in.TorchErr = readJSON(filepath.Join(dir, "torch.json"), &t); in.TorchErr == nil {
		in.Torch = &t
	}
	return in, nil
}

func readText(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(b), err
}

func readJSON(path string, v interface{}) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("no %s", filepath.Base(path))
	} else if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %v", filepath.Base(path), err)
	}
	return nil
}

// Write writes summary.md for in.
func Write(w io.Writer, in *Inputs) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, "# GPU bundle summary")
	fmt.Fprintln(bw)
	writeHeader(bw, in)
	writeParts(bw, in)
	writeDoctor(bw, in)
	t := newTable(in)
	t.write(bw, in)
	writeTargets(bw, in, t)
	writeFailures(bw, in)
	return bw.Flush()
}

// writeHeader names the machine: the doctor's device line says whether it
// was a GPU or the tests' fake driver.
func writeHeader(w io.Writer, in *Inputs) {
	for _, key := range []string{"bundle:", "date:", "host:"} {
		if v := lineAfter(in.Env, key); v != "" {
			fmt.Fprintf(w, "- %s %s\n", key, v)
		}
	}
	if v := lineAfter(in.Doctor, "driver "); v != "" {
		fmt.Fprintf(w, "- driver: %s\n", v)
	}
	if v := lineAfter(in.Doctor, "device "); v != "" {
		fmt.Fprintf(w, "- device: %s\n", v)
		if strings.Contains(v, "fakecuda") {
			fmt.Fprintln(w, "- **every CUDA figure below is from the tests' fake driver (host kernels), not a GPU**")
		}
	}
	if in.Torch != nil && in.Torch.Version != "" {
		fmt.Fprintf(w, "- PyTorch: %s (CUDA %s) on %s\n", in.Torch.Version, orDash(in.Torch.CUDA), orDash(in.Torch.GPU))
	}
	fmt.Fprintln(w)
}

// lineAfter is the rest of text's first line that starts, after spaces, with key.
func lineAfter(text, key string) string {
	for _, l := range strings.Split(text, "\n") {
		if t := strings.TrimSpace(l); strings.HasPrefix(t, key) {
			return strings.TrimSpace(strings.TrimPrefix(t, key))
		}
	}
	return ""
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func writeParts(w io.Writer, in *Inputs) {
	fmt.Fprintln(w, "## Parts")
	fmt.Fprintln(w)
	if len(in.Parts) == 0 {
		fmt.Fprintln(w, "run.sh recorded no parts.")
		fmt.Fprintln(w)
		return
	}
	fmt.Fprintln(w, "| part | status | seconds |")
	fmt.Fprintln(w, "|---|---|---|")
	for _, p := range in.Parts {
		fmt.Fprintf(w, "| %s | %s | %d |\n", p.Name, p.status(), p.Seconds)
	}
	fmt.Fprintln(w)
}

// writeDoctor gives the doctor's verdict and every line it marked FAIL.
func writeDoctor(w io.Writer, in *Inputs) {
	fmt.Fprintln(w, "## Doctor")
	fmt.Fprintln(w)
	switch {
	case in.Doctor == "":
		fmt.Fprintln(w, "not measured: no doctor.md")
	case strings.Contains(in.Doctor, "all checks passed"):
		fmt.Fprintf(w, "ok: all checks passed %s\n", lineAfter(in.Doctor, "all checks passed"))
	default:
		fmt.Fprintln(w, "**not ok**: the doctor did not say \"all checks passed\" (doctor.md has its output)")
	}
	for _, l := range failLines(in.Doctor) {
		fmt.Fprintf(w, "- `%s`\n", l)
	}
	if in.DoctorJSON {
		fmt.Fprintln(w, "\n(doctor.json holds the doctor's report as JSON.)")
	}
	fmt.Fprintln(w)
}

func failLines(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if t := strings.TrimSpace(l); strings.HasPrefix(t, "FAIL") || strings.Contains(t, "checks failed") {
			out = append(out, t)
		}
	}
	return out
}
