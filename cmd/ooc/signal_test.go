package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorgonia-ooc/outofcore/train"
)

// runAsOOC makes the test binary run as the ooc command (TestMain), so that
// a test can signal a real ooc process without building one.
const runAsOOC = "OOC_TEST_RUN_AS_OOC"

func TestMain(m *testing.M) {
	if os.Getenv(runAsOOC) == "1" {
		if len(os.Args) > 1 && os.Args[1] == "test-child" {
			os.Exit(launchTestChild(os.Args[2:]))
		}
		main()
	}
	os.Exit(m.Run())
}

// SIGTERM, as a batch system sends it, stops training after the current
// step and saves the checkpoint, as a first SIGINT does, and the message
// names the command that continues the run.
func TestSIGTERMSaves(t *testing.T) {
	bin, err := os.Executable()
	if err != nil {
		t.Skip("cannot find the test binary to run as ooc:", err)
	}
	dir := t.TempDir()
	ck := filepath.Join(dir, "run.ckpt")
	cmd := exec.Command(bin, "train", "-model", "smallcnn", "-data", "synthetic:n=4000", "-image", "16", "-batch", "4",
		"-checkpoint", ck, "-progress", "plain", "-log-every", "1")
	cmd.Env = append(os.Environ(), runAsOOC+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "step 2/") {
			break
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() {
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		t.Fatal("ooc did not stop within a minute of SIGTERM")
	}
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit: %v; stderr:\n%s", err, stderr.String())
	}
	c, err := train.Load(ck)
	if err != nil {
		t.Fatalf("no checkpoint after SIGTERM: %v", err)
	}
	want := "continue with: ooc train -checkpoint " + ck + " -resume"
	if c.Meta.Step < 2 || !strings.Contains(stderr.String(), want) {
		t.Errorf("checkpoint at step %d; stderr:\n%s", c.Meta.Step, stderr.String())
	}
}
