package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorgonia-ooc/outofcore/sweep"
	"github.com/gorgonia-ooc/outofcore/train"
)

func TestPlanCommand(t *testing.T) {
	plot := filepath.Join(t.TempDir(), "mem.svg")
	var out bytes.Buffer
	err := runPlan(context.Background(), []string{"-model", "resnet18", "-image", "32", "-classes", "10", "-batch", "64",
		"-budget", "40%", "-device", "sim:v100-pcie", "-scheduler", "window", "-plot", plot}, &out, io.Discard)
	require.NoError(t, err)
	s := out.String()
	require.Contains(t, s, "scheduler window")
	require.Contains(t, s, "(40% of the in-core peak)")
	require.Regexp(t, `swap-ins [1-9][0-9]* `, s)
	require.Regexp(t, `schedule-window [0-9.]+ [KMG]iB \([0-9.]+ x the budget\)`, s, "the automatic window says what it chose")
	require.Contains(t, s, "op and copy times: simulated: profile sim:v100-pcie")
	raw, err := os.ReadFile(plot)
	require.NoError(t, err)
	require.Contains(t, string(raw), "<svg")

	err = runPlan(context.Background(), []string{"-device", "tpu"}, io.Discard, io.Discard)
	require.True(t, errors.Is(err, errUsage), "%v", err)
	err = runPlan(context.Background(), []string{"-model", "resnet18", "-image", "32", "-batch", "8", "-budget", "1KiB", "-device", "sim:v100-pcie"}, io.Discard, io.Discard)
	require.ErrorContains(t, err, "is infeasible")
}

// ooc plan's default is ooc's, Auto: it says which plan it picked and the
// two simulated times it picked by.
func TestPlanDefaultSaysWhatAutoPicked(t *testing.T) {
	var out bytes.Buffer
	err := runPlan(context.Background(), []string{"-model", "smallcnn", "-image", "32", "-classes", "10", "-batch", "64",
		"-budget", "50%", "-device", "sim:v100-pcie"}, &out, io.Discard)
	require.NoError(t, err)
	s := out.String()
	require.Regexp(t, `scheduler auto: (window|hybrid)\n`, s)
	require.Regexp(t, `op and copy times: auto: (window|hybrid), simulated [0-9.e-]+ s vs (window|hybrid) [0-9.e-]+ s on sim:v100-pcie`, s)
}

// TestPlanMeasuresOnCPU: an offload planner on the CPU device plans with op
// times measured in a step on that device, and says so.
func TestPlanMeasuresOnCPU(t *testing.T) {
	var out bytes.Buffer
	err := runPlan(context.Background(), []string{"-model", "smallcnn", "-image", "16", "-classes", "4", "-batch", "8",
		"-budget", "70%", "-device", "cpu", "-scheduler", "greedy"}, &out, io.Discard)
	require.NoError(t, err)
	s := out.String()
	require.Contains(t, s, "measuring op times: one step on cpu")
	require.Contains(t, s, "scheduler greedy")
	require.Contains(t, s, "op and copy times: measured on cpu in the first step")
}

