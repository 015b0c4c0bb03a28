//go:build !amd64 || purego

package blas

import "unsafe"

func copyRowsAVX(dst, src unsafe.Pointer, off *int, kc, gb, size int) {
	panic("blas: copyRowsAVX without AVX")
}
