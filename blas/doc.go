// Package blas is a fast, deterministic GEMM for float32 and float64 in pure Go, and a
// gonum/gorgonia BLAS built on it.
//
// # Registration
//
// Importing the package registers Implementation with gorgonia.Use (which also sets tensor's
// BLAS), so every matmul gorgonia runs and every convolution of models/layers goes through the
// same GEMM. That is what keeps a TapeMachine and the project's out-of-core VM bit-identical.
// Registration on import was chosen over an explicit call because forgetting the call would
// silently make the two disagree; a program that wants gonum back calls
// gorgonia.Use(gonum.Implementation{}) after its imports are initialised.
//
// # Algorithm
//
// The GEMM is the Goto/BLIS scheme: op(B) is packed into panels of kc rows cut into slivers of
// NR columns, op(A) into slivers of MR rows, and a micro-kernel keeps an MR x NR block of C in
// registers while it streams kc steps of one A sliver and one B sliver. On amd64 the kernel is
// assembly, one FMA per term: with AVX-512 6x32 float32 and 6x16 float64, else with AVX2 and FMA
// 6x16 and 6x8 (the two give the same bits). Elsewhere, or built with the purego tag, a portable
// Go kernel (4x4, separate multiply and add) runs. Kernel reports which; SetKernel chooses. op(A)
// is packed in panels of 1536 rows and op(B) in panels of at most 4096 (float32) or 2048
// (float64) columns, so the packing buffers, reused across calls, stay a few megabytes. Packing
// a sliver stored along k (op(A) = A, or op(B) = Bᵀ) is a transpose: with AVX it runs as 8x8
// (float32) or 4x4 (float64) register transposes, else (and with purego) as a Go loop; both
// copy the same values, so the kernel and the bits are the same either way.
//
// # Determinism
//
// Every element of C is the sum of its k products taken in order within blocks of KBlock (256),
// the blocks added to C one after another. Threads split the packing and
// the micro-tiles of C, never a sum, so results are the same bits for any GOMAXPROCS. Partial
// tiles at the edges (m not a multiple of MR, n of NR) get the full kernel's arithmetic too: with
// AVX2, edge kernels (kernel_edge_amd64.s) do the full kernel's FMAs for the tile's rows and
// write its rows and columns of C in place; elsewhere (the portable and AVX-512 kernels) the
// tile goes through a zero-padded copy to the full kernel.
// Different kernels (avx2 vs go) differ in the last bits.
//
// # Packed operands and helpers for callers that split work themselves
//
// PackedA packs op(A) once for several products (a convolution's weights over a batch's images)
// and GemmPacked multiplies with it on the calling goroutine, rows [i0, i1) of C only: same
// panels, same kernel, so the same bits as Gemm. GemmSlivers takes both operands from
// SliverSources that pack themselves a sliver at a time (Stored for a matrix in memory), so an
// operand that is computed rather than stored (an im2col matrix read from the image) is packed
// in one pass: also Gemm's bits, and its k blocks may be computed apart and added in order.
// GemmPackedRows is GemmPacked with op(B) given as rows that are runs of one slice at offsets (a
// stride-1 convolution's column matrix, read from the padded image instead of being copied out),
// packed with vector moves through the offset table: the same bits as GemmPacked on the
// materialised matrix.
// Add is dst += src with vector adds (one rounded add per element, as the loop). The fork-join
// under Gemm runs on internal/workpool's long-lived goroutines, so a call allocates nothing once
// they exist.
//
// # Speed
//
// go test -bench 'Sgemm|Dgemm' ./blas compares with gonum in GFLOP/s; docs/results.md ("CPU
// speed") has the numbers measured on the project's machine.
package blas
