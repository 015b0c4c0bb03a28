package layers

import (
	"fmt"
	goreflect "reflect"
	"runtime"
	"slices"
	"sync"
	"unsafe"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/blas"
	"github.com/gorgonia-ooc/outofcore/internal/freelist"
	"github.com/gorgonia-ooc/outofcore/internal/workpool"
)

// WorkspaceOp is the contract the VM declares structurally for ops that need scratch memory. It is
// repeated here so tests (and readers) can assert it; the VM does not import this package.
type WorkspaceOp interface {
	// WorkspaceBytes is the scratch memory one call needs, given the input shapes (in operand order) and dtype.
	WorkspaceBytes(dt tensor.Dtype, inputs []tensor.Shape) int64
	// DoWorkspace computes the op's result into out using ws (len(ws) >= WorkspaceBytes) as scratch.
	DoWorkspace(out G.Value, ws []byte, inputs ...G.Value) error
}

// FLOPser is implemented by every op of this package for the cost model; a multiply-add counts as 2.
type FLOPser interface {
	FLOPs(inputs []tensor.Shape) int64
}

type float interface{ ~float32 | ~float64 }

// wsAlign keeps every carved workspace region on its own cache line, matching the VM's 64-byte
// alignment, so the declared size is the same whichever offsets the regions land on.
const wsAlign = 64

func roundUp(n, a int64) int64 { return (n + a - 1) / a * a }

// wsBytes is the size of a workspace holding the given element counts as consecutive aligned regions.
func wsBytes(dt tensor.Dtype, counts ...int) int64 {
	var total int64
	for _, c := range counts {
		if c > 0 {
			total += roundUp(int64(c)*int64(dt.Size()), wsAlign)
		}
	}
	return total
}

// carver hands out typed regions of a raw workspace in the same order wsBytes counted them.
type carver struct {
	buf []byte
	off int64
}

func carve[T float](c *carver, n int) ([]T, error) {
	if n <= 0 {
		return nil, nil
	}
	var zero T
	size := int64(n) * int64(unsafe.Sizeof(zero))
	if c.off+size > int64(len(c.buf)) {
		return nil, fmt.Errorf("layers: workspace too small: need at least %d bytes, have %d", c.off+size, len(c.buf))
	}
	p := unsafe.Pointer(&c.buf[c.off])
	if uintptr(p)%unsafe.Alignof(zero) != 0 {
		return nil, fmt.Errorf("layers: workspace at %p is not aligned for %T", p, zero)
	}
	c.off += roundUp(size, wsAlign)
	return unsafe.Slice((*T)(p), n), nil
}

// allocWorkspace makes a workspace for the plain Do/UsePreallocDo paths. Backing it with float64s
// guarantees the alignment carve needs; Go's allocator gives no 64-byte promise, which only matters
// for speed, not results, so Do and DoWorkspace still agree bit for bit.
func allocWorkspace(n int64) []byte {
	if n <= 0 {
		return nil
	}
	f := make([]float64, (n+7)/8)
	return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), n)
}

// denseData returns the contiguous elements of an input value, materialising views that need an
// iterator (so a transposed or sliced input is read in logical order).
func denseData[T float](v G.Value, want tensor.Shape) ([]T, error) {
	d, ok := v.(*tensor.Dense)
	if !ok {
		return nil, fmt.Errorf("layers: expected *tensor.Dense, got %T", v)
	}
	if want != nil && !d.Shape().Eq(want) {
		return nil, fmt.Errorf("layers: expected shape %v, got %v", shapeArg(want), d.Shape())
	}
	if d.RequiresIterator() {
		d = d.Materialize().(*tensor.Dense)
	}
	data, ok := elems[T](d)
	if !ok {
		var zero T
		return nil, fmt.Errorf("layers: expected %T data, got %T", zero, d.Data())
	}
	n := d.Shape().TotalSize()
	if len(data) < n {
		return nil, fmt.Errorf("layers: tensor of shape %v has only %d elements", d.Shape(), len(data))
	}
	return data[:n], nil
}

// outData returns the writable elements of an output value. It must be contiguous: writing
// through a view would not reach the memory the caller owns.
func outData[T float](v G.Value, want tensor.Shape) ([]T, error) {
	d, ok := v.(*tensor.Dense)
	if !ok {
		return nil, fmt.Errorf("layers: expected *tensor.Dense output, got %T", v)
	}
	if !d.Shape().Eq(want) {
		return nil, fmt.Errorf("layers: output has shape %v, want %v", d.Shape(), shapeArg(want))
	}
	if d.RequiresIterator() {
		return nil, fmt.Errorf("layers: output tensor must be contiguous")
	}
	data, ok := elems[T](d)
	if !ok {
		var zero T
		return nil, fmt.Errorf("layers: expected %T output, got %T", zero, d.Data())
	}
	n := want.TotalSize()
	if len(data) < n {
		return nil, fmt.Errorf("layers: output of shape %v has only %d elements", shapeArg(want), len(data))
	}
	return data[:n], nil
}

// shapeArg is a copy of want for an error message: formatting want itself would make every
// caller's shape literal escape to the heap, an allocation per call on the hot path.
func shapeArg(want tensor.Shape) tensor.Shape { return slices.Clone(want) }

// elems views a dense tensor's storage as []T without going through Data, whose
// reflect.Value.Interface allocates on every call (a training step makes hundreds of them).
// A 0-D tensor goes through Data as before: its Data is an element, not a slice.
func elems[T float](d *tensor.Dense) ([]T, bool) {
	var zero T
	if d.IsScalar() || d.Dtype().Type != goreflect.TypeOf(zero) {
		data, ok := d.Data().([]T)
		return data, ok
	}
	raw := d.Raw
	if len(raw) == 0 {
		return []T{}, true
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&raw[0])), len(raw)/int(unsafe.Sizeof(zero))), true
}

