//go:build !amd64 || purego

package blas

func addF32(dst, src []float32) { addGo(dst, src) }
func addF64(dst, src []float64) { addGo(dst, src) }
