// Command torchbench times training steps of the project's CPU engine against PyTorch on the
// same networks (parameter counts checked equal), interleaved so both see the same machine
// load, and prints medians and their ratio.
//
// Usage:
//
//	torchbench [-models resnet18,smallcnn,resnet50] [-rounds 7] [-steps 3] [-python /usr/bin/python3] [-malloc tuned|default] [-breakdown=false]
//
// The networks are the issue's: ResNet-18 (torchvision layout, 10 classes) on 32x32x3 at batch
// 32, smallcnn on 28x28x1 at batch 64 and ResNet-50 (torchvision layout, 10 classes) on 64x64x3
// at batch 16, all with Adam (lr 1e-3) and softmax cross-entropy.
//
// After each model's row, -breakdown (the default) prints where each side's step goes, per op
// category (convolution forward and backward, batch norm, ReLU, pooling, linear, loss, optimizer,
// the rest) and its largest ops: ours from the machine's own op timers (vm.Machine.OpTimes) over
// the timed steps, with the solver and the engine outside its ops as rows of their own;
// PyTorch's from torch.profiler (self CPU time of each aten op, key_averages' measure) over
// -steps more steps run after the timed rounds, so profiling does not touch the timed medians.
// A ReLU the machine runs fused into the batch norm before it (vm.Machine.Fused) counts in the
// batch norm forward's row; the ReLU forward row has the others (after a residual add).
// Ours runs as `ooc train` does: models.Build, ooc.Compile in core (Baseline) binding no
// activation to its node (WithNodeValues(0)) and the in-place solvers.NewAdam. PyTorch runs in a child process with 2 threads; -malloc tuned (the default)
// sets MALLOC_MMAP_THRESHOLD_ and MALLOC_TRIM_THRESHOLD_ high for it, its best configuration.
// -omp passive (the default) sets OMP_WAIT_POLICY=PASSIVE: on a machine shared with other work,
// spinning OpenMP threads collapse (smallcnn measured 1565 ms a step spinning, 48 ms passive, at a
// load average of 17 on 2 cores).
//
// PyTorch comes from Debian (apt-get install -y python3-torch python3-torchvision), which
// installs into /usr/bin/python3; without it the command says so and exits 0.
package main

import (
	"bufio"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/models"
	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/solvers"
	"github.com/gorgonia-ooc/outofcore/vm"
)

//go:embed bench.py
var script []byte

const installHint = "apt-get install -y python3-torch python3-torchvision"

type setup struct {
	name string
	cfg  models.Config
}

