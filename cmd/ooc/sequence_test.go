package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// "ooc train -model lstm -data text:DIR" trains a character model on a corpus under a budget,
// evaluates per-token accuracy on the test text, and its checkpoint (with the sequence length
// and hidden width) evaluates again to the same figures.
func TestTrainLSTMOnText(t *testing.T) {
	dir := t.TempDir()
	corpus := strings.Repeat("the cat sat on the mat.\n", 12)
	if err := os.WriteFile(filepath.Join(dir, "train.txt"), []byte(corpus), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "test.txt"), []byte(strings.Repeat("the mat sat on the cat.\n", 2)), 0o644); err != nil {
		t.Fatal(err)
	}
	path := tempCkpt(t)
	res, out := mustTrain(t, "-model", "lstm", "-data", "text:"+dir+",seq=8", "-hidden", "24", "-batch", "4", "-epochs", "2",
		"-lr", "0.01", "-budget", "60%", "-progress", "plain", "-checkpoint", path)
	// 60% is the device (105 KiB of 4 KiB chunks); the scheduler plans lower, where the VA
	// allocator serves this model's many small blocks in it.
	for _, want := range []string{"input 1x1x8, batch 4, 13 classes", "a CPU device of 105.1 KiB", "epoch 2/2 done"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if n := len(res.Losses); n != 2*((len(corpus)-1)/8/4) || !(res.Losses[n-1] < res.Losses[0]) {
		t.Errorf("losses %v", res.Losses)
	}
	if res.Stats.SwapInBytes == 0 {
		t.Error("no swapping under 60% of the in-core peak")
	}
	if len(res.Evals) != 2 || !res.Evals[1].HasAcc || res.Evals[1].Total != int64(((48-1)/8)*8) {
		t.Fatalf("evaluations %+v", res.Evals)
	}
	got, eout := mustEval(t, "-checkpoint", path)
	if want := res.Evals[1]; got.Correct != want.Correct || got.Total != want.Total || got.Loss != want.Loss {
		t.Errorf("eval %+v, training's %+v", *got, want)
	}
	if !strings.Contains(eout, "input 1x1x8") {
		t.Errorf("eval output:\n%s", eout)
	}
}
