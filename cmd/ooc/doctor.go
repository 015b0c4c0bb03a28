package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gorgonia-ooc/outofcore/vm/cuda"
)

// doctorParts are the parts of "ooc doctor", in the order they run.
var doctorParts = []string{"checks", "kernels", "models", "sweep"}

// defaultPartTimeout: the whole doctor must fit 9 minutes on an H200 (the
// GPU bundle's run). Four parts of at most 2 minutes each are 8, leaving a
// minute for the driver's start, the PTX's JIT and the CPU device's work
// between deadlines (a part notices its deadline within one check's
// helper call, or one model step). The checks take seconds; the kernels
// about a thousand small launches, seconds; the models part is the CPU
// device's side of 20 zoo cases at 3 budgets, a minute or two on 16 cores;
// the ResNet-50 sweep is cut where its deadline falls.
const defaultPartTimeout = 2 * time.Minute

// doctorHook, when set by a test, names a kernel whose output the kernels
// part corrupts after each launch (proving a wrong kernel gives FAIL).
var doctorHook string

// runDoctor is "ooc doctor", the acceptance of a machine with an NVIDIA GPU, in parts
// (-parts), each under its own deadline (-part-timeout: a part that runs out prints
// "TIMEOUT part: what it finished" and the next part runs), each line printed as it finishes:
//
//   - checks: the driver, the device, its memory and reserve, virtual memory management and
//     granularity, pinned bandwidth each way, and the allocator, stream-ordering and NCCL
//     checks that vm/cuda's tests run on a fake driver, on the real one (cuda.Doctor says
//     what each does);
//   - kernels: every kernel of vm/cuda/kernels (each entry of its Specs, each dtype) run on
//     the GPU on random inputs of odd sizes and compared with the CPU op it reproduces, by the
//     same checks the kernels' tests run on the host build (package kernelcheck), within
//     relative 1e-5 (float32) and 1e-12 (float64), normwise where the host build promises the
//     CPU op's bits (a GPU's exp and log are not the CPU's), else each check's own measure:
//     "ok kernel NAME max-rel-err E (tol T)";
//   - models: each bundled model's training step at the fake zoo's sizes (zoocheck.Cases;
//     -models picks some) at 100%, 50% and the least budget, against the CPU device by the
//     zoo's rule (float64 1e-12, float32 1e-5 normwise per tensor or at most 2x as far from a
//     float64 run as the CPU device), one line per model and budget;
//   - sweep: the ResNet-50 224x224 batch sweep on the GPU (in-core baseline, window + best
//     fit, window + VA in the paper's 40 MiB chunks) as a Markdown table in docs/results.md's
//     layout.
//
// -json FILE writes every line as a JSON record (part, name, ok, status, detail, numbers,
// seconds). It exits 1 when anything failed or timed out. It cannot run on a machine without a
// GPU: there it says what is missing (no NVIDIA driver: libcuda.so.1 not found, or no CUDA
// device) and exits 1.
func runDoctor(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseDoctorFlags(args, stderr)
	if err != nil {
		return err
	}
	rep := &doctorReport{w: stdout, jsonPath: o.json}
	if err := rep.save(); err != nil {
		return fmt.Errorf("-json: %w", err)
	}
	defer func() {
		if rep.jsonErr != nil {
			fmt.Fprintf(stderr, "ooc doctor: -json: %v\n", rep.jsonErr)
		}
	}()
	// Without a driver or a device every part would fail alike: say what is
	// missing once, and stop.
	d, err := cuda.Open(o.ordinal, o.opts...)
	if err != nil {
		rep.add(doctorLine{Part: "device", Name: "open", Detail: err.Error()})
		return err
	}
	if err := d.Close(); err != nil {
		return err
	}
	for _, part := range doctorParts {
		if !slices.Contains(o.parts, part) {
			continue
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		pctx, cancel := context.WithTimeout(ctx, o.partTimeout)
		runDoctorPart(pctx, part, o, rep, stderr)
		cancel()
	}
	if rep.failed > 0 {
		return fmt.Errorf("%d lines failed or timed out: %s", rep.failed, strings.Join(rep.failedNames, "; "))
	}
	return nil
}

type doctorOptions struct {
	ordinal     int
	opts        []cuda.Option
	library     string
	parts       []string
	partTimeout time.Duration
	models      string
	kernels     string
	json        string
	sweep       []string // the sweep's flags
	sweepTitle  string
}

func parseDoctorFlags(args []string, stderr io.Writer) (doctorOptions, error) {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: ooc doctor [flags]\n\nThe acceptance of a GPU, in parts: checks (driver, memory, VMM, pinned bandwidth, allocators,\n"+
			"stream ordering, NCCL), kernels (every kernel against the CPU op), models (each zoo model's step\n"+
			"against the CPU device), sweep (ResNet-50). Exits 1 if anything fails or times out.\n\nflags:\n")
		fs.PrintDefaults()
	}
	device := fs.String("device", "cuda", "the GPU to check: cuda (cuda:0) or cuda:N")
	library := fs.String("library", "", "the driver library (default: $"+cuda.LibraryEnv+", else the first "+cuda.DefaultLibrary+" found: see package cuda's Search)")
	parts := fs.String("parts", strings.Join(doctorParts, ","), "the parts to run, of "+strings.Join(doctorParts, ","))
	partTimeout := fs.Duration("part-timeout", defaultPartTimeout, "each part's deadline (the default fits all four in 9 minutes on an H200)")
	models := fs.String("models", "all", "-parts models: the zoo's models to check, comma-separated (smallcnn, lstm, resnet18, ...; smallcnn:float32 for one dtype)")
	kernelList := fs.String("kernels", "all", "-parts kernels: the check groups to run, comma-separated (unary, binary, conv, relu, ...; package kernelcheck's Cases)")
	jsonFile := fs.String("json", "", "also write every line as a JSON record to this file")
	checks := fs.Bool("checks", true, "run the checks part (-checks=false leaves it out of -parts)")
	sweepOn := fs.Bool("sweep", true, "run the sweep part (-sweep=false leaves it out of -parts)")
	sweepModel := fs.String("sweep-model", "resnet50", "-sweep: the model")
	sweepImage := fs.Int("sweep-image", 224, "-sweep: the input size")
	sweepClasses := fs.Int("sweep-classes", 1000, "-sweep: the number of classes")
	sweepBatches := fs.String("sweep-batches", "64,128,192,256,384,512,768,1024", "-sweep: the batch sizes")
	sweepBudget := fs.String("sweep-budget", "0", "-sweep: the device memory to sweep in (0: all of the GPU's)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return doctorOptions{}, err
		}
		return doctorOptions{}, usageError{err}
	}
	if fs.NArg() > 0 {
		return doctorOptions{}, usagef("unexpected arguments %q (flags only)", fs.Args())
	}
	o := doctorOptions{library: *library, partTimeout: *partTimeout, models: *models, kernels: *kernelList, json: *jsonFile}
	var err error
	if o.ordinal, err = cuda.ParseSpec(*device); err != nil {
		return o, usagef("-device: %v", err)
	}
	if *partTimeout <= 0 {
		return o, usagef("-part-timeout: %v is not positive", *partTimeout)
	}
	for _, p := range strings.Split(*parts, ",") {
		p = strings.TrimSpace(p)
		if !slices.Contains(doctorParts, p) {
			return o, usagef("-parts: unknown part %q (the parts are %s)", p, strings.Join(doctorParts, ","))
		}
		if (p == "checks" && !*checks) || (p == "sweep" && !*sweepOn) {
			continue
		}
		o.parts = append(o.parts, p)
	}
	if slices.Contains(o.parts, "models") {
		if _, err := selectModels(*models); err != nil {
			return o, usagef("-models: %v", err)
		}
	}
	if _, err := selectKernels(*kernelList); err != nil {
		return o, usagef("-kernels: %v", err)
	}
	if *library != "" {
		o.opts = append(o.opts, cuda.WithLibrary(*library))
	}
	o.sweepTitle = fmt.Sprintf("%s %dx%d batch sweep on %s", *sweepModel, *sweepImage, *sweepImage, *device)
	o.sweep = []string{"-device", *device, "-model", *sweepModel, "-image", fmt.Sprint(*sweepImage),
		"-classes", fmt.Sprint(*sweepClasses), "-batches", *sweepBatches, "-budget", *sweepBudget,
		"-schedulers", "baseline,window", "-allocators", "bestfit,va", "-chunk", "40MiB", "-markdown", "-q"}
	return o, nil
}

