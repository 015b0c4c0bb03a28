package train

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/vm/cuda"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/dispatch/dispatchtest"
)

// rankEnv makes the test binary one rank of a run across processes
// (TestMain): its value is a rankSpec in JSON.
const rankEnv = "OOC_TEST_TRAIN_RANK"

// fullEnv turns on the longer cases: four ranks, and a resumed world.
const fullEnv = "OOC_MULTIPROC_FULL"

func TestMain(m *testing.M) {
	if spec := os.Getenv(rankEnv); spec != "" {
		if err := runRank(spec); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// rankSpec is what a rank process runs: cfg (with Rank and NCCLID, which
// JSON leaves out, given apart), a new run or a resume of cfg.Checkpoint,
// its record written to Out.
type rankSpec struct {
	Config Config
	Rank   int
	ID     string
	Resume bool
	Out    string
}

// record is what a run did, step by step: the loss and a hash of the
// weights after the update; and, if it was interrupted (SIGTERM), after
// which step and why.
type record struct {
	Losses      []float64
	Weights     []string
	Interrupted int
	Why         string
}

// runRank is one rank of a run across processes: it says "step N" on
// stdout after each step.
func runRank(spec string) error {
	var s rankSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		return err
	}
	cfg := s.Config
	cfg.Rank = s.Rank
	id, err := cuda.ParseUniqueID(s.ID)
	if err != nil {
		return err
	}
	cfg.NCCLID = id
	tr, err := openRun(cfg, s.Resume)
	if err != nil {
		return err
	}
	defer tr.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	rec, err := fitRecorded(ctx, tr, func(step int) { fmt.Printf("step %d\n", step) })
	var intr *InterruptedError
	if errors.As(err, &intr) {
		rec.Interrupted, rec.Why, err = intr.Step, intr.Err.Error(), nil
	}
	if err != nil {
		return err
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return os.WriteFile(s.Out, b, 0o600)
}

// openRun opens cfg, or resumes its checkpoint to cfg.Steps.
func openRun(cfg Config, resume bool) (*Trainer, error) {
	if !resume {
		return Open(cfg)
	}
	ck, err := Load(cfg.Checkpoint)
	if err != nil {
		return nil, err
	}
	run := *ck.Meta.Run
	run.Steps, run.Rank, run.NCCLID = cfg.Steps, cfg.Rank, cfg.NCCLID
	return Resume(ck, cfg.Checkpoint, run)
}

// fitRecorded trains tr to its end, recording every step's loss and weights.
func fitRecorded(ctx context.Context, tr *Trainer, onStep func(int)) (record, error) {
	var rec record
	var werr error
	tr.Progress = func(e Event) {
		if e.Kind != StepDone || werr != nil {
			return
		}
		rec.Losses = append(rec.Losses, e.Loss)
		if werr = tr.upd.weightsToHost(); werr == nil {
			h := sha256.New()
			for _, l := range tr.model.Learnables {
				werr = binary.Write(h, binary.LittleEndian, l.Value().(*tensor.Dense).Data())
			}
			rec.Weights = append(rec.Weights, hex.EncodeToString(h.Sum(nil)))
		}
		onStep(e.Step)
	}
	if _, err := tr.Fit(ctx); err != nil {
		return rec, err
	}
	return rec, werr
}

// rankRun is a rank process: lines has what it says on stdout (what does
// not fit is dropped), done its exit once it is reaped.
type rankRun struct {
	cmd    *exec.Cmd
	out    string
	stderr bytes.Buffer
	lines  chan string
	done   chan error
}

// startRanks starts ranks 0 to world-1 of cfg as processes of their own,
// each on the one device of its own fake driver.
func startRanks(t *testing.T, cfg Config, world int, resume bool, id cuda.UniqueID) []*rankRun {
	t.Helper()
	bin, err := os.Executable()
	if err != nil {
		t.Skip("cannot find the test binary to run ranks with:", err)
	}
	cfg.Device, cfg.WorldSize = "cuda", world
	var rs []*rankRun
	for r := range world {
		rr := &rankRun{out: filepath.Join(t.TempDir(), "record.json"), lines: make(chan string, 64), done: make(chan error, 1)}
		spec, err := json.Marshal(rankSpec{Config: cfg, Rank: r, ID: id.String(), Resume: resume, Out: rr.out})
		if err != nil {
			t.Fatal(err)
		}
		rr.cmd = exec.Command(bin, "-test.run=^$")
		rr.cmd.Env = append(os.Environ(), rankEnv+"="+string(spec))
		rr.cmd.Stderr = &rr.stderr
		stdout, err := rr.cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := rr.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go rr.reap(stdout)
		t.Cleanup(func() {
			_ = rr.cmd.Process.Kill() // nothing, if it has exited
			<-rr.done
			rr.done <- nil
		})
		rs = append(rs, rr)
	}
	return rs
}

// reap reads the rank's stdout to its end, then reaps it.
func (rr *rankRun) reap(stdout io.Reader) {
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		select {
		case rr.lines <- sc.Text():
		default:
		}
	}
	close(rr.lines)
	rr.done <- rr.cmd.Wait()
}

// exit waits at most limit for the rank to exit.
func (rr *rankRun) exit(limit time.Duration) (err error, ok bool) {
	select {
	case err = <-rr.done:
		rr.done <- err // for the cleanup
		return err, true
	case <-time.After(limit):
		return nil, false
	}
}

// finish waits for every rank to succeed and returns their records.
func finish(t *testing.T, rs []*rankRun) []record {
	t.Helper()
	var recs []record
	for r, rr := range rs {
		err, ok := rr.exit(5 * time.Minute)
		switch {
		case !ok:
			t.Fatalf("rank %d did not finish within 5 minutes; stderr:\n%s", r, rr.stderr.String())
		case err != nil:
			t.Fatalf("rank %d: %v; stderr:\n%s", r, err, rr.stderr.String())
		}
		b, err := os.ReadFile(rr.out)
		if err != nil {
			t.Fatal(err)
		}
		var rec record
		if err := json.Unmarshal(b, &rec); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	return recs
}

// sameRecord fails unless a rank's steps are the reference's, bit for bit.
func sameRecord(t *testing.T, what string, got, want record) {
	t.Helper()
	if len(got.Losses) != len(want.Losses) || len(got.Weights) != len(want.Weights) {
		t.Fatalf("%s: %d steps, want %d", what, len(got.Losses), len(want.Losses))
	}
	for i := range want.Losses {
		if math.Float64bits(got.Losses[i]) != math.Float64bits(want.Losses[i]) {
			t.Errorf("%s: step %d's loss %v, want %v", what, i+1, got.Losses[i], want.Losses[i])
		}
		if got.Weights[i] != want.Weights[i] {
			t.Errorf("%s: the weights after step %d differ", what, i+1)
		}
	}
}

// sameCheckpoint fails unless two checkpoints hold the same losses and
// tensors (weights, batch-norm statistics, Adam's moments), bit for bit.
func sameCheckpoint(t *testing.T, what, got, want string) {
	t.Helper()
	gc, gt := runState(t, got)
	wc, wt := runState(t, want)
	sameRun(t, what, cudaRun{losses: gc.Losses, tensors: gt}, cudaRun{losses: wc.Losses, tensors: wt})
	if gc.Meta.Step != wc.Meta.Step || len(gt) == 0 {
		t.Errorf("%s: step %d and %d tensors, want step %d", what, gc.Meta.Step, len(gt), wc.Meta.Step)
	}
}

// TestRanksAcrossProcesses trains smallcnn with its ranks as processes of
// their own, each on the one device of its own fake CUDA driver, meeting
// through the fake NCCL: every rank's loss and weights after every step,
// and rank 0's checkpoint (weights, batch-norm statistics, Adam's moments,
// losses), equal bit for bit those of one process training the same global
// batch on as many fake devices (-device cuda*N). Two ranks; with
// OOC_MULTIPROC_FULL=1 also four, and a two-rank world stopped after step 2
// and resumed from rank 0's checkpoint, every rank reading it.
func TestRanksAcrossProcesses(t *testing.T) {
	driver := dispatchtest.Setenv(t)
	dispatchtest.SetenvNCCL(t, driver)
	t.Setenv("OOC_FAKENCCL_TIMEOUT_MS", "300000") // only a dead rank ends a wait early
	worlds := []int{2}
	full := os.Getenv(fullEnv) == "1"
	if full {
		worlds = append(worlds, 4)
	}
	dispatchtest.SetDevices(t, driver, 4)
	for _, world := range worlds {
		t.Run(fmt.Sprintf("%d ranks", world), func(t *testing.T) {
			dir := t.TempDir()
			cfg := tinyConfig()
			cfg.Batch, cfg.Steps = 2*world, 3
			one := cfg
			one.Device, one.Checkpoint = fmt.Sprintf("cuda*%d", world), filepath.Join(dir, "one.ckpt")
			start := time.Now()
			tr, err := Open(one)
			if err != nil {
				t.Fatal(err)
			}
			want, err := fitRecorded(context.Background(), tr, func(int) {})
			tr.Close()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("one process on %d devices: %v", world, time.Since(start))

			start = time.Now()
			cfg.Checkpoint = filepath.Join(dir, "ranks.ckpt")
			recs := finish(t, startRanks(t, cfg, world, false, newID(t)))
			t.Logf("%d processes: %v", world, time.Since(start))
			for r, rec := range recs {
				sameRecord(t, fmt.Sprintf("rank %d of %d", r, world), rec, want)
			}
			sameCheckpoint(t, "rank 0's checkpoint", cfg.Checkpoint, one.Checkpoint)

			if !full || world != 2 {
				return
			}
			cfg.Checkpoint, cfg.Steps = filepath.Join(dir, "resumed.ckpt"), 2
			finish(t, startRanks(t, cfg, world, false, newID(t)))
			cfg.Steps = 3
			recs = finish(t, startRanks(t, cfg, world, true, newID(t)))
			for r, rec := range recs {
				sameRecord(t, fmt.Sprintf("resumed rank %d", r), record{Losses: rec.Losses, Weights: rec.Weights}, record{Losses: want.Losses[2:], Weights: want.Weights[2:]})
			}
			sameCheckpoint(t, "the resumed world's checkpoint", cfg.Checkpoint, one.Checkpoint)
		})
	}
}

// newID is a fresh NCCL id of the fake NCCL $OOC_NCCL_LIBRARY names.
func newID(t *testing.T) cuda.UniqueID {
	t.Helper()
	id, err := cuda.NewUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestRankKilled: rank 1 of two is killed (SIGKILL) while they train; rank
// 0 exits within 30 s with an error naming rank 1, and its checkpoint,
// written after every step, is whole and holds the last step rank 0
// finished.
func TestRankKilled(t *testing.T) {
	driver := dispatchtest.Setenv(t)
	dispatchtest.SetenvNCCL(t, driver)
	t.Setenv("OOC_FAKENCCL_TIMEOUT_MS", "300000")
	cfg := tinyConfig()
	cfg.Steps, cfg.SaveEvery = 10000, 1
	cfg.Checkpoint = filepath.Join(t.TempDir(), "run.ckpt")
	rs := startRanks(t, cfg, 2, false, newID(t))
	last := ""
	for line := range rs[0].lines {
		if last = line; line == "step 3" {
			break
		}
	}
	if last != "step 3" {
		rs[0].exit(time.Minute)
		t.Fatalf("rank 0 stopped before step 3; stderr:\n%s", rs[0].stderr.String())
	}
	if err := rs[1].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	err, ok := rs[0].exit(30 * time.Second)
	if !ok {
		t.Fatalf("rank 0 still runs 30 s after rank 1 was killed; stderr:\n%s", rs[0].stderr.String())
	}
	took := time.Since(killed)
	msg := rs[0].stderr.String()
	pid := fmt.Sprint(rs[1].cmd.Process.Pid)
	if err == nil || !strings.Contains(msg, "rank 1 of 2 (pid "+pid+") is gone") {
		t.Errorf("rank 0 exited (%v) saying:\n%s\nwant an error naming rank 1 (pid %s)", err, msg, pid)
	}
	t.Logf("rank 0 exited %v after the kill: %s", took.Round(time.Millisecond), strings.TrimSpace(msg))
	ck, lerr := Load(cfg.Checkpoint)
	if lerr != nil {
		t.Fatalf("the checkpoint after the kill: %v", lerr)
	}
	if ck.Meta.Step < 3 || len(ck.Losses) != ck.Meta.Step {
		t.Errorf("the checkpoint holds step %d and %d losses, want step 3 or later", ck.Meta.Step, len(ck.Losses))
	}
}

// TestRankInterrupted: SIGTERM reaches rank 1 of two only (a batch system
// may signal one process first); the ranks agree before every step whether
// to stop, so both stop after the same step, neither failing on the other,
// and rank 0's checkpoint holds that step. With OOC_MULTIPROC_FULL=1 only: a
// few seconds more.
func TestRankInterrupted(t *testing.T) {
	if os.Getenv(fullEnv) != "1" {
		t.Skipf("two more rank processes: set %s=1 to run it", fullEnv)
	}
	driver := dispatchtest.Setenv(t)
	dispatchtest.SetenvNCCL(t, driver)
	cfg := tinyConfig()
	cfg.Steps = 10000
	cfg.Checkpoint = filepath.Join(t.TempDir(), "run.ckpt")
	rs := startRanks(t, cfg, 2, false, newID(t))
	for line := range rs[0].lines {
		if line == "step 3" {
			break
		}
	}
	if err := rs[1].cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	recs := finish(t, rs)
	if recs[0].Interrupted < 3 || recs[1].Interrupted != recs[0].Interrupted {
		t.Fatalf("rank 0 stopped after step %d, rank 1 after %d: want the same step, 3 or later", recs[0].Interrupted, recs[1].Interrupted)
	}
	if recs[0].Why != ErrOtherRankStopped.Error() || recs[1].Why != context.Canceled.Error() {
		t.Errorf("why: rank 0 %q, rank 1 %q", recs[0].Why, recs[1].Why)
	}
	ck, err := Load(cfg.Checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	if ck.Meta.Step != recs[0].Interrupted {
		t.Errorf("the checkpoint holds step %d; the ranks stopped after %d", ck.Meta.Step, recs[0].Interrupted)
	}
	t.Logf("both stopped after step %d", ck.Meta.Step)
}
