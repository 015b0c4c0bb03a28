package kernelcheck

import (
	"math"
	"math/rand"

	G "gorgonia.org/gorgonia"

	"github.com/gorgonia-ooc/outofcore/models/layers"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

// gemm is the host stand-in for cuBLAS in the convolution tests:
// C (m x n) = op(A)·op(B) + beta·C, row-major, float64 accumulation.
func gemm[T float32 | float64](tA, tB bool, mm, n, k int, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	for i := 0; i < mm; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for l := 0; l < k; l++ {
				ai, bi := i*lda+l, l*ldb+j
				if tA {
					ai = l*lda + i
				}
				if tB {
					bi = j*ldb + l
				}
				av, bv := a[ai], b[bi]
				s += float64(av) * float64(bv)
			}
			c[i*ldc+j] = T(s) + beta*c[i*ldc+j]
		}
	}
}

type convCase struct {
	N, C, H, W, O, K int
	p                layers.ConvParams
}

var convCases = []convCase{
	{2, 3, 7, 6, 4, 3, layers.Square(1, 1)},
	{1, 2, 9, 9, 3, 3, layers.Square(2, 1)},
	{2, 3, 8, 7, 2, 1, layers.Square(1, 0)},
	{1, 2, 11, 10, 3, 3, layers.ConvParams{StrideH: 2, StrideW: 1, PadH: 2, PadW: 1, DilationH: 2, DilationW: 1}},
	{3, 1, 5, 5, 2, 5, layers.Square(1, 2)},
}

func norm(p layers.ConvParams) layers.ConvParams {
	for _, v := range []*int{&p.StrideH, &p.StrideW, &p.DilationH, &p.DilationW} {
		if *v == 0 {
			*v = 1
		}
	}
	return p
}

func testConv[T float32 | float64](t TB, m *Mem, c convCase) {
	s := suffix[T]()
	rng := rand.New(rand.NewSource(11))
	g := G.NewGraph()
	xn, wn, bn := input[T](g, "x", c.N, c.C, c.H, c.W), input[T](g, "w", c.O, c.C, c.K, c.K), input[T](g, "b", c.O)
	y := must(t)(layers.Conv2D(xn, wn, bn, c.p))
	ys := y.Shape()
	dyn := input[T](g, "dy", ys...)
	grads, err := y.Op().(G.SDOp).SymDiff(G.Nodes{xn, wn, bn}, y, dyn)
	if err != nil {
		t.Fatal(err)
	}
	x, w, b := randn[T](rng, c.N*c.C*c.H*c.W, 1), randn[T](rng, c.O*c.C*c.K*c.K, 1), randn[T](rng, c.O, 1)
	dy := randn[T](rng, ys.TotalSize(), 1)
	xv, wv, bv, dyv := dense(x, c.N, c.C, c.H, c.W), dense(w, c.O, c.C, c.K, c.K), dense(b, c.O), dense(dy, ys...)
	wantY := data[T](t, do(t, y.Op(), xv, wv, bv))
	wantDX := data[T](t, do(t, grads[0].Op(), wv, dyv))
	wantDW := data[T](t, do(t, grads[1].Op(), xv, dyv))
	wantDB := data[T](t, do(t, grads[2].Op(), dyv))

	p := norm(c.p)
	OH, OW := ys[2], ys[3]
	geo := kernels.ConvGeom{C: int64(c.C), H: int64(c.H), W: int64(c.W), KH: int64(c.K), KW: int64(c.K), OH: int64(OH), OW: int64(OW),
		SH: int64(p.StrideH), SW: int64(p.StrideW), PH: int64(p.PadH), PW: int64(p.PadW), DH: int64(p.DilationH), DW: int64(p.DilationW)}
	K, P := c.C*c.K*c.K, OH*OW
	// Whole batch in one column matrix (nb = N): ld = N·P.
	ld := c.N * P
	colB := newOut[T](m, K*ld)
	xb := put(m, x)
	m.launch("im2col_"+s, p2(colB), p2(xb), kernels.Int(int64(c.N)), kernels.ConvArg(geo), kernels.Int(int64(ld)))
	col := get[T](colB)
	// forward: stage = W·col (O x N·P), then per image and channel.
	stage := make([]T, c.O*ld)
	gemm(false, false, c.O, ld, K, w, K, col, ld, 0, stage, ld)
	yv := make([]T, len(wantY))
	for i := 0; i < c.N; i++ {
		for o := 0; o < c.O; o++ {
			copy(yv[(i*c.O+o)*P:], stage[o*ld+i*P:o*ld+(i+1)*P])
		}
	}
	yb := put(m, yv)
	m.launch("channel_bias_"+s, p2(yb), p2(put(m, b)), kernels.Int(int64(c.N)), kernels.Int(int64(c.O)), kernels.Int(int64(P)))
	compare(t, m, "conv forward "+s, get[T](yb), wantY, true)

	// filter gradient: dW = dy (O x N·P) · colᵀ.
	dys := make([]T, c.O*ld)
	for i := 0; i < c.N; i++ {
		for o := 0; o < c.O; o++ {
			copy(dys[o*ld+i*P:o*ld+(i+1)*P], dy[(i*c.O+o)*P:(i*c.O+o+1)*P])
		}
	}
	dw := make([]T, len(wantDW))
	gemm(false, true, c.O, K, ld, dys, ld, col, ld, 0, dw, K)
	compare(t, m, "conv filter "+s, dw, wantDW, true)

	// data gradient: col' = Wᵀ·dy, then col2im.
	colG := make([]T, K*ld)
	gemm(true, false, K, ld, c.O, w, K, dys, ld, 0, colG, ld)
	dxb := newOut[T](m, len(x))
	m.launch("col2im_"+s, p2(dxb), p2(put(m, colG)), kernels.Int(int64(c.N)), kernels.ConvArg(geo), kernels.Int(int64(ld)))
	compare(t, m, "conv data "+s, get[T](dxb), wantDX, true)

	// bias gradient.
	dbb := newOut[T](m, c.O)
	m.launch("channel_sum_"+s, p2(dbb), p2(put(m, dy)), kernels.Int(int64(c.N)), kernels.Int(int64(c.O)), kernels.Int(int64(P)))
	compare(t, m, "channel_sum_"+s, get[T](dbb), wantDB, true)
}

