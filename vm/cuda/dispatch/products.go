package dispatch

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

// planLinAlg plans gorgonia's linAlgBinOp, every operator through cuBLAS's
// GEMM (the runner's one cuBLAS entry): matrix-matrix as one GEMM,
// matrix-vector as an m x 1 product (gemv's shape), the dot product as 1 x 1
// (k = n), the outer product as k = 1 (ger's shape), and the batched product
// as one GEMM per matrix of the batch.
func planLinAlg(c fn) (plan, error) {
	f := strings.Fields(fmt.Sprint(c.f.Op))
	if len(f) != 3 || len(c.ins) != 2 {
		return plan{}, c.unsupported("unexpected linear algebra op")
	}
	tA, err := boolField(c.f.Op, "transA")
	if err != nil {
		return plan{}, c.unsupported(err.Error())
	}
	tB, err := boolField(c.f.Op, "transB")
	if err != nil {
		return plan{}, c.unsupported(err.Error())
	}
	A, B := c.in(0), c.in(1)
	switch {
	case f[1] == "×" && strings.HasPrefix(f[2], "B"):
		return planMatMul(c, tA, tB)
	case f[1] == "×": // matrix-vector
		if len(A) != 2 || len(B) != 1 {
			return plan{}, c.unsupported(fmt.Sprintf("matrix-vector product of %v and %v", A, B))
		}
		m, k := A[0], A[1]
		if tA {
			m, k = k, m
		}
		if k != B[0] || int64(m) != total(c.out.Shape) {
			return plan{}, c.unsupported(fmt.Sprintf("matrix-vector product of %v and %v into %v", A, B, c.out.Shape))
		}
		return plan{run: func(r *Runner, a addrs) error {
			return r.gemm(c.es, tA, false, m, 1, k, a.in[0], A[1], a.in[1], 1, 0, a.out, 1)
		}}, nil
	case f[1] == "⋅": // dot
		k := int(total(A))
		if int64(k) != total(B) {
			return plan{}, c.unsupported(fmt.Sprintf("dot product of %v and %v", A, B))
		}
		return plan{run: func(r *Runner, a addrs) error {
			return r.gemm(c.es, false, false, 1, 1, k, a.in[0], k, a.in[1], 1, 0, a.out, 1)
		}}, nil
	case f[1] == "⊗":
		m, n := int(total(A)), int(total(B))
		return plan{run: func(r *Runner, a addrs) error {
			return r.gemm(c.es, false, false, m, n, 1, a.in[0], 1, a.in[1], n, 0, a.out, n)
		}}, nil
	case f[1] == "×××":
		return planBatched(c, tA, tB)
	}
	return plan{}, c.unsupported("unknown linear algebra operator " + f[1])
}

// planBatched plans a batched matrix product: per batch index, one GEMM of
// the last two axes.
func planBatched(c fn, tA, tB bool) (plan, error) {
	A, B, C := c.in(0), c.in(1), c.out.Shape
	r := len(A)
	if r < 3 || len(B) != r || len(C) != r || !slices.Equal(A[:r-2], B[:r-2]) {
		return plan{}, c.unsupported(fmt.Sprintf("batched product of %v and %v", A, B))
	}
	m, n := C[r-2], C[r-1]
	k := A[r-1]
	if tA {
		k = A[r-2]
	}
	batch := total(A[:r-2])
	sa, sb, sc := uintptr(A[r-2]*A[r-1])*uintptr(c.es), uintptr(B[r-2]*B[r-1])*uintptr(c.es), uintptr(m*n)*uintptr(c.es)
	return plan{run: func(rn *Runner, a addrs) error {
		for i := uintptr(0); i < uintptr(batch); i++ {
			if err := rn.gemm(c.es, tA, tB, m, n, k, a.in[0]+i*sa, A[r-1], a.in[1]+i*sb, B[r-1], 0, a.out+i*sc, n); err != nil {
				return err
			}
		}
		return nil
	}}, nil
}

// planTensordot plans gorgonia's tensordotOp (tensor.Contract): each operand
// is transposed, when its axes are not already in place, into the runner's
// scratch as a matrix (a: free axes, then the contracted ones in aAxes'
// order; b: the contracted ones in bAxes' order, then its free axes), then
// one GEMM writes the result (a's free axes, then b's).
func planTensordot(c fn) (plan, error) {
	aAxes, err := intsField(c.f.Op, "aAxes")
	if err != nil {
		return plan{}, c.unsupported(err.Error())
	}
	bAxes, err := intsField(c.f.Op, "bAxes")
	if err != nil {
		return plan{}, c.unsupported(err.Error())
	}
	A, B := c.in(0), c.in(1)
	if len(aAxes) != len(bAxes) {
		return plan{}, c.unsupported(fmt.Sprintf("contracting axes %v with %v", aAxes, bAxes))
	}
	pa, m, k, err := contractOrder(A, aAxes, true)
	if err != nil {
		return plan{}, c.unsupported(err.Error())
	}
	pb, n, kb, err := contractOrder(B, bAxes, false)
	if err != nil {
		return plan{}, c.unsupported(err.Error())
	}
	for i := range aAxes {
		if A[aAxes[i]] != B[bAxes[i]] {
			return plan{}, c.unsupported(fmt.Sprintf("axis %d of %v against axis %d of %v", aAxes[i], A, bAxes[i], B))
		}
	}
	if k != kb || int64(m)*int64(n) != total(c.out.Shape) {
		return plan{}, c.unsupported(fmt.Sprintf("contraction of %v and %v into %v", A, B, c.out.Shape))
	}
	type side struct {
		copy bool
		l    kernels.Layout
		off  int64 // in the scratch
		n    int64
	}
	var scratch int64
	mk := func(s []int, p []int) (side, error) {
		if slices.IsSorted(p) {
			return side{}, nil
		}
		l, err := permuteLayout(s, p)
		sd := side{copy: true, l: l, off: scratch, n: total(s)}
		scratch += alignUp(sd.n * c.es)
		return sd, err
	}
	sa, err := mk(A, pa)
	if err != nil {
		return plan{}, c.unsupported(err.Error())
	}
	sb, err := mk(B, pb)
	if err != nil {
		return plan{}, c.unsupported(err.Error())
	}
	return plan{scratch: scratch, run: func(r *Runner, a addrs) error {
		in := [2]uintptr{a.in[0], a.in[1]}
		for i, s := range [2]side{sa, sb} {
			if !s.copy {
				continue
			}
			dst := r.scratch() + uintptr(s.off)
			if err := copyLaunch(r, c.sfx, dst, in[i], s.n, s.l); err != nil {
				return err
			}
			in[i] = dst
		}
		return r.gemm(c.es, false, false, m, n, k, in[0], k, in[1], n, 0, a.out, n)
	}}, nil
}

// contractOrder is the permutation that puts s's free axes first and the
// contracted ones last in axes' order (freeFirst), or the contracted ones
// first; with the product of the free and of the contracted lengths.
func contractOrder(s []int, axes []int, freeFirst bool) (p []int, free, k int, err error) {
	free, k = 1, 1
	var fr []int
	for d := range s {
		if !slices.Contains(axes, d) {
			fr = append(fr, d)
			free *= s[d]
		}
	}
	for _, ax := range axes {
		if ax < 0 || ax >= len(s) {
			return nil, 0, 0, fmt.Errorf("axis %d of %v", ax, s)
		}
		k *= s[ax]
	}
	if freeFirst {
		p = append(fr, axes...)
	} else {
		p = append(slices.Clone(axes), fr...)
	}
	return p, free, k, nil
}
