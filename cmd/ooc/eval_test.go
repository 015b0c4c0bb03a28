package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gorgonia-ooc/outofcore/train"
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
	got, err := train.EvaluateCheckpoint(o.config(), &bytes.Buffer{})
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
