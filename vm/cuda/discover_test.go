package cuda

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/internal/fakecuda"
)

// TestSearchOrder lays out empty library files and records what the search tries to
// load, in order: the override alone when set; the loader's sonames; $CUDA_HOME and
// $CUDA_PATH; the toolkits under a root, newest version first; Python's site-packages;
// never a stubs directory. When nothing loads, the error names every place and what to
// install.
func TestSearchOrder(t *testing.T) {
	cases := []struct {
		name    string
		lib     library
		files   []string          // under the tree
		links   map[string]string // symbolic links under the tree -> their targets
		env     map[string]string // values may use {root}
		loader  []string          // bare names the loader has
		refuse  []string          // files (relative) that load but are refused
		python  bool              // a python3 on $PATH whose site-packages is {root}/sp
		pyBody  string            // instead, a python3 running this sh script
		want    []string          // the attempts, in order ({root}-relative, or bare names)
		found   string            // what loads; "" none
		errSays []string
		errIs   error
	}{
		{name: "override beats everything", lib: blasLibrary(),
			files: []string{"home/lib64/libcublas.so.13", "sp/nvidia/cu13/lib/libcublas.so.13"}, loader: []string{"libcublas.so.13"},
			env: map[string]string{"OOC_CUBLAS_LIBRARY": "{root}/mine/libcublas.so", "CUDA_HOME": "{root}/home"}, python: true,
			want: []string{"mine/libcublas.so"}, found: "mine/libcublas.so"},
		{name: "loader first, newest soname first", lib: blasLibrary(), loader: []string{"libcublas.so.12", "libcublas.so.11"},
			files: []string{"home/lib64/libcublas.so.13"}, env: map[string]string{"CUDA_HOME": "{root}/home"},
			want: []string{"libcublas.so.13", "libcublas.so.12"}, found: "libcublas.so.12"},
		{name: "CUDA_HOME before CUDA_PATH before toolkits", lib: blasLibrary(),
			refuse: []string{"home/lib64/libcublas.so.13", "home/lib/libcublas.so.12"},
			files: []string{"home/lib64/libcublas.so.13", "home/lib/libcublas.so.12", "path/lib/libcublas.so.13",
				"usr/local/cuda-13.0/lib64/libcublas.so.13"},
			env: map[string]string{"CUDA_HOME": "{root}/home", "CUDA_PATH": "{root}/path"},
			want: []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "home/lib64/libcublas.so.13",
				"home/lib/libcublas.so.12", "path/lib/libcublas.so.13"},
			found: "path/lib/libcublas.so.13"},
		{name: "toolkits newest first", lib: blasLibrary(),
			refuse: []string{"usr/local/cuda-13.0/lib64/libcublas.so.13", "usr/local/cuda-12.10/lib64/libcublas.so.12",
				"usr/local/cuda-12.4/lib64/libcublas.so.12"},
			files: []string{"usr/local/cuda/lib64/libcublas.so.12", "usr/local/cuda-12.4/lib64/libcublas.so.12",
				"usr/local/cuda-12.10/lib64/libcublas.so.12", "usr/local/cuda-13.0/lib64/libcublas.so.13",
				"usr/local/cuda-samples/lib64/libcublas.so.12", "usr/local/cuda-13.0/lib64/stubs/libcublas.so.13"},
			want: []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11",
				"usr/local/cuda-13.0/lib64/libcublas.so.13", "usr/local/cuda-12.10/lib64/libcublas.so.12",
				"usr/local/cuda-12.4/lib64/libcublas.so.12", "usr/local/cuda/lib64/libcublas.so.12"},
			found: "usr/local/cuda/lib64/libcublas.so.12"},
		{name: "a toolkit linked under two names is tried once", lib: blasLibrary(),
			files: []string{"usr/local/cuda-13.0/lib64/libcublas.so.13"}, links: map[string]string{"usr/local/cuda": "cuda-13.0"},
			refuse: []string{"usr/local/cuda-13.0/lib64/libcublas.so.13"}, errIs: ErrDriverTooOld,
			want:    []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "usr/local/cuda-13.0/lib64/libcublas.so.13"},
			errSays: []string{"/usr/local/cuda*/lib64 ({root}/usr/local/cuda-13.0/lib64, {root}/usr/local/cuda/lib64)"}},
		{name: "site-packages: CUDA 13's wheels before CUDA 12's", lib: blasLibrary(), python: true,
			files: []string{"sp/nvidia/cublas/lib/libcublas.so.12", "sp/nvidia/cu13/lib/libcublas.so.13"},
			want:  []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "sp/nvidia/cu13/lib/libcublas.so.13"},
			found: "sp/nvidia/cu13/lib/libcublas.so.13"},
		{name: "site-packages: nested wheels, NCCL", lib: ncclLibrary, python: true,
			files: []string{"sp/nvidia/nccl/x/lib/libnccl.so.2"},
			want:  []string{"libnccl.so.2", "sp/nvidia/nccl/x/lib/libnccl.so.2"}, found: "sp/nvidia/nccl/x/lib/libnccl.so.2"},
		{name: "libcuda: never a stub", lib: driverLibrary, python: true,
			files: []string{"usr/local/cuda-13.0/lib64/stubs/libcuda.so.1", "sp/nvidia/cu13/stubs/lib/libcuda.so.1",
				"sp/nvidia/cu13/lib/libcuda.so.1"},
			want: []string{"libcuda.so.1", "sp/nvidia/cu13/lib/libcuda.so.1"}, found: "sp/nvidia/cu13/lib/libcuda.so.1"},
		{name: "nothing anywhere", lib: blasLibrary(), python: true, files: []string{"sp/nvidia/cudnn/lib/libcudnn.so.9"},
			want: []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11"}, errIs: ErrNoBLAS,
			errSays: []string{"cuda: no cuBLAS library: tried $OOC_CUBLAS_LIBRARY (unset), " +
				"the loader's path (libcublas.so.13, libcublas.so.12, libcublas.so.11), $CUDA_HOME (unset), $CUDA_PATH (unset), ",
				"/usr/local/cuda*/lib64 (no toolkit), python3's site-packages nvidia/*/lib (in {root}/sp); install cuBLAS",
				"pip install nvidia-cublas", "or set $OOC_CUBLAS_LIBRARY to its path"}},
		{name: "no python3", lib: ncclLibrary, errIs: ErrNoNCCL, want: []string{"libnccl.so.2"},
			errSays: []string{"python3's site-packages nvidia/*/lib (no python3 on $PATH); install NCCL"}},
		{name: "python3 fails", lib: ncclLibrary, errIs: ErrNoNCCL, want: []string{"libnccl.so.2"},
			pyBody:  "echo no site here >&2; exit 3",
			errSays: []string{"python3's site-packages nvidia/*/lib ({bin}/python3 -c ...: exit status 3 no site here); install NCCL"}},
		{name: "python3 hangs", lib: ncclLibrary, errIs: ErrNoNCCL, want: []string{"libnccl.so.2"}, pyBody: "exec sleep 30",
			errSays: []string{"python3's site-packages nvidia/*/lib ({bin}/python3 -c ...: no answer in 300ms); install NCCL"}},
		{name: "found but refused", lib: driverLibrary, files: []string{"usr/local/cuda/lib64/libcuda.so.1"},
			refuse: []string{"usr/local/cuda/lib64/libcuda.so.1"}, errIs: ErrDriverTooOld,
			want:    []string{"libcuda.so.1", "usr/local/cuda/lib64/libcuda.so.1"},
			errSays: []string{"{root}/usr/local/cuda/lib64/libcuda.so.1 refused\n(the NVIDIA driver's libcuda found nowhere else: tried"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root, bin := t.TempDir(), t.TempDir()
			abs := func(s string) string { return strings.NewReplacer("{root}", root, "{bin}", bin).Replace(s) }
			for _, f := range c.files {
				p := filepath.Join(root, f)
				must(t, os.MkdirAll(filepath.Dir(p), 0o755))
				must(t, os.WriteFile(p, nil, 0o644))
			}
			for l, target := range c.links {
				must(t, os.Symlink(target, filepath.Join(root, l)))
			}
			s := Search{Getenv: func(k string) string { return abs(c.env[k]) }, Loader: true,
				Roots: []string{filepath.Join(root, "usr/local")}, Python: "python3", PythonTimeout: 300 * time.Millisecond}
			switch {
			case c.python:
				fakecuda.InstallPython(t, filepath.Join(root, "sp"), filepath.Join(root, "nowhere"))
			case c.pyBody != "":
				must(t, os.WriteFile(filepath.Join(bin, "python3"), []byte("#!/bin/sh\n"+c.pyBody+"\n"), 0o755))
				t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH")) // the fake first
			default:
				t.Setenv("PATH", bin) // no python3 at all
			}
			var tried []string
			got, err := s.find(c.lib, notFoundOf(c.lib), func(p string) error {
				rel := strings.TrimPrefix(p, root+"/")
				tried = append(tried, rel)
				switch {
				case !strings.Contains(p, "/") && !slices.Contains(c.loader, p):
					return notThere{errors.New(p + ": cannot open shared object file")}
				case slices.Contains(c.refuse, rel):
					return errors.Join(ErrDriverTooOld, errors.New(p+" refused"))
				}
				return nil
			})
			if !slices.Equal(tried, c.want) {
				t.Errorf("tried\n%q, want\n%q", tried, c.want)
			}
			if c.found != "" {
				if err != nil || strings.TrimPrefix(got, root+"/") != c.found {
					t.Fatalf("found %q (%v), want %q", got, err, c.found)
				}
				return
			}
			if err == nil {
				t.Fatalf("found %q, want an error", got)
			}
			if !errors.Is(err, c.errIs) {
				t.Errorf("error %q does not wrap %q", err, c.errIs)
			}
			for _, w := range c.errSays {
				if !strings.Contains(err.Error(), abs(w)) {
					t.Errorf("error\n%s\ndoes not say\n%s", err, abs(w))
				}
			}
		})
	}
}

