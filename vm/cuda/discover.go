package cuda

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ebitengine/purego"
)

// A Search says where Open, OpenBLAS and NewNCCL look for libcuda, cuBLAS and NCCL when
// no environment override names the library. In order:
//
//  1. the override ($OOC_CUDA_LIBRARY, $OOC_CUBLAS_LIBRARY, $OOC_NCCL_LIBRARY): when set,
//     it is the only place tried;
//  2. each soname through the dynamic loader's own search (LD_LIBRARY_PATH, ld.so.cache);
//  3. $CUDA_HOME/lib64, $CUDA_HOME/lib, $CUDA_PATH/lib64 and $CUDA_PATH/lib;
//  4. cuda*/lib64 under each of Roots (/usr/local), newest version first: cuda-13.0
//     before cuda-12.4 before cuda;
//  5. nvidia/*/lib and nvidia/*/*/lib under the site-packages of Python, where pip's
//     CUDA wheels put them (CUDA 13's in nvidia/cu13/lib, NCCL's in nvidia/nccl/lib,
//     CUDA 12's in nvidia/cublas/lib): a machine with PyTorch often has cuBLAS nowhere else.
//
// Within a place the sonames go newest first (libcublas.so.13, .12, .11). A directory
// named stubs is never searched: the toolkit's stub libcuda links but runs nothing.
// A library found but refused (too old, lacking a function) does not stop the search;
// when nothing loads, the error lists every place tried and why each candidate was
// refused, and says what to install or set.
type Search struct {
	// Getenv reads the overrides and $CUDA_HOME / $CUDA_PATH; nil reads nothing.
	Getenv func(string) string
	// Loader tries the bare sonames through the dynamic loader first.
	Loader bool
	// Roots are directories whose cuda and cuda-X.Y children are CUDA toolkits.
	Roots []string
	// Python is the interpreter asked for its site-packages, looked up on $PATH; ""
	// asks none. A missing interpreter is not an error.
	Python string
	// PythonTimeout bounds that question (0: DefaultPythonTimeout).
	PythonTimeout time.Duration
}

// DefaultPythonTimeout bounds the question to Python for its site-packages.
const DefaultPythonTimeout = 5 * time.Second

// DefaultSearch is the search Open, OpenBLAS and NewNCCL use unless told otherwise
// (WithSearch): the process environment, the loader, /usr/local and python3.
func DefaultSearch() Search {
	return Search{Getenv: os.Getenv, Loader: true, Roots: []string{"/usr/local"}, Python: "python3"}
}

// A library is one of the libraries this package loads.
type library struct {
	what    string   // as errors name it
	env     string   // its override
	names   []string // its sonames, newest first
	install string   // what to do when it is nowhere
}

// blasLibrary is cuBLAS, with BLASLibraries as they are now.
func blasLibrary() library {
	return library{what: "cuBLAS", env: BLASLibraryEnv, names: BLASLibraries,
		install: "install cuBLAS (the CUDA toolkit, or pip install nvidia-cublas for CUDA 13, nvidia-cublas-cu12 for 12), " +
			"or set $" + BLASLibraryEnv + " to its path"}
}

// The other libraries this package looks for.
var (
	driverLibrary = library{what: "the NVIDIA driver's libcuda", env: LibraryEnv, names: []string{DefaultLibrary},
		install: "install the NVIDIA driver (it puts libcuda.so.1 on the loader's path), or set $" + LibraryEnv + " to its path"}
	ncclLibrary = library{what: "NCCL", env: NCCLLibraryEnv, names: []string{NCCLLibrary},
		install: "install NCCL 2.23 or newer (apt libnccl2, or pip install nvidia-nccl-cu13), or set $" + NCCLLibraryEnv + " to its path"}
)

// errNotThere marks a load that failed because the file is not there, as opposed to a
// library found and refused: the search goes on quietly past it.
var errNotThere = errors.New("not there")

// notThere is a loader's error that is errNotThere, with the loader's words.
type notThere struct{ error }

func (notThere) Is(target error) bool { return target == errNotThere }

