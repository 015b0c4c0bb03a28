package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docs/regen.sh --dry-run lists every job and runs nothing; each job's
// command line parses as ooc parses it (flag names and values), and writes
// its files under docs/.
func TestRegenDryRun(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh to run docs/regen.sh with")
	}
	script, _ := filepath.Abs("../../docs/regen.sh")
	before, _ := os.ReadDir("../../docs")
	out, err := exec.Command(sh, script, "--dry-run", "--with-training").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if after, _ := os.ReadDir("../../docs"); len(after) != len(before) {
		t.Errorf("the dry run changed docs/: %d entries, then %d", len(before), len(after))
	}
	jobs := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		name, cmd, ok := strings.Cut(line, ": ooc ")
		if !ok {
			t.Fatalf("line %q is not NAME: ooc ARGS", line)
		}
		jobs++
		args := strings.Fields(cmd)
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), append(args, "-h"), &stdout, &stderr); code != 0 {
			t.Errorf("%s: ooc %s: exit %d\n%s", name, cmd, code, stderr.String())
		}
		for i, a := range args[:len(args)-1] {
			if (a == "-json" || strings.HasPrefix(a, "-plot") || a == "-history") && !strings.HasPrefix(args[i+1], "docs/") {
				t.Errorf("%s writes %s outside docs/", name, args[i+1])
			}
		}
	}
	if jobs < 12 {
		t.Errorf("%d jobs listed:\n%s", jobs, out)
	}
	if err := exec.Command(sh, script, "--dry-run", "no-such-job").Run(); err == nil {
		t.Error("an unknown job name was accepted")
	}
}

// Every relative link of README.md and docs/results.md names a file of the
// repository.
func TestDocLinks(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)#:]+)\)`)
	for _, doc := range []string{"../../README.md", "../../docs/results.md"} {
		raw, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(raw), -1) {
			if _, err := os.Stat(filepath.Join(filepath.Dir(doc), m[1])); err != nil {
				t.Errorf("%s links %s: %v", doc, m[1], err)
			}
		}
	}
}
