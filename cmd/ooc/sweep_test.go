package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeJSON replaces its file whole, through FILE.tmp: a sweep killed while writing its
// -json (run.sh's share running out) leaves the last whole file. Here the write to FILE.tmp
// fails, and FILE keeps its earlier contents.
func TestWriteJSONWhole(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sweep.json")
	if err := writeJSON(file, []int{1}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(file + ".tmp"); err == nil {
		t.Errorf("%s.tmp left behind", file)
	}
	if err := os.Mkdir(file+".tmp", 0o755); err != nil { // the next write cannot go through it
		t.Fatal(err)
	}
	if err := writeJSON(file, []int{1, 2}); err == nil {
		t.Errorf("writeJSON wrote %s without going through %s.tmp", file, file)
	}
	if b, err := os.ReadFile(file); err != nil || strings.TrimSpace(string(b)) != "[\n  1\n]" {
		t.Errorf("%s holds %q (%v), want the earlier whole file", file, b, err)
	}
}
