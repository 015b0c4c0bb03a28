package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorgonia-ooc/outofcore/train"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/dispatch/dispatchtest"
)

// -world-size, -rank and -nccl-id are refused, saying why, where they
// cannot make a run across processes.
func TestTrainRanksRefusals(t *testing.T) {
	dispatchtest.Setenv(t) // -device cuda opens
	id := filepath.Join(t.TempDir(), "nccl.id")
	for _, c := range []struct {
		args []string
		want string
	}{
		{tiny("-world-size", "2", "-device", "cuda"), "-world-size 2 needs -nccl-id FILE"},
		{tiny("-nccl-id", id), "give -world-size N too"},
		{tiny("-world-size", "2", "-rank", "2", "-device", "cuda", "-nccl-id", id), "-rank 2: want 0 to 1 for -world-size 2"},
		{tiny("-rank", "1"), "give -world-size too"},
		{tiny("-world-size", "-1"), "want a positive count of processes"},
		{tiny("-world-size", "2", "-nccl-id", id), "each rank trains on one CUDA device"},
		{tiny("-world-size", "2", "-nccl-id", id, "-device", "cuda*2"), "not -device cuda*2"},
		{tiny("-world-size", "2", "-nccl-id", id, "-device", "cuda", "-host-update"), "the update runs on each rank's device"},
	} {
		_, _, err := trainArgs(t, c.args...)
		require.ErrorContains(t, err, c.want, c.args)
	}
	// Rank 0 does not take another run's id file.
	require.NoError(t, os.WriteFile(id, []byte("old\n"), 0o600))
	_, _, err := trainArgs(t, tiny("-world-size", "2", "-nccl-id", id, "-device", "cuda")...)
	require.ErrorContains(t, err, "exists: another run's id")
	require.ErrorContains(t, err, "or another process was given -rank 0 too")
}

// oocRanks runs ooc train as world processes (the test binary as ooc,
// TestMain), rank r with -rank r and its own fake CUDA driver of one device,
// and returns each one's exit error and output.
func oocRanks(t *testing.T, world int, args func(rank int) []string) ([]error, []string) {
	t.Helper()
	bin, err := os.Executable()
	if err != nil {
		t.Skip("cannot find the test binary to run as ooc:", err)
	}
	cmds := make([]*exec.Cmd, world)
	outs := make([]*bytes.Buffer, world)
	for r := range world {
		cmds[r] = exec.Command(bin, append([]string{"train"}, args(r)...)...)
		cmds[r].Env = append(os.Environ(), runAsOOC+"=1")
		outs[r] = &bytes.Buffer{}
		cmds[r].Stdout, cmds[r].Stderr = outs[r], outs[r]
		require.NoError(t, cmds[r].Start())
	}
	errs := make([]error, world)
	texts := make([]string, world)
	for r, c := range cmds {
		done := make(chan error, 1)
		go func() { done <- c.Wait() }()
		select {
		case errs[r] = <-done:
		case <-time.After(5 * time.Minute):
			_ = c.Process.Kill()
			t.Fatalf("rank %d did not exit within 5 minutes:\n%s", r, outs[r].String())
		}
		texts[r] = outs[r].String()
	}
	return errs, texts
}

