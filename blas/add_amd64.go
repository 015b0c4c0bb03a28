//go:build amd64 && !purego

package blas

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

//go:noescape
func addF32AVX(dst, src *float32, n int)

//go:noescape
func addF64AVX(dst, src *float64, n int)

var hasAVX = cpu.X86.HasAVX

func addF32(dst, src []float32) {
	if hasAVX {
		addF32AVX(&dst[0], &src[0], len(dst))
		return
	}
	addGo(dst, src)
}

func addF64(dst, src []float64) {
	if hasAVX {
		addF64AVX(&dst[0], &src[0], len(dst))
		return
	}
	addGo(dst, src)
}

// copyGroupsAVX copies kc groups of gb bytes (32, 64 or 128), the source groups ld bytes apart,
// to consecutive groups at dst.
//
//go:noescape
func copyGroupsAVX(dst, src unsafe.Pointer, ld, kc, gb int)
