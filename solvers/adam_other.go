//go:build !amd64 || purego

package solvers

func adamFast(*coeffs[float32], []float32, []float32, []float32, []float32) int { return 0 }
