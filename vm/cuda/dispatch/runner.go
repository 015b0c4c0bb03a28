package dispatch

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/vm"
	"github.com/gorgonia-ooc/outofcore/vm/alloc"
	"github.com/gorgonia-ooc/outofcore/vm/cuda"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

func init() {
	vm.RegisterBackend(func(d vm.Device) (vm.Backend, bool) {
		cd, ok := d.(*cuda.Device)
		if !ok {
			return nil, false
		}
		return Backend{d: cd}, true
	})
}

// Backend runs programs on a CUDA device with the kernels of package
// kernels and cuBLAS calls. It implements vm.Backend.
type Backend struct{ d *cuda.Device }

// Workspace implements vm.WorkspaceBackend: the device scratch one call of
// f needs that its op does not declare (tensordot's transposed operands,
// CTC's tables), so that the trace makes it f's workspace, inside the budget.
func (b Backend) Workspace(f *vm.Func, operands []*vm.Var, out *vm.Var) int64 {
	c := fn{f: f, out: out, ins: operands}
	switch out.Dtype {
	case tensor.Float32:
		c.es, c.sfx = 4, "f32"
	case tensor.Float64:
		c.es, c.sfx = 8, "f64"
	}
	var pl plan
	var err error
	switch {
	case isCTC(f.Op):
		pl, err = planCTC(c)
	case fmt.Sprintf("%T", f.Op) == "gorgonia.tensordotOp" && c.es > 0:
		pl, err = planTensordot(c)
	}
	if err != nil {
		return 0 // refused: Bind says why
	}
	return pl.work
}

// Reserve implements vm.Reserver: the device memory a bound program holds
// beside its variables inside the budget, cuBLAS's workspace
// (cuda.Device.BLASWorkspaceBytes).
func (b Backend) Reserve() int64 { return b.d.BLASWorkspaceBytes() }

// For returns the backend of a CUDA device.
func For(d *cuda.Device) Backend { return Backend{d: d} }

// Launch is one kernel launch or cuBLAS call of a function, as planned: its
// configuration (the grid and block of a kernel; none for cuBLAS, whose
// launches are its own) and what it moves and computes, for reading a GPU run
// against the simulator's roofline.
type Launch struct {
	Func   int    // index in Program.Funcs
	Node   string // the function's node
	Kernel string // kernel name, or the cuBLAS entry point (cublasSgemm_v2, cublasDgemv_v2, ...)
	Grid   [3]uint32
	Block  [3]uint32
	Bytes  int64
	FLOPs  int64
	Count  int // launches of this configuration in one run of the function
}

// Runner is a program bound to a CUDA device. It implements vm.Runner.
type Runner struct {
	d      *cuda.Device
	prog   *vm.Program
	plans  []plan
	mod    *cuda.Module
	blas   *cuda.BLAS
	fns    map[string]*cuda.Function
	seg    alloc.Segment // scratch, batch-norm running statistics and batched products' matrix addresses, outside the budget
	bns    map[any]*bnState
	mu     sync.Mutex
	record []Launch // launches of the current function, while it runs
	table  [][]Launch
	closed bool
}

// Bind plans every function of p on the device (vm.Backend). An op with no
// CUDA implementation is an error naming the op and its node.
func (b Backend) Bind(p *vm.Program) (vm.Runner, error) { return b.bind(p) }

func (b Backend) bind(p *vm.Program) (*Runner, error) {
	r := &Runner{d: b.d, prog: p, fns: map[string]*cuda.Function{}, bns: map[any]*bnState{}}
	var errs []error
	var scratch int64
	for i := range p.Funcs {
		pl, err := planFunc(r, p, i)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if pl.work > p.Funcs[i].Workspace {
			pl.workInSeg = true
			pl.scratch = max(pl.scratch, pl.work)
		}
		scratch = max(scratch, pl.scratch)
		r.plans = append(r.plans, pl)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("dispatch: %d of %d functions have no CUDA implementation on %s: %w", len(errs), len(p.Funcs), b.d.Name(), errors.Join(errs...))
	}
	stats := int64(0)
	for _, s := range r.bns {
		s.off = scratch + stats
		stats += s.bytes()
	}
	for i := range r.plans {
		if r.plans[i].fixed > 0 {
			r.plans[i].fixedAt = alignUp(scratch + stats)
			stats = r.plans[i].fixedAt + alignUp(r.plans[i].fixed) - scratch
		}
	}
	var err error
	if r.mod, err = b.d.LoadModule([]byte(kernels.PTX)); err != nil {
		return nil, fmt.Errorf("dispatch: loading the kernels on %s: %w", b.d.Name(), err)
	}
	if r.blas, err = b.d.OpenBLAS(); err != nil {
		_ = r.mod.Unload()
		return nil, fmt.Errorf("dispatch: the GEMMs need cuBLAS: %w", err)
	}
	if total := scratch + stats; total > 0 {
		if r.seg, err = b.d.Memory().AllocSegment(alignUp(total)); err != nil {
			_ = r.Close()
			return nil, fmt.Errorf("dispatch: %d bytes of scratch, per-channel statistics and batched products' matrix addresses: %w", total, err)
		}
	}
	r.table = make([][]Launch, len(p.Funcs))
	return r, nil
}