func notFoundOf(l library) error {
	switch l.env {
	case BLASLibraryEnv:
		return ErrNoBLAS
	case NCCLLibraryEnv:
		return ErrNoNCCL
	}
	return ErrNoDriver
}

// TestSearchFindsInstalledLibraries installs the fake driver, cuBLAS and NCCL the ways a
// machine has them (pip's wheels under Python's site-packages, a $CUDA_HOME, a toolkit
// under /usr/local) with no override set: the default search alone finds them, a device
// opens, a GEMM runs on the cuBLAS (which needs the libcublasLt beside it), an NCCL
// all-reduce runs, and the doctor's lines name each library and its version.
func TestSearchFindsInstalledLibraries(t *testing.T) {
	for _, lib := range []string{DefaultLibrary, BLASLibraries[0], NCCLLibrary} {
		if _, err := dlopen(lib, 2 /* RTLD_NOW */); err == nil {
			t.Skipf("this machine has %s on the loader's path, which the search rightly finds first", lib)
		}
	}
	cases := []struct {
		name   string
		layout fakecuda.Layout
		env    map[string]string
		python bool
	}{
		{name: "pip wheels, CUDA 13", python: true, layout: fakecuda.Layout{Driver: "sp/nvidia/cu13/lib",
			BLAS: "sp/nvidia/cu13/lib", NCCL: "sp/nvidia/nccl/lib"}},
		{name: "pip wheels, CUDA 12 layout", python: true, layout: fakecuda.Layout{Driver: "sp/nvidia/cuda_runtime/lib",
			BLAS: "sp/nvidia/cublas/lib", NCCL: "sp/nvidia/nccl/lib"}},
		{name: "CUDA_HOME", env: map[string]string{"CUDA_HOME": "home"},
			layout: fakecuda.Layout{Driver: "home/lib64", BLAS: "home/lib64", NCCL: "home/lib"}},
		{name: "CUDA_PATH", env: map[string]string{"CUDA_PATH": "path"},
			layout: fakecuda.Layout{Driver: "path/lib64", BLAS: "path/lib", NCCL: "path/lib64"}},
		{name: "toolkit under /usr/local", layout: fakecuda.Layout{Driver: "usr/local/cuda-13.0/lib64",
			BLAS: "usr/local/cuda-13.0/lib64", NCCL: "usr/local/cuda/lib64"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			for _, k := range []string{LibraryEnv, BLASLibraryEnv, NCCLLibraryEnv, "CUDA_HOME", "CUDA_PATH"} {
				v := c.env[k]
				if v != "" {
					v = filepath.Join(root, v)
				}
				t.Setenv(k, v)
			}
			in := fakecuda.Install(t, root, c.layout)
			if c.python {
				fakecuda.InstallPython(t, filepath.Join(root, "sp"))
			} else {
				t.Setenv("PATH", t.TempDir())
			}
			s := DefaultSearch()
			s.Roots = []string{filepath.Join(root, "usr/local")}
			d, err := Open(0, WithSearch(s), WithLog(&logBuffer{}))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { must(t, d.Close()) }()
			if d.Info().Library != in.Driver {
				t.Errorf("the driver loaded from %s, want %s", d.Info().Library, in.Driver)
			}
			checkGemm(t, d, in.BLAS)
			checkAllReduce(t, d, in.NCCL)
			for _, l := range []struct{ got, want string }{
				{blasLine(s), in.BLAS + ": cuBLAS 13.1.0"},
				{ncclLine(s), in.NCCL + ": NCCL 2.23.4 (ncclGetVersion 22304)"},
			} {
				if l.got != l.want {
					t.Errorf("doctor's line %q, want %q", l.got, l.want)
				}
			}
		})
	}
}

