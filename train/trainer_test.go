package train

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm/alloc"
)

// stopAfter is a context whose Err reports cancellation from its n+1-th
// call on: Fit checks it once before each step, so the run stops after
// exactly n steps, with no timing involved.
type stopAfter struct {
	context.Context
	n int
}

func (c *stopAfter) Err() error {
	if c.n <= 0 {
		return context.Canceled
	}
	c.n--
	return nil
}

// runState is everything a checkpoint file holds that must match between an
// interrupted-and-resumed run and a straight one.
func runState(t *testing.T, path string) (*Checkpoint, map[string][]byte) {
	t.Helper()
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string][]byte{}
	for _, nt := range c.Tensors {
		m[nt.Name] = encodeBits(t, nt)
	}
	return c, m
}

func encodeBits(t *testing.T, nt NamedTensor) []byte {
	t.Helper()
	_, _, write, err := tensorWriter(nt.T)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := write(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// A run interrupted after any of several steps (the first, mid-epoch, at an
// epoch's end, mid-way through the second epoch, with -save-every between)
// and resumed from its checkpoint alone, with the configuration the
// checkpoint holds, ends with the same weights, batch-norm statistics,
// optimizer state, per-step losses and per-epoch history as a run that was
// never interrupted, bit for bit. The straight run uses the default fast
// solver; the rows with solvers run their segments (before the first
// interrupt, after each resume) with those instead, so they also check that
// gorgonia's solver trains the same bits and that a checkpoint moves between
// the two.
func TestInterruptAndResume(t *testing.T) {
	base := tinyConfig()
	base.Epochs, base.Optimizer, base.Augment, base.SaveEvery = 3, "momentum", true, 3
	base.LRDrop = []int{2} // the rate changes mid-run, in both solvers
	dir := t.TempDir()
	straight := base
	straight.Checkpoint = filepath.Join(dir, "straight.ckpt")
	fit(t, straight)
	want, wantT := runState(t, straight.Checkpoint)
	if len(want.Losses) != 12 || len(want.Meta.Epochs) != 3 {
		t.Fatalf("straight run: %d losses, %d epochs", len(want.Losses), len(want.Meta.Epochs))
	}
	for _, tc := range []struct {
		stops   []int
		solvers []string // per segment; nil: the default
	}{
		{stops: []int{1}}, {stops: []int{2}}, {stops: []int{4}}, {stops: []int{6}}, {stops: []int{2, 5, 9}},
		{[]int{2, 5, 9}, []string{GorgoniaSolver, FastSolver, GorgoniaSolver, FastSolver}},
		{[]int{6}, []string{FastSolver, GorgoniaSolver}},
	} {
		name := "stop-after-" + strings.Trim(strings.ReplaceAll(fmt.Sprint(tc.stops), " ", "-"), "[]")
		if tc.solvers != nil {
			name += "/" + strings.Join(tc.solvers, "-")
		}
		stops := tc.stops
		t.Run(name, func(t *testing.T) {
			cfg := base
			cfg.Checkpoint = filepath.Join(t.TempDir(), "run.ckpt")
			segment := func(c Config, i int) Config {
				if tc.solvers != nil {
					c.Solver = tc.solvers[i]
				}
				return c
			}
			cfg = segment(cfg, 0)
			tr, err := Open(cfg)
			if err != nil {
				t.Fatal(err)
			}
			done := 0
			for i, stop := range stops {
				_, err = tr.Fit(&stopAfter{context.Background(), stop - done})
				var intr *InterruptedError
				if !errors.As(err, &intr) || intr.Step != stop || intr.SaveErr != nil || !errors.Is(err, context.Canceled) {
					t.Fatalf("interrupt %d: %v", i, err)
				}
				tr.Close()
				done = stop
				ck, err := Load(cfg.Checkpoint)
				if err != nil {
					t.Fatal(err)
				}
				if ck.Meta.Step != stop || ck.Meta.Run == nil || ck.Meta.Run.Epochs != 3 || len(ck.Losses) != stop {
					t.Fatalf("checkpoint after %d steps: step %d, run %+v, %d losses", stop, ck.Meta.Step, ck.Meta.Run, len(ck.Losses))
				}
				// The checkpoint alone: its own configuration, nothing else.
				if tr, err = Resume(ck, cfg.Checkpoint, segment(RunConfig(ck), i+1)); err != nil {
					t.Fatal(err)
				}
			}
			res, err := tr.Fit(context.Background())
			tr.Close()
			if err != nil {
				t.Fatal(err)
			}
			if res.First != done+1 || res.Steps != 12 {
				t.Errorf("the last resume ran steps %d..%d", res.First, res.Steps)
			}
			got, gotT := runState(t, cfg.Checkpoint)
			if len(gotT) != len(wantT) {
				t.Fatalf("%d tensors, want %d", len(gotT), len(wantT))
			}
			for name, w := range wantT {
				if !bytes.Equal(gotT[name], w) {
					t.Errorf("%s differs from the straight run", name)
				}
			}
			for i := range want.Losses {
				if math.Float64bits(got.Losses[i]) != math.Float64bits(want.Losses[i]) {
					t.Errorf("step %d: loss %v, straight %v", i+1, got.Losses[i], want.Losses[i])
				}
			}
			if !reflect.DeepEqual(got.Meta.Epochs, want.Meta.Epochs) || !reflect.DeepEqual(got.Meta.LastEval, want.Meta.LastEval) {
				t.Errorf("history differs:\n%+v\n%+v", got.Meta.Epochs, want.Meta.Epochs)
			}
			if got.Meta.OptimizerIter != want.Meta.OptimizerIter || got.Meta.NextEpoch != want.Meta.NextEpoch || got.Meta.EpochLossSum != want.Meta.EpochLossSum {
				t.Errorf("meta differs:\n%+v\n%+v", got.Meta, want.Meta)
			}
		})
	}
}

// On the CPU device a budget of B bytes is a device of B bytes: the
// allocator never reserves more, the scheduler plans under what the
// allocator can serve in it, and a budget whose device cannot hold a step
// is refused before training with the least budget that works.
func TestBudgetIsDevice(t *testing.T) {
	base := Config{Model: "smallcnn", Data: "synthetic:n=32", Batch: 32, Image: 32, Seed: 1, Steps: 1}
	for _, pct := range []float64{40, 60, 100} {
		t.Run(fmt.Sprintf("%v%%", pct), func(t *testing.T) {
			cfg := base
			cfg.Budget = Budget{Percent: pct}
			tr, res := fit(t, cfg)
			// The chunk is a whole number of pages, the CPU device's granularity,
			// well under CUDA's 2 MiB for a device of a few MiB: the one chosen
			// for the device or its half or quarter.
			c := ooc.ChunkFor(tr.budget)
			if tr.mem.device != tr.budget || (tr.mem.chunk != c && tr.mem.chunk != c/2 && tr.mem.chunk != c/4) ||
				tr.mem.chunk%alloc.HostGranularity() != 0 || tr.mem.chunk >= 2<<20 || !tr.mem.adaptive {
				t.Errorf("budget %d: device %d, chunk %d", tr.budget, tr.mem.device, tr.mem.chunk)
			}
			st := res.Stats
			if st.ReservedBytes <= 0 || st.ReservedBytes > tr.mem.device || st.PeakDeviceBytes > tr.mem.planned || tr.mem.planned > tr.budget {
				t.Errorf("device %d, planned %d: reserved %d, peak %d", tr.mem.device, tr.mem.planned, st.ReservedBytes, st.PeakDeviceBytes)
			}
			var out bytes.Buffer
			tr.Summary(&out, res)
			if !strings.Contains(out.String(), "a CPU device of ") || !strings.Contains(out.String(), "peak requested from it") ||
				!regexp.MustCompile(`\n  planner     auto: (window|hybrid)[ ,]`).MatchString(out.String()) {
				t.Errorf("summary:\n%s", out.String())
			}
		})
	}
	cfg := base
	cfg.Budget = Budget{Percent: 20}
	_, err := Open(cfg)
	m := regexp.MustCompile(`the least device that serves a step is about .*\(or -budget ([0-9]+)\)`).FindStringSubmatch(fmt.Sprint(err))
	if m == nil {
		t.Fatalf("20%%: %v", err)
	}
	// The budget suggested works.
	b, _ := strconv.ParseInt(m[1], 10, 64)
	cfg.Budget = Budget{Bytes: b}
	fit(t, cfg)
}

// Training with the fast solver steps the same bits as with gorgonia's: the
// same weights, batch-norm statistics, optimizer state and losses after a few
// steps, for every optimizer.
func TestFastSolverIsGorgonias(t *testing.T) {
	for _, opt := range []string{"sgd", "momentum", "adam"} {
		t.Run(opt, func(t *testing.T) {
			var losses [][]float64
			var states []map[string][]byte
			for _, solver := range []string{FastSolver, GorgoniaSolver} {
				cfg := tinyConfig()
				cfg.Optimizer, cfg.Solver, cfg.Steps = opt, solver, 3
				cfg.Checkpoint = filepath.Join(t.TempDir(), solver+".ckpt")
				fit(t, cfg)
				ck, st := runState(t, cfg.Checkpoint)
				if ck.Meta.Run.Solver != solver {
					t.Errorf("checkpoint records solver %q, want %q", ck.Meta.Run.Solver, solver)
				}
				losses, states = append(losses, ck.Losses), append(states, st)
			}
			if len(losses[0]) != 3 || !reflect.DeepEqual(losses[0], losses[1]) {
				t.Errorf("losses: fast %v, gorgonia %v", losses[0], losses[1])
			}
			if len(states[0]) != len(states[1]) {
				t.Fatalf("fast %d tensors, gorgonia %d", len(states[0]), len(states[1]))
			}
			for name, w := range states[1] {
				if !bytes.Equal(states[0][name], w) {
					t.Errorf("%s differs", name)
				}
			}
		})
	}
}