// runDoctorPart runs one part under ctx's deadline.
func runDoctorPart(ctx context.Context, part string, o doctorOptions, rep *doctorReport, stderr io.Writer) {
	start := time.Now()
	switch part {
	case "checks":
		// cuda.Doctor has no context: it runs beside the deadline, and a hung
		// driver call leaves it behind when the deadline passes.
		lw := &lineWriter{rep: rep, part: "checks"}
		done := make(chan error, 1)
		go func() { done <- cuda.Doctor(lw, o.ordinal, o.opts...) }()
		select {
		case err := <-done:
			lw.flush()
			l := doctorLine{Part: "checks", Name: "checks", OK: err == nil, Seconds: time.Since(start).Seconds(), Detail: "all passed"}
			if err != nil {
				l.Detail = err.Error()
			}
			rep.add(l)
		case <-ctx.Done():
			rep.timeout("checks", fmt.Sprintf("%d lines printed before the deadline", lw.count()))
		}
	case "kernels", "models":
		d, err := cuda.Open(o.ordinal, o.opts...)
		if err != nil {
			rep.add(doctorLine{Part: part, Name: "open", Detail: err.Error()})
			return
		}
		if part == "kernels" {
			cases, _ := selectKernels(o.kernels) // checked with the flags
			doctorKernels(ctx, rep, d, cases, doctorHook)
		} else {
			cases, _ := selectModels(o.models) // checked with the flags
			doctorModels(ctx, rep, d, cases)
		}
		if err := d.Close(); err != nil {
			rep.add(doctorLine{Part: part, Name: "close", Detail: err.Error()})
		}
	case "sweep":
		if o.library != "" {
			// The sweep opens the device by name, through the environment's library.
			if err := os.Setenv(cuda.LibraryEnv, o.library); err != nil {
				rep.add(doctorLine{Part: "sweep", Name: "sweep", Detail: err.Error()})
				return
			}
		}
		fmt.Fprintf(rep.w, "\n%s:\n", o.sweepTitle)
		err := runSweep(ctx, o.sweep, rep.w, stderr)
		if ctx.Err() != nil {
			rep.timeout("sweep", "the table above holds the batches finished before the deadline")
			return
		}
		l := doctorLine{Part: "sweep", Name: "sweep", OK: err == nil, Seconds: time.Since(start).Seconds(), Detail: "done"}
		if err != nil {
			l.Detail = err.Error()
		}
		rep.add(l)
	}
}