// checkGemm opens cuBLAS on d, checks it came from want, and multiplies two 2x2 matrices.
func checkGemm(t *testing.T, d *Device, want string) {
	t.Helper()
	b, err := d.OpenBLAS()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { must(t, b.Close()) }()
	if b.Library() != want || b.Version() != "13.1.0" {
		t.Errorf("cuBLAS %s from %s, want 13.1.0 from %s", b.Version(), b.Library(), want)
	}
	seg, err := d.mem.AllocSegment(3 * 16)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { must(t, d.mem.FreeSegment(seg)) }()
	in := []float32{1, 2, 3, 4, 5, 6, 7, 8} // A then B, column-major
	ev, err := d.CopyIn(seg.Addr, unsafe.Slice((*byte)(unsafe.Pointer(&in[0])), 4*len(in)))
	if err != nil {
		t.Fatal(err)
	}
	must(t, ev.Wait())
	must(t, b.Gemm(false, false, false, 2, 2, 2, 1, seg.Addr, 2, seg.Addr+16, 2, 0, seg.Addr+32, 2))
	out := make([]float32, 4)
	ev, err = d.CopyOut(unsafe.Slice((*byte)(unsafe.Pointer(&out[0])), 16), seg.Addr+32)
	if err != nil {
		t.Fatal(err)
	}
	must(t, ev.Wait())
	// C = A·B with A = [1 3; 2 4], B = [5 7; 6 8]: [23 31; 34 46], column-major.
	if want := []float32{23, 34, 31, 46}; !slices.Equal(out, want) {
		t.Errorf("A·B = %v, want %v", out, want)
	}
}

// checkAllReduce all-reduces a buffer across one rank on d through the NCCL found.
func checkAllReduce(t *testing.T, d *Device, want string) {
	t.Helper()
	c, err := NewNCCL([]*Device{d})
	if err != nil {
		t.Fatal(err)
	}
	if c.Library() != want {
		t.Errorf("NCCL from %s, want %s", c.Library(), want)
	}
	buf := []float32{1, -2, 3.5}
	host := unsafe.Slice((*byte)(unsafe.Pointer(&buf[0])), 12)
	err = c.AllReduceMean(tensor.Float32, [][]byte{host})
	must(t, errors.Join(err, c.Close()))
	if !slices.Equal(buf, []float32{1, -2, 3.5}) {
		t.Errorf("the mean of one rank is %v", buf)
	}
}
