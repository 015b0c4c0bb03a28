package blas

// Add adds src to dst element by element: dst[i] += src[i] for i < min(len(dst), len(src)).
// Each element gets one rounded addition, as the plain loop gives it, so the result is the same
// bits whichever way it runs; on amd64 with AVX it runs eight or four elements an instruction.
// col2im (models/layers) spends most of its time in such adds.
func Add[T Float](dst, src []T) {
	n := min(len(dst), len(src))
	if n == 0 {
		return
	}
	switch d := any(dst).(type) {
	case []float32:
		addF32(d[:n], any(src).([]float32)[:n])
	case []float64:
		addF64(d[:n], any(src).([]float64)[:n])
	}
}

func addGo[T Float](dst, src []T) {
	src = src[:len(dst)]
	for i, v := range src {
		dst[i] += v
	}
}
