package layers

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/gorgonia-ooc/outofcore/blas"
)

// TestColSliversIsIm2col: the slivers packed straight from the images hold im2col's matrix,
// for a unit of one image or a chunk of several (blocks across an image's end), strided,
// dilated and padded kernels, slivers of 4, 6, 8 (interleaved) and 16 lanes (tap by tap), and
// slivers short of their width; float32 (six lanes interleaved in AVX2 where the CPU has it) and
// float64.
func TestColSliversIsIm2col(t *testing.T) {
	colSliversCase[float32](t)
	colSliversCase[float64](t)
}

func colSliversCase[T blas.Float](t *testing.T) {
	geoms := []struct {
		n, c, h, w, k int
		p             ConvParams
	}{
		{1, 2, 28, 28, 3, Square(1, 1)},
		{3, 3, 9, 7, 3, Square(1, 1)}, // 63 pixels: blocks across images
		{2, 2, 11, 13, 5, ConvParams{StrideH: 2, StrideW: 3, PadH: 2, PadW: 1}},
		{1, 2, 12, 12, 3, ConvParams{PadH: 3, PadW: 3, DilationH: 4, DilationW: 5}}, // taps that see none of a row
		{2, 3, 5, 5, 1, Square(1, 0)},
	}
	rng := rand.New(rand.NewSource(3))
	for gi, g := range geoms {
		p := g.p.norm()
		d := convDims{N: g.n, C: g.c, H: g.h, W: g.w, KH: g.k, KW: g.k, O: 1}
		d.OH = convOutSize(g.h, g.k, p.StrideH, p.PadH, p.DilationH)
		d.OW = convOutSize(g.w, g.k, p.StrideW, p.PadW, p.DilationW)
		P, K, xSize := d.outPix(), d.colRows(), g.c*g.h*g.w
		L := g.n * P
		x := make([]T, g.n*xSize)
		for i, v := range randData(rng, len(x)) {
			x[i] = T(v)
		}
		col := make([]T, K*L)
		for i := 0; i < g.n; i++ {
			im2col(x[i*xSize:(i+1)*xSize], col[i*P:], L, d, p, 0, P, 0, g.c)
		}
		for _, lanes := range []int{4, 6, 8, 16} {
			for q0 := 0; q0 < L; q0 += 40 {
				for _, t0 := range []int{0, 1} {
					s := &colSlivers[T]{x: x, d: d, p: p, q0: q0, t0: t0, xSize: xSize, taps: colTaps(nil, d, p)}
					kc := min(40, L-q0)
					for i0 := 0; i0 < K-t0; i0 += lanes {
						rows := min(lanes, K-t0-i0)
						dst := make([]T, kc*lanes)
						if rows == lanes {
							for i := range dst {
								dst[i] = T(math.NaN())
							}
						}
						s.PackSliver(dst, i0, rows, 3, kc-3, lanes)
						for k := 0; k < kc-3; k++ {
							for r := 0; r < lanes; r++ {
								var want T
								if r < rows {
									want = col[(t0+i0+r)*L+q0+3+k]
								}
								if got := dst[k*lanes+r]; math.Float64bits(float64(got)) != math.Float64bits(float64(want)) {
									t.Fatalf("%s: pixel %d of block %d, tap %d: %v, im2col has %v",
										fmt.Sprintf("%T geometry %d, %d lanes", want, gi, lanes), 3+k, q0, t0+i0+r, got, want)
								}
							}
						}
					}
				}
			}
		}
	}
}

// TestDySliversIsDyT: dyᵀ's slivers hold a unit's gradients image after image, for float32
// (whole groups of eight channels in AVX2 where the CPU has it) and float64, slivers of 8, 16
// and a part of one, runs across images and of lengths not a multiple of eight.
func TestDySliversIsDyT(t *testing.T) {
	dySliversCase[float32](t)
	dySliversCase[float64](t)
}

func dySliversCase[T blas.Float](t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	for _, g := range []struct{ n, o, p int }{{3, 16, 37}, {2, 20, 256}, {4, 8, 9}} {
		ySize, L := g.o*g.p, g.n*g.p
		dy := make([]T, g.n*ySize)
		for i, v := range randData(rng, len(dy)) {
			dy[i] = T(v)
		}
		for _, lanes := range []int{8, 16} {
			for q0 := 0; q0 < L; q0 += 29 {
				s := &dySlivers[T]{dy: dy, P: g.p, q0: q0, ySize: ySize}
				kc := min(45, L-q0)
				for i0 := 0; i0 < g.o; i0 += lanes {
					rows := min(lanes, g.o-i0)
					dst := make([]T, kc*lanes)
					if rows == lanes {
						for i := range dst {
							dst[i] = T(math.NaN())
						}
					}
					s.PackSliver(dst, i0, rows, 2, kc-2, lanes)
					for k := 0; k < kc-2; k++ {
						q := q0 + 2 + k
						for r := 0; r < lanes; r++ {
							var want T
							if r < rows {
								want = dy[q/g.p*ySize+(i0+r)*g.p+q%g.p]
							}
							if got := dst[k*lanes+r]; math.Float64bits(float64(got)) != math.Float64bits(float64(want)) {
								t.Fatalf("%T %v, %d lanes: pixel %d of block %d, channel %d: %v, dy has %v", want, g, lanes, 2+k, q0, i0+r, got, want)
							}
						}
					}
				}
			}
		}
	}
}
