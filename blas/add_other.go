//go:build !amd64 || purego

package blas

import "unsafe"

func addF32(dst, src []float32) { addGo(dst, src) }
func addF64(dst, src []float64) { addGo(dst, src) }

const hasAVX = false

func copyGroupsAVX(dst, src unsafe.Pointer, ld, kc, gb int) { panic("blas: copyGroupsAVX without AVX") }
