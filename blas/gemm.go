package blas

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gorgonia-ooc/outofcore/internal/freelist"
	"github.com/gorgonia-ooc/outofcore/internal/workpool"
)

// Float is the element type of a GEMM.
type Float interface{ float32 | float64 }

type float = Float

// kernFunc computes an MR x NR block of C from kc packed steps (see kernel_amd64.s).
type kernFunc[T float] func(kc int, a, b, c *T, ldc int, alpha, beta T)

// edgeFunc is a kernel for a partial tile, rows x cols of C (1 <= rows <= MR, 1 <= cols <= NR),
// from the same packed slivers (zero past their rows and columns), with the arithmetic kernFunc
// gives those elements, C written in place.
type edgeFunc[T float] func(kc int, a, b, c *T, ldc int, alpha, beta T, rows, cols int)

// KBlock is where every kernel cuts a k sum: each element of C gets the products of each block of
// KBlock consecutive k in order, the blocks added to C one after another. A product over k split
// into calls whose k are multiples of KBlock (all but the last), the later ones with beta = 1,
// therefore gives the same bits as one call: that is how a caller can tile the k dimension.
const KBlock = 256

// config is one kernel with its blocking. kc fixes where the k sum is cut (and so the rounding);
// mc and nc only size the packed panels. None of them depends on the thread count. edge, where
// there is one, does partial tiles; without it they go through a zero-padded copy to kern.
type config[T float] struct {
	mr, nr, kc, mc, nc int
	kern               kernFunc[T]
	edge               edgeFunc[T]
}

// edgeKernels says whether partial tiles use a config's edge kernel (a variable so that tests
// and benchmarks can compare with the copy through the full kernel).
var edgeKernels = true

type kernelSet struct {
	name string
	s    config[float32]
	d    config[float64]
}

// kernels lists what this CPU can run, fastest first; the portable Go kernel is always last.
var kernels = append(archKernels(), goKernels)

var active atomic.Pointer[kernelSet]

func init() { active.Store(&kernels[0]) }

// Kernel names the micro-kernel in use: "avx512" (amd64 with AVX-512F), "avx2" (amd64 with AVX2
// and FMA) or "go" (portable).
func Kernel() string { return active.Load().name }

// Kernels lists the kernels this CPU can run, fastest first.
func Kernels() []string {
	names := make([]string, len(kernels))
	for i, k := range kernels {
		names[i] = k.name
	}
	return names
}

// SetKernel selects a kernel by name. Results are the same bits for any thread count with a given
// kernel; avx512 and avx2 also agree with each other, but the portable kernel differs from them in
// the last bits (FMA rounds once, it rounds twice): choose "go" to reproduce results on a machine
// without AVX2. Not safe to call while GEMMs run.
func SetKernel(name string) error {
	for i := range kernels {
		if kernels[i].name == name {
			active.Store(&kernels[i])
			return nil
		}
	}
	return fmt.Errorf("blas: no kernel %q on this CPU (have %v)", name, Kernels())
}

// Gemm computes C = alpha*op(A)*op(B) + beta*C for row-major matrices, op(X) being X or its
// transpose: op(A) is m x k, op(B) k x n, C m x n, with leading dimensions lda, ldb and ldc.
// With beta == 0, C is not read (it may hold NaN); with alpha == 0 or k == 0, A and B are not read.
// The work is split over GOMAXPROCS goroutines, and the result does not depend on how many.
func Gemm[T Float](tA, tB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) error {
	if err := checkGemm(tA, tB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc); err != nil {
		return err
	}
	ks := active.Load()
	switch x := any(a).(type) {
	case []float32:
		gemm(&ks.s, tA, tB, m, n, k, float32(alpha), x, lda, any(b).([]float32), ldb, float32(beta), any(c).([]float32), ldc)
	case []float64:
		gemm(&ks.d, tA, tB, m, n, k, float64(alpha), x, lda, any(b).([]float64), ldb, float64(beta), any(c).([]float64), ldc)
	}
	return nil
}

