package main

import (
	"bytes"
	"strings"
	"testing"

	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/datasets"
)

// ooc eval on a saved checkpoint reproduces the evaluation training printed
// after its last epoch, exactly, whatever the scheduler and budget.
func TestEvalCheckpoint(t *testing.T) {
	path := tempCkpt(t)
	res, _ := mustTrain(t, tiny("-steps", "4", "-checkpoint", path)...)
	if len(res.Evals) != 1 {
		t.Fatalf("%d evaluations during training, want 1", len(res.Evals))
	}
	want := res.Evals[0]
	if !want.HasAcc || want.Examples != 16 || want.Total != 16 {
		t.Fatalf("training's evaluation: %+v", want)
	}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"defaults", nil},
		{"baseline", []string{"-scheduler", "baseline", "-allocator", "bestfit"}},
		{"window", []string{"-window", "2MiB"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, out := mustEval(t, append([]string{"-checkpoint", path}, tc.args...)...)
			if got.Correct != want.Correct || got.Total != want.Total || got.Loss != want.Loss || got.Examples != want.Examples {
				t.Errorf("eval %+v, training's %+v", *got, want)
			}
			m := evalLine.FindStringSubmatch(out)
			if m == nil || m[5] != "16" {
				t.Errorf("output:\n%s", out)
			}
			if !strings.Contains(out, "measured on the CPU device of this machine") {
				t.Errorf("output:\n%s", out)
			}
		})
	}
	// Another split, and a batch size that does not divide it (the last batch is padded).
	o, _ := parseEvalFlags([]string{"-checkpoint", path, "-split", "train", "-batch", "3"}, &bytes.Buffer{})
	got, err := evalCheckpoint(o, &bytes.Buffer{})
	if err != nil || got.Examples != 16 || got.Total != 16 {
		t.Errorf("train split, batch 3: %+v, %v", got, err)
	}
}

func TestEvalFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "-checkpoint FILE is required"},
		{[]string{"-checkpoint", "c", "-split", "validation"}, `-split "validation": want test or train`},
		{[]string{"-checkpoint", "c", "-batch", "-2"}, "-batch -2"},
		{[]string{"-checkpoint", "c", "-budget", "big"}, `"big" is not a byte size`},
		{[]string{"-checkpoint", "c", "-allocator", "slab"}, "unknown allocator"},
	} {
		if _, err := parseEvalFlags(tc.args, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("eval %q: error %v, want %q", tc.args, err, tc.want)
		}
	}
}

func TestCountCorrect(t *testing.T) {
	for _, tc := range []struct {
		name           string
		shape          []int
		data           []float32
		labels         []int
		correct, total int64
		err            bool
	}{
		{"rows", []int{3, 2}, []float32{1, 2, 5, -1, 0, 0}, []int{1, 0, 1}, 2, 3, false}, // a tie goes to the first class
		{"padding", []int{3, 2}, []float32{1, 2, 5, -1, 0, 0}, []int{1, 0, -1}, 2, 2, false},
		{"pixels", []int{1, 2, 1, 2}, []float32{1, 0, 0, 1}, []int{0, 1}, 2, 2, false}, // (N,K,H,W): class is axis 1
		{"pixels wrong", []int{1, 2, 1, 2}, []float32{1, 0, 0, 1}, []int{1, 0}, 0, 2, false},
		{"label count", []int{2, 2}, []float32{1, 0, 0, 1}, []int{0}, 0, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := tensor.New(tensor.WithShape(tc.shape...), tensor.WithBacking(tc.data))
			c, n, err := countCorrect(v, tc.labels)
			if (err != nil) != tc.err || c != tc.correct || n != tc.total {
				t.Errorf("got %d/%d, %v; want %d/%d, error %v", c, n, err, tc.correct, tc.total, tc.err)
			}
		})
	}
}

// Evaluating switches batch norm to inference mode and back, and leaves the
// running statistics exactly as they were (gorgonia's own BatchNormOp resets
// them when switched back to training).
func TestEvaluateKeepsState(t *testing.T) {
	path := tempCkpt(t)
	mustTrain(t, tiny("-steps", "3", "-checkpoint", path)...)
	ck, err := loadCheckpoint(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := buildModel("smallcnn", 4, dataShape{channels: 3, height: 16, width: 16, classes: 10}, 1)
	if err != nil {
		t.Fatal(err)
	}
	bns := modelBatchNorms(m)
	if len(bns) == 0 {
		t.Fatal("no batch norms found")
	}
	ev, err := newEvaluator(m, bns)
	if err != nil {
		t.Fatal(err)
	}
	if err := ev.compile(); err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	solver, _ := newSolver("adam", 0.001)
	if err := restoreTensors(path, ck, m.Learnables, bns, solver); err != nil {
		t.Fatal(err)
	}
	before, _ := snapshotBN(bns)
	trivial := true
	for _, s := range before {
		z := tensor.New(tensor.Of(s[0].Dtype()), tensor.WithShape(s[0].Shape()...))
		trivial = trivial && sameBits(s[0], z)
	}
	if trivial {
		t.Fatal("running means are all 0 after 3 steps: the statistics were not restored")
	}
	ds, err := openSplit("synthetic:n=16", datasets.Test, 16, 16, 10, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	r1, err := ev.evaluate(ds, datasets.Options{BatchSize: 4, Dtype: tensor.Float32})
	if err != nil {
		t.Fatal(err)
	}
	after, _ := snapshotBN(bns)
	for i := range before {
		if !sameBits(before[i][0], after[i][0]) || !sameBits(before[i][1], after[i][1]) {
			t.Errorf("batch norm %d: running statistics changed by evaluating", i)
		}
	}
	r2, _ := ev.evaluate(ds, datasets.Options{BatchSize: 4, Dtype: tensor.Float32})
	if r1 != r2 {
		t.Errorf("two evaluations differ: %+v, %+v", r1, r2)
	}
	for _, tm := range ev.modes {
		if tr, ok := tm.(interface{ Training() bool }); ok && !tr.Training() {
			t.Errorf("%v left in inference mode", tm)
		}
	}
}
