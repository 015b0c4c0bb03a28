package main

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorgonia-ooc/outofcore/train"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/dispatch/dispatchtest"
)

// TestTrainOnTwoDevices: -devices 2 and -device cpu,cpu are the same run,
// and it trains (the mean loss falls over an epoch's repeats); a run
// stopped after 5 steps and resumed from its checkpoint ends with the same
// losses, its checkpoint holding the two devices.
func TestTrainOnTwoDevices(t *testing.T) {
	dir := t.TempDir()
	a, out, err := trainArgs(t, tiny("-devices", "2", "-epochs", "3", "-lr", "0.01")...)
	require.NoError(t, err, out)
	require.Contains(t, out, "data parallel on 2 CPU devices")
	require.Contains(t, out, "measured on 2 CPU devices")
	require.Len(t, a.Losses, 12)
	require.Less(t, a.Losses[8]+a.Losses[9]+a.Losses[10]+a.Losses[11], a.Losses[0]+a.Losses[1]+a.Losses[2]+a.Losses[3])
	b, out, err := trainArgs(t, tiny("-device", "cpu,cpu", "-epochs", "3", "-lr", "0.01")...)
	require.NoError(t, err, out)
	require.Equal(t, a.Losses, b.Losses)

	ck := filepath.Join(dir, "par.ckpt")
	first, out, err := trainArgs(t, tiny("-devices", "2", "-epochs", "3", "-lr", "0.01", "-steps", "5", "-checkpoint", ck)...)
	require.NoError(t, err, out)
	rest, out, err := trainArgs(t, "-checkpoint", ck, "-resume", "-steps", "0", "-progress", "plain")
	require.NoError(t, err, out)
	require.Contains(t, out, "data parallel on 2 CPU devices", "the checkpoint's run trains on two devices again")
	require.Equal(t, a.Losses, append(first.Losses, rest.Losses...))
	// ooc eval of the checkpoint evaluates as the run did after its last
	// epoch: one device's share of the batch, replica 0's statistics.
	ck2, err := train.Load(ck)
	require.NoError(t, err)
	got, out := mustEval(t, "-checkpoint", ck)
	require.Contains(t, out, "batch 2")
	want := ck2.Meta.LastEval
	require.Equal(t, [3]any{want.Correct, want.Total, want.Loss}, [3]any{got.Correct, got.Total, got.Loss}, out)
}

func TestTrainDevicesRefusals(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{tiny("-devices", "3"), "does not split evenly among 3"},
		{tiny("-devices", "-1"), "want a positive count"},
		{tiny("-devices", "2", "-device", "cpu,cpu"), "one way"},
		{tiny("-device", "cpu*0"), "positive count"},
		{tiny("-devices", "2", "-host-update"), "-host-update"},
		{tiny("-device", "sim:titanxp-switch*2"), "runs real steps"},
	} {
		_, _, err := trainArgs(t, c.args...)
		require.ErrorContains(t, err, c.want, c.args)
	}
	var out, errOut bytes.Buffer
	require.Equal(t, 2, run(context.Background(), append([]string{"train"}, tiny("-devices", "-1")...), &out, &errOut))
}

// -resume restores the checkpoint's devices; flags given again override
// them, and a run moved off a CUDA device drops what only CUDA does.
func TestResumeDevices(t *testing.T) {
	for _, c := range []struct {
		saved       train.Config
		args        []string
		wantDevice  string
		wantDevices int
		note        string
	}{
		{train.Config{Device: "cpu", Devices: 2}, nil, "cpu", 2, ""},
		{train.Config{Device: "cpu", Devices: 2}, []string{"-devices", "1"}, "cpu", 1, "-devices 1 overrides the checkpoint's 2"},
		{train.Config{Device: "cuda", HostUpdate: true, LaunchTable: "l.txt"}, []string{"-device", "cpu"}, "cpu", 0, "CUDA-only -host-update and -launch-table are dropped"},
		{train.Config{Device: "cuda", HostUpdate: true}, []string{"-host-update=false"}, "cuda", 0, "-host-update=false overrides"},
	} {
		o, err := parseTrainFlags(append([]string{"-checkpoint", filepath.Join(t.TempDir(), "x.ckpt"), "-resume"}, c.args...), io.Discard)
		require.NoError(t, err)
		saved := c.saved
		saved.Model, saved.Data, saved.Batch, saved.Image, saved.Seed = "smallcnn", "synthetic:n=16", 4, 16, 1
		saved.Defaults()
		got, notes, err := o.resumeConfig("x.ckpt", saved)
		require.NoError(t, err, c.args)
		require.Equal(t, c.wantDevice, got.Device, c.args)
		require.Equal(t, c.wantDevices, got.Devices, c.args)
		if c.note != "" {
			require.Contains(t, strings.Join(notes, "\n"), c.note)
			continue
		}
		require.Empty(t, notes)
	}
}

// TestTrainOnTwoFakeCUDADevices: ooc train -device cuda:0,cuda:1 trains
// data parallel on two fake CUDA devices (the fake NCCL averaging on
// them), writes its history and checkpoint, resumes on the same two
// devices from the checkpoint alone, and ooc eval evaluates it at one
// device's share; a device the machine does not have is refused at once.
// train's TestDataParallelOnFakeCUDA checks the numbers.
func TestTrainOnTwoFakeCUDADevices(t *testing.T) {
	driver := dispatchtest.Setenv(t)
	dispatchtest.SetDevices(t, driver, 2)
	dispatchtest.SetenvNCCL(t, driver)
	dir := t.TempDir()
	ck, hist := filepath.Join(dir, "run.ckpt"), filepath.Join(dir, "history.json")
	ooc := func(args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, &stdout, &stderr); code != 0 {
			t.Fatalf("ooc %s: exit %d\n%s\n%s", strings.Join(args, " "), code, stdout.String(), stderr.String())
		}
		return stdout.String() + stderr.String()
	}
	out := ooc(append([]string{"train"}, tiny("-device", "cuda:0,cuda:1", "-budget", "60%", "-steps", "2", "-checkpoint", ck, "-history", hist)...)...)
	for _, want := range []string{"data parallel on 2 CUDA devices (-device cuda:0,cuda:1): batch 4 split 2 per device",
		"(nccl all-reduce)", "gradients averaged there by NCCL", "measured on 2 CUDA devices"} {
		require.Contains(t, out, want)
	}
	out = ooc("train", "-checkpoint", ck, "-resume", "-steps", "3", "-progress", "plain")
	require.Contains(t, out, "data parallel on 2 CUDA devices", "the checkpoint's run trains on the two devices again")
	c, err := train.Load(ck)
	require.NoError(t, err)
	require.Len(t, c.Losses, 3)
	_, out = mustEval(t, "-checkpoint", ck)
	require.Contains(t, out, "batch 2")

	_, _, err = trainArgs(t, tiny("-device", "cuda:0,cuda:2")...)
	require.ErrorContains(t, err, "cuda:2 asked for, but this machine has 2")
	_, _, err = trainArgs(t, tiny("-device", "cpu,cuda:1")...)
	require.ErrorContains(t, err, "not both")
}
