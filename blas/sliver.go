package blas

import "fmt"

// SliverSource supplies one operand of GemmSlivers a sliver at a time, so that an operand that
// is never stored whole (a convolution's im2col matrix, read straight from the image) goes to
// the kernel without being materialised and then packed: one pass over it instead of two.
//
// The operand is a matrix of rows x k (op(A), or op(B) transposed: its rows are C's rows, or
// C's columns). PackSliver writes its rows [i0, i0+rows) over k [p0, p0+kc) into dst as kc
// groups of g values, element (i0+r, p0+p) at dst[p*g+r]. When rows < g, dst arrives cleared
// and the rest of each group must stay 0.
type SliverSource[T Float] interface {
	PackSliver(dst []T, i0, rows, p0, kc, g int)
}

// Stored is a SliverSource over a matrix in memory: element (i, p) at Data[i*Ld+p], or at
// Data[p*Ld+i] with KMajor (the layout of op(B) for an untransposed B).
type Stored[T Float] struct {
	Data   []T
	Ld     int
	KMajor bool
}

// PackSliver packs rows [i0, i0+rows) over k [p0, p0+kc) as Gemm's packing does.
func (s *Stored[T]) PackSliver(dst []T, i0, rows, p0, kc, g int) {
	if s.KMajor {
		packB(dst, s.Data, s.Ld, false, p0, kc, i0, rows, g)
		return
	}
	transposeInto(dst, s.Data[i0*s.Ld+p0:], s.Ld, rows, kc, g)
}

// GemmSlivers computes C = alpha*A*B + beta*C, A m x k from a and B k x n from b (b supplies
// Bᵀ: its rows are C's columns), on the calling goroutine: it is for callers that split their
// work over goroutines themselves. Every element of C gets the arithmetic Gemm gives it for the
// same A and B (the same kernel, the same k blocks of KBlock), so a caller may split a product
// by rows, by columns, or by k blocks added later in order (C = acc of the first block with
// beta = 0, then C + acc of each next: what beta = 1 does). With beta == 0, C is not read.
func GemmSlivers[T Float](m, n, k int, alpha T, a, b SliverSource[T], beta T, c []T, ldc int) error {
	if m < 0 || n < 0 || k < 0 {
		return fmt.Errorf("blas: GemmSlivers of negative size %dx%dx%d", m, n, k)
	}
	if m == 0 || n == 0 {
		return nil
	}
	if ldc < max(1, n) || len(c) < (m-1)*ldc+n {
		return fmt.Errorf("blas: GemmSlivers C of %d elements, ldc %d, too small for %dx%d", len(c), ldc, m, n)
	}
	if k == 0 || alpha == 0 {
		scale(m, n, beta, c, ldc)
		return nil
	}
	cfg := configOf[T](active.Load())
	for i0 := 0; i0 < m; i0 += rowPanel {
		gemmSliversPanel(cfg, min(rowPanel, m-i0), i0, n, k, alpha, a, b, beta, c[i0*ldc:], ldc)
	}
	return nil
}

// gemmSliversPanel is gemmPanel on one goroutine with the packing done by the sources.
func gemmSliversPanel[T Float](cfg *config[T], m, i0, n, k int, alpha T, a, b SliverSource[T], beta T, c []T, ldc int) {
	mr, nr := cfg.mr, cfg.nr
	mp := roundUp(m, mr)
	kcMax := min(cfg.kc, k)
	npMax := roundUp(min(cfg.nc, n), nr)
	ws := getBuf[T](mp*kcMax + npMax*kcMax + mr*nr)
	defer putBuf(ws)
	buf := *ws
	j := panelJob[T]{
		cfg: cfg, m: m, alpha: alpha, c: c, ldc: ldc,
		edge: buf[mp*kcMax+npMax*kcMax:],
		aSl:  mp / mr,
	}
	rowBlocks := (m + cfg.mc - 1) / cfg.mc
	for j.jc = 0; j.jc < n; j.jc += cfg.nc {
		j.nc = min(cfg.nc, n-j.jc)
		np := roundUp(j.nc, nr)
		j.bSl = np / nr
		j.nb, j.colBlocks = np, 1
		for j.pc = 0; j.pc < k; j.pc += cfg.kc {
			j.kc = min(cfg.kc, k-j.pc)
			j.beta = beta
			if j.pc > 0 {
				j.beta = 1
			}
			j.ap = buf[:mp*j.kc]
			j.bp = buf[mp*kcMax : mp*kcMax+np*j.kc]
			packSlivers(j.ap, a, i0, m, j.pc, j.kc, mr)
			packSlivers(j.bp, b, j.jc, j.nc, j.pc, j.kc, nr)
			for it := 0; it < rowBlocks; it++ {
				j.compute(it, 0)
			}
		}
	}
}

// packSlivers packs rows [i0, i0+rows) of a source as slivers of g rows, each kc*g values.
func packSlivers[T Float](dst []T, s SliverSource[T], i0, rows, p0, kc, g int) {
	for r := 0; r < rows; r += g {
		sl := dst[r*kc : (r+g)*kc]
		h := min(g, rows-r)
		if h < g {
			clear(sl)
		}
		s.PackSliver(sl, i0+r, h, p0, kc, g)
	}
}