func alignUp(n int64) int64 { return (n + 255) / 256 * 256 }

// scratch is the device address of the scratch area.
func (r *Runner) scratch() uintptr { return r.seg.Addr }

// Run implements vm.Runner.
func (r *Runner) Run(fi int, out uintptr, ins []uintptr, ws uintptr) error {
	if fi < 0 || fi >= len(r.plans) {
		return fmt.Errorf("dispatch: no function %d", fi)
	}
	r.record = r.record[:0]
	a := addrs{out: out, in: ins, ws: ws, work: ws}
	pl := &r.plans[fi]
	if pl.fixed > 0 {
		a.fixed = r.seg.Addr + uintptr(pl.fixedAt)
	}
	if pl.workInSeg {
		a.work = r.scratch()
	}
	if err := r.plans[fi].run(r, a); err != nil {
		return fmt.Errorf("%s: %w", r.prog.Vars[r.prog.Funcs[fi].Output].Name, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.table[fi] == nil {
		r.table[fi] = merge(fi, r.prog.Vars[r.prog.Funcs[fi].Output].Name, r.record)
	}
	return nil
}

// merge counts the launches of one function by configuration (kernel,
// grid, block, bytes, FLOPs), in order of first appearance.
func merge(fi int, node string, ls []Launch) []Launch {
	out := []Launch{}
	at := map[Launch]int{}
	for _, l := range ls {
		l.Func, l.Node, l.Count = fi, node, 0
		k, ok := at[l]
		if !ok {
			k = len(out)
			at[l] = k
			out = append(out, l)
		}
		out[k].Count++
	}
	return out
}

// Launches returns, per function that has run, its launches in order: the
// launch configuration and bytes-moved table of the program.
func (r *Runner) Launches() []Launch {
	r.mu.Lock()
	defer r.mu.Unlock()
	var all []Launch
	for _, t := range r.table {
		all = append(all, t...)
	}
	return all
}

// launch prepares and queues one kernel.
func (r *Runner) launch(name string, args ...kernels.Arg) error {
	s, ok := kernels.Lookup(name)
	if !ok {
		return fmt.Errorf("no kernel %s", name)
	}
	l, err := s.Prepare(args...)
	if err != nil {
		return err
	}
	if l.Empty() {
		return nil
	}
	f := r.fns[name]
	if f == nil {
		if f, err = r.mod.Function(name); err != nil {
			return err
		}
		r.fns[name] = f
	}
	g, b := l.Grid, l.Block
	if err := r.d.LaunchPacked(f, cuda.Dim3{X: g[0], Y: g[1], Z: g[2]}, cuda.Dim3{X: b[0], Y: b[1], Z: b[2]}, l.SharedBytes, l.Params().Pointer()); err != nil {
		return fmt.Errorf("%s: %w", l, err)
	}
	r.record = append(r.record, Launch{Kernel: name, Grid: g, Block: b, Bytes: l.Bytes, FLOPs: l.FLOPs})
	return nil
}

// gemm queues the row-major product C (m x n) = op(A)·op(B) + beta·C, where
// op(A) is m x k (A stored k x m when transA) and lda, ldb, ldc are row
// lengths: cuBLAS is column-major, so it computes Cᵀ = op(B)ᵀ·op(A)ᵀ.
func (r *Runner) gemm(es int64, transA, transB bool, m, n, k int, a uintptr, lda int, b uintptr, ldb int, beta float64, c uintptr, ldc int) error {
	if m == 0 || n == 0 {
		return nil
	}
	if err := r.blas.Gemm(es == 8, transB, transA, n, m, k, 1, b, ldb, a, lda, beta, c, ldc); err != nil {
		return err
	}
	bytes := int64(m*k+k*n+m*n) * es
	if beta != 0 {
		bytes += int64(m*n) * es
	}
	r.recordBLAS(es, "gemm_v2", bytes, 2*int64(m)*int64(n)*int64(k))
	return nil
}

// gemmBatched queues batch row-major products C[i] (m x n) = op(A[i])·op(B[i])
// as one cuBLAS call, gemm's shapes; arrays is the device address of the
// matrices' addresses: batch of A, then batch of B, then batch of C.
func (r *Runner) gemmBatched(es int64, transA, transB bool, m, n, k int, lda, ldb int, arrays uintptr, batch int) error {
	if m == 0 || n == 0 || batch == 0 {
		return nil
	}
	aArr, bArr, cArr := arrays, arrays+uintptr(batch)*8, arrays+2*uintptr(batch)*8
	if err := r.blas.GemmBatched(es == 8, transB, transA, n, m, k, 1, bArr, ldb, aArr, lda, 0, cArr, n, batch); err != nil {
		return err
	}
	b := int64(batch)
	r.recordBLAS(es, "gemmBatched", b*(int64(m*k+k*n+m*n)*es+24), 2*b*int64(m)*int64(n)*int64(k))
	return nil
}

// gemv queues the row-major y = A·x, or Aᵀ·x when transA, for A rows x cols:
// cuBLAS sees A as the column-major cols x rows Aᵀ, so the transposes swap.
func (r *Runner) gemv(es int64, transA bool, rows, cols int, a, x, y uintptr) error {
	if rows == 0 || cols == 0 {
		return nil
	}
	if err := r.blas.Gemv(es == 8, !transA, cols, rows, 1, a, cols, x, 1, 0, y, 1); err != nil {
		return err
	}
	r.recordBLAS(es, "gemv_v2", int64(rows*cols+rows+cols)*es, 2*int64(rows)*int64(cols))
	return nil
}

// outer writes the row-major outer product C (m x n) = x·yᵀ: C zeroed, then
// cuBLAS's rank-one update, which adds (gorgonia's Outer zeroes and calls
// BLAS's ger too). Column-major, C is the n x m Cᵀ = y·xᵀ.
func (r *Runner) outer(es int64, sfx string, m, n int, x, y, c uintptr) error {
	if m == 0 || n == 0 {
		return nil
	}
	if err := r.launch("fill_"+sfx, ptr(c), flt(0), i64(int64(m)*int64(n))); err != nil {
		return err
	}
	if err := r.blas.Ger(es == 8, n, m, 1, y, 1, x, 1, c, n); err != nil {
		return err
	}
	r.recordBLAS(es, "ger_v2", int64(2*m*n+m+n)*es, 2*int64(m)*int64(n))
	return nil
}

// dot queues the dot product of two n-vectors into the device scalar out,
// without a host synchronisation (cuda.BLAS.Dot: device pointer mode).
func (r *Runner) dot(es int64, n int, x, y, out uintptr) error {
	if err := r.blas.Dot(es == 8, n, x, 1, y, 1, out); err != nil {
		return err
	}
	r.recordBLAS(es, "dot_v2", int64(2*n+1)*es, 2*int64(n))
	return nil
}

// recordBLAS records one cuBLAS call in the launch table, named as cuBLAS
// names it: cublasS<op> for float32, cublasD<op> for float64.
func (r *Runner) recordBLAS(es int64, op string, bytes, flops int64) {
	t := "S"
	if es == 8 {
		t = "D"
	}
	r.record = append(r.record, Launch{Kernel: "cublas" + t + op, Bytes: bytes, FLOPs: flops})
}

// CopyOut implements vm.Runner.
func (r *Runner) CopyOut(dst []byte, src uintptr) (vm.Waiter, error) {
	ev, err := r.d.CopyOut(dst, src)
	if err != nil {
		return nil, err
	}
	return ev, nil
}

// CopyIn implements vm.Runner.
func (r *Runner) CopyIn(dst uintptr, src []byte) (vm.Waiter, error) {
	ev, err := r.d.CopyIn(dst, src)
	if err != nil {
		return nil, err
	}
	return ev, nil
}

var _ vm.Stager = (*Runner)(nil)

// CopyInNext implements vm.Stager: a copy for the next step on the
// host-to-device stream (cuda.Device.CopyInNext).
func (r *Runner) CopyInNext(dst uintptr, src []byte) (vm.Waiter, error) {
	ev, err := r.d.CopyInNext(dst, src)
	if err != nil {
		return nil, err
	}
	return ev, nil
}

// HostBuffer implements vm.Stager: pinned host memory from the device's
// PinnedPool, which its copies read by DMA while compute runs.
func (r *Runner) HostBuffer(n int64) ([]byte, func() error, error) {
	b, err := r.d.Pinned().Get(n)
	if err != nil {
		return nil, nil, err
	}
	return b.Bytes, func() error { return r.d.Pinned().Put(b) }, nil
}

// WaitFor implements vm.Runner.
func (r *Runner) WaitFor(w vm.Waiter) error {
	ev, ok := w.(*cuda.Event)
	if !ok {
		return fmt.Errorf("dispatch: %T is not a copy of this device", w)
	}
	return r.d.WaitFor(ev)
}

// EndStep implements vm.Runner: one host synchronisation, then the batch-norm
// running statistics updated on the device go back to their ops.
func (r *Runner) EndStep() (time.Duration, error) {
	bns, err := r.queueBN()
	st, err2 := r.d.EndStep() // waits for the copies too
	if err = errors.Join(err, err2); err != nil {
		return 0, err
	}
	return st.Stall, storeBN(bns)
}

// Close implements vm.Runner.
func (r *Runner) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	var errs []error
	if r.blas != nil {
		errs = append(errs, r.blas.Close())
	}
	if r.mod != nil {
		errs = append(errs, r.mod.Unload())
	}
	if r.seg.Addr != 0 {
		errs = append(errs, r.d.Memory().FreeSegment(r.seg))
	}
	return errors.Join(errs...)
}