var setups = map[string]setup{
	"resnet18": {"resnet18", models.Config{Batch: 32, Channels: 3, Height: 32, Width: 32, Classes: 10, Seed: 1}},
	"smallcnn": {"smallcnn", models.Config{Batch: 64, Channels: 1, Height: 28, Width: 28, Classes: 10, Seed: 1}},
	"resnet50": {"resnet50", models.Config{Batch: 16, Channels: 3, Height: 64, Width: 64, Classes: 10, Seed: 1}},
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "torchbench:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("torchbench", flag.ContinueOnError)
	names := fs.String("models", "resnet18,smallcnn", "comma-separated: resnet18, smallcnn, resnet50")
	withBreakdown := fs.Bool("breakdown", true, "after each model's row, print both sides' time per op category and their largest ops")
	rounds := fs.Int("rounds", 7, "interleaved rounds (each runs -steps steps on each side)")
	steps := fs.Int("steps", 3, "steps per side per round")
	python := fs.String("python", "/usr/bin/python3", "the Python that has Debian's python3-torch")
	malloc := fs.String("malloc", "tuned", "PyTorch's glibc malloc: tuned (mmap and trim thresholds high) or default")
	threads := fs.Int("threads", 2, "PyTorch's thread count (ours uses GOMAXPROCS)")
	omp := fs.String("omp", "passive", "PyTorch's OpenMP wait policy: passive (OMP_WAIT_POLICY=PASSIVE) or default (spin)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *rounds < 1 || *steps < 1 || *threads < 1 {
		return errors.New("-rounds, -steps and -threads must be positive")
	}
	if *malloc != "tuned" && *malloc != "default" {
		return fmt.Errorf("-malloc %q: want tuned or default", *malloc)
	}
	if *omp != "passive" && *omp != "default" {
		return fmt.Errorf("-omp %q: want passive or default", *omp)
	}
	if err := exec.Command(*python, "-c", "import torch, torchvision").Run(); err != nil {
		fmt.Fprintf(out, "skipped: %s cannot import torch and torchvision (%v); install them with: %s\n", *python, err, installHint)
		return nil
	}
	dir, err := os.MkdirTemp("", "torchbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	py := filepath.Join(dir, "bench.py")
	if err := os.WriteFile(py, script, 0o600); err != nil {
		return err
	}
	list := strings.Split(*names, ",")
	for _, n := range list {
		if _, ok := setups[n]; !ok {
			return fmt.Errorf("unknown model %q (want resnet18, smallcnn or resnet50)", n)
		}
	}
	fmt.Fprintf(out, "load before: %s", loadavg())
	header := fmt.Sprintf("| model | parameters | this project, median ms/step | PyTorch (%d threads, malloc %s, OpenMP %s), median ms/step | ratio |\n|---|---|---|---|---|\n", *threads, *malloc, *omp)
	fmt.Fprint(out, header)
	for i, n := range list {
		s := setups[n]
		r, err := compare(s, py, *python, *malloc, *omp, *threads, *rounds, *steps, *withBreakdown)
		if err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
		title := fmt.Sprintf("%s b%d %dx%dx%d", n, s.cfg.Batch, s.cfg.Channels, s.cfg.Height, s.cfg.Width)
		fmt.Fprintf(out, "| %s | %d | %.1f | %.1f | %.2fx |\n", title, r.params, r.ours, r.theirs, r.ours/r.theirs)
		if *withBreakdown {
			printBreakdown(out, title, r.oursBy, r.theirsBy, *steps)
			if i < len(list)-1 {
				fmt.Fprint(out, "\n"+header)
			}
		}
	}
	fmt.Fprintf(out, "load after: %s", loadavg())
	return nil
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown\n"
	}
	return string(b)
}

// result is one model's comparison: median ms a step on each side, the parameter count and,
// if asked for, each side's breakdown.
type result struct {
	ours, theirs     float64
	params           int64
	oursBy, theirsBy breakdown
}

// compare alternates rounds of our steps and PyTorch's and returns the median step times, then,
// with breakdown, each side's time per op: ours over the timed rounds, PyTorch's over steps
// more steps run under its profiler.
func compare(s setup, py, python, malloc, omp string, threads, rounds, steps int, withBreakdown bool) (res result, err error) {
	p, err := startPython(s, py, python, malloc, omp, threads)
	if err != nil {
		return res, err
	}
	defer func() {
		if werr := p.close(); err == nil && werr != nil {
			err = fmt.Errorf("python: %w", werr)
		}
	}()
	first, err := p.line()
	if err != nil {
		return res, err
	}
	var torchParams int64
	if _, err := fmt.Sscanf(first, "params %d", &torchParams); err != nil {
		return res, fmt.Errorf("python said %q: %w", first, err)
	}
	o, err := ourStep(s)
	if err != nil {
		return res, err
	}
	defer o.vm.Close()
	if o.params != torchParams {
		return res, fmt.Errorf("the networks differ: %d parameters here, %d in PyTorch", o.params, torchParams)
	}
	res.params = o.params
	var mine, torch []float64
	var before map[string]time.Duration
	for r := 0; r <= rounds; r++ { // round 0 warms both up and is not counted
		if r == 1 {
			before, _ = opTotals(o.vm)
			o.solver, o.wall = 0, 0
		}
		ms, err := o.steps(steps)
		if err != nil {
			return res, err
		}
		theirs, err := p.run(steps)
		if err != nil {
			return res, err
		}
		if r > 0 {
			mine, torch = append(mine, ms...), append(torch, theirs...)
		}
	}
	res.ours, res.theirs = median(mine), median(torch)
	if !withBreakdown {
		return res, nil
	}
	after, calls := opTotals(o.vm)
	res.oursBy = ourBreakdown(before, after, calls, rounds*steps, o.solver, o.wall)
	if _, err := fmt.Fprintf(p.stdin, "prof %d\n", steps); err != nil {
		return res, err
	}
	l, err := p.line()
	if err != nil {
		return res, err
	}
	res.theirsBy, err = torchBreakdown(l)
	return res, err
}

// python is bench.py running in a child process.
type python struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines *bufio.Scanner
}

