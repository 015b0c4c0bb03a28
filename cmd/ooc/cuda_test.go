package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/dispatch/dispatchtest"
)

// TestSweepOnFakeCUDA: ooc sweep -device cuda runs its points on the fake
// CUDA device with both schedulers and allocators, and says where.
func TestSweepOnFakeCUDA(t *testing.T) {
	dispatchtest.Setenv(t)
	args := []string{"sweep", "-device", "cuda", "-model", "smallcnn", "-image", "16", "-classes", "4", "-batches", "2,4",
		"-budget", "16MiB", "-schedulers", "baseline,window", "-allocators", "bestfit,va", "-chunk", "2MiB"}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("ooc %s: exit %d\n%s\n%s", strings.Join(args, " "), code, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "measured on cuda:0") || strings.Contains(stdout.String(), " x ") {
		t.Errorf("the table does not name the device, or a point failed:\n%s\n%s", stdout.String(), stderr.String())
	}
	t.Logf("\n%s", stdout.String())
}