func TestSweepCommand(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	err := runSweep(context.Background(), []string{"-model", "resnet18", "-image", "32", "-batches", "128,512", "-budget", "320MiB",
		"-device", "sim:v100-pcie", "-schedulers", "baseline,window", "-allocators", "va", "-q",
		"-json", filepath.Join(dir, "r.json"), "-plot", filepath.Join(dir, "f.svg")}, &out, io.Discard)
	require.NoError(t, err)
	require.Contains(t, out.String(), "SIMULATED on sim:v100-pcie")
	var rs []sweep.Result
	raw, err := os.ReadFile(filepath.Join(dir, "r.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &rs))
	require.Len(t, rs, 4)
	var fields map[string]interface{}
	var arr []map[string]interface{}
	require.NoError(t, json.Unmarshal(raw, &arr))
	fields = arr[0]
	for _, k := range []string{"model", "image", "batch", "scheduler", "allocator", "device", "simulated", "ok", "error", "ips",
		"budget_bytes", "peak_bytes", "reserved_bytes", "swap_bytes", "stall_s"} {
		require.Contains(t, fields, k)
	}
	err = runSweep(context.Background(), []string{"-batches", "a,b"}, io.Discard, io.Discard)
	require.True(t, errors.Is(err, errUsage))
}

func TestRecordProfile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cpu.json")
	_, out := mustTrain(t, tiny("-steps", "2", "-record-profile", file)...)
	require.Contains(t, out, "per-op times of 2 steps written to "+file)
	var sout bytes.Buffer
	err := runSweep(context.Background(), []string{"-model", "smallcnn", "-image", "16", "-batches", "4", "-budget", "64MiB",
		"-device", "sim:measured:" + file, "-schedulers", "baseline", "-q"}, &sout, io.Discard)
	require.NoError(t, err)
	require.True(t, strings.Contains(sout.String(), "per-op times measured"), sout.String())
}

func TestTrainHistoryAndPlot(t *testing.T) {
	dir := t.TempDir()
	res, out := mustTrain(t, tiny("-epochs", "2", "-history", filepath.Join(dir, "h.json"), "-plot", filepath.Join(dir, "p.svg"))...)
	require.Len(t, res.Epochs, 2)
	require.Contains(t, out, "loss and accuracy plot of 2 epochs written to")
	var h struct {
		Epochs []train.EpochRecord `json:"epochs"`
		Losses []float64           `json:"step_losses"`
	}
	raw, err := os.ReadFile(filepath.Join(dir, "h.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &h))
	require.Len(t, h.Epochs, 2)
	require.NotNil(t, h.Epochs[1].Eval)
	require.Equal(t, res.Losses, h.Losses)
	svg, err := os.ReadFile(filepath.Join(dir, "p.svg"))
	require.NoError(t, err)
	require.Contains(t, string(svg), "test accuracy")
}

func TestCompareCommand(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	err := runCompare(context.Background(), []string{"-model", "resnet18", "-image", "32", "-classes", "10", "-batch", "16",
		"-budgets", "0%,50%,100%", "-q", "-json", filepath.Join(dir, "c.json"), "-plot", filepath.Join(dir, "c.svg")}, &out, io.Discard)
	require.NoError(t, err)
	s := out.String()
	require.Contains(t, s, "makespan / lower bound, SIMULATED on sim:v100-pcie")
	for _, name := range []string{"window", "lms", "greedy", "vdnn"} {
		require.Contains(t, s, name)
	}
	var rs []sweep.CompareResult
	raw, err := os.ReadFile(filepath.Join(dir, "c.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &rs))
	for _, r := range rs {
		if r.OK {
			require.GreaterOrEqual(t, r.Ratio, 1.0, "%s at %d%%: a makespan below the lower bound", r.Scheduler, r.Percent)
		}
		if r.Percent == 100 {
			require.True(t, r.OK, r.Error)
			require.InDelta(t, 1.0, r.Ratio, 1e-9, "%s: in core the makespan is the bound", r.Scheduler)
		}
	}
	err = runCompare(context.Background(), []string{"-device", "cpu"}, io.Discard, io.Discard)
	require.ErrorContains(t, err, "needs a simulated device")
	err = runCompare(context.Background(), []string{"-budgets", "150%"}, io.Discard, io.Discard)
	require.True(t, errors.Is(err, errUsage))
}

// TestCompareOverhead: -overhead prints the DQN paper's Fig. 5 table, and
// the recomputing planners are known by name; in core nothing is saved and
// nothing lost, and Hybrid is never slower than the window scheduler.
func TestCompareOverhead(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	err := runCompare(context.Background(), []string{"-model", "resnet18", "-image", "32", "-classes", "10", "-batch", "16",
		"-device", "sim:gtx1080ti", "-budgets", "50%,100%", "-schedulers", "window,checkpoint,hybrid", "-overhead", "-q",
		"-json", filepath.Join(dir, "c.json")}, &out, io.Discard)
	require.NoError(t, err)
	require.Contains(t, out.String(), "memory saved / overhead (makespan / in-core makespan - 1")
	require.Contains(t, out.String(), "SIMULATED on sim:gtx1080ti")
	var rs []sweep.CompareResult
	raw, err := os.ReadFile(filepath.Join(dir, "c.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &rs))
	window := map[int]float64{}
	for _, r := range rs {
		if r.Scheduler == "window" {
			window[r.Percent] = r.Makespan
		}
	}
	for _, r := range rs {
		require.Positive(t, r.InCore)
		if r.Percent == 100 {
			require.True(t, r.OK, r.Error)
			require.InDelta(t, 0, r.Overhead, 1e-9, "%s in core", r.Scheduler)
		}
		if r.Scheduler == "hybrid" {
			require.True(t, r.OK, r.Error)
			require.LessOrEqual(t, r.Makespan, window[r.Percent], "hybrid at %d%%", r.Percent)
		}
	}
}

func TestLearningRateDrop(t *testing.T) {
	_, _, err := trainArgs(t, tiny("-lr-drop", "3,2")...)
	require.True(t, errors.Is(err, errUsage), "%v", err)

	// Straight through a drop, and stopped and resumed across it: the same run.
	straight, _ := mustTrain(t, tiny("-epochs", "2", "-lr-drop", "1")...)
	dir := t.TempDir()
	ck := filepath.Join(dir, "run.ckpt")
	first, _ := mustTrain(t, tiny("-epochs", "2", "-lr-drop", "1", "-steps", "3", "-checkpoint", ck)...)
	second, out := mustTrain(t, "-checkpoint", ck, "-resume", "-epochs", "2", "-steps", "0", "-progress", "plain")
	require.Equal(t, straight.Losses, append(first.Losses, second.Losses...), out)
	plain, _ := mustTrain(t, tiny("-epochs", "2")...)
	require.Equal(t, plain.Losses[:4], straight.Losses[:4], "the first epoch runs at the full rate")
	require.NotEqual(t, plain.Losses[4:], straight.Losses[4:], "the second at a tenth")
}
