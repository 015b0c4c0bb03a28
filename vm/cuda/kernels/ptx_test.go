package kernels_test

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels/internal/build"
)

// TestPTXMatchesSources regenerates the PTX with clang and compares it with
// the committed kernels_sm60.ptx. Only regenerating needs clang; without it
// the test skips.
func TestPTXMatchesSources(t *testing.T) {
	clang, err := exec.LookPath("clang")
	if err != nil {
		t.Skip("clang not installed: the committed PTX is not rechecked against src/ (apt-get install -y clang)")
	}
	got, err := build.PTX(clang, "src")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(build.PTXFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale: run go generate ./vm/cuda/kernels/", build.PTXFile)
	}
}

// TestOpsHeader: src/ops.h is what the Go operator tables generate.
func TestOpsHeader(t *testing.T) {
	got, err := os.ReadFile("src/ops.h")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, kernels.OpsHeader()) {
		t.Fatal("src/ops.h differs from kernels.OpsHeader(): run go generate ./vm/cuda/kernels/")
	}
}

var (
	entryRe = regexp.MustCompile(`(?m)^\.visible \.entry (\w+)\(\n((?:\s*\.param[^\n]*\n)*)\)`)
	paramRe = regexp.MustCompile(`\.param \.(?:align \d+ )?\.?(\w+) \w+(?:\[(\d+)\])?`)
)

// TestPTXEntries checks the embedded PTX without clang: its target is Arch,
// it has exactly one entry per Spec, each with the parameter sizes of its
// Spec, calls no external function (no libdevice), and never fuses a
// multiply-add (the host build's rounding is the GPU's).
func TestPTXEntries(t *testing.T) {
	if !strings.Contains(kernels.PTX, ".target "+kernels.Arch+"\n") {
		t.Fatalf("PTX is not for %s", kernels.Arch)
	}
	for _, bad := range []string{".extern", "call.uni", "fma.rn", "div.approx", "sqrt.approx", "ex2.approx", "lg2.approx"} {
		if strings.Contains(kernels.PTX, bad) {
			t.Errorf("PTX contains %q", bad)
		}
	}
	entries := entryRe.FindAllStringSubmatch(kernels.PTX, -1)
	if len(entries) != len(kernels.Specs) {
		t.Errorf("PTX has %d entries, Specs %d", len(entries), len(kernels.Specs))
	}
	for _, e := range entries {
		s, ok := kernels.Lookup(e[1])
		if !ok {
			t.Errorf("PTX entry %s has no Spec", e[1])
			continue
		}
		params := paramRe.FindAllStringSubmatch(e[2], -1)
		if len(params) != len(s.Params) {
			t.Errorf("%s: %d PTX parameters, Spec %d", s.Name, len(params), len(s.Params))
			continue
		}
		for i, pm := range params {
			size := 0
			if pm[2] != "" {
				size, _ = strconv.Atoi(pm[2])
			} else {
				size, _ = strconv.Atoi(strings.TrimLeft(pm[1], "bfsu"))
				size /= 8
			}
			if size != s.Params[i].Type.Size() {
				t.Errorf("%s parameter %d (%s): %d bytes in PTX, %d in Spec", s.Name, i, s.Params[i].Name, size, s.Params[i].Type.Size())
			}
		}
	}
}
