package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// launchTestChild is a stand-in rank for ooc launch's tests, run as
// "ooc test-child MODE ..." by the test binary (TestMain), so that they need
// no model, no GPU and no NCCL:
//
//	test-child env              print the rank's environment (and a line to stderr, and one without a newline), exit 0
//	test-child wait DIR         say "ready" (after writing DIR/ready-RANK), wait for SIGINT or SIGTERM, say so
//	                            (and of each one more within half a second), exit 1
//	test-child fail R CODE DIR  rank R exits CODE (kills itself: "kill") once every other rank is ready; the others wait
//	                            for SIGTERM and exit 0 ("fail ... stubborn": they ignore it)
func launchTestChild(args []string) int {
	rank, _ := strconv.Atoi(os.Getenv("RANK"))
	size, _ := strconv.Atoi(os.Getenv("WORLD_SIZE"))
	switch {
	case len(args) == 1 && args[0] == "env":
		fmt.Printf("rank=%s world=%s local=%s localworld=%s master=%s:%s run=%s\n", os.Getenv("RANK"), os.Getenv("WORLD_SIZE"),
			os.Getenv("LOCAL_RANK"), os.Getenv("LOCAL_WORLD_SIZE"), os.Getenv("MASTER_ADDR"), os.Getenv("MASTER_PORT"), os.Getenv("OOC_RUN_ID"))
		fmt.Fprintln(os.Stderr, "a line on stderr")
		fmt.Print("no newline at the end")
		return 0
	case len(args) == 2 && args[0] == "wait":
		sigs := make(chan os.Signal, 4)
		signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
		ready(args[1], rank)
		fmt.Println("ready")
		select {
		case s := <-sigs:
			fmt.Println("got", s)
		case <-time.After(childPatience):
			fmt.Println("never signalled")
			return 98
		}
		// Say so if a second one comes (ooc train would die of it).
		for end := time.After(500 * time.Millisecond); ; {
			select {
			case s := <-sigs:
				fmt.Println("got", s)
			case <-end:
				return 1
			}
		}
	case len(args) >= 4 && args[0] == "fail":
		failing, _ := strconv.Atoi(args[1])
		code, _ := strconv.Atoi(args[2])
		dir := args[3]
		if rank == failing {
			for r := range size {
				for r != failing && !exists(filepath.Join(dir, fmt.Sprint("ready-", r))) {
					time.Sleep(10 * time.Millisecond)
				}
			}
			fmt.Println("failing with", args[2])
			if args[2] == "kill" {
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}
			return code
		}
		sigs := make(chan os.Signal, 1)
		if len(args) == 5 && args[4] == "stubborn" {
			signal.Ignore(syscall.SIGTERM)
		} else {
			signal.Notify(sigs, syscall.SIGTERM)
		}
		ready(dir, rank)
		select {
		case s := <-sigs:
			fmt.Println("stopped by", s)
			return 0
		case <-time.After(childPatience):
			fmt.Println("never stopped")
			return 98
		}
	}
	fmt.Fprintf(os.Stderr, "test-child: bad arguments %q\n", args)
	return 99
}

// childPatience bounds a stand-in rank's wait for a signal, so that a
// launcher that never sends one fails the test instead of hanging it.
const childPatience = 30 * time.Second

