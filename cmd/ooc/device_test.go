package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gorgonia-ooc/outofcore/vm/cuda"
)

// TestCUDAWithoutDriver: on a machine without the NVIDIA driver, every command given
// -device cuda fails at once, before building a model or reading data, saying so, with
// exit code 1; so does ooc doctor. On a machine with a driver the test points the commands
// at a library that is not there.
func TestCUDAWithoutDriver(t *testing.T) {
	t.Setenv(cuda.LibraryEnv, "")
	want := "no NVIDIA driver: tried $" + cuda.LibraryEnv + " (unset), the loader's path (" + cuda.DefaultLibrary + ")"
	if d, err := cuda.Open(0); err == nil || !errors.Is(err, cuda.ErrNoDriver) {
		if err == nil {
			d.Close()
		}
		lib := "/nonexistent/libcuda.so.1"
		t.Setenv(cuda.LibraryEnv, lib)
		want = "no NVIDIA driver: " + lib + " not found"
	}
	for _, args := range [][]string{
		{"train", "-device", "cuda"},
		{"train", "-device", "cuda:1", "-model", "resnet50", "-image", "224", "-batch", "256"},
		{"eval", "-device", "cuda"},
		{"sweep", "-device", "cuda"},
		{"plan", "-device", "cuda"},
		{"compare", "-device", "cuda"},
		{"doctor"},
		{"doctor", "-device", "cuda:2"},
	} {
		var stdout, stderr bytes.Buffer
		start := time.Now()
		code := run(context.Background(), args, &stdout, &stderr)
		took := time.Since(start)
		if code != 1 || !strings.Contains(stderr.String(), want) {
			t.Errorf("ooc %s: exit %d, stderr %q; want 1 and %q", strings.Join(args, " "), code, stderr.String(), want)
		}
		if took > time.Second {
			t.Errorf("ooc %s took %v to fail, want under a second", strings.Join(args, " "), took)
		}
	}
}

// TestDeviceFlagErrors: device names that name nothing are usage errors.
func TestDeviceFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		out  string
	}{
		{[]string{"train", "-device", "tpu"}, `vm: unknown device "tpu" (want cpu, sim:PROFILE, cuda, cuda:N)`},
		{[]string{"train", "-device", "sim:v100-pcie"}, "this command runs real steps: use cpu"},
		{[]string{"eval", "-device", "gpu"}, `unknown device "gpu"`},
		{[]string{"plan", "-device", "sim:nope"}, "unknown device profile"},
		{[]string{"doctor", "-device", "cpu"}, `device name "cpu": want cuda or cuda:N`},
		{[]string{"doctor", "extra"}, "unexpected arguments"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tc.args, &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), tc.out) {
			t.Errorf("ooc %s: exit %d, stderr %q; want 2 and %q", strings.Join(tc.args, " "), code, stderr.String(), tc.out)
		}
	}
}
