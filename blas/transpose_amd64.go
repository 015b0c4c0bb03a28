//go:build amd64 && !purego

package blas

import "unsafe"

// transposeF32AVX and transposeF64AVX transpose one chunk of rows (1 to 8 float32, 1 to 4
// float64) over kc >= 8 (4) columns; lds and ld are in bytes. See transpose_amd64.s.
//
//go:noescape
func transposeF32AVX(dst, src unsafe.Pointer, lds, ld, kc, rows int)

//go:noescape
func transposeF64AVX(dst, src unsafe.Pointer, lds, ld, kc, rows int)
