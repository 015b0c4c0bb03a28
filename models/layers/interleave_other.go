//go:build !amd64 || purego

package layers

func interleave6F32Fast([]float32, *[colMaxLanes][]float32, int) int { return 0 }

func interleave8F32Fast([]float32, int, *[8][]float32, int) int { return 0 }