func startPython(s setup, py, bin, malloc, omp string, threads int) (*python, error) {
	c := s.cfg
	cmd := exec.Command(bin, py, s.name, strconv.Itoa(c.Batch), strconv.Itoa(c.Channels), strconv.Itoa(c.Height),
		strconv.Itoa(c.Width), strconv.Itoa(c.Classes), strconv.Itoa(threads))
	cmd.Env = os.Environ()
	if malloc == "tuned" {
		// 32 MiB is the largest mmap threshold glibc accepts on 64-bit; trimming effectively off.
		cmd.Env = append(cmd.Env, "MALLOC_MMAP_THRESHOLD_=33554432", "MALLOC_TRIM_THRESHOLD_=68719476736")
	}
	if omp == "passive" {
		cmd.Env = append(cmd.Env, "OMP_WAIT_POLICY=PASSIVE")
	}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	lines := bufio.NewScanner(stdout)
	lines.Buffer(nil, 1<<20) // the profile is one long JSON line
	return &python{cmd: cmd, stdin: stdin, lines: lines}, nil
}

func (p *python) line() (string, error) {
	if !p.lines.Scan() {
		return "", fmt.Errorf("python stopped: %v", p.lines.Err())
	}
	return p.lines.Text(), nil
}

// run has PyTorch take n steps and returns their milliseconds.
func (p *python) run(n int) ([]float64, error) {
	if _, err := fmt.Fprintf(p.stdin, "run %d\n", n); err != nil {
		return nil, err
	}
	l, err := p.line()
	if err != nil {
		return nil, err
	}
	var ms []float64
	for _, f := range strings.Fields(l) {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return nil, fmt.Errorf("python said %q: %w", l, err)
		}
		ms = append(ms, v)
	}
	return ms, nil
}

func (p *python) close() error {
	p.stdin.Close()
	return p.cmd.Wait()
}

// ours is our side of a comparison: the compiled machine, its solver and the time the steps
// spent, in all and in the solver, since the counters were last zeroed.
type ours struct {
	vm           *vm.Machine
	step         func() error
	params       int64
	solver, wall time.Duration
}

// steps runs n training steps and returns each one's milliseconds.
func (o *ours) steps(n int) ([]float64, error) {
	var ms []float64
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if err := o.step(); err != nil {
			return nil, err
		}
		d := time.Since(t0)
		o.wall += d
		ms = append(ms, float64(d.Microseconds())/1e3)
	}
	return ms, nil
}

// ourStep builds the model with random inputs and one-hot labels and returns one training step
// (forward, backward, Adam) and the parameter count.
func ourStep(s setup) (*ours, error) {
	m, err := models.Build(s.name, s.cfg)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewSource(1))
	c := s.cfg
	x := make([]float32, c.Batch*c.Channels*c.Height*c.Width)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	y := make([]float32, c.Batch*c.Classes)
	for i := 0; i < c.Batch; i++ {
		y[i*c.Classes+rng.Intn(c.Classes)] = 1
	}
	if err := G.Let(m.Input, tensor.New(tensor.WithShape(m.Input.Shape()...), tensor.WithBacking(x))); err != nil {
		return nil, err
	}
	if err := G.Let(m.Labels, tensor.New(tensor.WithShape(m.Labels.Shape()...), tensor.WithBacking(y))); err != nil {
		return nil, err
	}
	o := &ours{}
	for _, l := range m.Learnables {
		o.params += int64(l.Shape().TotalSize())
	}
	// WithNodeValues(0), as package train compiles: a step reads the loss only, and binding the
	// forward's activations (TapeMachine's every node) would copy each to the host after its op,
	// about 38 MB a step for smallcnn, which neither ooc train nor PyTorch does.
	if o.vm, err = ooc.Compile(m.Graph, ooc.BindDualValues(m.Learnables...), ooc.Baseline(), ooc.WithNodeValues(0)); err != nil {
		return nil, err
	}
	solver := solvers.NewAdam(G.WithLearnRate(1e-3))
	vgs := G.NodesToValueGrads(m.Learnables)
	o.step = func() error {
		if err := o.vm.RunAll(); err != nil {
			return err
		}
		t := time.Now()
		if err := solver.Step(vgs); err != nil {
			return err
		}
		o.solver += time.Since(t)
		o.vm.Reset()
		return nil
	}
	return o, nil
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}