// find calls load on each candidate for lib, in the search's order, until one succeeds,
// and returns the path it loaded. load wraps errNotThere when a bare soname is not on the
// loader's path. notFound is the sentinel the error wraps when nothing was there at all.
func (s Search) find(lib library, notFound error, load func(path string) error) (string, error) {
	if p := s.getenv(lib.env); p != "" {
		// The override wins, and is the only place tried: a user who names a library
		// means that one, and its own error says what is wrong with it.
		return p, load(p)
	}
	var tried []string
	var refused []error
	try := func(p string) bool {
		err := load(p)
		if err == nil {
			return true
		}
		if !errors.Is(err, errNotThere) {
			refused = append(refused, err)
		}
		return false
	}
	tried = append(tried, "$"+lib.env+" (unset)")
	if s.Loader {
		for _, n := range lib.names {
			if try(n) {
				return n, nil
			}
		}
		tried = append(tried, "the loader's path ("+strings.Join(lib.names, ", ")+")")
	}
	seen := map[string]bool{} // real paths: /usr/local/cuda is often a link to cuda-13.0
	for _, place := range s.places() {
		dirs, note := place.dirs()
		for _, n := range lib.names {
			for _, d := range dirs {
				p := filepath.Join(d, n)
				real, err := filepath.EvalSymlinks(p)
				if fi, serr := os.Stat(p); err != nil || serr != nil || fi.IsDir() || seen[real] {
					continue
				}
				seen[real] = true
				if try(p) {
					return p, nil
				}
			}
		}
		tried = append(tried, place.name+" ("+note+")")
	}
	msg := fmt.Sprintf("tried %s; %s", strings.Join(tried, ", "), lib.install)
	if len(refused) > 0 {
		// What was found and refused says more than the list of places: its errors
		// come first, and carry their own sentinels (ErrDriverTooOld, ...).
		return "", fmt.Errorf("%w\n(%s found nowhere else: %s)", errors.Join(refused...), lib.what, msg)
	}
	return "", fmt.Errorf("cuda: %w: %s", notFound, msg)
}

func (s Search) getenv(k string) string {
	if s.Getenv == nil {
		return ""
	}
	return s.Getenv(k)
}

// A place is one step of the search after the loader: a name for errors, and the
// directories it holds with a note on what was there.
type place struct {
	name string
	dirs func() (dirs []string, note string)
}

func (s Search) places() []place {
	var ps []place
	for _, env := range []string{"CUDA_HOME", "CUDA_PATH"} {
		ps = append(ps, place{"$" + env, func() ([]string, string) {
			root := s.getenv(env)
			if root == "" {
				return nil, "unset"
			}
			dirs := []string{filepath.Join(root, "lib64"), filepath.Join(root, "lib")}
			return dirs, strings.Join(dirs, ", ")
		}})
	}
	for _, root := range s.Roots {
		ps = append(ps, place{filepath.Join(root, "cuda*", "lib64"), func() ([]string, string) {
			dirs := toolkitDirs(root)
			if len(dirs) == 0 {
				return nil, "no toolkit"
			}
			return dirs, strings.Join(dirs, ", ")
		}})
	}
	if s.Python != "" {
		ps = append(ps, place{s.Python + "'s site-packages nvidia/*/lib", func() ([]string, string) {
			sp, err := sitePackages(s.Python, s.PythonTimeout)
			if err != nil {
				return nil, err.Error()
			}
			var dirs []string
			for _, d := range sp {
				for _, pat := range []string{"nvidia/*/lib", "nvidia/*/*/lib"} {
					m, _ := filepath.Glob(filepath.Join(d, pat))
					dirs = append(dirs, m...)
				}
			}
			return withoutStubs(dirs), "in " + strings.Join(sp, ", ")
		}})
	}
	return ps
}

// toolkitDirs lists root/cuda*/lib64 for the toolkits under root, newest version first
// (numerically: cuda-12.10 is newer than cuda-12.4), the unversioned cuda last.
func toolkitDirs(root string) []string {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil
	}
	type kit struct {
		dir     string
		version []int // nil: unversioned
	}
	var kits []kit
	for _, e := range entries {
		name := e.Name()
		v, ok := toolkitVersion(name)
		if !ok {
			continue
		}
		dir := filepath.Join(root, name, "lib64")
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
			kits = append(kits, kit{dir, v})
		}
	}
	slices.SortStableFunc(kits, func(a, b kit) int { return slices.Compare(b.version, a.version) })
	dirs := make([]string, len(kits))
	for i, k := range kits {
		dirs[i] = k.dir
	}
	return withoutStubs(dirs)
}

// toolkitVersion reads a toolkit directory's name: cuda is unversioned (nil), cuda-13.0 is
// [13 0]; anything else (cuda-samples) is not a toolkit.
func toolkitVersion(name string) ([]int, bool) {
	if name == "cuda" {
		return nil, true
	}
	rest, ok := strings.CutPrefix(name, "cuda-")
	if !ok || rest == "" {
		return nil, false
	}
	var v []int
	for _, part := range strings.Split(rest, ".") {
		n, err := strconv.Atoi(part)
		if err != nil || n < 0 {
			return nil, false
		}
		v = append(v, n)
	}
	return v, true
}

