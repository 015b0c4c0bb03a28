// Package kernelcheck holds the checks of every CUDA kernel of package
// kernels against the CPU op it reproduces: random inputs of odd sizes and
// special values, the CPU op's result (gorgonia's and models/layers' ops,
// tensor's softmax, gorgonia's solvers), and the comparison. The checks are
// written once and run in two places: the kernels' tests run them on the
// host build (package kernels' tests: exact, bit for bit where the kernels
// promise the CPU op's bits, with race, guard and sanitizer checks around
// each launch), and "ooc doctor" runs them on a GPU through the CUDA driver,
// where a check that asks for the CPU op's bits is normwise within
// Tolerance (float32 1e-5, float64 1e-12) instead, as a GPU's exp and log
// differ from the CPU's in the last bits, and every other check keeps its
// measure (elementwise relative for ops computed element by element,
// normwise for sums) and the same tolerance.
//
// A Mem is a check's device memory on a Device (host build or GPU): buffers
// with host bytes that the device copies in before each launch and back
// after it, so a check reads and writes plain Go slices. It keeps, per
// kernel, the worst error of the comparisons its results entered (a
// comparison is charged to every kernel launched since the previous group of
// comparisons: a convolution's forward check charges im2col and
// channel_bias).
//
// Cases lists the checks, one per group and dtype; every kernel of
// kernels.Specs is launched by at least one (TestEveryKernelHasACase).
package kernelcheck