func checkGemm(tA, tB bool, m, n, k, la, lda, lb, ldb, lc, ldc int) error {
	if m < 0 || n < 0 || k < 0 {
		return fmt.Errorf("blas: negative dimension in gemm (m=%d n=%d k=%d)", m, n, k)
	}
	ar, ac := m, k
	if tA {
		ar, ac = k, m
	}
	br, bc := k, n
	if tB {
		br, bc = n, k
	}
	for _, x := range []struct {
		name                 string
		rows, cols, ld, size int
	}{{"A", ar, ac, lda, la}, {"B", br, bc, ldb, lb}, {"C", m, n, ldc, lc}} {
		if x.ld < max(1, x.cols) {
			return fmt.Errorf("blas: gemm leading dimension of %s is %d, below its %d columns", x.name, x.ld, x.cols)
		}
		if x.rows > 0 && x.cols > 0 && x.size < (x.rows-1)*x.ld+x.cols {
			return fmt.Errorf("blas: gemm %s has %d elements, a %dx%d matrix with leading dimension %d needs %d",
				x.name, x.size, x.rows, x.cols, x.ld, (x.rows-1)*x.ld+x.cols)
		}
	}
	return nil
}

// workerCap is SetWorkers's cap (0: none).
var workerCap atomic.Int64

// SetWorkers caps the goroutines one GEMM uses at n (0 or less: no cap, GOMAXPROCS) and
// returns the previous cap. Several GEMMs running at once (data-parallel replicas on CPU
// devices, say) each split over all cores otherwise, and then fight over them. It changes no
// result: the split never touches a sum. It applies to the whole process.
func SetWorkers(n int) (prev int) {
	return int(workerCap.Swap(int64(max(n, 0))))
}

// Workers is how many goroutines a large GEMM splits over: GOMAXPROCS, or SetWorkers's cap if
// lower. The convolutions of models/layers split their own loops the same way.
func Workers() int {
	w := runtime.GOMAXPROCS(0)
	if c := int(workerCap.Load()); c > 0 {
		w = min(w, c)
	}
	return w
}

// serialBelow is the m*n*k under which a GEMM runs on the calling goroutine only: starting
// goroutines costs microseconds, about what such a product takes.
const serialBelow = 1 << 17

func gemm[T float](cfg *config[T], tA, tB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	if k == 0 || alpha == 0 {
		scale(m, n, beta, c, ldc)
		return
	}
	workers := Workers()
	if m*n*k < serialBelow {
		workers = 1
	}
	// Row panels bound the packed A; re-packing B per panel costs 1/rowPanel of the work.
	for i0 := 0; i0 < m; i0 += rowPanel {
		aOff := i0 * lda
		if tA {
			aOff = i0
		}
		gemmPanel(cfg, workers, tA, tB, min(rowPanel, m-i0), n, k, alpha, a[aOff:], lda, b, ldb, beta, c[i0*ldc:], ldc)
	}
}

// rowPanel is how many rows of op(A) are packed at once (a multiple of every kernel's MR).
const rowPanel = 1536

func gemmPanel[T float](cfg *config[T], workers int, tA, tB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	mr, nr := cfg.mr, cfg.nr
	mp := roundUp(m, mr)
	kcMax := min(cfg.kc, k)
	npMax := roundUp(min(cfg.nc, n), nr)
	ws := getBuf[T](mp*kcMax + npMax*kcMax + workers*mr*nr)
	defer putBuf(ws)
	buf := *ws
	// One struct instead of closures: a closure capturing the loop variables would put each of
	// them on the heap, five allocations per call, which small products notice. The struct
	// itself is the workers' (workpool.Run takes it as a Job), so it comes from a free list.
	j := getJob[T]()
	defer putJob(j)
	*j = panelJob[T]{
		cfg: cfg, tA: tA, tB: tB, m: m, alpha: alpha, a: a, lda: lda, b: b, ldb: ldb, c: c, ldc: ldc,
		ap:   buf[:mp*kcMax],
		bp:   buf[mp*kcMax : mp*kcMax+npMax*kcMax],
		edge: buf[mp*kcMax+npMax*kcMax:],
		aSl:  mp / mr,
	}
	rowBlocks := (m + cfg.mc - 1) / cfg.mc
	for j.jc = 0; j.jc < n; j.jc += cfg.nc {
		j.nc = min(cfg.nc, n-j.jc)
		np := roundUp(j.nc, nr)
		j.bSl = np / nr
		// Column chunks only group micro-tiles for load balance: they change no result.
		j.nb = np
		if want := 4 * workers; workers > 1 && rowBlocks < want {
			chunks := min(j.bSl, (want+rowBlocks-1)/rowBlocks)
			j.nb = roundUp((np+chunks-1)/chunks, nr)
		}
		j.colBlocks = (np + j.nb - 1) / j.nb
		for j.pc = 0; j.pc < k; j.pc += cfg.kc {
			j.kc = min(cfg.kc, k-j.pc)
			j.beta = beta
			if j.pc > 0 {
				j.beta = 1
			}
			j.aItems = (j.aSl + packGrain - 1) / packGrain
			j.packing = true
			workpool.Run(workers, j.aItems+(j.bSl+packGrain-1)/packGrain, j)
			j.packing = false
			workpool.Run(workers, rowBlocks*j.colBlocks, j)
		}
	}
}

