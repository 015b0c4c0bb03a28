package blas

import (
	"fmt"

	"github.com/gorgonia-ooc/outofcore/internal/workpool"
)

// PackedA is op(A) packed once in the GEMM's panel layout, for several products that share their
// left operand: a convolution multiplies the same weights by each image of a batch, and packing
// them once per layer call instead of once per image is what this saves. GemmPacked with it
// gives the bits Gemm gives with the unpacked A.
//
// The zero value is empty; Pack fills it and reuses its buffer, so a PackedA kept across calls
// allocates only when A grows. It holds the kernel that was active when it was packed.
type PackedA[T Float] struct {
	cfg  *config[T]
	m, k int
	data []T // for each k block from pc: roundUp(m, mr) rows as slivers of mr, at offset roundUp(m, mr)*pc
	// job is the packing's workpool.Job, kept here: a local one escapes to the heap through the
	// Job interface, an allocation per Pack (a convolution's weight gradient packs per image).
	job packAJob[T]
}

// Rows and K are op(A)'s size as packed.
func (p *PackedA[T]) Rows() int { return p.m }
func (p *PackedA[T]) K() int    { return p.k }

// RowAlign is what the first row of a GemmPacked row range must be a multiple of (the kernel's
// row sliver): 0 for an empty PackedA.
func (p *PackedA[T]) RowAlign() int {
	if p.cfg == nil {
		return 0
	}
	return p.cfg.mr
}

func configOf[T Float](ks *kernelSet) *config[T] {
	if c, ok := any(&ks.s).(*config[T]); ok {
		return c
	}
	return any(&ks.d).(*config[T])
}

// Pack packs op(A), m x k (A stored row-major with leading dimension lda, transposed if tA),
// splitting the copy over Workers() goroutines when it is large.
func (p *PackedA[T]) Pack(tA bool, m, k int, a []T, lda int) error {
	workers := Workers()
	if m*k < serialBelow/8 {
		workers = 1
	}
	return p.pack(workers, tA, m, k, a, lda)
}

// PackSerial is Pack on the calling goroutine only, for callers that split work themselves.
func (p *PackedA[T]) PackSerial(tA bool, m, k int, a []T, lda int) error {
	return p.pack(1, tA, m, k, a, lda)
}

func (p *PackedA[T]) pack(workers int, tA bool, m, k int, a []T, lda int) error {
	if err := checkGemm(tA, false, m, 1, k, len(a), lda, k, 1, m, 1); err != nil {
		return err
	}
	cfg := configOf[T](active.Load())
	mp := roundUp(m, cfg.mr)
	if cap(p.data) < mp*k {
		p.data = make([]T, mp*k)
	}
	*p = PackedA[T]{cfg: cfg, m: m, k: k, data: p.data[:mp*k]}
	p.job = packAJob[T]{p: p, tA: tA, a: a, lda: lda, slivers: mp / cfg.mr}
	p.job.groups = (p.job.slivers + packGrain - 1) / packGrain
	items := p.job.groups * ((k + cfg.kc - 1) / cfg.kc)
	workpool.Run(workers, items, &p.job)
	p.job.a = nil // A is the caller's: do not keep it alive
	return nil
}

type packAJob[T Float] struct {
	p               *PackedA[T]
	tA              bool
	a               []T
	lda             int
	slivers, groups int
}

// Run packs one group of slivers of one k block.
func (j *packAJob[T]) Run(it, _ int) {
	p, mr := j.p, j.p.cfg.mr
	pc := (it / j.groups) * p.cfg.kc
	kc := min(p.cfg.kc, p.k-pc)
	base := roundUp(p.m, mr) * pc
	for s := (it % j.groups) * packGrain; s < min(j.slivers, (it%j.groups+1)*packGrain); s++ {
		packA(p.data[base+s*mr*kc:base+(s+1)*mr*kc], j.a, j.lda, j.tA, s*mr, min(mr, p.m-s*mr), pc, kc, mr)
	}
}

// GemmPacked computes rows [i0, i1) of C = alpha*op(A)*op(B) + beta*C with op(A) packed in p:
// op(B) is p.K() x n, and c holds those rows of C, row i0 at c[0] and row i at c[(i-i0)*ldc].
// i0 must be a multiple of p.RowAlign(). It runs on the calling goroutine only: it is for
// callers that split their work over goroutines themselves (by column ranges or row ranges of
// C, which changes no result). With beta == 0, C is not read.
func GemmPacked[T Float](p *PackedA[T], i0, i1 int, tB bool, n int, alpha T, b []T, ldb int, beta T, c []T, ldc int) error {
	if p.cfg == nil {
		return fmt.Errorf("blas: GemmPacked with an empty PackedA")
	}
	if i0 < 0 || i1 < i0 || i1 > p.m || i0%p.cfg.mr != 0 {
		return fmt.Errorf("blas: GemmPacked rows [%d,%d) of a %d-row PackedA: the range must lie within it and start at a multiple of %d", i0, i1, p.m, p.cfg.mr)
	}
	m, k := i1-i0, p.k
	if err := checkGemm(false, tB, m, n, k, m*k, max(1, k), len(b), ldb, len(c), ldc); err != nil {
		return err
	}
	if m == 0 || n == 0 {
		return nil
	}
	if k == 0 || alpha == 0 {
		scale(m, n, beta, c, ldc)
		return nil
	}
	gemmPackedSerial(p, i0, m, tB, n, alpha, b, ldb, nil, beta, c, ldc)
	return nil
}

// gemmPackedSerial is gemmPanel on one goroutine with A already packed: the same panels go to
// the same kernel, so each element of C gets the same arithmetic. With off (GemmPackedRows), row
// k of op(B) is b[off[k]:] instead, which only B's packing reads.
func gemmPackedSerial[T Float](p *PackedA[T], i0, m int, tB bool, n int, alpha T, b []T, ldb int, off []int, beta T, c []T, ldc int) {
	cfg := p.cfg
	mr, nr := cfg.mr, cfg.nr
	kcMax := min(cfg.kc, p.k)
	npMax := roundUp(min(cfg.nc, n), nr)
	ws := getBuf[T](npMax*kcMax + mr*nr)
	defer putBuf(ws)
	buf := *ws
	mpFull := roundUp(p.m, mr)
	j := panelJob[T]{
		cfg: cfg, tB: tB, m: m, alpha: alpha, b: b, ldb: ldb, off: off, c: c, ldc: ldc,
		bp:   buf[:npMax*kcMax],
		edge: buf[npMax*kcMax:],
		aSl:  roundUp(m, mr) / mr,
	}
	rowBlocks := (m + cfg.mc - 1) / cfg.mc
	for j.jc = 0; j.jc < n; j.jc += cfg.nc {
		j.nc = min(cfg.nc, n-j.jc)
		np := roundUp(j.nc, nr)
		j.bSl = np / nr
		j.nb, j.colBlocks = np, 1
		for j.pc = 0; j.pc < p.k; j.pc += cfg.kc {
			j.kc = min(cfg.kc, p.k-j.pc)
			j.beta = beta
			if j.pc > 0 {
				j.beta = 1
			}
			start := mpFull*j.pc + i0*j.kc
			j.ap = p.data[start : start+j.aSl*mr*j.kc]
			for it := 0; it < (j.bSl+packGrain-1)/packGrain; it++ {
				j.pack(it) // aItems is 0: B slivers only
			}
			for it := 0; it < rowBlocks; it++ {
				j.compute(it, 0)
			}
		}
	}
}
