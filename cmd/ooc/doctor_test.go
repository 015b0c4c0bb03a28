package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/dispatch/dispatchtest"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/dispatch/zoocheck"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

// runDoctorFake runs ooc doctor with args on a fresh fake driver (its
// kernels the host build, its cuBLAS the fake's) and returns the exit code,
// stdout and the -json records.
func runDoctorFake(t *testing.T, args ...string) (int, string, []doctorLine) {
	t.Helper()
	dispatchtest.Setenv(t)
	js := filepath.Join(t.TempDir(), "doctor.json")
	args = append([]string{"doctor", "-json", js}, args...)
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatalf("ooc %s wrote no JSON: %v\n%s\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	var recs []struct {
		doctorLine
		Numbers map[string]any `json:"numbers"`
	}
	if err := json.Unmarshal(b, &recs); err != nil {
		t.Fatalf("-json: %v\n%s", err, b)
	}
	lines := make([]doctorLine, len(recs))
	for i, r := range recs {
		lines[i] = r.doctorLine
		lines[i].Numbers = map[string]float64{}
		for k, v := range r.Numbers {
			switch x := v.(type) {
			case float64:
				lines[i].Numbers[k] = x
			case string: // +Inf, NaN
				lines[i].Numbers[k], _ = strconv.ParseFloat(x, 64)
			}
		}
	}
	return code, stdout.String() + stderr.String(), lines
}

// TestDoctorKernelsAndModels: the kernels part prints an ok line for every
// kernel of kernels.Specs (every check, a few seconds on the fake) and the
// models part one per budget of smallcnn float32, on the fake driver; the
// JSON holds the same lines with their numbers.
func TestDoctorKernelsAndModels(t *testing.T) {
	code, out, lines := runDoctorFake(t, "-parts", "kernels,models", "-models", "smallcnn:float32")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for _, s := range kernels.Specs {
		if !strings.Contains(out, "ok kernel "+s.Name+" max-rel-err ") {
			t.Errorf("no ok line for kernel %s", s.Name)
		}
	}
	models := 0
	for _, l := range lines {
		if !l.OK || l.Status != "ok" {
			t.Errorf("JSON record %+v is not ok", l)
		}
		switch l.Part {
		case "kernels":
			if tol := l.Numbers["tol"]; tol != 1e-5 && tol != 1e-12 || !(l.Numbers["max_rel_err"] <= tol) {
				t.Errorf("kernel %s: numbers %v", l.Name, l.Numbers)
			}
		case "models":
			models++
			if _, ok := l.Numbers["gradients"]; !ok || !strings.HasPrefix(l.Name, "smallcnn ") {
				t.Errorf("model line %+v", l)
			}
		}
	}
	if want := 3; models != want { // zoocheck's smallcnn float32 case at three budgets
		t.Errorf("%d model lines, want %d:\n%s", models, want, out)
	}
	if !strings.Contains(out, "ok model smallcnn float32 batch 4 at 50% ") {
		t.Errorf("no line for smallcnn float32 at 50%%:\n%s", out)
	}
}

// TestDoctorWrongKernelFails: a kernel whose output is corrupted after each
// launch gives a FAIL line naming it, and exit 1; the other kernels stay ok.
func TestDoctorWrongKernelFails(t *testing.T) {
	doctorHook = "relu_f32"
	t.Cleanup(func() { doctorHook = "" })
	code, out, lines := runDoctorFake(t, "-parts", "kernels", "-kernels", "relu")
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if !strings.Contains(out, "FAIL kernel relu_f32: ") || !strings.Contains(out, "ok kernel relu_f64 ") {
		t.Errorf("no FAIL line for relu_f32, or relu_f64 not ok:\n%s", out)
	}
	failed := 0
	for _, l := range lines {
		if !l.OK {
			failed++
			if l.Name != "relu_f32" {
				t.Errorf("unexpected failure %+v", l)
			}
		}
	}
	if failed == 0 {
		t.Errorf("the JSON records no failure")
	}
}

