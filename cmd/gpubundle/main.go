// Command gpubundle builds the GPU bundle: one folder that a bare machine with an NVIDIA GPU
// (no Go, no network, no module cache) runs as the whole acceptance of issue 25.
//
// Usage, from the repository:
//
//	go run ./cmd/gpubundle .gpu     # .gpu is ignored by git, so the device tool can carry it
//	.gpu/run.sh                     # on the GPU machine: writes at most 8 files into $OUT (default ./out)
//
// It puts into DIR:
//
//	ooc               the command, built with CGO_ENABLED=0 for linux/amd64 (-trimpath, -ldflags=-s -w): it
//	                  reaches libcuda, cuBLAS and NCCL through purego's dlopen, so it needs only the
//	                  machine's libc and dynamic loader, and no C toolchain where it is built
//	run.sh            the acceptance run: environment, ooc doctor, the ResNet-50 sweep under 16 GiB,
//	                  PyTorch side by side, summary.md (run.sh's header says what and how long)
//	torch_resnet50.py PyTorch's side (its docstring says what it measures)
//	VERSION           the commit (and whether the tree had changes), the date, the Go version
//
// run.sh and torch_resnet50.py are this folder's files, embedded. The whole of DIR must stay under
// 40 MiB (what the device tool carries is limited); gpubundle checks it. DIR, when inside the
// repository, must be ignored by git: the device tool carries only ignored folders.
package main

import (
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

var (
	//go:embed run.sh
	runScript []byte
	//go:embed torch_resnet50.py
	torchScript []byte
)

// MaxBytes is the most the bundle may hold.
const MaxBytes = 40 << 20

// oocPackage is the command the bundle carries.
const oocPackage = "github.com/gorgonia-ooc/outofcore/cmd/ooc"

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "gpubundle:", err)
			os.Exit(1)
		}
	}
}

// run builds the bundle named by args into its folder.
func run(args []string, stdout, stderr io.Writer) error {
	flags := flag.NewFlagSet("gpubundle", flag.ContinueOnError)
	flags.SetOutput(stderr)
	goTool := flags.String("go", "go", "the Go command that builds ooc")
	flags.Usage = func() {
		fmt.Fprintf(flags.Output(), "usage: gpubundle [-go GO] DIR\n\nBuilds the GPU bundle into DIR (e.g. .gpu): ooc for linux/amd64 without cgo, run.sh,\n"+
			"torch_resnet50.py and VERSION. On the GPU machine: DIR/run.sh.\n\nflags:\n")
		flags.PrintDefaults()
	}
	if err := flags.Parse(args); err != nil {
		return err
	}
	if flags.NArg() != 1 {
		flags.Usage()
		return fmt.Errorf("want one argument, the folder to build into; got %d", flags.NArg())
	}
	dir := flags.Arg(0)
	gobin, err := exec.LookPath(*goTool)
	if err != nil {
		return fmt.Errorf("%s not found: the bundle's ooc is built with the Go toolchain (%v)", *goTool, err)
	}
	root, err := moduleRoot(gobin)
	if err != nil {
		return err
	}
	if err := checkDir(dir, root); err != nil {
		return err
	}
	if err := build(gobin, root, filepath.Join(dir, "ooc")); err != nil {
		return err
	}
	if err := writeFiles(dir, root, gobin); err != nil {
		return err
	}
	size, err := checkSize(dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "gpubundle: %s holds %.1f MiB (at most %d MiB): ooc, run.sh, torch_resnet50.py, VERSION\n"+
		"on the GPU machine: %s/run.sh (writes into $OUT, default ./out)\n", dir, float64(size)/(1<<20), MaxBytes>>20, dir)
	return nil
}

// moduleRoot is the folder of this repository's go.mod, where ooc is built.
func moduleRoot(gobin string) (string, error) {
	out, err := exec.Command(gobin, "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %v", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside a Go module: run gpubundle from the outofcore repository (go run ./cmd/gpubundle DIR)")
	}
	return filepath.Dir(mod), nil
}

// checkDir refuses a DIR that is a file, and one inside the repository that git does not
// ignore (the device tool would not carry it, and its 25 MiB binary would show as untracked).
func checkDir(dir, root string) error {
	if st, err := os.Stat(dir); err == nil && !st.IsDir() {
		return fmt.Errorf("%s is a file, not a folder: name a folder to build the bundle into", dir)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(root, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return nil // outside the repository
	}
	if rel == "." {
		return fmt.Errorf("%s is the repository itself: name an ignored folder in it, such as .gpu", dir)
	}
	git, err := exec.LookPath("git")
	if err != nil {
		return nil // no git to ask: nothing to check against
	}
	cmd := exec.Command(git, "check-ignore", "-q", "--no-index", rel+"/")
	cmd.Dir = root
	switch err := cmd.Run(); {
	case err == nil:
		return nil
	case exitCode(err) == 1:
		return fmt.Errorf("%s is inside the repository but not ignored by git: the device tool carries only ignored folders; use .gpu (in .gitignore) or ignore %s", dir, rel)
	}
	return nil // not a git work tree, or git failed: nothing to check against
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// build compiles ooc for linux/amd64 without cgo into out.
func build(gobin, root, out string) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	abs, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	cmd := exec.Command(gobin, "build", "-trimpath", "-ldflags=-s -w", "-o", abs, oocPackage)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building ooc (CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath): %v\n%s", err, msg)
	}
	return nil
}

// writeFiles writes the scripts and VERSION beside ooc.
func writeFiles(dir, root, gobin string) error {
	for _, f := range []struct {
		name string
		data []byte
		mode os.FileMode
	}{
		{"run.sh", runScript, 0o755},
		{"torch_resnet50.py", torchScript, 0o644},
		{"VERSION", []byte(version(root, gobin)), 0o644},
	} {
		path := filepath.Join(dir, f.name)
		if err := os.WriteFile(path, f.data, f.mode); err != nil {
			return err
		}
		if err := os.Chmod(path, f.mode); err != nil { // WriteFile keeps an existing file's mode
			return err
		}
	}
	return nil
}

// version is VERSION's text: the commit, whether the work tree had changes, the date and the Go.
func version(root, gobin string) string {
	commit, dirty := "unknown (no git)", ""
	if out, err := gitOut(root, "rev-parse", "HEAD"); err == nil {
		commit = out
		if st, err := gitOut(root, "status", "--porcelain", "--untracked-files=no"); err == nil && st != "" {
			dirty = " with uncommitted changes"
		}
	}
	gover, _ := exec.Command(gobin, "env", "GOVERSION").Output()
	return fmt.Sprintf("commit %s%s\nbuilt %s\n%s, linux/amd64, CGO_ENABLED=0\n",
		commit, dirty, time.Now().UTC().Format(time.RFC3339), strings.TrimSpace(string(gover)))
}

func gitOut(root string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = root
	out, err := cmd.Output()
	return strings.TrimSpace(string(out)), err
}

// checkSize is the bytes under dir, an error past MaxBytes.
func checkSize(dir string) (int64, error) {
	var size int64
	err := filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		info, err := e.Info()
		if err == nil {
			size += info.Size()
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	if size > MaxBytes {
		return size, fmt.Errorf("%s holds %.1f MiB, over the bundle's %d MiB: remove what else is in it, or shrink ooc", dir, float64(size)/(1<<20), MaxBytes>>20)
	}
	return size, nil
}