const packGrain = 4 // slivers per packing item

// panelJob is one row panel's GEMM: packing items, then micro-tile items, for each (jc, pc).
type panelJob[T float] struct {
	cfg              *config[T]
	tA, tB           bool
	m, lda, ldb, ldc int
	alpha, beta      T // beta is the current k block's: the caller's for the first, then 1
	a, b, c          []T
	off              []int // GemmPackedRows: row k of op(B) is b[off[k]:]
	ap, bp, edge     []T
	aSl, bSl, aItems int
	jc, nc, pc, kc   int
	nb, colBlocks    int
	packing          bool
}

func (j *panelJob[T]) Run(it, w int) {
	if j.packing {
		j.pack(it)
	} else {
		j.compute(it, w)
	}
}

func (j *panelJob[T]) pack(it int) {
	mr, nr, kc := j.cfg.mr, j.cfg.nr, j.kc
	if it < j.aItems {
		for s := it * packGrain; s < min(j.aSl, (it+1)*packGrain); s++ {
			packA(j.ap[s*mr*kc:(s+1)*mr*kc], j.a, j.lda, j.tA, s*mr, min(mr, j.m-s*mr), j.pc, kc, mr)
		}
		return
	}
	it -= j.aItems
	for s := it * packGrain; s < min(j.bSl, (it+1)*packGrain); s++ {
		if j.off != nil {
			packRows(j.bp[s*nr*kc:(s+1)*nr*kc], j.b, j.off[j.pc:j.pc+kc], j.jc+s*nr, min(nr, j.nc-s*nr), nr)
			continue
		}
		packB(j.bp[s*nr*kc:(s+1)*nr*kc], j.b, j.ldb, j.tB, j.pc, kc, j.jc+s*nr, min(nr, j.nc-s*nr), nr)
	}
}

func (j *panelJob[T]) compute(it, w int) {
	mr, nr, kc, ldc, c := j.cfg.mr, j.cfg.nr, j.kc, j.ldc, j.c
	i0 := (it / j.colBlocks) * j.cfg.mc
	i1 := min(j.m, i0+j.cfg.mc)
	j0 := (it % j.colBlocks) * j.nb
	j1 := min(j.nc, j0+j.nb)
	tile := j.edge[w*mr*nr : (w+1)*mr*nr]
	for jr := j0; jr < j1; jr += nr {
		bs := &j.bp[(jr/nr)*kc*nr]
		nrr := min(nr, j.nc-jr)
		for ir := i0; ir < i1; ir += mr {
			as := &j.ap[(ir/mr)*kc*mr]
			mrr := min(mr, j.m-ir)
			off := ir*ldc + j.jc + jr
			if mrr == mr && nrr == nr {
				j.cfg.kern(kc, as, bs, &c[off], ldc, j.alpha, j.beta)
				continue
			}
			if j.cfg.edge != nil && edgeKernels {
				j.cfg.edge(kc, as, bs, &c[off], ldc, j.alpha, j.beta, mrr, nrr)
				continue
			}
			// Without an edge kernel a partial tile goes through a full-size copy so the
			// kernel does the same arithmetic as on a full one.
			clear(tile)
			if j.beta != 0 {
				for r := 0; r < mrr; r++ {
					copy(tile[r*nr:r*nr+nrr], c[off+r*ldc:off+r*ldc+nrr])
				}
			}
			j.cfg.kern(kc, as, bs, &tile[0], nr, j.alpha, j.beta)
			for r := 0; r < mrr; r++ {
				copy(c[off+r*ldc:off+r*ldc+nrr], tile[r*nr:r*nr+nrr])
			}
		}
	}
}