// TestTrainRanks: two ooc train processes, -world-size 2 with -rank 0 and
// 1, meeting through an -nccl-id file on the fake NCCL, train: rank 0
// reports and writes the checkpoint, rank 1 says only that it is done, and
// rank 0 removes the id file. With OOC_MULTIPROC_FULL=1 the checkpoint's
// losses and tensors are, bit for bit, those of one process on two fake
// devices (-device cuda*2); package train's TestRanksAcrossProcesses checks
// that step by step by default. Ranks that disagree on the world size both
// fail, saying so.
func TestTrainRanks(t *testing.T) {
	driver := dispatchtest.Setenv(t)
	dispatchtest.SetenvNCCL(t, driver)
	dir := t.TempDir()
	ck, id := filepath.Join(dir, "ranks.ckpt"), filepath.Join(dir, "nccl.id")
	errs, outs := oocRanks(t, 2, func(r int) []string {
		return tiny("-device", "cuda", "-steps", "2", "-checkpoint", ck, "-world-size", "2", "-rank", fmt.Sprint(r), "-nccl-id", id)
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d:\n%s", r, outs[r])
	}
	require.Contains(t, outs[0], "rank 0 of 2 processes (-world-size 2), one CUDA device each")
	require.Contains(t, outs[0], "checkpoint  "+ck)
	require.Equal(t, "rank 1 of 2: trained to step 2; rank 0 reports, evaluates and writes the checkpoint\n", outs[1])
	_, err := os.Stat(id)
	require.ErrorIs(t, err, os.ErrNotExist, "rank 0 removes the id file once every rank has joined")
	a, err := train.Load(ck)
	require.NoError(t, err)
	require.Len(t, a.Losses, 2)
	require.Equal(t, 2, a.Meta.Run.WorldSize, "the checkpoint keeps the world size")
	// Started again without -resume, every rank refuses the checkpoint at
	// once: none waits for a rank 0 that will not come.
	errs, outs = oocRanks(t, 2, func(r int) []string {
		return tiny("-device", "cuda", "-steps", "2", "-checkpoint", ck, "-world-size", "2", "-rank", fmt.Sprint(r), "-nccl-id", id)
	})
	for r, err := range errs {
		require.Error(t, err, "rank %d:\n%s", r, outs[r])
		require.Contains(t, outs[r], "already exists: pass -resume", "rank %d", r)
	}
	_, _, err = trainArgs(t, "-checkpoint", ck, "-resume", "-steps", "3")
	require.ErrorContains(t, err, "the run has -world-size 2: give every rank -nccl-id FILE and its -rank, or -world-size 1")
	if os.Getenv("OOC_MULTIPROC_FULL") == "1" {
		// The same run in one process, then both resumed to step 3: the world
		// resumes from rank 0's checkpoint, every rank reading it.
		dispatchtest.SetDevices(t, driver, 2) // this process's, for the one-process run
		one := filepath.Join(dir, "one.ckpt")
		mustTrain(t, tiny("-device", "cuda*2", "-steps", "2", "-checkpoint", one)...)
		sameCheckpoints(t, ck, one)
		mustTrain(t, "-checkpoint", one, "-resume", "-steps", "3")
		errs, outs := oocRanks(t, 2, func(r int) []string {
			return []string{"-checkpoint", ck, "-resume", "-steps", "3", "-rank", fmt.Sprint(r), "-nccl-id", id}
		})
		for r, err := range errs {
			require.NoError(t, err, "resumed rank %d:\n%s", r, outs[r])
		}
		require.Contains(t, outs[0], "resuming "+ck+" after step 2")
		sameCheckpoints(t, ck, one)
	}

	errs, outs = oocRanks(t, 2, func(r int) []string {
		return tiny("-device", "cuda", "-batch", "12", "-steps", "1", "-world-size", fmt.Sprint(2+r), "-rank", fmt.Sprint(r), "-nccl-id", filepath.Join(dir, "bad.id"))
	})
	for r, err := range errs {
		require.Error(t, err, "rank %d:\n%s", r, outs[r])
		require.Contains(t, outs[r], "every rank must give the same world size", "rank %d", r)
	}
	require.True(t, strings.Contains(outs[1], "rank 1 of 3"), outs[1])
}

// sameCheckpoints fails unless two checkpoints hold the same losses and
// tensors, bit for bit.
func sameCheckpoints(t *testing.T, got, want string) {
	t.Helper()
	a, err := train.Load(got)
	require.NoError(t, err)
	b, err := train.Load(want)
	require.NoError(t, err)
	require.Equal(t, b.Losses, a.Losses)
	require.Equal(t, len(b.Tensors), len(a.Tensors))
	for i := range b.Tensors {
		require.Equal(t, b.Tensors[i].Name, a.Tensors[i].Name)
		require.True(t, sameBits(a.Tensors[i].T, b.Tensors[i].T), "%s differs from the one-process run's", a.Tensors[i].Name)
	}
}
