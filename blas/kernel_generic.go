package blas

// The portable kernels keep the same contract as the assembly ones: each accumulator sums its
// k terms in order, then C = alpha*acc + beta*C (C not read when beta == 0). The explicit
// conversions stop the compiler from fusing a multiply and an add, so these kernels give the
// same bits on every architecture.

const goMR, goNR = 4, 4

func goKern[T float](kc int, a, b, c *T, ldc int, alpha, beta T) {
	ap := unsafeSlice(a, kc*goMR)
	bp := unsafeSlice(b, kc*goNR)
	var acc [goMR * goNR]T
	for p := 0; p < kc; p++ {
		av := ap[p*goMR : p*goMR+goMR : p*goMR+goMR]
		bv := bp[p*goNR : p*goNR+goNR : p*goNR+goNR]
		for i, x := range av {
			row := acc[i*goNR : i*goNR+goNR : i*goNR+goNR]
			row[0] = row[0] + T(x*bv[0])
			row[1] = row[1] + T(x*bv[1])
			row[2] = row[2] + T(x*bv[2])
			row[3] = row[3] + T(x*bv[3])
		}
	}
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
