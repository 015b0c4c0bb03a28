package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMultiGPUCommand: the simulated tables for a small model, the
// measured CPU comparison, and bad flags.
func TestMultiGPUCommand(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"multigpu", "-models", "smallcnn", "-image", "32", "-classes", "10",
		"-devices", "1,2", "-step", "512", "-max-batch", "1024", "-batches", "512", "-q"}, &out, &errOut)
	require.Equal(t, 0, code, errOut.String())
	s := out.String()
	require.Contains(t, s, "simulated on sim:titanxp-switch")
	require.Contains(t, s, "Largest batch per device")
	require.Contains(t, s, "Images/s per device with 2 devices (simulated, sim:titanxp-switch)")
	require.Equal(t, 2, strings.Count(s, "vdnn-cap-tuned"), "a header per table:\n"+s)
	require.Contains(t, s, "\n512    | ")

	out.Reset()
	code = run(context.Background(), []string{"multigpu", "-models", "smallcnn", "-image", "32", "-classes", "10",
		"-devices", "2", "-tables-only", "-batches", "256", "-schemes", "cap", "-q"}, &out, &errOut)
	require.Equal(t, 0, code, errOut.String())
	require.Contains(t, out.String(), "| greedy-cap     | dynprog        | dynprog-cap    | window         | window-cap")

	out.Reset()
	code = run(context.Background(), []string{"multigpu", "-cpu", "-cpu-batch", "8", "-cpu-image", "16", "-steps", "1"}, &out, &errOut)
	require.Equal(t, 0, code, errOut.String())
	require.Contains(t, out.String(), "measured on this machine's CPU")
	require.Contains(t, out.String(), "speed-up")
	require.Contains(t, out.String(), "the machine's concurrency meanwhile: 2 loops of arithmetic on 2 goroutines ran")

	for _, bad := range [][]string{{"-devices", "0"}, {"-batches", "x"}, {"-tables-only", "-models", "smallcnn"}, {"-profile", "nope"}, {"-schemes", "mine"}} {
		errOut.Reset()
		require.NotEqual(t, 0, run(context.Background(), append([]string{"multigpu", "-q"}, bad...), &out, &errOut), bad)
	}
}
