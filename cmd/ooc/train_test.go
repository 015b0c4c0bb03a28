package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/train"
)

// A short run under a budget below the in-core peak: it prints a loss per
// step, swaps, stays within the budget and evaluates at the end of the epoch.
func TestTrainSwapsUnderBudget(t *testing.T) {
	for _, alloc := range []string{"va", "bestfit"} {
		t.Run(alloc, func(t *testing.T) {
			res, out := mustTrain(t, tiny("-steps", "4", "-budget", "60%", "-allocator", alloc)...)
			losses := printedLosses(t, out)
			if len(losses) != 4 || len(res.Losses) != 4 {
				t.Fatalf("%d printed losses, %d recorded, want 4; output:\n%s", len(losses), len(res.Losses), out)
			}
			for i, l := range losses {
				if !(l > 0) || math.Abs(l-res.Losses[i]) > 5e-7 {
					t.Errorf("step %d: printed loss %v, computed %v", i+1, l, res.Losses[i])
				}
			}
			sw := swapLine.FindStringSubmatch(out)
			if sw == nil || atoi64(t, sw[1]) <= 0 || atoi64(t, sw[2]) <= 0 {
				t.Fatalf("no swapping reported; output:\n%s", out)
			}
			pk := peakLine.FindStringSubmatch(out)
			if pk == nil || atoi64(t, pk[1]) > atoi64(t, pk[2]) || atoi64(t, pk[1]) <= 0 {
				t.Fatalf("peak above the budget or missing; output:\n%s", out)
			}
			if ev := evalLine.FindStringSubmatch(out); ev == nil || ev[5] != "16" || ev[3] != "16" {
				t.Errorf("no evaluation of the 16 test examples; output:\n%s", out)
			}
			for _, want := range []string{"measured on the CPU device of this machine", "60% of the in-core peak", "allocator " + alloc, "epoch 1/1 done at step 4"} {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
		})
	}
}

// The baseline scheduler and the window scheduler under a budget compute the
// same steps bit for bit, and only the latter swaps.
func TestTrainBaselineEqualsBudget(t *testing.T) {
	base, out := mustTrain(t, tiny("-steps", "2", "-scheduler", "baseline")...)
	win, _ := mustTrain(t, tiny("-steps", "2", "-budget", "50%")...)
	if fmt.Sprint(base.Losses) != fmt.Sprint(win.Losses) {
		t.Errorf("baseline losses %v, under a budget %v", base.Losses, win.Losses)
	}
	if base.Stats.SwapInBytes != 0 || win.Stats.SwapInBytes == 0 {
		t.Errorf("swap-in bytes: baseline %d, window %d", base.Stats.SwapInBytes, win.Stats.SwapInBytes)
	}
	if !strings.Contains(out, "no budget (baseline") {
		t.Errorf("baseline output:\n%s", out)
	}
}

// stateOf loads a checkpoint's tensors as name -> tensor.
func stateOf(t *testing.T, path string) (*train.Checkpoint, map[string]*tensor.Dense) {
	t.Helper()
	c, err := train.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]*tensor.Dense{}
	for _, nt := range c.Tensors {
		m[nt.Name] = nt.T
	}
	return c, m
}

