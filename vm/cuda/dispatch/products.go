package dispatch

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

// planLinAlg plans gorgonia's linAlgBinOp through cuBLAS's entry point for
// each shape, the BLAS call the CPU device makes for it (tensor's MatMul,
// MatVecMul, Inner and Outer call gemm, gemv, dot and ger): matrix-matrix as
// one GEMM, matrix-vector as gemv, the dot product as dot (its result
// written on the device: no host synchronisation), the outer product as a
// fill and ger, and the batched product as one batched GEMM.
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
			return r.gemv(c.es, tA, A[0], A[1], a.in[0], a.in[1], a.out)
		}}, nil
	case f[1] == "⋅": // dot
		k := int(total(A))
		if int64(k) != total(B) || total(c.out.Shape) != 1 {
			return plan{}, c.unsupported(fmt.Sprintf("dot product of %v and %v", A, B))
		}
		return plan{run: func(r *Runner, a addrs) error { return r.dot(c.es, k, a.in[0], a.in[1], a.out) }}, nil
	case f[1] == "⊗":
		m, n := int(total(A)), int(total(B))
		if int64(m)*int64(n) != total(c.out.Shape) {
			return plan{}, c.unsupported(fmt.Sprintf("outer product of %v and %v into %v", A, B, c.out.Shape))
		}
		return plan{run: func(r *Runner, a addrs) error { return r.outer(c.es, c.sfx, m, n, a.in[0], a.in[1], a.out) }}, nil
	case f[1] == "×××":
		return planBatched(c, tA, tB)
	}
	return plan{}, c.unsupported("unknown linear algebra operator " + f[1])
}

// planBatched plans a batched matrix product (gorgonia runs one GEMM per
// batch index, of the last two axes) as one cublas{S,D}gemmBatched. That call
// reads the matrices' addresses from arrays in device memory; they are the
// plan's fixed bytes of the runner's segment (outside the budget, 24 bytes
// per matrix of the batch), written when the operands' addresses change
// (an upload ordered on the compute stream) and kept while they stay.
// cublas{S,D}gemmStridedBatched needs no arrays but takes 18 arguments, more
// than purego's calls pass (15).
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
	batch := int(total(A[:r-2]))
	sa, sb, sc := uintptr(A[r-2]*A[r-1])*uintptr(c.es), uintptr(B[r-2]*B[r-1])*uintptr(c.es), uintptr(m*n)*uintptr(c.es)
	var last [3]uintptr // the operands' addresses the arrays were written for
	var buf []byte
	return plan{fixed: 3 * 8 * int64(batch), run: func(rn *Runner, a addrs) error {
		if batch == 0 {
			return nil
		}
		if now := [3]uintptr{a.in[0], a.in[1], a.out}; now != last {
			buf = batchAddrs(buf[:0], now, [3]uintptr{sa, sb, sc}, batch)
			if err := rn.upload(a.fixed, buf); err != nil {
				return err
			}
			last = now
		}
		return rn.gemmBatched(c.es, tA, tB, m, n, k, A[r-1], B[r-1], a.fixed, batch)
	}}, nil
}

// batchAddrs appends the addresses of each operand's batch matrices (base
// plus i times its stride), operand after operand, as 8-byte device pointers.
func batchAddrs(b []byte, base, stride [3]uintptr, batch int) []byte {
	for o := range base {
		for i := 0; i < batch; i++ {
			b = binary.LittleEndian.AppendUint64(b, uint64(base[o]+uintptr(i)*stride[o]))
		}
	}
	return b
}

// planTensordot plans gorgonia's tensordotOp (tensor.Contract): each operand
// is transposed, when its axes are not already in place, into the function's
// workspace (plan.work) as a matrix (a: free axes, then the contracted ones in aAxes'
// order; b: the contracted ones in bAxes' order, then its free axes), then
// one cuBLAS call writes the result (a's free axes, then b's): contract says
// which.
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
		off  int64 // in the workspace
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
	return plan{work: scratch, run: func(r *Runner, a addrs) error {
		in := [2]uintptr{a.in[0], a.in[1]}
		for i, s := range [2]side{sa, sb} {
			if !s.copy {
				continue
			}
			dst := a.work + uintptr(s.off)
			if err := copyLaunch(r, c.sfx, dst, in[i], s.n, s.l); err != nil {
				return err
			}
			in[i] = dst
		}
		return contract(r, c.es, m, n, k, in[0], in[1], a.out)
	}}, nil
}

// contract writes the row-major product of a (m x k) and b (k x n) as
// tensor's TensorMul does it, whose tensor.Dot calls BLAS by the matrices'
// shapes: a (1, k) row and a (k, 1) column are vectors to it when k > 1, so
// the product is a dot, a gemv of bᵀ, or a gemv of a there, and a GEMM
// otherwise (shapes where k is 1 and m or n is not, which tensor mistakes for
// vectors and refuses or multiplies wrongly, get the GEMM's right answer).
func contract(r *Runner, es int64, m, n, k int, a, b, out uintptr) error {
	switch {
	case k > 1 && m == 1 && n == 1:
		return r.dot(es, k, a, b, out)
	case k > 1 && m == 1:
		return r.gemv(es, true, k, n, b, a, out)
	case k > 1 && n == 1:
		return r.gemv(es, false, m, k, a, b, out)
	}
	return r.gemm(es, false, false, m, n, k, a, k, b, n, 0, out, n)
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
