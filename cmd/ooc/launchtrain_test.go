package main

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorgonia-ooc/outofcore/train"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/dispatch/dispatchtest"
)

// TestLaunchTrain: "ooc launch -nproc 2 -- train -device cuda ..." trains
// one run as two processes on the FAKE CUDA driver and fake NCCL (no GPU):
// the ranks find their world in the environment launch sets, meet through
// package dist's TCP rendezvous on loopback (rank 0 makes the NCCL id).
// Each process's fake driver has one device, as when Slurm binds a task to
// its GPU (CUDA_VISIBLE_DEVICES=0 here, so -device cuda stays cuda:0;
// TestRankDevice checks cuda:LOCAL_RANK otherwise). Rank 0 reports and
// writes the checkpoint, and the checkpoint is, bit for bit, the one the
// same ranks write when started by hand with -world-size, -rank and
// -nccl-id (TestTrainRanks' way).
func TestLaunchTrain(t *testing.T) {
	driver := dispatchtest.Setenv(t)
	dispatchtest.SetenvNCCL(t, driver)
	t.Setenv("CUDA_VISIBLE_DEVICES", "0")
	dir := t.TempDir()
	ck := filepath.Join(dir, "launch.ckpt")
	code, out, errs := launch(t, append([]string{"-nproc", "2", "--", "train"}, tiny("-device", "cuda", "-steps", "2", "-checkpoint", ck)...)...)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errs)
	require.Contains(t, out, "[rank 0] compute: rank 0 of 2 processes (-world-size 2), one CUDA device each")
	require.Contains(t, out, "[rank 1] rank 1 of 2: trained to step 2; rank 0 reports, evaluates and writes the checkpoint\n")
	require.NotContains(t, out, "[rank 1] step ", "rank 1 reports nothing but that it is done")
	c, err := train.Load(ck)
	require.NoError(t, err)
	require.Len(t, c.Losses, 2)
	require.Equal(t, 2, c.Meta.Run.WorldSize)

	byHand := filepath.Join(dir, "byhand.ckpt")
	errsByHand, outs := oocRanks(t, 2, func(r int) []string {
		return tiny("-device", "cuda", "-steps", "2", "-checkpoint", byHand, "-world-size", "2", "-rank", fmt.Sprint(r),
			"-nccl-id", filepath.Join(dir, "nccl.id"))
	})
	for r, err := range errsByHand {
		require.NoError(t, err, "rank %d:\n%s", r, outs[r])
	}
	sameCheckpoints(t, ck, byHand)
}

// Under a launcher, -world-size and -rank that disagree with the
// environment are refused before any work, naming both.
func TestLaunchTrainConflict(t *testing.T) {
	dispatchtest.Setenv(t) // -device cuda opens
	t.Setenv("RANK", "1")
	t.Setenv("WORLD_SIZE", "2")
	t.Setenv("MASTER_ADDR", "127.0.0.1")
	t.Setenv("MASTER_PORT", "1")
	_, _, err := trainArgs(t, tiny("-device", "cuda", "-world-size", "3", "-rank", "1", "-nccl-id", filepath.Join(t.TempDir(), "id"))...)
	require.ErrorContains(t, err, `-world-size "3": conflicts with WORLD_SIZE="2"`)
	require.ErrorIs(t, err, errUsage)
}

// rankDevice: "cuda" is the local rank's GPU unless the process sees one.
func TestRankDevice(t *testing.T) {
	for _, tc := range []struct {
		device  string
		local   int
		visible string
		want    string
	}{
		{"cuda", 0, "", "cuda"},
		{"cuda", 3, "", "cuda:3"},
		{"cuda", 3, "0,1,2,3", "cuda:3"},
		{"cuda", 3, "3", "cuda"}, // Slurm bound the task to its GPU
		{"cuda:1", 3, "", "cuda:1"},
		{"cpu", 1, "", "cpu"},
	} {
		t.Setenv("CUDA_VISIBLE_DEVICES", tc.visible)
		if got := rankDevice(tc.device, tc.local); got != tc.want {
			t.Errorf("rankDevice(%q, %d) with CUDA_VISIBLE_DEVICES=%q = %q, want %q", tc.device, tc.local, tc.visible, got, tc.want)
		}
	}
}