// Training N steps straight and N/2 steps, then -resume for the rest, give the
// same losses and the same weights, batch-norm statistics and optimizer state,
// bit for bit, for every optimizer, across an epoch boundary and with an
// evaluation (batch norm switched to inference mode and back) in between.
func TestResumeBitForBit(t *testing.T) {
	const n = 6 // epochs of 4 steps: the split at 3 is mid-epoch, the resumed run crosses into epoch 2
	for _, opt := range []string{"sgd", "momentum", "adam"} {
		t.Run(opt, func(t *testing.T) {
			common := tiny("-optimizer", opt, "-epochs", "2", "-budget", "60%", "-augment")
			straight := tempCkpt(t)
			full, _ := mustTrain(t, append(common, "-steps", strconv.Itoa(n), "-checkpoint", straight)...)

			split := tempCkpt(t)
			// The first half with gorgonia's solver, the second with the fast one (as the
			// straight run): a checkpoint moves between them.
			first, _ := mustTrain(t, append(common, "-steps", strconv.Itoa(n/2), "-checkpoint", split, "-solver", "gorgonia")...)
			c, _ := stateOf(t, split)
			if c.Meta.Step != n/2 || c.Meta.NextEpoch != 0 || c.Meta.NextBatch != n/2 {
				t.Fatalf("checkpoint position: step %d, epoch %d, batch %d", c.Meta.Step, c.Meta.NextEpoch, c.Meta.NextBatch)
			}
			// Flags the checkpoint holds may be left out on -resume.
			second, out := mustTrain(t, "-checkpoint", split, "-resume", "-epochs", "2", "-steps", strconv.Itoa(n), "-progress", "plain", "-solver", "fast")
			if !strings.Contains(out, fmt.Sprintf("resuming %s after step %d: next is batch %d of 4 in epoch 1", split, n/2, n/2+1)) ||
				!strings.Contains(out, "-solver fast overrides the checkpoint's gorgonia") {
				t.Errorf("resume output:\n%s", out)
			}
			if second.First != n/2+1 {
				t.Errorf("resumed run starts at step %d", second.First)
			}
			got := append(append([]float64{}, first.Losses...), second.Losses...)
			if len(got) != n {
				t.Fatalf("%d losses, want %d", len(got), n)
			}
			for i := range got {
				if math.Float64bits(got[i]) != math.Float64bits(full.Losses[i]) {
					t.Errorf("step %d: loss %v after resume, %v straight", i+1, got[i], full.Losses[i])
				}
			}
			ca, a := stateOf(t, straight)
			cb, b := stateOf(t, split)
			if len(a) != len(b) || len(a) == 0 {
				t.Fatalf("%d and %d tensors", len(a), len(b))
			}
			var params, bns, slots int
			for name, ta := range a {
				if !sameBits(ta, b[name]) {
					t.Errorf("%s differs after resume", name)
				}
				switch {
				case strings.HasPrefix(name, "param/"):
					params++
				case strings.HasPrefix(name, "bn/"):
					bns++
				case strings.HasPrefix(name, "opt/"):
					slots++
				}
			}
			want := map[string]int{"sgd": 0, "momentum": 1, "adam": 2}[opt]
			if params == 0 || bns == 0 || slots != want*params {
				t.Errorf("%d params, %d bn tensors, %d optimizer tensors (want %d per param)", params, bns, slots, want)
			}
			if ca.Meta.Step != n || cb.Meta.Step != n || ca.Meta.OptimizerIter != cb.Meta.OptimizerIter ||
				ca.Meta.NextEpoch != cb.Meta.NextEpoch || ca.Meta.NextBatch != cb.Meta.NextBatch || ca.Meta.EpochLossSum != cb.Meta.EpochLossSum {
				t.Errorf("meta differs:\n%+v\n%+v", ca.Meta, cb.Meta)
			}
			if opt == "adam" && ca.Meta.OptimizerIter != n {
				t.Errorf("adam iter %d, want %d", ca.Meta.OptimizerIter, n)
			}
		})
	}
}

func TestResumeRefusals(t *testing.T) {
	path := tempCkpt(t)
	mustTrain(t, tiny("-steps", "1", "-checkpoint", path)...)
	good, _ := os.ReadFile(path)

	// Starting over would overwrite a good checkpoint.
	_, _, err := trainArgs(t, tiny("-steps", "2", "-checkpoint", path)...)
	if err == nil || !strings.Contains(err.Error(), "already exists: pass -resume") {
		t.Errorf("fresh run over an existing checkpoint: %v", err)
	}
	// Flags that contradict the checkpoint.
	_, _, err = trainArgs(t, tiny("-steps", "2", "-checkpoint", path, "-resume", "-optimizer", "sgd", "-seed", "9")...)
	if err == nil || !strings.Contains(err.Error(), "-optimizer sgd (the checkpoint has adam)") || !strings.Contains(err.Error(), "-seed 9 (the checkpoint has 1)") {
		t.Errorf("contradicting flags: %v", err)
	}
	// Nothing left to do.
	_, out, err := trainArgs(t, "-checkpoint", path, "-resume", "-steps", "1", "-progress", "plain")
	if err != nil || !strings.Contains(out, "nothing to do") {
		t.Errorf("resume at the end: %v\n%s", err, out)
	}
	// A corrupt checkpoint is an error naming it, and stays as it is.
	bad := append([]byte{}, good...)
	bad[len(bad)/2] ^= 1
	os.WriteFile(path, bad, 0o644)
	_, _, err = trainArgs(t, "-checkpoint", path, "-resume", "-steps", "3", "-progress", "plain")
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Errorf("corrupt checkpoint: %v", err)
	}
	if now, _ := os.ReadFile(path); !bytes.Equal(now, bad) {
		t.Error("the corrupt checkpoint was overwritten")
	}
	// A missing one too.
	_, _, err = trainArgs(t, "-checkpoint", path+".missing", "-resume", "-progress", "plain")
	if err == nil || !strings.Contains(err.Error(), path+".missing") {
		t.Errorf("missing checkpoint: %v", err)
	}
}

