// Package dispatchtest sets up the fake CUDA device for tests outside
// package vm/cuda: the fake driver (vm/cuda/internal/fakecuda), the host
// builds of the kernels as its kernels (kernelstest) and the fake cuBLAS,
// built by the system's compilers inside the test, so that "-device cuda"
// and cuda.Open(0) reach them through the ordinary environment variables.
// What the fake proves and cannot prove is said in package cuda's and
// package dispatch's documentation.
package dispatchtest

import (
	"strconv"
	"testing"

	"github.com/gorgonia-ooc/outofcore/blas"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/internal/fakecuda"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels/kernelstest"
)

// Setenv builds the fake driver, kernels and cuBLAS and points
// OOC_CUDA_LIBRARY, OOC_FAKECUDA_KERNELS, OOC_CUBLAS_LIBRARY and
// OOC_FAKECUBLAS_DRIVER at them (t.Setenv: the test cannot be parallel). It
// returns the driver's path; each call gives a fresh driver instance. It
// skips the test, saying what to install, without a C or C++ compiler.
//
// The fake cuBLAS is told to do each element's arithmetic as package blas's
// active kernel does (OOC_FAKECUBLAS_KBLOCK, OOC_FAKECUBLAS_FMA; see
// fakecublas.c): the CPU device's convolutions and matmuls run that GEMM, so
// a product with the same k gives the same bits on both devices and a
// difference between them is the CUDA kernels', not the GEMMs'. Set it
// after any blas.SetKernel.
func Setenv(t testing.TB) (driver string) {
	t.Helper()
	driver = fakecuda.Build(t)
	t.Setenv("OOC_CUDA_LIBRARY", driver)
	t.Setenv("OOC_FAKECUDA_KERNELS", kernelstest.BuildHost(t))
	t.Setenv("OOC_CUBLAS_LIBRARY", fakecuda.BuildBLAS(t))
	t.Setenv("OOC_FAKECUBLAS_DRIVER", driver)
	t.Setenv("OOC_FAKECUBLAS_KBLOCK", strconv.Itoa(blas.KBlock))
	fma := "1" // avx2 and avx512: one FMA per term
	if blas.Kernel() == "go" {
		fma = "0" // a rounded multiply, then a rounded add
	}
	t.Setenv("OOC_FAKECUBLAS_FMA", fma)
	return driver
}

// SetDevices makes the fake driver at driver (Setenv's) report n devices; call it before
// opening any.
func SetDevices(t testing.TB, driver string, n int) {
	t.Helper()
	fakecuda.Open(t, driver).Set(t, "devices", int64(n))
}

// SetenvNCCL builds a fresh fake NCCL (vm/cuda/internal/fakecuda/nccl says what it
// proves) working with the fake driver at driver, and points OOC_NCCL_LIBRARY and
// OOC_FAKENCCL_DRIVER at them. It returns the library's path.
func SetenvNCCL(t testing.TB, driver string) string {
	t.Helper()
	lib := fakecuda.BuildNCCL(t)
	t.Setenv("OOC_NCCL_LIBRARY", lib)
	t.Setenv("OOC_FAKENCCL_DRIVER", driver)
	return lib
}

// FailAt makes the fake driver at driver (Setenv's) fail calls of the named function with
// result: the next after calls succeed, then times calls fail (negative: every later one).
// A device opened after it meets the failures from its first call on: failing
// cuMemCreate or cuMemMap before Open makes the device's VMM trial fail.
func FailAt(t testing.TB, driver, call string, result int, after, times int64) {
	t.Helper()
	fakecuda.Open(t, driver).FailAt(t, call, result, after, times)
}
