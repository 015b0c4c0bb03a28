// Package fakecuda builds and controls a fake CUDA driver for tests: a small C library
// (csrc/; fakecuda.h says how it works) exporting the driver-API symbols package vm/cuda
// binds, compiled by the system C compiler at test time, so the real binding code runs end
// to end on machines with no GPU. What it proves and what it cannot is said in package cuda's documentation.
// Beside the driver it builds a fake cuBLAS and a fake NCCL, and Install puts all three
// into a tree the ways a machine has them (a toolkit, pip's wheels), for the tests of
// package cuda's library search.
package fakecuda

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

//go:embed csrc/*.h csrc/*.c
var sources embed.FS

// LibraryName is the file name of a built fake driver, the real driver's soname.
const LibraryName = "libcuda.so.1"

// Build compiles the fake driver and returns the path of a private copy of it in
// t.TempDir(). A library loaded from a path of its own is a separate instance with its own
// state (devices, knobs, memory), so every call gives a fresh driver. The compiled library
// is cached by the hash of its source and compiler, in the user cache directory, so only
// the first build of a source pays for the compiler. Build skips the test, saying what to
// install, when there is no C compiler.
func Build(t testing.TB) string {
	t.Helper()
	files := map[string][]byte{}
	err := fs.WalkDir(sources, "csrc", func(path string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			files[e.Name()], err = sources.ReadFile(path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	built := compile(t, "driver", files)
	lib := filepath.Join(t.TempDir(), LibraryName)
	copyFile(t, built, lib)
	return lib
}

// BuildKernels compiles C source into a shared library of host "kernels", for the
// environment variable OOC_FAKECUDA_KERNELS: the fake's cuModuleGetFunction(mod, "K") looks
// up ooc_host_K in it, with the signature
//
//	void ooc_host_K(const unsigned int grid[3], const unsigned int block[3],
//	                unsigned int sharedBytes, void **params)
//
// where params[i] points to argument i, as cuLaunchKernel's kernelParams.
func BuildKernels(t testing.TB, csource string) string {
	t.Helper()
	return compile(t, "kernels", map[string][]byte{"kernels.c": []byte(csource)})
}

//go:embed blas/fakecublas.c
var blasSource []byte

//go:embed blas/fakecublasLt.c
var blasLtSource []byte

// BLASName is the file name of a built fake cuBLAS, the real CUDA 13 library's soname.
const BLASName = "libcublas.so.13"

// BLASLtName is the file name of the fake libcublasLt that Install puts beside the fake
// cuBLAS, which needs it as the real one needs its own.
const BLASLtName = "libcublasLt.so.13"

// BuildBLAS compiles the fake cuBLAS (blas/fakecublas.c says what it does) and returns
// its path, named libcublas.so.13, for $OOC_CUBLAS_LIBRARY. It synchronises streams
// through the fake driver whose path is in $OOC_FAKECUBLAS_DRIVER: set both (t.Setenv).
// It skips the test, saying what to install, when there is no C compiler.
func BuildBLAS(t testing.TB) string {
	t.Helper()
	built := compile(t, "cublas", map[string][]byte{"fakecublas.c": blasSource})
	lib := filepath.Join(t.TempDir(), BLASName)
	copyFile(t, built, lib)
	return lib
}

// buildBLASWithLt compiles the fake libcublasLt.so.13 and a fake cuBLAS that needs it
// (DT_NEEDED, no RUNPATH), and returns both.
func buildBLASWithLt(t testing.TB) (blas, lt string) {
	t.Helper()
	lt = compile(t, "cublasLt", map[string][]byte{"fakecublasLt.c": blasLtSource}, "-Wl,-soname,"+BLASLtName)
	blas = compile(t, "cublas-lt", map[string][]byte{"fakecublas.c": blasSource}, "-DFAKECUBLAS_LT", lt)
	return blas, lt
}

//go:embed nccl/fakenccl.c
var ncclSource []byte

// NCCLName is the file name of a built fake NCCL, the real library's soname.
const NCCLName = "libnccl.so.2"

// BuildNCCL compiles the fake NCCL (nccl/fakenccl.c says what it does and proves) and
// returns the path of a private copy, named libnccl.so.2, for $OOC_NCCL_LIBRARY: every
// call gives a fresh instance. Ranks meet through POSIX shared memory named by their
// unique id, so ranks in other processes that load a copy of it (each with its own fake
// driver) join the same communicator. It reaches the fake driver whose path is in
// $OOC_FAKENCCL_DRIVER (for contexts and streams): set both (t.Setenv). It skips the test,
// saying what to install, when there is no C compiler.
func BuildNCCL(t testing.TB) string {
	t.Helper()
	built := compile(t, "nccl", map[string][]byte{"fakenccl.c": ncclSource}, "-lrt") // shm_open, in librt before glibc 2.34
	lib := filepath.Join(t.TempDir(), NCCLName)
	copyFile(t, built, lib)
	return lib
}

var (
	builtMu sync.Mutex
	built   = map[[32]byte]string{}
)

// compile builds C sources (by file name) into a shared library, once per process and
// sources; extra are more arguments for the compiler (defines, libraries to link).
func compile(t testing.TB, what string, files map[string][]byte, extra ...string) string {
	t.Helper()
	cc := compiler()
	if cc == "" {
		t.Skipf("no C compiler ($CC, cc, gcc or clang) on PATH: the fake CUDA driver is built from C at test time; install one (e.g. apt-get install gcc) to run this test")
	}
	names := slices.Sorted(maps.Keys(files))
	version, _ := exec.Command(cc, "--version").Output()
	// -Bsymbolic binds the library's references to its own definitions, so that every
	// copy loaded from its own path keeps its own state.
	flags := []string{"-shared", "-fPIC", "-O2", "-Wall", "-pthread", "-ffp-contract=off", "-Wl,-Bsymbolic"}
	h := sha256.New()
	for _, part := range [][]byte{[]byte(cc), version, []byte(fmt.Sprint(flags)), []byte(fmt.Sprint(extra))} {
		h.Write(append(part, 0))
	}
	for _, n := range names {
		h.Write(append([]byte(n), 0))
		h.Write(append(files[n], 0))
	}
	var key [32]byte
	copy(key[:], h.Sum(nil))
	builtMu.Lock()
	defer builtMu.Unlock()
	if p, ok := built[key]; ok {
		return p
	}
	dir, persistent := cacheDir(t, key)
	out := filepath.Join(dir, what+".so")
	if _, err := os.Stat(out); err != nil {
		src := t.TempDir()
		args := append([]string{}, flags...)
		for _, n := range names {
			if err := os.WriteFile(filepath.Join(src, n), files[n], 0o644); err != nil {
				t.Fatal(err)
			}
			if strings.HasSuffix(n, ".c") {
				args = append(args, filepath.Join(src, n))
			}
		}
		tmp, err := os.CreateTemp(dir, what+"-*.so")
		if err != nil {
			t.Fatal(err)
		}
		_ = tmp.Close()
		// extra after the sources: a library linked before the objects that use it is
		// dropped where the linker defaults to --as-needed (Ubuntu, Debian's gcc).
		args = append(args, extra...)
		args = append(args, "-o", tmp.Name(), "-ldl", "-lm")
		if msg, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
			_ = os.Remove(tmp.Name())
			t.Fatalf("building the fake CUDA %s with %s: %v\n%s", what, cc, err, msg)
		}
		// Rename is atomic: test processes building the same sources at once all end up
		// with a complete library.
		if err := os.Rename(tmp.Name(), out); err != nil {
			t.Fatal(err)
		}
	}
	if persistent {
		built[key] = out
	}
	return out
}

func compiler() string {
	for _, c := range []string{os.Getenv("CC"), "cc", "gcc", "clang"} {
		if c == "" {
			continue
		}
		if p, err := exec.LookPath(c); err == nil {
			return p
		}
	}
	return ""
}

// cacheDir is where a build of the given key lives: the user cache directory (persistent),
// or, when that is not writable, a directory of this test.
func cacheDir(t testing.TB, key [32]byte) (string, bool) {
	if base, err := os.UserCacheDir(); err == nil {
		dir := filepath.Join(base, "ooc-fakecuda", hex.EncodeToString(key[:8]))
		if os.MkdirAll(dir, 0o755) == nil {
			return dir, true
		}
	}
	return t.TempDir(), false
}

func copyFile(t testing.TB, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
}
