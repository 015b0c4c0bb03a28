package gpusummary

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gorgonia-ooc/outofcore/sweep"
)

// pt is one point of our sweep (VA).
func pt(sched string, batch int, ips float64) sweep.Result {
	r := sweep.Result{Model: "resnet50", Image: 224, Batch: batch, Scheduler: sched, Allocator: "va", Device: "cuda:0", Capacity: 16 << 30, OK: ips > 0, IPS: ips}
	if ips == 0 {
		r.Error = "alloc: out of memory: va cannot allocate 123 bytes"
	}
	return r
}

func torchPt(mode string, batch int, ips float64) TorchResult {
	r := TorchResult{Mode: mode, Capped: true, Batch: batch, OK: ips > 0, IPS: ips}
	if ips == 0 {
		r.Error, r.OOM = "out of memory: CUDA out of memory", true
	}
	return r
}

// ours is a sweep where the baseline trains up to batch 128 at 400 images/s
// and window to batch 1024 at windowIPS (hybrid alongside, slower).
func ours(windowIPS float64) []sweep.Result {
	return []sweep.Result{
		pt("baseline", 128, 400), pt("window", 128, 390), pt("hybrid", 128, 380),
		pt("baseline", 256, 0), pt("window", 256, 380), pt("hybrid", 256, 300),
		pt("window", 1024, windowIPS), pt("hybrid", 1024, windowIPS/2),
		pt("window", 1280, 0), pt("hybrid", 1280, 0),
	}
}

// bestFit is rs as run.sh sweeps where the doctor found no VMM.
func bestFit(rs []sweep.Result) []sweep.Result {
	for i := range rs {
		rs[i].Allocator = "bestfit"
	}
	return rs
}

func torchRun(saveIPS float64) *Torch {
	return &Torch{Status: "ok", Version: "2.11.0", GPU: "NVIDIA H200", CUDA: "13.0", Results: []TorchResult{
		torchPt("in_core", 128, 500), torchPt("in_core", 256, 0),
		torchPt("save_on_cpu", 256, 300), torchPt("checkpoint", 256, 350),
		torchPt("save_on_cpu", 1024, saveIPS), torchPt("checkpoint", 1024, 280),
	}}
}

const doctorOK = "```\ndriver    libcuda.so.1: CUDA 13.0 (cuDriverGetVersion 13000)\ndevice    cuda:0: NVIDIA H200, compute capability 9.0\nall checks passed on cuda:0 (NVIDIA H200)\n```\n"

