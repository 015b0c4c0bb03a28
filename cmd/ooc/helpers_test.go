package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/train"
)

// tiny is a run small enough for tests: 16 synthetic examples of 3x16x16 (and
// 16 test examples), batches of 4, so an epoch is 4 steps.
func tiny(extra ...string) []string {
	return append([]string{"-model", "smallcnn", "-data", "synthetic:n=16", "-batch", "4", "-image", "16", "-progress", "plain"}, extra...)
}

// trainArgs parses args as "ooc train" does and runs the training.
func trainArgs(t *testing.T, args ...string) (*train.Result, string, error) {
	t.Helper()
	o, err := parseTrainFlags(args, io.Discard)
	if err != nil {
		return nil, "", err
	}
	var out bytes.Buffer
	res, err := runTraining(context.Background(), o, &out)
	return res, out.String(), err
}

// mustEval parses args as "ooc eval" does and evaluates the checkpoint.
func mustEval(t *testing.T, args ...string) (*train.EvalResult, string) {
	t.Helper()
	o, err := parseEvalFlags(args, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	got, err := train.EvaluateCheckpoint(o.config(), &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	return got, out.String()
}

func mustTrain(t *testing.T, args ...string) (*train.Result, string) {
	t.Helper()
	res, out, err := trainArgs(t, args...)
	if err != nil {
		t.Fatalf("train %q: %v\noutput:\n%s", args, err, out)
	}
	return res, out
}

var (
	stepLine = regexp.MustCompile(`(?m)^step (\d+)/\d+ .* loss ([0-9.]+) `)
	swapLine = regexp.MustCompile(`(?m)^  swap bytes  in (\d+) \(.*\), out (\d+) `)
	peakLine = regexp.MustCompile(`(?m)^  device      peak (\d+) B .*budget (\d+) B`)
	evalLine = regexp.MustCompile(`(?m)test accuracy ([0-9.]+) \((\d+)/(\d+)\), test loss ([0-9.]+) on (\d+) examples`)
)

// printedLosses reads the step lines' loss values.
func printedLosses(t *testing.T, out string) []float64 {
	t.Helper()
	var ls []float64
	for _, m := range stepLine.FindAllStringSubmatch(out, -1) {
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, v)
	}
	return ls
}

func atoi64(t *testing.T, s string) int64 {
	t.Helper()
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func tempCkpt(t *testing.T) string { return filepath.Join(t.TempDir(), "run.ckpt") }

// sameBits reports whether two tensors hold the same shape, dtype and bits.
func sameBits(a, b *tensor.Dense) bool {
	if a == nil || b == nil || !a.Shape().Eq(b.Shape()) || a.Dtype() != b.Dtype() {
		return false
	}
	var x, y bytes.Buffer
	return binary.Write(&x, binary.LittleEndian, a.Data()) == nil && binary.Write(&y, binary.LittleEndian, b.Data()) == nil && bytes.Equal(x.Bytes(), y.Bytes())
}