// shapesOf lists the operands' shapes. With buf (at least len(vs) long, usually a caller's
// stack array) the list lives there instead of in a fresh slice.
func shapesOf(vs []G.Value, buf ...tensor.Shape) []tensor.Shape {
	s := buf[:0]
	if cap(s) < len(vs) {
		s = make([]tensor.Shape, 0, len(vs))
	}
	for _, v := range vs {
		s = append(s, v.Shape())
	}
	return s
}

func dimSizersToShapes(ds []G.DimSizer) ([]tensor.Shape, error) {
	s := make([]tensor.Shape, len(ds))
	for i, d := range ds {
		sh, ok := d.(tensor.Shape)
		if !ok {
			return nil, fmt.Errorf("layers: expected tensor.Shape, got %T", d)
		}
		s[i] = sh
	}
	return s, nil
}

func checkDtype(dt tensor.Dtype) error {
	if dt != tensor.Float32 && dt != tensor.Float64 {
		return fmt.Errorf("layers: unsupported dtype %v (float32 and float64 only)", dt)
	}
	return nil
}

func commonDtype(vs []G.Value) (tensor.Dtype, error) {
	if len(vs) == 0 {
		return tensor.Dtype{}, fmt.Errorf("layers: no inputs")
	}
	dt := vs[0].Dtype()
	for _, v := range vs[1:] {
		if v.Dtype() != dt {
			return dt, fmt.Errorf("layers: mixed dtypes %v and %v", dt, v.Dtype())
		}
	}
	return dt, checkDtype(dt)
}

func newDense(dt tensor.Dtype, s tensor.Shape) *tensor.Dense {
	return tensor.New(tensor.Of(dt), tensor.WithShape(s.Clone()...))
}

// fnType builds "Tensor-d1 a → … → Tensor-dn a" for ops whose operands share one float type.
func fnType(dims ...int) hm.Type {
	a := hm.TypeVariable('a')
	ts := make([]hm.Type, len(dims))
	for i, d := range dims {
		ts[i] = G.TensorType{Dims: d, Of: a}
	}
	return hm.NewFnType(ts...)
}

// parallelFor splits [0,n) into at most NumCPU (and blas.Workers) contiguous chunks. Callers only use it where each
// index writes disjoint memory and every reduction stays inside one index, so the result does not
// depend on the split or on scheduling. work is a rough element count: small jobs run inline because
// goroutine start-up would cost more than it saves.
//
// The chunks run on internal/workpool's long-lived goroutines, the caller's among them, so a call
// allocates nothing but its caller's closure: a training step makes thousands of these calls
// (the kernels of the bundled CNNs pass a pooled chunker to parallelChunks instead, and allocate
// nothing). A panic in any chunk is raised again on the calling goroutine once every chunk has
// finished.
func parallelFor(n int, work int64, fn func(lo, hi int)) {
	parallelChunks(n, work, chunkFunc(fn))
}

// chunker is a parallelFor body as a method of a struct. The kernels every training step
// runs keep theirs in a free list (jobList): a closure handed to parallelFor escapes to the
// heap, an allocation or two per call.
type chunker interface{ chunk(lo, hi int) }

type chunkFunc func(lo, hi int)

func (f chunkFunc) chunk(lo, hi int) { f(lo, hi) }

// parallelChunks is parallelFor with the body body.chunk.
func parallelChunks(n int, work int64, body chunker) {
	workers := min(runtime.NumCPU(), blas.Workers())
	if workers > n {
		workers = n
	}
	if workers <= 1 || work < 1<<15 {
		if n > 0 {
			body.chunk(0, n)
		}
		return
	}
	c := chunkJobs.Get().(*chunkJob)
	c.body, c.n, c.size = body, n, (n+workers-1)/workers
	defer func() {
		c.body = nil
		chunkJobs.Put(c)
	}()
	workpool.Run(workers, (n+c.size-1)/c.size, c)
}

// chunkJob is one parallelFor call as a workpool.Job: item i is the i-th chunk.
type chunkJob struct {
	body    chunker
	n, size int
}

func (c *chunkJob) Run(item, _ int) {
	lo := item * c.size
	c.body.chunk(lo, min(lo+c.size, c.n))
}

// jobList is a free list of a kernel's chunker structs, one per element type (jobsFor).
type jobList[J any] struct {
	mu   sync.Mutex
	free freelist.List[J]
}

func (l *jobList[J]) get() *J {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.free.Get()
}

// put takes back a finished job, its references to tensors dropped.
func (l *jobList[J]) put(j *J) {
	var zero J
	*j = zero
	l.mu.Lock()
	l.free.Put(j)
	l.mu.Unlock()
}

// jobsFor is the free list for T of a kernel's job J[T], given its lists for float32 and float64.
func jobsFor[T float, J any](l32, l64 any) *jobList[J] {
	if l, ok := l32.(*jobList[J]); ok {
		return l
	}
	return l64.(*jobList[J])
}

var chunkJobs = sync.Pool{New: func() any { return new(chunkJob) }}

// prod multiplies dimensions as int64 so FLOP and byte counts of paper-scale shapes cannot overflow.
func prod(xs ...int) int64 {
	p := int64(1)
	for _, x := range xs {
		p *= int64(x)
	}
	return p
}
