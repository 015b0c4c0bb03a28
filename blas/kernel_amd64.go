//go:build amd64 && !purego

package blas

import "golang.org/x/sys/cpu"

//go:noescape
func sgemmKernAVX2(kc int, a, b, c *float32, ldc int, alpha, beta float32)

//go:noescape
func dgemmKernAVX2(kc int, a, b, c *float64, ldc int, alpha, beta float64)

// The edge kernels (kernel_edge_amd64.s) compute a rows x cols corner of the AVX2 kernel's tile
// in place, with its arithmetic.
//
//go:noescape
func sgemmKernEdgeAVX2(kc int, a, b, c *float32, ldc int, alpha, beta float32, rows, cols int)

//go:noescape
func dgemmKernEdgeAVX2(kc int, a, b, c *float64, ldc int, alpha, beta float64, rows, cols int)

//go:noescape
func sgemmKernAVX512(kc int, a, b, c *float32, ldc int, alpha, beta float32)

//go:noescape
func dgemmKernAVX512(kc int, a, b, c *float64, ldc int, alpha, beta float64)

// archKernels lists the assembly kernels this CPU can run, fastest first. x/sys/cpu reports
// AVX2 only when the OS saves the YMM state.
func archKernels() []kernelSet {
	var ks []kernelSet
	// The AVX-512 kernels do per lane what the AVX2 ones do (same k order, one FMA per term), so
	// the two give the same bits; only the portable kernel differs.
	if cpu.X86.HasAVX512F {
		ks = append(ks, kernelSet{
			name: "avx512",
			s:    config[float32]{mr: 6, nr: 32, kc: KBlock, mc: 96, nc: 4096, kern: sgemmKernAVX512},
			d:    config[float64]{mr: 6, nr: 16, kc: KBlock, mc: 48, nc: 2048, kern: dgemmKernAVX512},
		})
	}
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		ks = append(ks, kernelSet{
			name: "avx2",
			s:    config[float32]{mr: 6, nr: 16, kc: KBlock, mc: 96, nc: 4096, kern: sgemmKernAVX2, edge: sgemmKernEdgeAVX2},
			d:    config[float64]{mr: 6, nr: 8, kc: KBlock, mc: 48, nc: 2048, kern: dgemmKernAVX2, edge: dgemmKernEdgeAVX2},
		})
	}
	return ks
}
