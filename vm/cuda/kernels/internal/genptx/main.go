// Command genptx regenerates the committed kernel artefacts (go generate in
// vm/cuda/kernels): src/ops.h from the Go operator tables, then the PTX module
// from src/all.cu with clang (Debian's clang 14: apt-get install -y clang).
package main

import (
	"fmt"
	"os"
	"os/exec"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels/internal/build"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "genptx:", err)
		os.Exit(1)
	}
}

func run() error {
	if err := os.WriteFile("src/ops.h", kernels.OpsHeader(), 0o644); err != nil {
		return err
	}
	clang, err := exec.LookPath("clang")
	if err != nil {
		return fmt.Errorf("clang not found (apt-get install -y clang): %v", err)
	}
	ptx, err := build.PTX(clang, "src")
	if err != nil {
		return err
	}
	return os.WriteFile(build.PTXFile, ptx, 0o644)
}