// packA writes rows i0..i0+rows of op(A), columns p0..p0+kc, as kc groups of mr values
// (zero past the last row).
func packA[T float](dst, a []T, lda int, tA bool, i0, rows, p0, kc, mr int) {
	if rows < mr {
		clear(dst)
	}
	if tA {
		for p := 0; p < kc; p++ {
			copy(dst[p*mr:p*mr+rows], a[(p0+p)*lda+i0:])
		}
		return
	}
	transposeInto(dst, a[i0*lda+p0:], lda, rows, kc, mr)
}

// packB writes rows p0..p0+kc of op(B), columns j0..j0+cols, as kc groups of nr values
// (zero past the last column).
func packB[T float](dst, b []T, ldb int, tB bool, p0, kc, j0, cols, nr int) {
	if cols < nr {
		clear(dst)
	}
	if !tB {
		if cols == nr && copyGroups(dst, b[p0*ldb+j0:], ldb, kc, nr) {
			return
		}
		for p := 0; p < kc; p++ {
			copy(dst[p*nr:p*nr+cols], b[(p0+p)*ldb+j0:])
		}
		return
	}
	transposeInto(dst, b[j0*ldb+p0:], ldb, cols, kc, nr)
}

// copyGroups copies kc groups of nr values, src rows ld apart, with 32-byte vector moves where
// the CPU has them: a sliver's rows are 32 to 128 bytes, where a call to memmove per row cost
// more than the move (packing a convolution's column matrix was a tenth of a training step).
// It reports false where it did nothing.
func copyGroups[T float](dst, src []T, ld, kc, nr int) bool {
	var zero T
	size := int(unsafe.Sizeof(zero))
	gb := nr * size
	if !hasAVX || (gb != 32 && gb != 64 && gb != 128) || kc == 0 {
		return false
	}
	_, _ = dst[kc*nr-1], src[(kc-1)*ld+nr-1] // the bounds the assembly relies on
	copyGroupsAVX(unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[0]), ld*size, kc, gb)
	return true
}

// transposeInto writes dst[p*ld+r] = src[r*lds+p] for r < rows <= ld, p < kc: the packing of
// a sliver whose rows are contiguous along k. It may also write zeros into the groups' padding
// (dst[p*ld+r] for rows <= r < ld, which packA and packB clear anyway), never past the kc groups.
// With AVX, 8x8 (float32) or 4x4 (float64) register transposes do all but a few columns: the
// scalar loop was 30% of a convolution's filter gradient (smallcnn's, whose slivers of 16 rows of
// the column matrix and 6 of dy are transposed here).
func transposeInto[T float](dst, src []T, lds, rows, kc, ld int) {
	if done := transposeVec(dst, src, lds, rows, kc, ld); done < kc {
		transposeGo(dst[done*ld:], src[done:], lds, rows, kc-done, ld)
	}
}

// vecTranspose says whether transposeInto uses the AVX transposes (a variable so that a test
// can compare whole products made with and without them).
var vecTranspose = hasAVX

// transposeVec transposes the first columns with transposeF32AVX or transposeF64AVX and
// reports how many it did: all of them, all but the last one or few (a sliver of fewer rows
// than a block in groups narrower than one, where a whole column's store would pass the end of
// the groups), or none (no AVX, or fewer columns than a block).
func transposeVec[T float](dst, src []T, lds, rows, kc, ld int) int {
	var zero T
	size := int(unsafe.Sizeof(zero))
	w := 32 / size // a block's rows and columns: 8 float32, 4 float64
	if !vecTranspose || rows <= 0 || rows > ld || kc < w {
		return 0
	}
	n, span := kc, rows // columns done, and how far the last column's store reaches
	if rows < w {
		// Below a block every column is stored as w values, the last w-rows of them zeros.
		span = w
		room := min(len(dst), kc*ld)
		if room < w {
			return 0
		}
		if n = min(kc, (room-w)/ld+1); n < w {
			return 0
		}
	}
	_, _ = src[(rows-1)*lds+n-1], dst[(n-1)*ld+span-1] // the bounds the assembly relies on
	f := transposeF64AVX
	if size == 4 {
		f = transposeF32AVX
	}
	// Chunks of w rows; a last partial chunk is moved back to end at rows, redoing a few rows.
	for r0 := 0; r0 < rows; r0 += w {
		c0 := min(r0, max(rows-w, 0))
		f(unsafe.Pointer(&dst[c0]), unsafe.Pointer(&src[c0*lds]), lds*size, ld*size, n, min(w, rows-c0))
	}
	return n
}

