package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ooc gpu-summary on a folder where run.sh's parts wrote nothing still writes summary.md,
// marking each target not measured and saying why; it prints the same.
func TestGPUSummaryEmpty(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"gpu-summary", "-dir", dir, "-parts", "env:0:1,doctor:1:2"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	b, err := os.ReadFile(filepath.Join(dir, "summary.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| doctor | **failed** (exit 1) | 2 |", "**not measured** (our sweep not measured (no sweep.json))",
		"**not measured** (PyTorch not measured (no torch.json))"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("summary.md lacks %q:\n%s", want, b)
		}
	}
	if stdout.String() != string(b) {
		t.Errorf("printed %q, wrote %q", stdout.String(), b)
	}
}
