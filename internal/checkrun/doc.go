// Package checkrun lets checks written against a test's *testing.T run
// outside tests: the kernels' comparisons with the CPU ops
// (vm/cuda/kernels/kernelcheck) and the model zoo's CUDA-versus-CPU steps
// (vm/cuda/dispatch/zoocheck) are written once against TB, which
// *testing.T satisfies, and "ooc doctor" runs the same code on a real GPU
// through Run, which turns Fatal into a failed check instead of a failed
// test and stops a check whose deadline has passed.
package checkrun
