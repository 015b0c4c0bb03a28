package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/dispatch/dispatchtest"
)

// readmeFullEnv runs the README's heavier commands too (ResNet-18 training
// and its resumes, the data-parallel and fake-GPU runs): about a minute more
// on a quiet 2-core machine.
const readmeFullEnv = "OOC_README_FULL"

// readmeCommands are the `go run ./cmd/ooc ...` lines of the README's shell
// blocks, continuation lines joined and comments cut, as ooc's arguments.
func readmeCommands(t *testing.T) [][]string {
	t.Helper()
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var cmds [][]string
	var cur string
	for _, line := range strings.Split(string(raw), "\n") {
		if cur == "" && !strings.HasPrefix(line, "go run ./cmd/ooc ") {
			continue
		}
		line, _, _ = strings.Cut(line, " #")
		cur += " " + strings.TrimSpace(line)
		if strings.HasSuffix(cur, `\`) {
			cur = strings.TrimSuffix(cur, `\`)
			continue
		}
		cmds = append(cmds, strings.Fields(strings.TrimPrefix(strings.TrimSpace(cur), "go run ./cmd/ooc")))
		cur = ""
	}
	return cmds
}

// regenJobs are docs/regen.sh's commands, as ooc's arguments.
func regenJobs(t *testing.T) [][]string {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh to run docs/regen.sh with")
	}
	script, _ := filepath.Abs("../../docs/regen.sh")
	out, err := exec.Command(sh, script, "--dry-run", "--with-training").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var jobs [][]string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if _, cmd, ok := strings.Cut(line, ": ooc "); ok {
			jobs = append(jobs, strings.Fields(cmd))
		}
	}
	return jobs
}

// flagsOf maps each -flag of args to its value ("" for a bare boolean),
// leaving out the ones that only name output files.
func flagsOf(args []string) map[string]string {
	m := map[string]string{}
	for i := 1; i < len(args); i++ {
		name, ok := strings.CutPrefix(args[i], "-")
		if !ok {
			continue
		}
		val := ""
		if i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			val = args[i+1]
			i++
		}
		if name == "json" || name == "q" || strings.HasPrefix(name, "plot") {
			continue
		}
		m[name] = val
	}
	return m
}

// inRegen reports whether docs/regen.sh runs the command: a job of the same
// subcommand given every flag the command gives, with the same value (a
// list of schedulers may be a subset of the job's).
func inRegen(cmd []string, jobs [][]string) bool {
	want := flagsOf(cmd)
	for _, job := range jobs {
		if job[0] != cmd[0] {
			continue
		}
		have := flagsOf(job)
		ok := true
		for k, v := range want {
			hv, found := have[k]
			switch {
			case !found:
				ok = false
			case k == "schedulers":
				for _, s := range strings.Split(v, ",") {
					ok = ok && slices.Contains(strings.Split(hv, ","), s)
				}
			default:
				ok = ok && hv == v
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// shorten makes a README command quick enough for a test without changing
// what it exercises: one training step, one DQN episode.
func shorten(cmd []string) []string {
	switch cmd[0] {
	case "train":
		return append(slices.Clone(cmd), "-steps", "1", "-progress", "plain")
	case "dqn-train":
		return append(slices.Clone(cmd), "-episodes", "1")
	}
	return cmd
}

// Every command the README shows parses as ooc parses it, and each is either
// one that docs/regen.sh runs or is run here, in the README's order (a resume
// after the run it resumes) in a fresh directory: the ones of seconds always,
// the heavier ones (ResNet-18 training, two devices, the fake GPU) with
// OOC_README_FULL=1. Training commands run one step (-steps 1 appended) and
// dqn-train one episode; everything else runs as written.
func TestREADMECommands(t *testing.T) {
	cmds := readmeCommands(t)
	if len(cmds) < 15 {
		t.Fatalf("found %d ooc commands in the README", len(cmds))
	}
	jobs := regenJobs(t)
	full := os.Getenv(readmeFullEnv) != ""
	heavy := regexp.MustCompile(`resnet18|-devices|cuda|checkpoint run\.ckpt`)
	t.Chdir(t.TempDir())
	cudaSet := false
	for _, cmd := range cmds {
		line := strings.Join(cmd, " ")
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), append(slices.Clone(cmd), "-h"), &stdout, &stderr); code != 0 {
			t.Errorf("ooc %s: its flags do not parse (exit %d)\n%s", line, code, stderr.String())
			continue
		}
		if inRegen(cmd, jobs) {
			t.Logf("docs/regen.sh runs: ooc %s", line)
			continue
		}
		if heavy.MatchString(line) && !full {
			t.Logf("not run without %s=1: ooc %s", readmeFullEnv, line)
			continue
		}
		if strings.Contains(line, "cuda") && !cudaSet {
			driver := dispatchtest.Setenv(t)
			dispatchtest.SetDevices(t, driver, 2)
			cudaSet = true
		}
		args := shorten(cmd)
		stdout.Reset()
		stderr.Reset()
		if code := run(context.Background(), args, &stdout, &stderr); code != 0 {
			t.Errorf("ooc %s: exit %d\n%s\n%s", strings.Join(args, " "), code, stdout.String(), stderr.String())
		} else {
			t.Logf("ran: ooc %s", strings.Join(args, " "))
		}
	}
}