// The progress bar, when asked for, shows the rate, the loss and the memory.
func TestProgressBar(t *testing.T) {
	barThrottle = 0
	defer func() { barThrottle = 100 * time.Millisecond }()
	_, out := mustTrain(t, tiny("-steps", "2", "-progress", "bar")...)
	for _, want := range []string{"img/s", "loss ", "dev ", "epoch 1/1"} {
		if !strings.Contains(out, want) {
			t.Errorf("bar output lacks %q:\n%q", want, out)
		}
	}
	if strings.Contains(out, "\nstep 1/2") {
		t.Errorf("bar mode printed plain step lines:\n%s", out)
	}
}

// stopAfter is a context whose Err reports cancellation from its n+1-th
// call on: the trainer checks it once before each step, so the run stops
// after exactly n steps, as on a first SIGINT or SIGTERM.
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

// An interrupted run says the exact command that continues it, and that
// command (-checkpoint F -resume, nothing else) finishes the run as a
// straight one would, with its history and plot covering the whole run;
// flags given again override the saved run and say so.
func TestInterruptThenResumeAlone(t *testing.T) {
	dir := t.TempDir()
	hist, plot := filepath.Join(dir, "h.json"), filepath.Join(dir, "p.svg")
	run := tiny("-epochs", "2", "-budget", "55%", "-allocator", "bestfit", "-history", hist, "-plot", plot)
	straight, _ := mustTrain(t, tiny("-epochs", "2", "-budget", "55%", "-allocator", "bestfit")...)

	path := filepath.Join(dir, "run.ckpt")
	o, err := parseTrainFlags(append(run, "-checkpoint", path), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	first, err := runTraining(&stopAfter{context.Background(), 3}, o, &out)
	want := "interrupted after step 3; continue with: ooc train -checkpoint " + path + " -resume"
	if err == nil || err.Error() != want {
		t.Fatalf("interrupt: %v, want %q", err, want)
	}
	if _, err := os.Stat(hist); err == nil {
		t.Errorf("an interrupted run wrote its history")
	}
	second, out2 := mustTrain(t, "-checkpoint", path, "-resume")
	for _, w := range []string{"resuming " + path + " after step 3", "allocator bestfit", "55% of the in-core peak", "history of steps 1..8 and 2 epochs", "plot of 2 epochs"} {
		if !strings.Contains(out2, w) {
			t.Errorf("resumed output lacks %q:\n%s", w, out2)
		}
	}
	if got := append(append([]float64{}, first.Losses...), second.Losses...); fmt.Sprint(got) != fmt.Sprint(straight.Losses) {
		t.Errorf("losses %v, straight %v", got, straight.Losses)
	}
	var h train.History
	raw, _ := os.ReadFile(hist)
	if err := json.Unmarshal(raw, &h); err != nil || h.First != 1 || len(h.Losses) != 8 || len(h.Epochs) != 2 {
		t.Errorf("history %+v, %v", h, err)
	}
	// Flags given again override the saved run, and say so.
	_, out3 := mustTrain(t, "-checkpoint", path, "-resume", "-epochs", "3", "-budget", "70%", "-steps", "9")
	for _, w := range []string{"-epochs 3 overrides the checkpoint's 2", "-budget 70% overrides the checkpoint's 55%", "-steps 9 overrides the checkpoint's 0", "steps       9..9 of 9"} {
		if !strings.Contains(out3, w) {
			t.Errorf("override output lacks %q:\n%s", w, out3)
		}
	}
}

// A run removes the temporary files an interrupted write of its own
// checkpoint left, and only those.
func TestStaleTempsRemoved(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "run.ckpt")
	mine, other := filepath.Join(dir, ".run.ckpt.tmp-123"), filepath.Join(dir, ".other.ckpt.tmp-9")
	for _, f := range []string{mine, other} {
		if err := os.WriteFile(f, []byte("half a checkpoint"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, out := mustTrain(t, tiny("-steps", "1", "-checkpoint", path)...)
	if _, err := os.Stat(mine); err == nil || !strings.Contains(out, "removed "+mine) {
		t.Errorf("stale %s left, output:\n%s", mine, out)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("another checkpoint's temp file was removed: %v", err)
	}
}

// A run that finishes no epoch has no plot to draw: it says so and
// succeeds, instead of failing after its work.
func TestPlotWithoutEpoch(t *testing.T) {
	plot := filepath.Join(t.TempDir(), "p.svg")
	_, out := mustTrain(t, tiny("-steps", "1", "-plot", plot)...)
	if !strings.Contains(out, "no plot written to "+plot+": no epoch has finished yet") {
		t.Errorf("output:\n%s", out)
	}
}

// -cpuprofile writes a pprof profile of the run (gzipped protobuf), and a
// file it cannot create is an error naming the flag.
func TestCPUProfile(t *testing.T) {
	prof := filepath.Join(t.TempDir(), "cpu.prof")
	var out bytes.Buffer
	if err := runTrain(context.Background(), tiny("-steps", "2", "-cpuprofile", prof), &out, io.Discard); err != nil {
		t.Fatalf("train -cpuprofile: %v\n%s", err, out.String())
	}
	b, err := os.ReadFile(prof)
	if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("profile %s: %d bytes, err %v; want a gzipped pprof profile", prof, len(b), err)
	}
	err = runTrain(context.Background(), tiny("-steps", "1", "-cpuprofile", filepath.Join(t.TempDir(), "no", "such", "dir", "p")), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "-cpuprofile") {
		t.Errorf("an uncreatable profile file: err = %v, want one naming -cpuprofile", err)
	}
}

// How long a run is: -steps alone trains that many steps across epochs; with
// -epochs too, the first limit ends it and the output says which; a resume of
// a finished run says it is finished and what to give to go on.
func TestStepsAndEpochs(t *testing.T) {
	cases := []struct {
		name      string
		args      []string
		steps     int
		epochLine string // the last epoch's progress line
		note      string
	}{
		{"steps alone cross epochs", []string{"-steps", "6"}, 6, "epoch 2/2", ""},
		{"epochs end before steps", []string{"-steps", "6", "-epochs", "1"}, 4, "epoch 1/1", "-epochs 1 ends the run at step 4, before -steps 6"},
		{"steps end before epochs", []string{"-steps", "3", "-epochs", "2"}, 3, "epoch 1/2", ""},
		{"epochs alone", []string{"-epochs", "2"}, 8, "epoch 2/2", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, out := mustTrain(t, tiny(c.args...)...)
			if res.Steps != c.steps || len(printedLosses(t, out)) != c.steps {
				t.Fatalf("%d steps done, want %d; output:\n%s", res.Steps, c.steps, out)
			}
			if !strings.Contains(out, c.epochLine) {
				t.Errorf("output lacks %q:\n%s", c.epochLine, out)
			}
			if c.note != "" && !strings.Contains(out, c.note) {
				t.Errorf("output lacks the note %q:\n%s", c.note, out)
			}
		})
	}
	t.Run("resume of a finished run", func(t *testing.T) {
		path := tempCkpt(t)
		mustTrain(t, tiny("-epochs", "1", "-checkpoint", path)...)
		_, out, err := trainArgs(t, "-checkpoint", path, "-resume", "-progress", "plain")
		want := "nothing to do: the run is finished (4 steps done; -epochs 1 ends it there). To train on, resume with a larger -epochs (e.g. -epochs 2) or -steps"
		if err != nil || !strings.Contains(out, want) {
			t.Fatalf("resume of a finished run: %v, output lacks %q:\n%s", err, want, out)
		}
		res, out := mustTrain(t, "-checkpoint", path, "-resume", "-progress", "plain", "-steps", "6")
		if res.Steps != 6 || !strings.Contains(out, "-steps 6 without -epochs trains 6 steps in all, past the checkpoint's -epochs 1") {
			t.Fatalf("resume with -steps alone: %d steps, output:\n%s", res.Steps, out)
		}
	})
}

// -budget as a percentage is echoed as given, and where the scheduler plans
// under less than it (the allocator's rounding in a device of exactly that
// size), both numbers are printed, with words.
func TestBudgetEcho(t *testing.T) {
	_, out := mustTrain(t, tiny("-steps", "1", "-budget", "70%")...)
	if !regexp.MustCompile(`budget 70% of the in-core peak [0-9.]+ [KM]iB = \d+ B \([0-9.]+ [KM]iB\), of which the scheduler plans under \d+ B \([0-9.]+ [KM]iB, \d+% of the in-core peak`).MatchString(out) &&
		!regexp.MustCompile(`budget \d+ B \([0-9.]+ [KM]iB, 70% of the in-core peak`).MatchString(out) {
		t.Fatalf("the budget line does not say 70%% as given:\n%s", out)
	}
}
