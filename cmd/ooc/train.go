package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"

	"github.com/gorgonia-ooc/outofcore/train"
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
		if t, err = train.Resume(ck, o.Checkpoint, cfg); err != nil {
			return nil, err
		}
	} else {
		var err error
		if t, err = train.Open(o.config()); err != nil {
			return nil, err
		}
	}
	defer t.Close()
	t.Describe(out)
	cfg := t.Config()

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
	return res, nil
}

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
