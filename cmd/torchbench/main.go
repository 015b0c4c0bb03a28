// Command torchbench times training steps of the project's CPU engine against PyTorch on the
// same networks (parameter counts checked equal), interleaved so both see the same machine
// load, and prints medians and their ratio.
//
// Usage:
//
//	torchbench [-models resnet18,smallcnn] [-rounds 7] [-steps 3] [-python /usr/bin/python3] [-malloc tuned|default]
//
// The networks are the issue's: ResNet-18 (torchvision layout, 10 classes) on 32x32x3 at batch
// 32, and smallcnn on 28x28x1 at batch 64, both with Adam (lr 1e-3) and softmax cross-entropy.
// Ours runs as `ooc train` does: models.Build, ooc.Compile in core (Baseline) and the in-place
// solvers.NewAdam. PyTorch runs in a child process with 2 threads; -malloc tuned (the default)
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
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "torchbench:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("torchbench", flag.ContinueOnError)
	names := fs.String("models", "resnet18,smallcnn", "comma-separated: resnet18, smallcnn")
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
	fmt.Fprintf(out, "load before: %s", loadavg())
	fmt.Fprintf(out, "| model | parameters | this project, median ms/step | PyTorch (%d threads, malloc %s, OpenMP %s), median ms/step | ratio |\n|---|---|---|---|---|\n", *threads, *malloc, *omp)
	for _, n := range strings.Split(*names, ",") {
		s, ok := setups[n]
		if !ok {
			return fmt.Errorf("unknown model %q (want resnet18 or smallcnn)", n)
		}
		ours, theirs, params, err := compare(s, py, *python, *malloc, *omp, *threads, *rounds, *steps)
		if err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
		fmt.Fprintf(out, "| %s b%d %dx%dx%d | %d | %.1f | %.1f | %.2fx |\n", n, s.cfg.Batch, s.cfg.Channels, s.cfg.Height, s.cfg.Width,
			params, ours, theirs, ours/theirs)
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

// compare alternates rounds of our steps and PyTorch's and returns the median step times.
func compare(s setup, py, python, malloc, omp string, threads, rounds, steps int) (ours, theirs float64, params int64, err error) {
	c := s.cfg
	cmd := exec.Command(python, py, s.name, strconv.Itoa(c.Batch), strconv.Itoa(c.Channels), strconv.Itoa(c.Height),
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
		return 0, 0, 0, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, 0, 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, 0, 0, err
	}
	defer func() {
		stdin.Close()
		if werr := cmd.Wait(); err == nil && werr != nil {
			err = fmt.Errorf("python: %w", werr)
		}
	}()
	lines := bufio.NewScanner(stdout)
	line := func() (string, error) {
		if !lines.Scan() {
			return "", fmt.Errorf("python stopped: %v", lines.Err())
		}
		return lines.Text(), nil
	}
	first, err := line()
	if err != nil {
		return 0, 0, 0, err
	}
	var torchParams int64
	if _, err := fmt.Sscanf(first, "params %d", &torchParams); err != nil {
		return 0, 0, 0, fmt.Errorf("python said %q: %w", first, err)
	}

	step, params, closeVM, err := ourStep(s)
	if err != nil {
		return 0, 0, 0, err
	}
	defer closeVM()
	if params != torchParams {
		return 0, 0, 0, fmt.Errorf("the networks differ: %d parameters here, %d in PyTorch", params, torchParams)
	}
	var mine, torch []float64
	for r := 0; r <= rounds; r++ { // round 0 warms both up and is not counted
		var ms []float64
		for i := 0; i < steps; i++ {
			t0 := time.Now()
			if err := step(); err != nil {
				return 0, 0, 0, err
			}
			ms = append(ms, float64(time.Since(t0).Microseconds())/1e3)
		}
		if _, err := fmt.Fprintf(stdin, "run %d\n", steps); err != nil {
			return 0, 0, 0, err
		}
		l, err := line()
		if err != nil {
			return 0, 0, 0, err
		}
		if r == 0 {
			continue
		}
		mine = append(mine, ms...)
		for _, f := range strings.Fields(l) {
			v, err := strconv.ParseFloat(f, 64)
			if err != nil {
				return 0, 0, 0, fmt.Errorf("python said %q: %w", l, err)
			}
			torch = append(torch, v)
		}
	}
	return median(mine), median(torch), params, nil
}

// ourStep builds the model with random inputs and one-hot labels and returns one training step
// (forward, backward, Adam) and the parameter count.
func ourStep(s setup) (step func() error, params int64, closeVM func(), err error) {
	m, err := models.Build(s.name, s.cfg)
	if err != nil {
		return nil, 0, nil, err
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
		return nil, 0, nil, err
	}
	if err := G.Let(m.Labels, tensor.New(tensor.WithShape(m.Labels.Shape()...), tensor.WithBacking(y))); err != nil {
		return nil, 0, nil, err
	}
	for _, l := range m.Learnables {
		params += int64(l.Shape().TotalSize())
	}
	vm, err := ooc.Compile(m.Graph, ooc.BindDualValues(m.Learnables...), ooc.Baseline())
	if err != nil {
		return nil, 0, nil, err
	}
	solver := solvers.NewAdam(G.WithLearnRate(1e-3))
	vgs := G.NodesToValueGrads(m.Learnables)
	step = func() error {
		if err := vm.RunAll(); err != nil {
			return err
		}
		if err := solver.Step(vgs); err != nil {
			return err
		}
		vm.Reset()
		return nil
	}
	return step, params, func() { vm.Close() }, nil
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
