package blas

// The portable kernels keep the same contract as the assembly ones: each accumulator sums its
// k terms in order, then C = alpha*acc + beta*C (C not read when beta == 0). The explicit
// conversions stop the compiler from fusing a multiply and an add, so these kernels give the
// same bits on every architecture.

const goMR, goNR = 4, 4

func goKern[T float](kc int, a, b, c *T, ldc int, alpha, beta T) {
	ap := unsafeSlice(a, kc*goMR)
	bp := unsafeSlice(b, kc*goNR)
	// Sixteen named accumulators stay in registers, where an array would live in memory.
	var c00, c01, c02, c03, c10, c11, c12, c13, c20, c21, c22, c23, c30, c31, c32, c33 T
	for p := 0; p < kc; p++ {
		av := ap[p*goMR : p*goMR+goMR : p*goMR+goMR]
		bv := bp[p*goNR : p*goNR+goNR : p*goNR+goNR]
		b0, b1, b2, b3 := bv[0], bv[1], bv[2], bv[3]
		a0, a1, a2, a3 := av[0], av[1], av[2], av[3]
		c00, c01, c02, c03 = c00+T(a0*b0), c01+T(a0*b1), c02+T(a0*b2), c03+T(a0*b3)
		c10, c11, c12, c13 = c10+T(a1*b0), c11+T(a1*b1), c12+T(a1*b2), c13+T(a1*b3)
		c20, c21, c22, c23 = c20+T(a2*b0), c21+T(a2*b1), c22+T(a2*b2), c23+T(a2*b3)
		c30, c31, c32, c33 = c30+T(a3*b0), c31+T(a3*b1), c32+T(a3*b2), c33+T(a3*b3)
	}
	acc := [goMR * goNR]T{c00, c01, c02, c03, c10, c11, c12, c13, c20, c21, c22, c23, c30, c31, c32, c33}
	cs := unsafeSlice(c, (goMR-1)*ldc+goNR)
	for i := 0; i < goMR; i++ {
		row := cs[i*ldc : i*ldc+goNR]
		for j := range row {
			v := T(alpha * acc[i*goNR+j])
			if beta != 0 {
				v = v + T(beta*row[j])
			}
			row[j] = v
		}
	}
}

var goKernels = kernelSet{
	name: "go",
	s:    config[float32]{mr: goMR, nr: goNR, kc: KBlock, mc: 64, nc: 4096, kern: goKern[float32]},
	d:    config[float64]{mr: goMR, nr: goNR, kc: KBlock, mc: 64, nc: 2048, kern: goKern[float64]},
}