func TestSummary(t *testing.T) {
	for _, tc := range []struct {
		name   string
		sweep  []sweep.Result // nil: no sweep.json
		torch  *Torch         // nil: no torch.json
		doctor string
		parts  string
		want   [2]string // the two verdicts, as Verdict.String begins
		says   []string  // in summary.md
	}{
		{"both met", ours(240), torchRun(150), doctorOK, "env:0:2,doctor:0:50,sweep:0:200,torch:0:90",
			[2]string{"met: window at batch 1024 (8.0x the in-core 128) at 240.0 images/s (60% of in-core's 400.0)", "met: at batch 1024, window 240.0 images/s against save_on_cpu 150.0: 1.60x"},
			[]string{"| 1024 |  | 240.0 | 120.0 |  | 150.0 | 280.0 | 0.86x | 1.60x |", "| 256 | x | 380.0 | 300.0 | x | 300.0 | 350.0 | 1.09x | 1.27x |",
				"all checks passed on cuda:0", "## Failures\n\nnone", "Largest batch in core under the budget, of those run: ours 128, PyTorch 128.", "PyTorch: 2.11.0 (CUDA 13.0) on NVIDIA H200"}},
		{"both missed", ours(160), torchRun(150), doctorOK, "env:0:2,doctor:0:50,sweep:124:240,torch:0:90",
			[2]string{"missed (largest batch trained out of core 1024 = 8.0x the in-core 128, at 160.0 images/s = 40% of in-core's 400.0)", "missed (at batch 1024, window 160.0 images/s against save_on_cpu 150.0: 1.07x)"},
			[]string{"| sweep | **timed out** (exit 124: its share ran out) | 240 |", "- part sweep: **timed out**"}},
		{"PyTorch killed", ours(240), &Torch{Status: "running", Results: torchRun(150).Results}, doctorOK, "torch:124:105",
			[2]string{"met: window at batch 1024", "met: at batch 1024"}, []string{"- PyTorch: the script did not finish"}},
		{"no VMM: best fit", bestFit(ours(240)), torchRun(150), doctorOK, "",
			[2]string{"met: window at batch 1024 (8.0x the in-core 128) at 240.0 images/s (60% of in-core's 400.0); ours with the bestfit allocator, not VA",
				"met: at batch 1024, window 240.0 images/s against save_on_cpu 150.0: 1.60x; ours with the bestfit allocator"},
			[]string{"Ours: the bestfit allocator", "| 1024 |  | 240.0 | 120.0 |"}},
		{"cut short", ours(240)[:8], nil, doctorOK, "",
			[2]string{"met: window at batch 1024", "not measured (PyTorch not measured (no torch.json))"}, nil},
		{"sweep ended early", ours(240)[:6], torchRun(150), doctorOK, "",
			[2]string{"missed (largest batch trained out of core 256 = 2.0x the in-core 128, at 380.0 images/s = 95% of in-core's 400.0; the sweep ended before window or hybrid ran out of memory", "missed (at batch 256, window 380.0 images/s against save_on_cpu 300.0: 1.27x)"}, nil},
		{"no torch, no sweep", nil, &Torch{Status: "skipped", Reason: "no torch in /usr/bin/python3", Install: "apt-get install -y python3-torch"}, "", "",
			[2]string{"not measured (our sweep not measured (no sweep.json))", "not measured (PyTorch skipped: no torch in /usr/bin/python3 (install: apt-get install -y python3-torch))"},
			[]string{"not measured: no doctor.md", "No points: sweep not measured (no sweep.json)"}},
		{"baseline never fits", []sweep.Result{pt("baseline", 64, 0), pt("window", 64, 100)}, torchRun(150),
			"device    cuda:0: Fake CUDA Device 0 (fakecuda)\nFAIL      ordering of copy in, kernel, copy out\n1 checks failed: [ordering]\n", "doctor:1:3",
			[2]string{"not measured (the in-core baseline trained at no batch swept", "not measured (no batch where both ours"},
			[]string{"**not ok**", "- doctor: FAIL      ordering of copy in", "from the tests' fake driver", "| doctor | **failed** (exit 1) | 3 |"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.sweep != nil {
				// As run.sh writes them: hybrid in a sweep of its own.
				var main, hybrid []sweep.Result
				for _, r := range tc.sweep {
					if r.Scheduler == "hybrid" {
						hybrid = append(hybrid, r)
					} else {
						main = append(main, r)
					}
				}
				writeJSON(t, filepath.Join(dir, "sweep.json"), main)
				writeJSON(t, filepath.Join(dir, "hybrid.json"), hybrid)
			}
			if tc.torch != nil {
				writeJSON(t, filepath.Join(dir, "torch.json"), tc.torch)
			}
			if tc.doctor != "" {
				if err := os.WriteFile(filepath.Join(dir, "doctor.md"), []byte(tc.doctor), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			parts, err := ParseParts(tc.parts)
			if err != nil {
				t.Fatal(err)
			}
			in, err := Read(dir, parts, "16GiB")
			if err != nil {
				t.Fatal(err)
			}
			vs := Targets(in)
			for i, want := range tc.want {
				if !strings.HasPrefix(vs[i].String(), want) {
					t.Errorf("target %d: %s\nwant it to begin %s", i+1, vs[i], want)
				}
			}
			var buf bytes.Buffer
			if err := Write(&buf, in); err != nil {
				t.Fatal(err)
			}
			t.Logf("\n%s", buf.String())
			for _, s := range tc.says {
				if !strings.Contains(buf.String(), s) {
					t.Errorf("summary.md lacks %q:\n%s", s, buf.String())
				}
			}
			for _, v := range vs {
				if !strings.Contains(buf.String(), v.State) {
					t.Errorf("summary.md does not say %q:\n%s", v.State, buf.String())
				}
			}
		})
	}
}

func TestBadInput(t *testing.T) {
	for _, s := range []string{"env", "env:0", "env:x:1", ":0:1", "env:0:1:2"} {
		if _, err := ParseParts(s); err == nil {
			t.Errorf("ParseParts(%q): no error", s)
		}
	}
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(file, nil, ""); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("Read of a file: %v", err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "sweep.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	in, err := Read(dir, nil, "")
	if err != nil || in.SweepErr == nil || !strings.Contains(in.SweepErr.Error(), "sweep.json") {
		t.Errorf("a broken sweep.json: %v, %v", err, in.SweepErr)
	}
}

func writeJSON(t *testing.T, path string, v interface{}) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
