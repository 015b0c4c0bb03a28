//go:build !amd64 || purego

package blas

import "unsafe"

func transposeF32AVX(dst, src unsafe.Pointer, lds, ld, kc, rows int) {
	panic("blas: transposeF32AVX without AVX")
}

func transposeF64AVX(dst, src unsafe.Pointer, lds, ld, kc, rows int) {
	panic("blas: transposeF64AVX without AVX")
}
