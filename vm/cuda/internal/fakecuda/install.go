package fakecuda

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Layout says where Install puts each fake library: a directory relative to the root
// ("" leaves the library out).
type Layout struct {
	Driver, BLAS, NCCL string
}

// Installed are the paths of the libraries Install put in place ("" where left out).
type Installed struct {
	Driver, BLAS, BLASLt, NCCL string
}

// Install builds the fake driver, cuBLAS and NCCL and puts each in its Layout directory
// under root with its real soname, as a CUDA toolkit or pip's wheels do: libcuda.so.1,
// libcublas.so.13 with the libcublasLt.so.13 it needs beside it (this cuBLAS has no
// RUNPATH, so it loads only where its loader loads that sibling first), libnccl.so.2.
// It sets no override ($OOC_CUDA_LIBRARY and the rest): it is for tests of package cuda's
// library search. It does set $OOC_FAKECUBLAS_DRIVER and $OOC_FAKENCCL_DRIVER (t.Setenv)
// to the installed driver, which is how the fake cuBLAS and NCCL reach it; with Driver ""
// that driver is a private copy outside root (Build). Every call installs fresh
// instances. It skips the test, saying what to install, when there is no C compiler.
func Install(t testing.TB, root string, l Layout) Installed {
	t.Helper()
	var in Installed
	put := func(dir, name, built string) string {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(root, dir, name)
		copyFile(t, built, p)
		return p
	}
	if l.Driver != "" {
		in.Driver = put(l.Driver, LibraryName, Build(t))
	} else {
		in.Driver = Build(t)
	}
	t.Setenv("OOC_FAKECUBLAS_DRIVER", in.Driver)
	t.Setenv("OOC_FAKENCCL_DRIVER", in.Driver)
	if l.BLAS != "" {
		blas, lt := buildBLASWithLt(t)
		in.BLASLt = put(l.BLAS, BLASLtName, lt)
		in.BLAS = put(l.BLAS, BLASName, blas)
	}
	if l.NCCL != "" {
		in.NCCL = put(l.NCCL, NCCLName, BuildNCCL(t))
	}
	return in
}

// InstallPython puts a fake python3 first on $PATH (t.Setenv) that prints the given
// directories, one a line, whatever it is asked: package cuda asks Python for its
// site-packages. It returns the directory holding it.
func InstallPython(t testing.TB, sitePackages ...string) string {
	t.Helper()
	bin := t.TempDir()
	var script strings.Builder
	script.WriteString("#!/bin/sh\n")
	for _, d := range sitePackages {
		if strings.ContainsAny(d, "'\n") {
			t.Fatalf("InstallPython: %q cannot be quoted for sh", d)
		}
		fmt.Fprintf(&script, "echo '%s'\n", d)
	}
	if err := os.WriteFile(filepath.Join(bin, "python3"), []byte(script.String()), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	return bin
}