// doctorLine is one line of the doctor's report, and one record of -json.
type doctorLine struct {
	Part    string             `json:"part"`
	Name    string             `json:"name"`
	OK      bool               `json:"ok"`
	Status  string             `json:"status"` // ok, FAIL, TIMEOUT, or info (a line of the checks that is no check)
	Detail  string             `json:"detail,omitempty"`
	Numbers map[string]float64 `json:"numbers,omitempty"`
	Seconds float64            `json:"seconds"`
}

// doctorReport prints lines as they come and keeps them for -json, whose
// file it rewrites after every line: a run killed by its caller's deadline
// still leaves every line it printed.
type doctorReport struct {
	mu          sync.Mutex
	w           io.Writer
	lines       []doctorLine
	failed      int
	failedNames []string
	jsonPath    string
	jsonErr     error // the first failed rewrite
}

// keep adds a line to the records (r.mu held).
func (r *doctorReport) keep(l doctorLine) {
	r.lines = append(r.lines, l)
	if err := r.saveLocked(); err != nil && r.jsonErr == nil {
		r.jsonErr = err
	}
}

// add prints a result line ("ok kernel NAME detail", "FAIL models NAME: detail") now.
func (r *doctorReport) add(l doctorLine) {
	if l.Status == "" {
		l.Status = "ok"
		if !l.OK {
			l.Status = "FAIL"
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.keep(l)
	what := strings.TrimSuffix(l.Part, "s") // kernel, model, check
	switch l.Status {
	case "ok":
		fmt.Fprintf(r.w, "ok %s %s %s\n", what, l.Name, l.Detail)
	case "info":
		return // a line cuda.Doctor printed itself
	default:
		r.failed++
		r.failedNames = append(r.failedNames, l.Part+" "+l.Name)
		fmt.Fprintf(r.w, "%s %s %s: %s\n", l.Status, what, l.Name, l.Detail)
	}
	if f, ok := r.w.(interface{ Sync() error }); ok {
		_ = f.Sync()
	}
}

// timeout records a part that ran out of time.
func (r *doctorReport) timeout(part, finished string) {
	r.mu.Lock()
	r.keep(doctorLine{Part: part, Name: part, Status: "TIMEOUT", Detail: finished})
	r.failed++
	r.failedNames = append(r.failedNames, "TIMEOUT "+part)
	r.mu.Unlock()
	fmt.Fprintf(r.w, "TIMEOUT %s: %s\n", part, finished)
}

// save writes the records to -json's file (none: nothing to do).
func (r *doctorReport) save() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.saveLocked()
}

// saveLocked writes the records through a temporary file and a rename, so
// the file always holds a whole JSON array.
func (r *doctorReport) saveLocked() error {
	if r.jsonPath == "" {
		return nil
	}
	// JSON has no Inf or NaN (a kernel's error is +Inf where it gave a NaN):
	// those numbers are written as strings.
	type record struct {
		doctorLine
		Numbers map[string]any `json:"numbers,omitempty"`
	}
	recs := make([]record, len(r.lines))
	for i, l := range r.lines {
		recs[i].doctorLine = l
		for k, v := range l.Numbers {
			if recs[i].Numbers == nil {
				recs[i].Numbers = map[string]any{}
			}
			recs[i].Numbers[k] = v
			if math.IsInf(v, 0) || math.IsNaN(v) {
				recs[i].Numbers[k] = fmt.Sprint(v)
			}
		}
	}
	b, err := json.MarshalIndent(recs, "", "  ")
	if err != nil {
		return err
	}
	tmp := r.jsonPath + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, r.jsonPath)
}

