package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/gorgonia-ooc/outofcore/dist"
	"github.com/gorgonia-ooc/outofcore/train"
	"github.com/gorgonia-ooc/outofcore/vm/cuda"
)

func runTrain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseTrainFlags(args, stderr)
	if err != nil {
		return err
	}
	if o.CPUProfile != "" {
		stop, err := startCPUProfile(o.CPUProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	_, err = runTraining(ctx, o, stdout)
	return err
}

// startCPUProfile profiles the process into file until the returned func is called.
func startCPUProfile(file string) (stop func(), err error) {
	f, err := os.Create(file)
	if err != nil {
		return nil, fmt.Errorf("-cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("-cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// runTraining opens (or resumes) the run the flags describe, trains it with
// progress on out, and prints its summary.
func runTraining(ctx context.Context, o *trainOptions, out io.Writer) (*train.Result, error) {
	var t *train.Trainer
	var joined func() // once the trainer is open, or failed to: rank 0 removes -nccl-id
	world, err := launcherWorld(o)
	if err != nil {
		return nil, err
	}
	if o.Resume {
		ck, err := train.Load(o.Checkpoint)
		if err != nil {
			return nil, fmt.Errorf("-resume: %w", err)
		}
		cfg, notes, err := o.resumeConfig(o.Checkpoint, train.RunConfig(ck))
		if err != nil {
			return nil, err
		}
		for _, n := range notes {
			fmt.Fprintln(out, n)
		}
		if joined, err = worldID(ctx, o, world, &cfg); err != nil {
			return nil, err
		}
		t, err = train.Resume(ck, o.Checkpoint, cfg)
		joined()
		if err != nil {
			return nil, err
		}
	} else {
		cfg := o.config()
		if _, err := os.Stat(cfg.Checkpoint); err == nil && cfg.WorldSize > 1 {
			// As train.Open would, before the ranks meet: a rank 0 that fails
			// after handing out the id leaves the others waiting.
			return nil, usagef("-checkpoint %s already exists: pass -resume to continue it, or remove it to start over", cfg.Checkpoint)
		}
		if joined, err = worldID(ctx, o, world, &cfg); err != nil {
			return nil, err
		}
		t, err = train.Open(cfg)
		joined()
		if err != nil {
			return nil, err
		}
	}
	defer t.Close()
	cfg := t.Config()
	report := out
	if cfg.Rank > 0 {
		out = io.Discard // rank 0 reports; the others say only that they are done
	}
	t.Describe(out)

	if t.Step() >= t.LastStep() {
		fmt.Fprintln(out, finished(t, cfg))
		return &train.Result{First: t.Step() + 1, Steps: t.Step()}, nil
	}
	if cfg.Steps > t.LastStep() {
		fmt.Fprintf(out, "-epochs %d ends the run at step %d, before -steps %d (leave -epochs out to train %d steps)\n",
			t.Epochs(), t.LastStep(), cfg.Steps, cfg.Steps)
	}
	every := o.LogEvery
	if every == 0 {
		every = (t.LastStep() - t.Step() + 99) / 100
	}
	rep, err := newReporter(o.Progress, out, every)
	if err != nil {
		return nil, err
	}
	defer rep.done()
	t.Progress = rep.event
	res, err := t.Fit(ctx)
	rep.done()
	var intr *train.InterruptedError
	if errors.As(err, &intr) {
		if intr.Checkpoint == "" {
			return res, fmt.Errorf("interrupted after step %d; no -checkpoint was given, so the run cannot be continued", intr.Step)
		}
		if intr.SaveErr != nil {
			return res, fmt.Errorf("interrupted after step %d, and the checkpoint could not be written: %w", intr.Step, intr.SaveErr)
		}
		return res, fmt.Errorf("interrupted after step %d; continue with: ooc train -checkpoint %s -resume", intr.Step, shellQuote(intr.Checkpoint))
	}
	if err != nil {
		return res, err
	}
	t.Summary(out, res)
	if cfg.Rank > 0 {
		fmt.Fprintf(report, "rank %d of %d: trained to step %d; rank 0 reports, evaluates and writes the checkpoint\n", cfg.Rank, cfg.WorldSize, t.Step())
	}
	return res, nil
}

// worldID gives a rank of a run across processes (-world-size) its NCCL id
// through -nccl-id FILE: rank 0 makes the id and writes the file (which must
// not exist: another run's id would leave the ranks waiting on it), the
// others wait for the file. joined, called once the trainer is open (every
// rank has joined) or failed to open, has rank 0 remove the file. A rank 0
// that fails before every rank has joined leaves the others waiting, for the
// file (ncclIDWait) or in NCCL's join: a launcher that ends the others on
// the first failure (as torchrun does) ends them sooner.
//
// Under a launcher (world: ooc launch, torchrun, Slurm's srun) with no
// -nccl-id, the id goes through world's rendezvous instead (shareID), and
// "-device cuda" is the rank's own GPU of its machine (rankDevice); ranks
// started by hand with -world-size and -rank keep their -device.
func worldID(ctx context.Context, o *trainOptions, world dist.World, cfg *train.Config) (joined func(), err error) {
	joined = func() {}
	if cfg.WorldSize <= 1 {
		return joined, nil
	}
	if world.Multi() && world.Source != "flags" {
		// Started by a launcher, every rank has the same flags.
		cfg.Device = rankDevice(cfg.Device, world.LocalRank)
	}
	path := o.NCCLIDFile
	if path == "" && world.Transport() != "" {
		return joined, shareID(ctx, world, cfg)
	}
	if path == "" { // a resumed run across processes
		return joined, usagef("the run has -world-size %d: give every rank -nccl-id FILE and its -rank, or -world-size 1 to go on in one process "+
			"(or start the ranks with ooc launch, torchrun or srun, which set %s and %s)", cfg.WorldSize, dist.EnvMasterAddr, dist.EnvMasterPort)
	}
	if cfg.Rank == 0 {
		exists := usagef("-nccl-id %s exists: another run's id (rank 0 removes its own once every rank has joined: remove it, or give a new path), "+
			"or another process was given -rank 0 too", path)
		if _, err := os.Stat(path); err == nil {
			return joined, exists
		}
		id, err := cuda.NewUniqueID()
		if err != nil {
			return joined, fmt.Errorf("rank 0: the NCCL id: %w", err)
		}
		// Written whole, then linked to its name, which must not exist: a rank
		// reading it never sees half, and of two rank 0s one fails here.
		tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
		if err := id.WriteFile(tmp); err != nil {
			return joined, fmt.Errorf("-nccl-id: %w", err)
		}
		err = os.Link(tmp, path)
		os.Remove(tmp)
		switch {
		case errors.Is(err, fs.ErrExist):
			return joined, exists
		case err != nil:
			return joined, fmt.Errorf("-nccl-id: %w", err)
		}
		cfg.NCCLID = id
		return func() { os.Remove(path) }, nil
	}
	start := time.Now()
	for {
		id, err := cuda.ReadUniqueID(path)
		if err == nil {
			cfg.NCCLID = id
			return joined, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return joined, fmt.Errorf("rank %d: -nccl-id: %w", cfg.Rank, err)
		}
		if time.Since(start) > ncclIDWait {
			return joined, fmt.Errorf("rank %d: -nccl-id %s: rank 0 has not written it in %v", cfg.Rank, path, ncclIDWait)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// launcherWorld puts the process in the world a launcher's environment
// describes (torchrun's RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and
// MASTER_PORT, as ooc launch sets them, or Slurm's; see package dist), as
// if -world-size and -rank had been given; flags that disagree with the
// environment are refused.
func launcherWorld(o *trainOptions) (dist.World, error) {
	envRank, envSize := dist.Launched()
	if o.set["rank"] && !o.set["world-size"] && !envSize {
		// A rank started by hand resuming with -rank and -nccl-id: its world
		// size is the checkpoint's, not a flag's, so there is no world to
		// read here yet (TestTrainRanks under OOC_MULTIPROC_FULL=1).
		return dist.World{}, nil
	}
	var f dist.Flags
	if o.set["world-size"] {
		f.WorldSize = strconv.Itoa(o.WorldSize)
	}
	if o.set["rank"] || o.set["world-size"] && !envRank {
		f.Rank = strconv.Itoa(o.Rank) // -world-size alone is rank 0, -rank's default
	}
	w, err := dist.FromEnv(f)
	if err != nil {
		return w, usageError{err}
	}
	if w.Multi() {
		o.WorldSize, o.Rank = w.Size, w.Rank
		o.set["world-size"], o.set["rank"] = true, true
	}
	return w, nil
}

// shareID hands rank 0's new NCCL id to every rank through w's rendezvous.
func shareID(ctx context.Context, w dist.World, cfg *train.Config) error {
	b, err := dist.Share(ctx, w, func() ([]byte, error) {
		id, err := cuda.NewUniqueID()
		return id[:], err
	})
	var ce *dist.ConfigError
	switch {
	case errors.As(err, &ce):
		return usageError{err}
	case err != nil:
		return fmt.Errorf("rank %d: the NCCL id: %w", w.Rank, err)
	case len(b) != len(cfg.NCCLID):
		return fmt.Errorf("rank %d: rank 0 sent %d bytes, not a %d-byte NCCL id", w.Rank, len(b), len(cfg.NCCLID))
	}
	copy(cfg.NCCLID[:], b)
	return nil
}

// rankDevice is a rank's GPU: "-device cuda" means the local rank's,
// cuda:LOCAL_RANK, as every rank of ooc launch is given the same flags;
// unless CUDA_VISIBLE_DEVICES shows the process one GPU (as Slurm's
// per-task binding does), which is then its cuda:0.
func rankDevice(device string, local int) string {
	visible := os.Getenv("CUDA_VISIBLE_DEVICES")
	if device != "cuda" || local == 0 || visible != "" && !strings.Contains(visible, ",") {
		return device
	}
	return fmt.Sprintf("cuda:%d", local)
}

// ncclIDWait is how long a rank waits for rank 0's -nccl-id file.
const ncclIDWait = 5 * time.Minute

// finished says that a run has nothing left to do, which limit ended it, and
// what to give to train on: a -resume of a finished run continues nothing.
func finished(t *train.Trainer, cfg train.Config) string {
	limit := fmt.Sprintf("-epochs %d", t.Epochs())
	if cfg.Steps > 0 && cfg.Steps == t.LastStep() {
		limit = fmt.Sprintf("-steps %d", cfg.Steps)
	}
	return fmt.Sprintf("nothing to do: the run is finished (%d steps done; %s ends it there). To train on, resume with "+
		"a larger -epochs (e.g. -epochs %d) or -steps", t.Step(), limit, t.Epochs()+1)
}

// shellQuote quotes a path for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./+=:,@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
