package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Bad input gets an error naming the problem, before anything is built.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "want one argument"},
		{[]string{"a", "b"}, "want one argument"},
		{[]string{file}, "is a file, not a folder"},
		{[]string{"-go", filepath.Join(dir, "no-go"), filepath.Join(dir, "b")}, "not found: the bundle's ooc is built with the Go toolchain"},
	} {
		var stdout, stderr bytes.Buffer
		if err := run(tc.args, &stdout, &stderr); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("gpubundle %q: %v, want an error saying %q", tc.args, err, tc.want)
		}
		if _, err := os.Stat(filepath.Join(dir, "b")); err == nil {
			t.Errorf("gpubundle %q made its folder before refusing", tc.args)
		}
	}
}

// Inside the repository the bundle's folder must be ignored by git (.gpu is).
func TestCheckDir(t *testing.T) {
	root, err := moduleRoot("go")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
		t.Skip("not a git checkout: nothing says what is ignored")
	}
	for _, tc := range []struct {
		dir  string
		want string // "" for no error
	}{
		{filepath.Join(root, ".gpu"), ""},
		{filepath.Join(root, "docs", "bundle"), "not ignored by git"},
		{root, "is the repository itself"},
		{t.TempDir(), ""},
	} {
		err := checkDir(tc.dir, root)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("checkDir(%s): %v, want %q", tc.dir, err, tc.want)
		}
	}
}

// A bundle over 40 MiB is refused, saying how large it is.
func TestCheckSize(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "ooc")
	if err := os.WriteFile(big, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, MaxBytes-1); err != nil { // sparse: no disk used
		t.Fatal(err)
	}
	if _, err := checkSize(dir); err != nil {
		t.Errorf("just under the limit: %v", err)
	}
	if err := os.Truncate(big, MaxBytes+1<<20); err != nil {
		t.Fatal(err)
	}
	if _, err := checkSize(dir); err == nil || !strings.Contains(err.Error(), "41.0 MiB, over the bundle's 40 MiB") {
		t.Errorf("over the limit: %v", err)
	}
}

// The embedded scripts are the files beside this test, and parse: bash -n and, where python3
// is, py_compile (without running them).
func TestScripts(t *testing.T) {
	for name, data := range map[string][]byte{"run.sh": runScript, "torch_resnet50.py": torchScript} {
		disk, err := os.ReadFile(name)
		if err != nil || !bytes.Equal(disk, data) {
			t.Errorf("%s: the embedded copy differs from the file (%v)", name, err)
		}
	}
	checkSyntax(t, "bash", "-n", "run.sh")
	checkSyntax(t, "python3", "-c", "import sys, py_compile; py_compile.compile(sys.argv[2], cfile=sys.argv[1], doraise=True)",
		filepath.Join(t.TempDir(), "torch_resnet50.pyc"), "torch_resnet50.py")
}