// transposeGo is transposeInto in Go. Four rows go at a time, so each store fills four
// adjacent values of a packed group instead of one value per group.
func transposeGo[T float](dst, src []T, lds, rows, kc, ld int) {
	r := 0
	for ; r+4 <= rows; r += 4 {
		s0 := src[r*lds : r*lds+kc]
		s1 := src[(r+1)*lds : (r+1)*lds+kc]
		s2 := src[(r+2)*lds : (r+2)*lds+kc]
		s3 := src[(r+3)*lds : (r+3)*lds+kc]
		for p := range s0 {
			d := dst[p*ld+r : p*ld+r+4 : p*ld+r+4]
			d[0], d[1], d[2], d[3] = s0[p], s1[p], s2[p], s3[p]
		}
	}
	for ; r < rows; r++ {
		for p, v := range src[r*lds : r*lds+kc] {
			dst[p*ld+r] = v
		}
	}
}

func scale[T float](m, n int, beta T, c []T, ldc int) {
	for i := 0; i < m; i++ {
		row := c[i*ldc : i*ldc+n]
		switch beta {
		case 0:
			clear(row)
		case 1:
		default:
			for j := range row {
				row[j] *= beta
			}
		}
	}
}

func roundUp(x, m int) int { return (x + m - 1) / m * m }

func unsafeSlice[T float](p *T, n int) []T { return unsafe.Slice(p, n) }

// Packed panels are reused across calls: one GEMM of a training step would otherwise allocate
// megabytes that the next one frees. Unlike a sync.Pool, the cache keeps its buffers over garbage
// collections, so the live heap stays flat: it holds one buffer per GEMM that ever ran
// concurrently, each at most (rowPanel + nc) * KBlock elements.
type bufCache[T float] struct {
	mu   sync.Mutex
	free []*[]T
	jobs freelist.List[panelJob[T]] // gemmPanel's, see getJob
}

var (
	cache32 bufCache[float32]
	cache64 bufCache[float64]
)

func cacheOf[T float]() *bufCache[T] {
	if c, ok := any(&cache32).(*bufCache[T]); ok {
		return c
	}
	return any(&cache64).(*bufCache[T])
}

func getBuf[T float](n int) *[]T {
	c := cacheOf[T]()
	c.mu.Lock()
	var p *[]T
	if len(c.free) > 0 {
		// The last buffer big enough, else the last: GEMMs of different sizes running at once
		// (a convolution's goroutines) would otherwise trade buffers and regrow them each call.
		i := len(c.free) - 1
		for j := i; j >= 0; j-- {
			if cap(*c.free[j]) >= n {
				i = j
				break
			}
		}
		p = c.free[i]
		c.free[i] = c.free[len(c.free)-1]
		c.free = c.free[:len(c.free)-1]
	}
	c.mu.Unlock()
	if p == nil {
		p = new([]T)
	}
	if cap(*p) < n {
		*p = make([]T, n)
	}
	*p = (*p)[:n]
	return p
}

func putBuf[T float](p *[]T) {
	c := cacheOf[T]()
	c.mu.Lock()
	c.free = append(c.free, p)
	c.mu.Unlock()
}

// getJob is a panelJob for gemmPanel from the free list, or a new one: one a call was a heap
// allocation per GEMM.
func getJob[T float]() *panelJob[T] {
	c := cacheOf[T]()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.jobs.Get()
}

// putJob returns a finished job, its references to the operands dropped.
func putJob[T float](j *panelJob[T]) {
	*j = panelJob[T]{}
	c := cacheOf[T]()
	c.mu.Lock()
	c.jobs.Put(j)
	c.mu.Unlock()
}
