//go:build amd64 && !purego

package layers

import "golang.org/x/sys/cpu"

// The float32 loops of batch norm (batchnorm.go) and ReLU (relu.go) with AVX2: four float64 lanes
// (or eight float32 elements) at a time, each operation rounded as the scalar code rounds it (no
// fused multiply-add) and ReLU's masks the same tests, so the bits are the same. n is a multiple
// of 4 for the lane sums, of 8 for the others.

//go:noescape
func lanesAddF32(n int, dst *float64, x *float32)

//go:noescape
func lanesSqF32(n int, dst *float64, x *float32, mean float64)

//go:noescape
func lanesGradF32(n int, da, db *float64, dy, x *float32, mean float64)

//go:noescape
func affineF32(n int, y, x *float32, m, a, b float32)

//go:noescape
func bnDxF32(n int, r, x, dy *float32, mdy, mt, k, at float32)

var haveAVX2 = cpu.X86.HasAVX2

// The fast paths below do the longest prefix they can and return its length; the caller's Go
// loop does the rest.

func addF32Fast(dst []float64, x []float32) int {
	n := len(x) &^ 3
	if !haveAVX2 || n == 0 {
		return 0
	}
	_ = dst[n-1]
	lanesAddF32(n, &dst[0], &x[0])
	return n
}

func sqF32Fast(dst []float64, x []float32, mean float64) int {
	n := len(x) &^ 3
	if !haveAVX2 || n == 0 {
		return 0
	}
	_ = dst[n-1]
	lanesSqF32(n, &dst[0], &x[0], mean)
	return n
}

func gradF32Fast(da, db []float64, dy, x []float32, mean float64) int {
	n := len(dy) &^ 3
	if !haveAVX2 || n == 0 {
		return 0
	}
	_, _, _ = da[n-1], db[n-1], x[n-1]
	lanesGradF32(n, &da[0], &db[0], &dy[0], &x[0], mean)
	return n
}

func affineF32Fast(y, x []float32, m, a, b float32) int {
	n := len(x) &^ 7
	if !haveAVX2 || n == 0 {
		return 0
	}
	_ = y[n-1]
	affineF32(n, &y[0], &x[0], m, a, b)
	return n
}

func bnDxF32Fast(r, x, dy []float32, mdy, mt, k, at float32) int {
	n := len(dy) &^ 7
	if !haveAVX2 || n == 0 {
		return 0
	}
	_, _ = r[n-1], x[n-1]
	bnDxF32(n, &r[0], &x[0], &dy[0], mdy, mt, k, at)
	return n
}

//go:noescape
func reluF32(n int, r, x *float32)

//go:noescape
func reluGradF32(n int, r, y, dy *float32)

// reluF32Fast is reluMask32's prefix in AVX2 (dy nil: the forward).
func reluF32Fast(r, x, dy []float32) int {
	n := len(x) &^ 7
	if !haveAVX2 || n == 0 {
		return 0
	}
	_ = r[n-1]
	if dy == nil {
		reluF32(n, &r[0], &x[0])
	} else {
		_ = dy[n-1]
		reluGradF32(n, &r[0], &x[0], &dy[0])
	}
	return n
}

//go:noescape
func foldF64(n int, dst, src *float64)

// foldFast adds src to dst (disjoint) over their longest prefix of whole vectors and returns
// its length.
func foldFast(dst, src []float64) int {
	n := len(dst) &^ 3
	if !haveAVX2 || n == 0 {
		return 0
	}
	_ = src[n-1]
	foldF64(n, &dst[0], &src[0])
	return n
}
