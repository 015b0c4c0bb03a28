package blas

import (
	"fmt"
	"unsafe"
)

// GemmPackedRows is GemmPacked with op(B) given by its rows, each a run of one slice: row k of
// op(B) is src[off[k] : off[k]+n]. It computes rows [i0, i1) of C = alpha*op(A)*op(B) + beta*C
// with op(A) packed in p (len(off) must be p.K()), c holding those rows of C as in GemmPacked,
// and gives the bits GemmPacked gives with that matrix materialised: the same kernel, the same k
// blocks, the same edge tiles; only the packing of B reads src through the offsets.
//
// It is a convolution without its im2col matrix: at stride 1, every row of that matrix is a run
// of the (zero-padded) image at the tap's offset, so the rows need not be copied out first.
// It runs on the calling goroutine only. With beta == 0, C is not read.
func GemmPackedRows[T Float](p *PackedA[T], i0, i1 int, n int, alpha T, src []T, off []int, beta T, c []T, ldc int) error {
	if p.cfg == nil {
		return fmt.Errorf("blas: GemmPackedRows with an empty PackedA")
	}
	if i0 < 0 || i1 < i0 || i1 > p.m || i0%p.cfg.mr != 0 {
		return fmt.Errorf("blas: GemmPackedRows rows [%d,%d) of a %d-row PackedA: the range must lie within it and start at a multiple of %d", i0, i1, p.m, p.cfg.mr)
	}
	if len(off) != p.k {
		return fmt.Errorf("blas: GemmPackedRows has %d row offsets for a PackedA of k=%d", len(off), p.k)
	}
	m := i1 - i0
	if n < 0 {
		return fmt.Errorf("blas: GemmPackedRows with a negative column count %d", n)
	}
	if ldc < max(1, n) {
		return fmt.Errorf("blas: GemmPackedRows leading dimension of C is %d, below its %d columns", ldc, n)
	}
	if m > 0 && n > 0 && len(c) < (m-1)*ldc+n {
		return fmt.Errorf("blas: GemmPackedRows C has %d elements, a %dx%d matrix with leading dimension %d needs %d", len(c), m, n, ldc, (m-1)*ldc+n)
	}
	if m == 0 || n == 0 {
		return nil
	}
	if p.k == 0 || alpha == 0 {
		scale(m, n, beta, c, ldc)
		return nil
	}
	for k, o := range off {
		if o < 0 || o > len(src)-n {
			return fmt.Errorf("blas: GemmPackedRows row %d of B is src[%d:%d], outside the %d elements of src", k, o, o+n, len(src))
		}
	}
	gemmPackedSerial(p, i0, m, false, n, alpha, src, 0, off, beta, c, ldc)
	return nil
}

// packRows writes columns j0..j0+cols of the rows at offs (row p is src[offs[p]:]) as
// len(offs) groups of nr values, zero past the last column: packB's sliver, read through the
// offsets. The caller has checked that every row holds its columns.
func packRows[T Float](dst, src []T, offs []int, j0, cols, nr int) {
	if cols == nr && copyRows(dst, src[j0:], offs, nr) {
		return
	}
	if cols < nr {
		clear(dst)
	}
	for p, o := range offs {
		copy(dst[p*nr:p*nr+cols], src[o+j0:o+j0+cols])
	}
}

// copyRows copies len(offs) groups of nr values, group p from src[offs[p]:], with vector moves
// where the CPU has them (copyGroups with an offset table for the fixed stride). It reports
// false where it did nothing.
func copyRows[T Float](dst, src []T, offs []int, nr int) bool {
	var zero T
	size := int(unsafe.Sizeof(zero))
	gb := nr * size
	if !hasAVX || (gb != 32 && gb != 64 && gb != 128) || len(offs) == 0 {
		return false
	}
	_ = dst[len(offs)*nr-1] // the bound the assembly relies on for dst; src's is GemmPackedRows's check
	copyRowsAVX(unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[0]), &offs[0], len(offs), gb, size)
	return true
}