// TestDoctorPartTimeout: a part that runs past its deadline prints TIMEOUT
// with what it finished, and the next part still runs (and times out too);
// the exit status is 1.
func TestDoctorPartTimeout(t *testing.T) {
	code, out, lines := runDoctorFake(t, "-parts", "kernels,models", "-models", "smallcnn:float32", "-part-timeout", "300ms")
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	for _, want := range []string{"TIMEOUT kernels: ", "cases finished", "TIMEOUT models: ", "models finished"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	timeouts := 0
	for _, l := range lines {
		if l.Status == "TIMEOUT" {
			timeouts++
		}
	}
	if timeouts != 2 {
		t.Errorf("%d TIMEOUT records, want 2: %+v", timeouts, lines)
	}
}

// TestDoctorModelsOrder: -models all runs the default (small) cases before
// the deep ones, so a deadline among the deep ones leaves the small checked.
func TestDoctorModelsOrder(t *testing.T) {
	cs, err := selectModels("all")
	if err != nil || len(cs) != len(zoocheck.Cases) {
		t.Fatalf("%d cases, %v; want %d", len(cs), err, len(zoocheck.Cases))
	}
	seenDeep := false
	for _, c := range cs {
		if seenDeep && !c.Deep {
			t.Errorf("%s comes after a deep model", c.Label())
		}
		seenDeep = seenDeep || c.Deep
	}
	if one, err := selectModels("lstm:float64"); err != nil || len(one) != 1 || one[0].Dtype() != tensor.Float64 {
		t.Errorf("lstm:float64 picks %v, %v", one, err)
	}
}

// TestDoctorFlagErrors: bad flags are usage errors (exit 2) naming the
// problem, before any device is opened; so is (exit 1) a -json file that
// cannot be written.
func TestDoctorFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-parts", "kernels,bogus"}, `-parts: unknown part "bogus"`},
		{[]string{"-kernels", "nosuch"}, `-kernels: no kernel check group "nosuch"`},
		{[]string{"-parts", "models", "-models", "alexnet"}, `-models: no zoo case for model "alexnet"`},
		{[]string{"-part-timeout", "0s"}, "-part-timeout: 0s is not positive"},
		{[]string{"extra"}, "unexpected arguments"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append([]string{"doctor"}, c.args...), &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("ooc doctor %v: exit %d, stderr %q; want 2 and %q", c.args, code, stderr.String(), c.want)
		}
	}
	// A -json file that cannot be written stops the doctor before any part.
	var stdout, stderr bytes.Buffer
	bad := filepath.Join(t.TempDir(), "no", "such", "dir", "doctor.json")
	if code := run(context.Background(), []string{"doctor", "-json", bad}, &stdout, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), "-json: ") || stdout.Len() > 0 {
		t.Errorf("-json %s: exit %d, stdout %q, stderr %q; want 1, nothing run, and a -json error", bad, code, stdout.String(), stderr.String())
	}
}

// TestDoctorChecksLines: cuda.Doctor's printed lines pass through as they
// come and become -json records: ok and FAIL lines by their check's name,
// the rest as information.
func TestDoctorChecksLines(t *testing.T) {
	var out bytes.Buffer
	rep := &doctorReport{w: &out}
	lw := &lineWriter{rep: rep, part: "checks"}
	text := "driver    /usr/lib/libcuda.so.1: CUDA 13.0\n" +
		"ok        bestfit allocator, random trace: 1500 steps (0.10s)\n" +
		"FAIL      ordering of copy in, kernel, copy out on three streams: wrong bytes\n" +
		"all checks"
	for _, chunk := range []string{text[:20], text[20:90], text[90:]} { // lines split across writes
		if _, err := lw.Write([]byte(chunk)); err != nil {
			t.Fatal(err)
		}
	}
	lw.flush()
	if out.String() != text {
		t.Errorf("passed through %q, want %q", out.String(), text)
	}
	want := []doctorLine{
		{Part: "checks", Name: "driver", OK: true, Status: "info", Detail: "/usr/lib/libcuda.so.1: CUDA 13.0"},
		{Part: "checks", Name: "bestfit allocator, random trace", OK: true, Status: "ok", Detail: "1500 steps (0.10s)"},
		{Part: "checks", Name: "ordering of copy in, kernel, copy out on three streams", Status: "FAIL", Detail: "wrong bytes"},
		{Part: "checks", Name: "all", OK: true, Status: "info", Detail: "checks"},
	}
	if len(rep.lines) != len(want) || lw.count() != len(want) {
		t.Fatalf("records %+v, want %+v", rep.lines, want)
	}
	for i, w := range want {
		if g := rep.lines[i]; g.Part != w.Part || g.Name != w.Name || g.OK != w.OK || g.Status != w.Status || g.Detail != w.Detail {
			t.Errorf("record %d: %+v, want %+v", i, g, w)
		}
	}
}

// TestDoctorJSONAfterEveryLine: the -json file holds every line printed so
// far after each one, so a doctor killed by its caller's deadline leaves them
// (an infinite error included: JSON has none, it is written as a string).
func TestDoctorJSONAfterEveryLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "doctor.json")
	rep := &doctorReport{w: &bytes.Buffer{}, jsonPath: path}
	for i, add := range []func(){
		func() { rep.add(doctorLine{Part: "kernels", Name: "relu_f32", OK: true}) },
		func() {
			rep.add(doctorLine{Part: "kernels", Name: "relu_f64", Numbers: map[string]float64{"max_rel_err": math.Inf(1)}})
		},
		func() { rep.timeout("models", "0 of 1 models finished") },
	} {
		add()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var recs []map[string]any
		if err := json.Unmarshal(b, &recs); err != nil || len(recs) != i+1 {
			t.Errorf("after line %d: %d records (%v), want %d:\n%s", i+1, len(recs), err, i+1, b)
		}
	}
	if rep.jsonErr != nil {
		t.Fatal(rep.jsonErr)
	}
}