func p2(b *Buffer) kernels.Arg { return p(b) }

// col2imBitExact: col2im alone against the CPU op's col2im, through a
// 1x1-channel identity product so no GEMM rounding enters: the data gradient
// of a conv whose weight is the identity on one channel is col2im(dy spread).
func col2imBitExact(t TB, m *Mem) {
	rng := rand.New(rand.NewSource(12))
	// ConvTranspose2D (U-Net's 2x2 stride-2 up-convolution) with one input and
	// one output channel and w = 1 is col2im of x's pixels copied to each tap.
	g := G.NewGraph()
	xn, wn, bn := input[float32](g, "x", 2, 1, 3, 4), input[float32](g, "w", 1, 1, 3, 3), input[float32](g, "b", 1)
	up := must(t)(layers.ConvTranspose2D(xn, wn, bn, layers.Square(2, 1)))
	x := randn[float32](rng, 24, 1)
	w := []float32{1, 1, 1, 1, 1, 1, 1, 1, 1}
	b := []float32{0.25}
	want := data[float32](t, do(t, up.Op(), dense(w, 1, 1, 3, 3), dense(x, 2, 1, 3, 4), dense(b, 1)))
	us := up.Shape()
	geo := kernels.ConvGeom{C: 1, H: int64(us[2]), W: int64(us[3]), KH: 3, KW: 3, OH: 3, OW: 4, SH: 2, SW: 2, PH: 1, PW: 1, DH: 1, DW: 1}
	// col (9 x 2·12): every tap row is x (Wᵀ·x with w = 1 is exact).
	col := make([]float32, 9*24)
	for r := 0; r < 9; r++ {
		copy(col[r*24:], x)
	}
	out := newOut[float32](m, us.TotalSize())
	m.launch("col2im_f32", p(out), p(put(m, col)), kernels.Int(2), kernels.ConvArg(geo), kernels.Int(24))
	m.launch("channel_bias_f32", p(out), p(put(m, b)), kernels.Int(2), kernels.Int(1), kernels.Int(int64(us[2]*us[3])))
	got := get[float32](out)
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("col2im+bias element %d: %v, CPU %v", i, got[i], want[i])
		}
	}
	m.exactly()
}

