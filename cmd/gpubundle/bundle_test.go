package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/dispatch/dispatchtest"
)

// TestBundleOnFakeCUDA builds the bundle into a temporary folder and runs its run.sh, from
// another folder, on the fake driver, cuBLAS and NCCL at tiny sizes (smallcnn 16x16, batches
// 2 and 4, through run.sh's OOC_BUNDLE_* knobs), then checks what it left in $OUT: at most 8
// files, Markdown and JSON only; the doctor's checks passed; every row of the sweeps trained;
// PyTorch recorded as skipped (no CUDA torch here); summary.md joined it all. It proves the
// script and the statically built ooc, not a GPU: every number in it is the fake's.
//
// It builds ooc for linux/amd64 without cgo (seconds with a warm build cache, minutes on a
// cold one), so it runs only with OOC_BUNDLE_TEST=1.
func TestBundleOnFakeCUDA(t *testing.T) {
	if os.Getenv("OOC_BUNDLE_TEST") != "1" {
		t.Skip("builds ooc for the bundle and runs run.sh on the fake driver: set OOC_BUNDLE_TEST=1 to run it")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("run.sh needs bash")
	}
	driver := dispatchtest.Setenv(t)
	dispatchtest.SetenvNCCL(t, driver)
	t.Setenv("OOC_FAKECUDA_KERNELS", withCheckKernel(t, os.Getenv("OOC_FAKECUDA_KERNELS")))

	bundle := filepath.Join(t.TempDir(), "bundle")
	var stdout, stderr bytes.Buffer
	if err := run([]string{bundle}, &stdout, &stderr); err != nil {
		t.Fatalf("gpubundle: %v\n%s", err, stderr.String())
	}
	read := runBundle(t, bundle)
	if d := read("doctor.md"); !strings.Contains(d, "all checks passed") {
		t.Errorf("the doctor's checks did not pass on the fake:\n%s", d)
	}
	type point struct {
		Scheduler string `json:"scheduler"`
		OK        bool   `json:"ok"`
		Error     string `json:"error"`
	}
	var sweep []point
	for _, name := range []string{"sweep.json", "hybrid.json"} {
		var points []point
		if err := json.Unmarshal([]byte(read(name)), &points); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		sweep = append(sweep, points...)
	}
	trained := map[string]bool{}
	for _, r := range sweep {
		trained[r.Scheduler] = trained[r.Scheduler] || r.OK
	}
	for _, s := range []string{"baseline", "window", "hybrid"} {
		if !trained[s] {
			t.Errorf("the sweep's %s row trained at no batch: %+v", s, sweep)
		}
	}
	var torch struct{ Status, Reason string }
	if err := json.Unmarshal([]byte(read("torch.json")), &torch); err != nil || torch.Status != "skipped" {
		t.Errorf("torch.json: status %q (%s), want skipped (no CUDA torch here); %v", torch.Status, torch.Reason, err)
	}
	summary := read("summary.md")
	for _, want := range []string{"## Targets", "| env | ok |", "| doctor | ok |", "| sweep | ok |", "| hybrid | ok |", "| torch | ok |",
		"from the tests' fake driver", "| 4 | "} {
		if !strings.Contains(summary, want) {
			t.Errorf("summary.md lacks %q:\n%s", want, summary)
		}
	}
	t.Logf("env.md:\n%s\ndoctor.md:\n%s", read("env.md"), read("doctor.md"))
	if log := read("log.md"); !strings.Contains(log, "| window + va |") || !strings.Contains(log, "| hybrid + va |") {
		t.Errorf("log.md lacks the sweeps' tables:\n%s", log)
	}
}