func ready(dir string, rank int) {
	os.WriteFile(filepath.Join(dir, fmt.Sprint("ready-", rank)), nil, 0o644)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// syncBuffer is a bytes.Buffer safe for the launcher's writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// launch runs "ooc launch ARGS" in this process, its ranks being this test
// binary as ooc, and returns its exit code and output.
func launch(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	t.Setenv(runAsOOC, "1")
	var stdout, stderr syncBuffer
	code := run(context.Background(), append([]string{"launch"}, args...), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// Each rank gets torchrun's environment, a shared master port and run id,
// and its lines come out whole behind "[rank R]", stdout to stdout and
// stderr to stderr.
func TestLaunchEnvironment(t *testing.T) {
	code, out, errs := launch(t, "-nproc", "3", "-master-port", "29123", "--", "test-child", "env")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	var runs []string
	for r := range 3 {
		re := regexp.MustCompile(fmt.Sprintf(`(?m)^\[rank %d\] rank=%d world=3 local=%d localworld=3 master=127\.0\.0\.1:29123 run=(launch-[0-9a-f]{16})$`, r, r, r))
		m := re.FindStringSubmatch(out)
		if m == nil {
			t.Errorf("no environment line for rank %d in:\n%s", r, out)
			continue
		}
		runs = append(runs, m[1])
		for _, want := range []string{fmt.Sprintf("[rank %d] no newline at the end\n", r)} {
			if !strings.Contains(out, want) {
				t.Errorf("stdout lacks %q:\n%s", want, out)
			}
		}
		if want := fmt.Sprintf("[rank %d] a line on stderr\n", r); !strings.Contains(errs, want) || strings.Contains(out, want) {
			t.Errorf("stderr lacks %q (or stdout has it):\n%s", want, errs)
		}
	}
	if len(runs) == 3 && (runs[0] != runs[1] || runs[1] != runs[2]) {
		t.Errorf("ranks got different run ids: %q", runs)
	}
	if n := strings.Count(out, "\n"); n != 6 {
		t.Errorf("%d lines on stdout, want 6:\n%s", n, out)
	}

	// Without -master-port, a free one, and another run id.
	code, out2, _ := launch(t, "-nproc", "1", "--", "test-child", "env")
	if code != 0 || !regexp.MustCompile(`master=127\.0\.0\.1:[1-9][0-9]* run=launch-`).MatchString(out2) || len(runs) > 0 && strings.Contains(out2, runs[0]) {
		t.Errorf("exit %d: %s", code, out2)
	}
}

// A rank that fails stops the others (SIGTERM; SIGKILL for those that ignore
// it, after -grace), and its exit status is launch's.
func TestLaunchFailure(t *testing.T) {
	// A child of a -race test binary sleeps a second before it exits
	// (GORACE's atexit_sleep_ms): the grace of ranks that stop is longer.
	for _, tc := range []struct {
		name     string
		stubborn bool
		grace    string
		code     string // rank 1's: a status, or "kill" (SIGKILL)
		want     int
		says     string
	}{
		{"others stop", false, "20s", "7", 7, "rank 1 exited with status 7"},
		{"others killed after the grace period", true, "1s", "7", 7, "rank 1 exited with status 7"},
		{"a rank killed by a signal", false, "20s", "kill", 128 + 9, "rank 1 was killed by signal 9 (killed)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"-nproc", "3", "-grace", tc.grace, "--", "test-child", "fail", "1", tc.code, t.TempDir()}
			if tc.stubborn {
				args = append(args, "stubborn")
			}
			start := time.Now()
			code, out, errs := launch(t, args...)
			took := time.Since(start)
			if code != tc.want || !strings.Contains(errs, "ooc launch: "+tc.says+": stopping the other ranks") ||
				!strings.Contains(errs, "ooc launch: "+tc.says+"\n") {
				t.Errorf("exit %d, want rank 1's %d\n%s\n%s", code, tc.want, out, errs)
			}
			for _, r := range []int{0, 2} {
				stopped := strings.Contains(out, fmt.Sprintf("[rank %d] stopped by terminated", r))
				killed := strings.Contains(errs, fmt.Sprintf("rank %d did not stop within %s: killing it", r, tc.grace))
				if stopped == tc.stubborn || killed != tc.stubborn {
					t.Errorf("rank %d: stopped %v, killed %v\n%s\n%s", r, stopped, killed, out, errs)
				}
			}
			if took > 30*time.Second {
				t.Errorf("took %v", took)
			}
		})
	}
}

// A signal to ooc launch reaches every rank once; the ranks' exit status
// (1, as ooc train's after an interrupt) is launch's.
func TestLaunchForwardsSignals(t *testing.T) {
	bin, err := os.Executable()
	if err != nil {
		t.Skip("cannot find the test binary to run as ooc:", err)
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := exec.Command(bin, "launch", "-nproc", "2", "--", "test-child", "wait", t.TempDir())
			cmd.Env = append(os.Environ(), runAsOOC+"=1")
			var stderr syncBuffer
			cmd.Stderr = &stderr
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			sc := bufio.NewScanner(stdout)
			var lines []string
			for n := 0; n < 2 && sc.Scan(); {
				lines = append(lines, sc.Text())
				if strings.HasSuffix(sc.Text(), "] ready") {
					n++
				}
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			for sc.Scan() {
				lines = append(lines, sc.Text())
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err = <-done:
			case <-time.After(time.Minute):
				t.Fatalf("ooc launch did not exit within a minute of %v", sig)
			}
			out := strings.Join(lines, "\n")
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
				t.Errorf("exit: %v, want 1\n%s\n%s", err, out, stderr.String())
			}
			for r := range 2 {
				// Once each: a second signal would kill ooc train mid-checkpoint.
				if n := strings.Count(out, fmt.Sprintf("[rank %d] got %v", r, sig)); n != 1 {
					t.Errorf("rank %d got %v %d times\n%s\n%s", r, sig, n, out, stderr.String())
				}
			}
			if !strings.Contains(stderr.String(), fmt.Sprintf("ooc launch: %v: passing it to the 2 running ranks", sig)) {
				t.Errorf("stderr:\n%s", stderr.String())
			}
		})
	}
}

// Bad command lines are usage errors (exit 2) that say what is wrong.
func TestLaunchUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--", "help"}, "-nproc 0: want at least 1"},
		{[]string{"-nproc", "2"}, "no command to run"},
		{[]string{"-nproc", "2", "--", "launch", "-nproc", "2"}, "cannot launch itself"},
		{[]string{"-nproc", "2", "-master-port", "70000", "--", "help"}, "-master-port 70000"},
		{[]string{"-nproc", "2", "-grace", "0s", "--", "help"}, "-grace 0s"},
	} {
		var stdout, stderr syncBuffer
		code := run(context.Background(), append([]string{"launch"}, tc.args...), &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("ooc launch %q: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}

// prefixWriter puts the prefix on whole lines however the writes split them,
// ends a last line that has no newline, and lets no line grow without bound.
func TestPrefixWriter(t *testing.T) {
	long := strings.Repeat("x", maxLine+1)
	for _, tc := range []struct {
		writes []string
		want   string
	}{
		{[]string{"a\nb\n"}, "[r] a\n[r] b\n"},
		{[]string{"a", "b\nc", "d\n"}, "[r] ab\n[r] cd\n"},
		{[]string{"no end"}, "[r] no end\n"},
		{[]string{"\n\n"}, "[r] \n[r] \n"},
		{[]string{long, "y\n"}, "[r] " + long + "\n[r] y\n"},
		{nil, ""},
	} {
		var mu sync.Mutex
		var b bytes.Buffer
		p := &prefixWriter{mu: &mu, w: &b, prefix: "[r] "}
		for _, w := range tc.writes {
			if n, err := p.Write([]byte(w)); n != len(w) || err != nil {
				t.Fatalf("Write(%q) = %d, %v", w, n, err)
			}
		}
		p.flush()
		if b.String() != tc.want {
			t.Errorf("writes %q: got %q, want %q", tc.writes, b.String(), tc.want)
		}
	}
}