// testConvTiles: Conv2D forward and data gradient of the first image in
// tiles of output pixels, as the VM runs a convolution whose workspace
// holds less than one image's column matrix: im2col_tile, a host GEMM and
// channel_bias per tile forward; per tile from the last, Wᵀ·dy and
// col2im_tile added onto the image, against models/layers' convOp.
func testConvTiles[T float32 | float64](t TB, m *Mem, c convCase, tile int) {
	t.Helper()
	s := suffix[T]()
	rng := rand.New(rand.NewSource(18))
	g := G.NewGraph()
	xn, wn, bn := input[T](g, "x", c.N, c.C, c.H, c.W), input[T](g, "w", c.O, c.C, c.K, c.K), input[T](g, "b", c.O)
	y := must(t)(layers.Conv2D(xn, wn, bn, c.p))
	ys := y.Shape()
	grads, err := y.Op().(G.SDOp).SymDiff(G.Nodes{xn, wn, bn}, y, input[T](g, "dy", ys...))
	if err != nil {
		t.Fatal(err)
	}
	x, w, b := randn[T](rng, c.N*c.C*c.H*c.W, 1), randn[T](rng, c.O*c.C*c.K*c.K, 1), randn[T](rng, c.O, 1)
	dy := randn[T](rng, ys.TotalSize(), 1)
	wantY := data[T](t, do(t, y.Op(), dense(x, c.N, c.C, c.H, c.W), dense(w, c.O, c.C, c.K, c.K), dense(b, c.O)))
	wantDX := data[T](t, do(t, grads[0].Op(), dense(w, c.O, c.C, c.K, c.K), dense(dy, ys...)))

	cp := norm(c.p)
	OH, OW := ys[2], ys[3]
	geo := kernels.ConvArg(kernels.ConvGeom{C: int64(c.C), H: int64(c.H), W: int64(c.W), KH: int64(c.K), KW: int64(c.K), OH: int64(OH), OW: int64(OW),
		SH: int64(cp.StrideH), SW: int64(cp.StrideW), PH: int64(cp.PadH), PW: int64(cp.PadW), DH: int64(cp.DilationH), DW: int64(cp.DilationW)})
	K, P, img := c.C*c.K*c.K, OH*OW, c.C*c.H*c.W
	xb := put(m, x[:img])
	yv := make([]T, c.O*P)
	for p0 := 0; p0 < P; p0 += tile {
		n := min(tile, P-p0)
		colB := newOut[T](m, K*n)
		m.launch("im2col_tile_"+s, p(colB), p(xb), geo, kernels.Int(int64(n)), kernels.Int(int64(p0)), kernels.Int(int64(n)))
		out := make([]T, c.O*n)
		gemm(false, false, c.O, n, K, w, K, get[T](colB), n, 0, out, n)
		for o := 0; o < c.O; o++ {
			copy(yv[o*P+p0:o*P+p0+n], out[o*n:(o+1)*n])
		}
	}
	yb := put(m, yv)
	m.launch("channel_bias_"+s, p(yb), p(put(m, b)), kernels.Int(1), kernels.Int(int64(c.O)), kernels.Int(int64(P)))
	compare(t, m, "conv forward in tiles "+s, get[T](yb), wantY[:c.O*P], true)

	dxb := put(m, make([]T, img))
	for p0 := (P - 1) / tile * tile; p0 >= 0; p0 -= tile {
		n := min(tile, P-p0)
		dyT := make([]T, c.O*n)
		for o := 0; o < c.O; o++ {
			copy(dyT[o*n:(o+1)*n], dy[o*P+p0:o*P+p0+n])
		}
		colG := make([]T, K*n)
		gemm(true, false, K, n, c.O, w, K, dyT, n, 0, colG, n)
		m.launch("col2im_tile_"+s, p(dxb), p(put(m, colG)), geo, kernels.Int(int64(n)), kernels.Int(int64(p0)), kernels.Int(int64(n)))
	}
	compare(t, m, "conv data gradient in tiles "+s, get[T](dxb), wantDX[:img], true)
}
