package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Every command checks all of its input before any work and exits non-zero
// on anything invalid, naming the problem; the checks are quick because no
// model is trained, planned or swept first.
func TestInvalidInput(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "no", "such")
	small := []string{"-model", "smallcnn", "-image", "16", "-classes", "4", "-q"}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"sweep", "-device", "sim:nonexistent"}, 2, "-device sim:nonexistent"},
		{[]string{"sweep", "-device", "gpu"}, 2, "-device gpu"},
		{[]string{"sweep", "-budget", "150%"}, 2, "a sweep's -budget is the device's memory in bytes"},
		{[]string{"sweep", "-budget", "lots"}, 2, `"lots" is not a byte size`},
		{[]string{"sweep", "-batches", "16,,64"}, 2, `-batches "16,,64": an empty item`},
		{[]string{"sweep", "-batches", "16,0"}, 2, `"0" is not a positive integer`},
		{[]string{"sweep", "-schedulers", "window,fifo"}, 2, `unknown scheduler "fifo"`},
		{[]string{"sweep", "-allocators", "slab"}, 2, "slab"},
		{[]string{"sweep", "-max-batch", "0"}, 2, "-max-batch 0: want a positive batch size"},
		{[]string{"gpu-summary"}, 2, "-dir: the folder run.sh wrote is required"},
		{[]string{"gpu-summary", "-dir", dir, "-parts", "env:0"}, 2, `-parts: part "env:0": want name:exit:seconds`},
		{[]string{"gpu-summary", "-dir", missing}, 2, "no such file"},
		{[]string{"sweep", "-time-limit", "-1s"}, 2, "-time-limit -1s"},
		{[]string{"sweep", "-time-limit", "soon"}, 2, "-time-limit"},
		{[]string{"sweep", "-steps", "0"}, 2, "-steps 0: must be positive"},
		{[]string{"sweep", "-chunk", "0"}, 2, "-chunk 0"},
		{[]string{"sweep", "-model", "resnet9000"}, 2, `-model "resnet9000": unknown model`},
		{[]string{"sweep", "-plot", filepath.Join(dir, "f.bmp")}, 2, `unknown plot format ".bmp"`},
		{[]string{"sweep", "-plot-speed", filepath.Join(dir, "f")}, 2, `-plot-speed`},
		{[]string{"sweep", "-json", filepath.Join(missing, "r.json")}, 2, "does not exist"},
		{[]string{"sweep", "extra"}, 2, "unexpected arguments"},
		{append([]string{"sweep", "-batches", "4", "-budget", "1B", "-schedulers", "baseline,window"}, small...), 1, "every point of the sweep failed"},
		{[]string{"plan", "-plot", "m"}, 2, `-plot m: unknown plot format ""`},
		{[]string{"plan", "-scheduler", "fifo"}, 2, `unknown scheduler "fifo"`},
		{[]string{"plan", "-device", "sim:nonexistent"}, 2, "-device sim:nonexistent"},
		{[]string{"plan", "-batch", "0"}, 2, "-batch 0: must be positive"},
		{[]string{"plan", "-budget", "0%"}, 2, "positive percentage"},
		{[]string{"compare", "-budgets", "10%,,20%"}, 2, "an empty item"},
		{[]string{"compare", "-budgets", "150%"}, 2, "not a percentage from 0% to 100%"},
		{[]string{"compare", "-schedulers", "window,fifo"}, 2, `unknown scheduler "fifo"`},
		{[]string{"compare", "-device", "cpu"}, 2, "needs a simulated device"},
		{[]string{"dqn-train"}, 2, "-o: the weights file to write is required"},
		{[]string{"dqn-train", "-o", filepath.Join(dir, "w"), "-episodes", "0"}, 2, "-episodes 0"},
		{[]string{"dqn-train", "-o", filepath.Join(dir, "w"), "-device", "cpu"}, 2, "use sim:PROFILE"},
		{[]string{"dqn-train", "-o", filepath.Join(dir, "w"), "-from", filepath.Join(missing, "w")}, 1, "no such file"},
		{[]string{"compare", "-device", "sim:nonexistent"}, 2, "-device sim:nonexistent"},
		{[]string{"compare", "-plot", filepath.Join(missing, "c.svg")}, 2, "does not exist"},
		{[]string{"train", "-plot", filepath.Join(dir, "p.bmp")}, 2, `unknown plot format ".bmp"`},
		{[]string{"train", "-history", filepath.Join(missing, "h.json")}, 2, "-history"},
		{[]string{"train", "-record-profile", dir}, 2, "is a directory"},
		{[]string{"train", "-device", "sim:v100-pcie"}, 2, "this command runs real steps"},
		{[]string{"train", "-device", "gpu"}, 2, "-device gpu"},
		{[]string{"train", "-budget", "-5%"}, 2, "positive percentage"},
		{[]string{"eval", "-checkpoint", "c", "-device", "sim:nonexistent"}, 2, "-device sim:nonexistent"},
		{[]string{"plan", "-h"}, 0, "usage: ooc plan"},
		{[]string{"compare", "-h"}, 0, "usage: ooc compare"},
		{[]string{"sweep", "-h"}, 0, "usage: ooc sweep"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			start := time.Now()
			code := run(context.Background(), tc.args, &stdout, &stderr)
			out := stdout.String() + stderr.String()
			if code != tc.code || !strings.Contains(out, tc.want) {
				t.Errorf("exit %d, output:\n%s\nwant exit %d and %q", code, out, tc.code, tc.want)
			}
			if tc.code == 2 && stdout.Len() > 0 {
				t.Errorf("work was done before the input was refused:\n%s", stdout.String())
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Logf("took %v", d)
			}
		})
	}
}

// A sweep whose points all fail for one reason says it once, prints no
// table, and the search's per-budget failures appear only with -v.
func TestSweepAllFailedAndVerbose(t *testing.T) {
	args := []string{"sweep", "-model", "smallcnn", "-image", "16", "-classes", "4", "-batches", "4,8", "-budget", "1KiB", "-schedulers", "window"}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), args, &stdout, &stderr); code != 1 {
		t.Fatalf("exit %d", code)
	}
	quiet := strings.Count(stderr.String(), "\n")
	if stdout.Len() != 0 || strings.Count(stderr.String(), "every point of the sweep failed") != 1 || quiet != 3 {
		t.Errorf("stdout %q; stderr (%d lines):\n%s", stdout.String(), quiet, stderr.String())
	}
	stderr.Reset()
	run(context.Background(), append(args, "-v"), &stdout, &stderr)
	if n := strings.Count(stderr.String(), "\n"); n <= quiet || !strings.Contains(stderr.String(), "  budget ") {
		t.Errorf("-v logged %d lines:\n%s", n, stderr.String())
	}
}