// withoutStubs drops directories with a stubs component: the toolkit's stub libraries
// satisfy a linker but fail every call (libcuda's with CUDA_ERROR_STUB_LIBRARY).
func withoutStubs(dirs []string) []string {
	return slices.DeleteFunc(dirs, func(d string) bool {
		return slices.Contains(strings.Split(filepath.ToSlash(d), "/"), "stubs")
	})
}

// pythonScript prints the interpreter's site-packages and the rest of sys.path, one a line,
// as PyTorch's own preload searches sys.path for nvidia/<lib>/lib.
const pythonScript = `import site, sys
p = []
try: p += site.getsitepackages()
except Exception: pass
try: p.append(site.getusersitepackages())
except Exception: pass
print("\n".join(p + sys.path))`

// sitePackagesAnswer is what one interpreter said, kept for the process: the three
// libraries' searches ask once, and an interpreter that failed or hung is not asked again.
type sitePackagesAnswer struct {
	dirs []string
	err  error
}

var (
	pythonMu      sync.Mutex
	pythonAnswers = map[string]sitePackagesAnswer{}
)

// sitePackages asks python (looked up on $PATH) for the directories that may hold pip's
// nvidia packages, once per interpreter: only those with an nvidia directory are kept.
func sitePackages(python string, timeout time.Duration) ([]string, error) {
	exe, err := exec.LookPath(python)
	if err != nil {
		return nil, fmt.Errorf("no %s on $PATH", python)
	}
	pythonMu.Lock()
	defer pythonMu.Unlock()
	a, ok := pythonAnswers[exe]
	if !ok {
		a.dirs, a.err = askPython(exe, timeout)
		pythonAnswers[exe] = a
	}
	return a.dirs, a.err
}

func askPython(exe string, timeout time.Duration) ([]string, error) {
	if timeout <= 0 {
		timeout = DefaultPythonTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, exe, "-c", pythonScript)
	cmd.Stderr = &stderr
	cmd.WaitDelay = time.Second // a child left holding the pipes does not hold us
	out, err := cmd.Output()
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("no answer in %v", timeout)
		}
		return nil, fmt.Errorf("%s -c ...: %s", exe, strings.TrimSpace(fmt.Sprintf("%v %s", err, stderr.String())))
	}
	var sp []string
	for _, line := range strings.Split(string(out), "\n") {
		d := strings.TrimSpace(line)
		if !filepath.IsAbs(d) || slices.Contains(sp, d) {
			continue
		}
		if fi, err := os.Stat(filepath.Join(d, "nvidia")); err == nil && fi.IsDir() {
			sp = append(sp, d)
		}
	}
	return sp, nil
}

// missing says how a library failed to load: "not found" when it is not there, "does not
// load" when it is but dlopen refused it (a dependency missing, another architecture).
func missing(path string, err error) string {
	if errors.Is(err, errNotThere) {
		return "not found"
	}
	if _, serr := os.Stat(path); serr != nil && strings.Contains(path, "/") {
		return "not found"
	}
	return "does not load"
}

// dlopen opens a library. A bare soname the loader does not find wraps errNotThere.
func dlopen(path string, mode int) (uintptr, error) {
	// purego reads dlerror in a second call, which must run on the thread whose dlopen
	// failed or the message comes back empty.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	h, err := purego.Dlopen(path, mode)
	if err == nil {
		return h, nil
	}
	if !strings.Contains(path, "/") && strings.HasPrefix(err.Error(), path+": cannot open shared object file") {
		return 0, notThere{err}
	}
	return 0, err
}

// blasLine is the doctor's line on cuBLAS: where it loads from and its version, or why
// none loads.
func blasLine(s Search) string {
	lib, err := findBLAS(s)
	if err != nil {
		return "not found: " + err.Error()
	}
	v := lib.version
	if v == "" {
		v = "of unknown version (no cublasGetProperty)"
	}
	return fmt.Sprintf("%s: cuBLAS %s", lib.path, v)
}

// ncclLine is the doctor's line on NCCL: where it loads from and its version, or why none
// loads.
func ncclLine(s Search) string {
	l, err := findNCCL(s)
	if err != nil {
		return "not found: " + err.Error()
	}
	return fmt.Sprintf("%s: NCCL %s (ncclGetVersion %d)", l.path, ncclVersionString(l.version), l.version)
}
