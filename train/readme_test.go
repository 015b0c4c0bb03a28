package train

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/dispatch/dispatchtest"
)

// The README's Go programs build and run as they stand there: the test takes
// each ```go block that is a whole program (package main) from README.md and
// runs it with `go run`, placed by an overlay in a directory of this module
// that does not exist on disk, so the README and the test cannot drift.
// A program that compiles for a CUDA device (ooc.WithDevice) runs on the
// fake CUDA driver (dispatchtest) and must print its loss on cuda:0.
func TestREADMEProgram(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the README's programs with the go command; skipped with -short")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to build the README's programs with")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(raw), -1)
	programs, fake := 0, false
	for _, b := range blocks {
		src := b[1]
		if !strings.HasPrefix(src, "package main\n") {
			continue
		}
		programs++
		dir := t.TempDir()
		file := filepath.Join(dir, "main.go")
		if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		pkg := filepath.Join(root, "internal", "readmeprogram", "main.go")
		overlay, _ := json.Marshal(map[string]map[string]string{"Replace": {pkg: file}})
		ov := filepath.Join(dir, "overlay.json")
		if err := os.WriteFile(ov, overlay, 0o644); err != nil {
			t.Fatal(err)
		}
		onCUDA := strings.Contains(src, "ooc.WithDevice(")
		if onCUDA && !fake {
			dispatchtest.Setenv(t) // the program's "cuda" is the fake driver, through the environment
			fake = true
		}
		cmd := exec.Command(goCmd, "run", "-overlay="+ov, "./internal/readmeprogram")
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("README program %d: %v\n%s\nsource:\n%s", programs, err, out, src)
		}
		if onCUDA {
			if !regexp.MustCompile(`loss [0-9.e+-]+ on cuda:0`).Match(out) {
				t.Errorf("README program %d (CUDA) printed:\n%s", programs, out)
			}
			continue
		}
		// The program reports a loss, and swapping: its budget is below the peak.
		m := regexp.MustCompile(`loss [0-9.]+; device peak ([0-9]+) of ([0-9]+) bytes in core; ([0-9]+) bytes swapped in`).FindStringSubmatch(string(out))
		if m == nil || len(m[1]) > len(m[2]) || (len(m[1]) == len(m[2]) && m[1] >= m[2]) || m[3] == "0" {
			t.Errorf("README program %d printed:\n%s", programs, out)
		}
	}
	if programs == 0 {
		t.Fatal("README.md holds no Go program (a ```go block starting with package main)")
	}
}
