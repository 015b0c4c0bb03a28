package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/dispatch/dispatchtest"
)

// TestTrainOnFakeCUDA: ooc train -device cuda runs on the fake CUDA device
// (the host builds of the kernels behind the real launch path, a host GEMM
// behind the cuBLAS binding), with the update on the device by default and
// with -host-update, under half the in-core peak; both give the CPU
// device's per-step losses within 1e-5, and -launch-table writes the
// kernels' table. A run resumed from its checkpoint continues bit for bit,
// and ooc eval -device cuda evaluates the checkpoint as the CPU device does.
func TestTrainOnFakeCUDA(t *testing.T) {
	dispatchtest.Setenv(t)
	dir := t.TempDir()
	losses := func(name string, extra ...string) []float64 {
		t.Helper()
		hist := filepath.Join(dir, name+".json")
		args := append([]string{"train", "-model", "smallcnn", "-data", "synthetic", "-batch", "4", "-image", "16", "-classes", "4",
			"-budget", "50%", "-progress", "plain", "-history", hist}, extra...)
		if !strings.Contains(strings.Join(extra, " "), "-steps") {
			args = append(args, "-steps", "3")
		}
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, &stdout, &stderr); code != 0 {
			t.Fatalf("ooc %s: exit %d\n%s\n%s", strings.Join(args, " "), code, stdout.String(), stderr.String())
		}
		// On the CUDA device every step after the run's first takes its
		// batch (input and labels) from the copy staged during the step
		// before (the resumed run has one step: nothing to stage).
		want := strings.HasPrefix(name, "cuda") && name != "cuda-resumed"
		if staged := strings.Contains(stdout.String(), " staged (vm.Machine.StageNext)"); staged != want {
			t.Errorf("ooc %s: staged inputs reported: %v\n%s", strings.Join(args, " "), staged, stdout.String())
		}
		b, err := os.ReadFile(hist)
		if err != nil {
			t.Fatal(err)
		}
		var h struct {
			Losses []float64 `json:"step_losses"`
		}
		if err := json.Unmarshal(b, &h); err != nil {
			t.Fatal(err)
		}
		if len(h.Losses) == 0 {
			t.Fatalf("%s: no losses", name)
		}
		return h.Losses
	}
	table := filepath.Join(dir, "launches.txt")
	cpu := losses("cpu", "-device", "cpu")
	dev := losses("cuda", "-device", "cuda", "-launch-table", table)
	host := losses("cuda-host", "-device", "cuda", "-host-update")
	// A checkpoint after step 2 holds the device's weights and Adam state:
	// resumed, step 3 is the uninterrupted run's.
	ck := filepath.Join(dir, "run.ckpt")
	losses("cuda-first", "-device", "cuda", "-checkpoint", ck, "-steps", "2")
	resumed := losses("cuda-resumed", "-device", "cuda", "-checkpoint", ck, "-resume")
	if got := resumed[len(resumed)-1]; got != dev[2] {
		t.Errorf("resumed from a checkpoint, step 3's loss is %v; uninterrupted %v", got, dev[2])
	}
	// ooc eval -device cuda evaluates that checkpoint as the CPU device does.
	onCPU, _ := mustEval(t, "-checkpoint", ck)
	onCUDA, out := mustEval(t, "-checkpoint", ck, "-device", "cuda")
	if !strings.Contains(out, "measured on the CUDA device") || onCUDA.Correct != onCPU.Correct || math.Abs(onCUDA.Loss-onCPU.Loss) > 1e-5*math.Abs(onCPU.Loss) {
		t.Errorf("eval -device cuda: %s; on the CPU device %s\n%s", onCUDA, onCPU, out)
	}
	for i := range cpu {
		for _, got := range []struct {
			name string
			v    float64
		}{{"device update", dev[i]}, {"host update", host[i]}} {
			if math.Abs(got.v-cpu[i]) > 1e-5*math.Abs(cpu[i]) {
				t.Errorf("step %d: %s loss %v, CPU device %v", i+1, got.name, got.v, cpu[i])
			}
		}
	}
	b, err := os.ReadFile(table)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"im2col_f32", "cublasSgemm_v2", "bn_stats_f32", "total"} {
		if !bytes.Contains(b, []byte(k)) {
			t.Errorf("the launch table has no %s", k)
		}
	}
	t.Logf("losses: cpu %v, cuda (device update) %v, cuda (host update) %v", cpu, dev, host)
}

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

// TestDoctorSweepOnFakeCUDA: ooc doctor's GPU sweep runs through ooc sweep on the
// device it checked and prints a Markdown table in docs/results.md's layout (here a
// small model on the fake CUDA device; on a GPU, ResNet-50 at 224x224 by default). Only
// the sweep part runs: this fake driver has the project's kernels, not the doctor's test kernel
// (vm/cuda's TestDoctor runs the checks on its own fake).
func TestDoctorSweepOnFakeCUDA(t *testing.T) {
	dispatchtest.Setenv(t)
	args := []string{"doctor", "-parts", "sweep", "-sweep-model", "smallcnn", "-sweep-image", "16", "-sweep-classes", "4",
		"-sweep-batches", "2", "-sweep-budget", "64MiB"}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("ooc %s: exit %d\n%s\n%s", strings.Join(args, " "), code, stdout.String(), stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{
		"smallcnn 16x16 batch sweep on cuda:",
		"| scheduler + allocator | 2 | largest |",
		"|---|---|---|",
		"| baseline + bestfit |", "| baseline + va |", "| window + bestfit |", "| window + va |",
		"measured on cuda",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("ooc doctor's output lacks %q:\n%s", want, out)
		}
	}
}
