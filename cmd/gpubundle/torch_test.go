package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// checkSyntax runs a syntax check, skipping where its program is missing.
func checkSyntax(t *testing.T, prog string, args ...string) {
	t.Helper()
	if _, err := exec.LookPath(prog); err != nil {
		t.Logf("%s not found: %s not checked", prog, args[len(args)-1])
		return
	}
	if msg, err := exec.Command(prog, args...).CombinedOutput(); err != nil {
		t.Errorf("%s %s: %v\n%s", prog, strings.Join(args, " "), err, msg)
	}
}

// torchReport is the part of torch_resnet50.py's JSON the tests read.
type torchReport struct {
	Status, Reason, Install string
	CappedBatches           []int `json:"capped_batches"`
	Results                 []struct {
		Mode  string  `json:"mode"`
		Batch int     `json:"batch"`
		OK    bool    `json:"ok"`
		IPS   float64 `json:"ips"`
		Error string  `json:"error"`
	}
}

// runTorch runs the script with python and returns its JSON.
func runTorch(t *testing.T, python string, args ...string) torchReport {
	t.Helper()
	out := filepath.Join(t.TempDir(), "torch.json")
	cmd := exec.Command(python, append([]string{"torch_resnet50.py", "--out", out}, args...)...)
	msg, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s torch_resnet50.py %s: %v (it must exit 0)\n%s", python, strings.Join(args, " "), err, msg)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var r torchReport
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%s: %v\n%s", out, err, b)
	}
	return r
}

// TestTorchScript: without torch the script writes a JSON saying so, with the install
// command, and exits 0; with torch (Debian's, on the CPU) it runs every mode at a tiny size
// (ResNet-50 at 32x32, batch 2); asked for CUDA where there is none, it says so and exits 0.
// Each python is run once per case: importing torch takes seconds.
func TestTorchScript(t *testing.T) {
	// The capped part's batches are those ooc sweep's window or hybrid rows trained (here 2; the
	// baseline's 4 and a missing file do not count).
	ours := filepath.Join(t.TempDir(), "sweep.json")
	if err := os.WriteFile(ours, []byte(`[{"batch": 2, "scheduler": "window", "ok": true}, {"batch": 4, "scheduler": "baseline", "ok": true}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	tiny := []string{"--image", "32", "--classes", "10", "--batches", "8", "--ours", ours + "," + ours + ".missing",
		"--warmup", "0", "--steps", "1", "--time-limit", "600"} // a loaded machine imports torch slowly: the limit is not what is tested
	python := ""
	for _, p := range []string{"python3", "/usr/bin/python3"} {
		if _, err := exec.LookPath(p); err != nil {
			continue
		}
		r := runTorch(t, p, append([]string{"--device", "cpu"}, tiny...)...)
		if r.Status == "skipped" {
			if !strings.Contains(r.Reason, "no torch") || r.Install != "apt-get install -y python3-torch python3-torchvision" {
				t.Errorf("%s without torch: %+v", p, r)
			}
			continue
		}
		python = p
		modes := map[string]bool{}
		for _, x := range r.Results {
			if !x.OK || x.IPS <= 0 || x.Batch != 2 {
				t.Errorf("%s at batch %d: ok %v, %.3f images/s, %s", x.Mode, x.Batch, x.OK, x.IPS, x.Error)
			}
			modes[x.Mode] = true
		}
		if len(r.CappedBatches) != 1 || r.CappedBatches[0] != 2 {
			t.Errorf("capped batches %v, want [2] (from %s)", r.CappedBatches, ours)
		}
		if r.Status != "ok" || len(modes) != 3 || !modes["in_core"] || !modes["save_on_cpu"] || !modes["checkpoint"] {
			t.Errorf("on the CPU: status %q (%s), modes %v; want ok and in_core, save_on_cpu, checkpoint", r.Status, r.Reason, modes)
		}
		break
	}
	if python == "" {
		t.Skip("no python3 with torch and torchvision: the script's CPU run is not tested; apt-get install -y python3-torch python3-torchvision")
	}
	// Where torch has CUDA this is a tiny real run instead.
	r := runTorch(t, python, append([]string{"--device", "cuda"}, tiny...)...)
	if !(r.Status == "skipped" && strings.Contains(r.Reason, "sees no CUDA device")) && r.Status != "ok" {
		t.Errorf("--device cuda: %+v", r)
	}
}
