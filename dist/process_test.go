package dist

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// childEnv makes the test binary a rank (TestMain): it resolves its world
// from the environment, as a training process does, shares, and prints the
// bytes it got in hex, or its error.
const childEnv = "OOC_DIST_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(child())
	}
	os.Exit(m.Run())
}

func child() int {
	w, err := FromEnv(Flags{Timeout: 30 * time.Second})
	if err == nil {
		var b []byte
		b, err = Share(context.Background(), w, func() ([]byte, error) {
			return []byte(fmt.Sprintf("id of %s made by pid %d", w.RunID, os.Getpid())), nil
		})
		if err == nil {
			fmt.Println(hex.EncodeToString(b))
			return 0
		}
	}
	fmt.Fprintln(os.Stderr, err)
	return 3
}

// startRanks starts the test binary once per environment, each with the
// torchrun variables of its rank added.
func startRanks(t *testing.T, envs [][]string) []*exec.Cmd {
	t.Helper()
	bin, err := os.Executable()
	if err != nil {
		t.Skip("cannot find the test binary to run as a rank:", err)
	}
	var cmds []*exec.Cmd
	for _, env := range envs {
		c := exec.Command(bin, "-test.run=^$")
		c.Env = append(append(os.Environ(), childEnv+"=1"), env...)
		c.Stdout, c.Stderr = new(bytes.Buffer), new(bytes.Buffer)
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, c)
	}
	t.Cleanup(func() {
		for _, c := range cmds {
			c.Process.Kill()
		}
	})
	return cmds
}

// waitRanks waits for each process and returns its exit code, stdout and
// stderr.
func waitRanks(t *testing.T, cmds []*exec.Cmd) (codes []int, outs, errs []string) {
	t.Helper()
	for _, c := range cmds {
		c.Wait()
		codes = append(codes, c.ProcessState.ExitCode())
		outs = append(outs, strings.TrimSpace(c.Stdout.(*bytes.Buffer).String()))
		errs = append(errs, strings.TrimSpace(c.Stderr.(*bytes.Buffer).String()))
	}
	return codes, outs, errs
}

func rankEnv(rank, size int, extra ...string) []string {
	return append([]string{fmt.Sprintf("RANK=%d", rank), fmt.Sprintf("WORLD_SIZE=%d", size), fmt.Sprintf("LOCAL_RANK=%d", rank)}, extra...)
}

// Ranks as real processes meet over TCP on loopback and through a file, and
// all hold rank 0's bytes.
func TestShareProcesses(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int
		env  func(t *testing.T) []string
	}{
		{"tcp", 3, func(t *testing.T) []string {
			host, port, _ := strings.Cut(freeMaster(t), ":")
			return []string{"MASTER_ADDR=" + host, "MASTER_PORT=" + port, "OOC_RUN_ID=p1"}
		}},
		{"file", 2, func(t *testing.T) []string {
			return []string{"OOC_RENDEZVOUS_FILE=" + filepath.Join(t.TempDir(), "id"), "OOC_RUN_ID=p2"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			common := tc.env(t)
			var envs [][]string
			// The last rank first: the others wait for rank 0.
			for r := tc.size - 1; r >= 0; r-- {
				envs = append(envs, rankEnv(r, tc.size, common...))
			}
			codes, outs, errs := waitRanks(t, startRanks(t, envs))
			for i := range codes {
				if codes[i] != 0 || outs[i] == "" || outs[i] != outs[0] {
					t.Errorf("rank %d: exit %d, out %q, stderr %q", tc.size-1-i, codes[i], outs[i], errs[i])
				}
			}
			if b, _ := hex.DecodeString(outs[0]); !strings.HasPrefix(string(b), "id of p") {
				t.Errorf("shared %q", b)
			}
		})
	}
}

// Two processes that both say they are rank 1 are refused by rank 0, which
// says so, and every process exits with an error instead of hanging.
func TestShareProcessesDuplicateRank(t *testing.T) {
	host, port, _ := strings.Cut(freeMaster(t), ":")
	common := []string{"MASTER_ADDR=" + host, "MASTER_PORT=" + port, "OOC_RUN_ID=dup"}
	start := time.Now()
	codes, outs, errs := waitRanks(t, startRanks(t, [][]string{rankEnv(0, 3, common...), rankEnv(1, 3, common...), rankEnv(1, 3, common...)}))
	refused := 0
	for i := range codes {
		if codes[i] == 0 {
			t.Errorf("process %d succeeded: %q", i, outs[i])
		}
		if strings.Contains(errs[i], "rank 1 checked in twice") {
			refused++
		}
	}
	// Rank 0 and the second rank 1 hear why; the first rank 1 does too, as
	// one that checked in.
	if refused != 3 || time.Since(start) > 20*time.Second {
		t.Errorf("after %v: %q", time.Since(start), errs)
	}
}
