package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTrainOnTwoDevices: -devices 2 and -device cpu,cpu are the same run,
// and it trains (the mean loss falls over an epoch's repeats).
func TestTrainOnTwoDevices(t *testing.T) {
	a, out, err := trainArgs(t, tiny("-devices", "2", "-epochs", "3", "-lr", "0.01")...)
	require.NoError(t, err)
	require.Contains(t, out, "split among 2 devices")
	require.Len(t, a.Losses, 12)
	require.Less(t, a.Losses[8]+a.Losses[9]+a.Losses[10]+a.Losses[11], a.Losses[0]+a.Losses[1]+a.Losses[2]+a.Losses[3])
	b, _, err := trainArgs(t, tiny("-device", "cpu,cpu", "-epochs", "3", "-lr", "0.01")...)
	require.NoError(t, err)
	require.Equal(t, a.Losses, b.Losses)
}

func TestTrainDevicesRefusals(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{tiny("-devices", "3"), "does not split evenly among 3"},
		{tiny("-devices", "-1"), "want a positive count"},
		{tiny("-devices", "2", "-device", "cpu,cpu"), "one way"},
		{tiny("-devices", "2", "-checkpoint", "x.ckpt"), "-checkpoint is not supported with several devices"},
		{tiny("-device", "sim:titanxp-switch*2"), "runs real steps"},
	} {
		_, _, err := trainArgs(t, c.args...)
		require.ErrorContains(t, err, c.want, c.args)
	}
	var out, errOut bytes.Buffer
	require.Equal(t, 2, run(context.Background(), append([]string{"train"}, tiny("-devices", "-1")...), &out, &errOut))
}
