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

//go:noescape
func maxPool2F32(n int, y, r0, r1 *float32)

//go:noescape
func maxPool2GradF32(n int, d0, d1, r0, r1, dy *float32)

// maxPool2x2F32Fast is one output row of maxPool2x2Plane for float32, its ow windows in AVX2
// (takes as compares and blends, so the same element wins): the forward into y (dy nil), or the
// backward into rows d0 and d1 (their first 2*ow elements). The windows after the last whole
// vector go through the same kernel from zero-padded copies. It returns the windows done: ow,
// or 0 without AVX2.
func maxPool2x2F32Fast(y, r0, r1, dy, d0, d1 []float32, ow int) int {
	if !haveAVX2 || ow == 0 {
		return 0
	}
	n := ow &^ 7
	if n > 0 {
		_, _ = r0[2*n-1], r1[2*n-1]
		if dy == nil {
			_ = y[n-1]
			maxPool2F32(n, &y[0], &r0[0], &r1[0])
		} else {
			_, _, _ = dy[n-1], d0[2*n-1], d1[2*n-1]
			maxPool2GradF32(n, &d0[0], &d1[0], &r0[0], &r1[0], &dy[0])
		}
	}
	t := ow - n
	if t == 0 {
		return ow
	}
	var a, b, da, db [16]float32
	var g, o [8]float32
	copy(a[:], r0[2*n:2*ow])
	copy(b[:], r1[2*n:2*ow])
	if dy == nil {
		maxPool2F32(8, &o[0], &a[0], &b[0])
		copy(y[n:ow], o[:t])
		return ow
	}
	copy(g[:], dy[n:ow])
	maxPool2GradF32(8, &da[0], &db[0], &a[0], &b[0], &g[0])
	copy(d0[2*n:2*ow], da[:2*t])
	copy(d1[2*n:2*ow], db[:2*t])
	return ow
}

//go:noescape
func maxPool3F32(n int, y *float32, idx *int32, r0, r1, r2 *float32)

// maxPool3F32Row runs cnt windows of 3x3 at column stride 2 on AVX2: window j reads columns
// 2j, 2j+1, 2j+2 of rows r0, r1, r2 (each at least 2*cnt+1 long), and gets its max by takes
// in row-major order in y[j] (y not nil) or that max's place in the window, 0..8, in idx[j].
// A last partial vector goes through the kernel from zero-padded copies. It reports false,
// doing nothing, without AVX2.
func maxPool3F32Row(y []float32, idx []int32, r0, r1, r2 []float32, cnt int) bool {
	if !haveAVX2 {
		return false
	}
	var yp *float32
	var ip *int32
	// A whole vector starting at window j reads columns 2j to 2j+17: those inside the rows.
	n := max(0, min(cnt, (min(len(r0), len(r1), len(r2))-2)/2)) &^ 7
	if n > 0 {
		if y != nil {
			_ = y[n-1]
			yp = &y[0]
		}
		if idx != nil {
			_ = idx[n-1]
			ip = &idx[0]
		}
		maxPool3F32(n, yp, ip, &r0[0], &r1[0], &r2[0])
	}
	for ; n < cnt; n += 8 {
		var a, b, c [18]float32
		var yb [8]float32
		var ib [8]int32
		end := min(len(r0), 2*cnt+1)
		copy(a[:], r0[2*n:end])
		copy(b[:], r1[2*n:min(len(r1), 2*cnt+1)])
		copy(c[:], r2[2*n:min(len(r2), 2*cnt+1)])
		maxPool3F32(8, &yb[0], &ib[0], &a[0], &b[0], &c[0])
		t := min(8, cnt-n)
		if y != nil {
			copy(y[n:n+t], yb[:t])
		}
		if idx != nil {
			copy(idx[n:n+t], ib[:t])
		}
	}
	return true
}