// lineWriter passes cuda.Doctor's output through as it comes and records
// each of its lines for -json ("ok        name: note", "FAIL      name: error",
// or information such as "driver    ...").
type lineWriter struct {
	rep  *doctorReport
	part string
	mu   sync.Mutex
	buf  bytes.Buffer
	n    int
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.rep.w.Write(p); err != nil {
		return 0, err
	}
	w.buf.Write(p)
	for {
		i := bytes.IndexByte(w.buf.Bytes(), '\n')
		if i < 0 {
			return len(p), nil
		}
		w.record(string(w.buf.Next(i + 1)))
	}
}

func (w *lineWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.buf.Len() > 0 {
		w.record(w.buf.String())
		w.buf.Reset()
	}
}

func (w *lineWriter) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// record keeps one printed line for -json.
func (w *lineWriter) record(line string) {
	line = strings.TrimSpace(line)
	if line == "" {
		return
	}
	w.n++
	head, rest, _ := strings.Cut(line, " ")
	rest = strings.TrimSpace(rest)
	name, detail, ok := strings.Cut(rest, ": ")
	if !ok {
		name, detail = head, rest
	}
	status := "info"
	switch head {
	case "ok":
		status = "ok"
	case "FAIL":
		status = "FAIL"
	default:
		name, detail = head, rest
	}
	w.rep.mu.Lock()
	w.rep.keep(doctorLine{Part: w.part, Name: name, OK: status != "FAIL", Status: status, Detail: detail})
	w.rep.mu.Unlock()
}