// TestBundlePartsFail: a part that runs out of its share of time, or fails, is recorded as
// such and the parts after it still run: here the doctor and the hybrid sweep get one second
// each and the PyTorch script a python that does not exist. The sweep runs with the best-fit
// allocator, as run.sh does where the doctor finds no VMM, and the summary says so. Also only
// with OOC_BUNDLE_TEST=1.
func TestBundlePartsFail(t *testing.T) {
	if os.Getenv("OOC_BUNDLE_TEST") != "1" {
		t.Skip("builds ooc for the bundle and runs run.sh on the fake driver: set OOC_BUNDLE_TEST=1 to run it")
	}
	driver := dispatchtest.Setenv(t)
	dispatchtest.SetenvNCCL(t, driver)
	bundle := filepath.Join(t.TempDir(), "bundle")
	var stdout, stderr bytes.Buffer
	if err := run([]string{bundle}, &stdout, &stderr); err != nil {
		t.Fatalf("gpubundle: %v\n%s", err, stderr.String())
	}
	read := runBundle(t, bundle, "OOC_BUNDLE_T_DOCTOR=1", "OOC_BUNDLE_T_HYBRID=1", "OOC_BUNDLE_PYTHON=/nonexistent/python3",
		"OOC_BUNDLE_ALLOCATOR=bestfit")
	summary := read("summary.md") + read("log.md")
	for _, want := range []string{"| env | ok |", "| doctor | **timed out**", "| sweep | ok |", "| hybrid | **timed out**",
		"| torch | **failed** (exit 127) |", "PyTorch error: the PyTorch script wrote no JSON", "## Failures",
		"Ours: the bestfit allocator", "| window + bestfit |"} {
		if !strings.Contains(summary, want) {
			t.Errorf("summary.md lacks %q:\n%s", want, summary)
		}
	}
}

// runBundle runs bundle/run.sh, from another folder, on the tiny sizes, with extra environment
// settings; it checks that $OUT holds at most 8 files, Markdown and JSON only, and returns a
// reader of them.
func runBundle(t *testing.T, bundle string, env ...string) (read func(name string) string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	cmd := exec.Command("bash", filepath.Join(bundle, "run.sh"))
	cmd.Dir = t.TempDir() // run.sh works from any folder
	cmd.Env = append(os.Environ(), "OUT="+out, "OOC_BUNDLE_MODEL=smallcnn", "OOC_BUNDLE_IMAGE=16", "OOC_BUNDLE_CLASSES=4",
		"OOC_BUNDLE_BATCHES=2,4", "OOC_BUNDLE_HYBRID_BATCHES=2,4", "OOC_BUNDLE_MAX_BATCH=4", "OOC_BUNDLE_BUDGET=64MiB", "OOC_BUNDLE_CHUNK=2MiB", "OOC_BUNDLE_STEPS=1",
		// The doctor's models part at the tiny size too: the whole zoo takes the fake's host GEMMs minutes.
		"OOC_BUNDLE_DOCTOR_ARGS=-models smallcnn")
	cmd.Env = append(cmd.Env, env...)
	log, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("run.sh: %v\n%s", err, log)
	}
	t.Logf("run.sh:\n%s", log)
	files, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) > 8 {
		t.Errorf("%d files in $OUT, at most 8", len(files))
	}
	for _, f := range files {
		if ext := filepath.Ext(f.Name()); f.IsDir() || (ext != ".md" && ext != ".json") {
			t.Errorf("$OUT holds %s: only Markdown and JSON files belong there", f.Name())
		}
	}
	return func(name string) string {
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Errorf("run.sh wrote no %s: %v", name, err)
		}
		return string(b)
	}
}

// checkKernel is the doctor's ordering-check kernel (vm/cuda/checkdata/add_one.cu) for the
// fake driver, which runs host builds of kernels from one library.
const checkKernel = `
void ooc_host_add_one(const unsigned int grid[3], const unsigned int block[3], unsigned int shared, void **params) {
	float *x = *(float **)params[0];
	unsigned int n = *(unsigned int *)params[1];
	unsigned long long threads = (unsigned long long)grid[0] * block[0];
	for (unsigned long long i = 0; i < threads; i++)
		if (i < n)
			x[i] += 1.0f;
}
`

// withCheckKernel builds a library holding the doctor's check kernel and, through its
// dependency on kernels (the project's kernels built for the host), every project kernel:
// the fake looks kernels up by dlsym, which searches a library's dependencies too
// (--no-as-needed keeps that dependency, on which nothing in the library calls).
func withCheckKernel(t *testing.T, kernels string) string {
	t.Helper()
	cc := ""
	for _, name := range []string{os.Getenv("CC"), "cc", "gcc", "clang"} {
		if p, err := exec.LookPath(name); name != "" && err == nil {
			cc = p
			break
		}
	}
	if cc == "" {
		t.Skip("no C compiler (cc, gcc or clang): the fake driver's kernels are built at test time; apt-get install -y gcc")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "check.c")
	if err := os.WriteFile(src, []byte(checkKernel), 0o644); err != nil {
		t.Fatal(err)
	}
	lib := filepath.Join(dir, "kernels.so")
	if msg, err := exec.Command(cc, "-shared", "-fPIC", "-O2", "-o", lib, src, "-Wl,--no-as-needed", kernels).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cc, err, msg)
	}
	return lib
}
