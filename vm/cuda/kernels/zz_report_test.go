package kernels_test

// This file sorts last so its tests run after every kernel test of the
// package: they read what the others recorded.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels/kernelstest"
)

// TestZSanitizers replays every launch the other tests made (the same
// arguments and input bytes) in the sanitizer harness: AddressSanitizer
// reports any read or write outside a buffer (each malloc'ed at exactly its
// size), UndefinedBehaviorSanitizer any undefined operation. Skipped when the
// compiler has no sanitizers, or when no kernel test ran before it.
func TestZSanitizers(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the sanitizer build and replay take a few seconds")
	}
	rep := replayFile()
	if ncalls == 0 {
		t.Skip("no launches recorded: run it with the kernel tests (go test ./vm/cuda/kernels/)")
	}
	harness := kernelstest.BuildSanitized(t)
	f := filepath.Join(t.TempDir(), "launches.bin")
	if err := os.WriteFile(f, rep, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(harness, f)
	cmd.Env = append(os.Environ(), "ASAN_OPTIONS=detect_leaks=0:detect_stack_use_after_return=0",
		"UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sanitizer replay of %d launches failed: %v\n%s", ncalls, err, out)
	}
	if strings.Contains(string(out), "runtime error") || strings.Contains(string(out), "Sanitizer") {
		t.Fatalf("sanitizer reports:\n%s", out)
	}
	t.Logf("%s", strings.TrimSpace(string(out)))
}

// TestZAccuracyReport runs last (by name) and prints, with -v, the worst
// error seen per kernel and whether every comparison was bit-exact.
func TestZAccuracyReport(t *testing.T) {
	if !testing.Verbose() {
		t.Skip("prints with -v")
	}
	worstMu.Lock()
	defer worstMu.Unlock()
	names := make([]string, 0, len(worst))
	for n := range worst {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		ex := "bit-exact"
		if inexact[n] {
			ex = fmt.Sprintf("max rel err %.2g", worst[n])
		}
		t.Logf("%-20s %s", n, ex)
	}
	for _, s := range kernels.Specs {
		if launched[s.Name] == 0 {
			t.Logf("%-20s NOT LAUNCHED", s.Name)
		}
	}
}

var _ = fmt.Sprint
