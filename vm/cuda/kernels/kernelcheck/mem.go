package kernelcheck

import (
	"math"
	"slices"
	"sort"
	"unsafe"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

// Device is where a Mem's buffers live and its kernels run: the host build
// (the kernels' tests) or a GPU through the CUDA driver ("ooc doctor").
type Device interface {
	// Alloc gives a buffer of n bytes: its host bytes (zeroed) and the
	// address kernels are passed.
	Alloc(n int) (host []byte, addr uintptr, err error)
	// Launch runs l, whose pointer arguments point into bufs. Each buffer's
	// host bytes are its contents: a device with memory of its own copies
	// them in before the launch and back after it.
	Launch(s *kernels.Spec, l *kernels.Launch, bufs []*Buffer) error
}

// Buffer is one allocation of a Mem.
type Buffer struct {
	host []byte
	addr uintptr
}

// Data is the buffer's host bytes.
func (b *Buffer) Data() []byte { return b.host }

// Addr is its address as kernels see it.
func (b *Buffer) Addr() uintptr { return b.addr }

// Size is its length in bytes.
func (b *Buffer) Size() int { return len(b.host) }

// Mem runs the checks' launches on a Device and keeps, per kernel, the
// worst error the comparisons found.
type Mem struct {
	t      TB
	dev    Device
	exact  bool
	bufs   []*Buffer
	report map[string]*Accuracy
	// pending are the kernels launched since the last comparison began a
	// new group: a comparison's error is theirs.
	pending  []string
	compared bool
}

// Accuracy is what the comparisons found for one kernel.
type Accuracy struct {
	Kernel   string
	Launches int
	// MaxRelErr is the worst relative error of a comparison its results
	// entered (elementwise or normwise, as the check chose).
	MaxRelErr float64
	// Exact is whether every such comparison was bit for bit.
	Exact bool
	// Tol is the tolerance of its dtype (Tolerance).
	Tol float64
}

// NewMem makes a Mem on dev. exact asks the checks for the host build's
// guarantee of bit-for-bit results where the kernels promise the CPU op's
// bits (package kernels says where). A GPU is not exact: its exp and log
// differ from the CPU's in the last bits, so there those checks are
// normwise within Tolerance, and the others keep their measure.
func NewMem(t TB, dev Device, exact bool) *Mem {
	return &Mem{t: t, dev: dev, exact: exact, report: map[string]*Accuracy{}}
}

// Report is the accuracy of every kernel launched so far, by name.
func (m *Mem) Report() []Accuracy {
	out := make([]Accuracy, 0, len(m.report))
	for _, a := range m.report {
		out = append(out, *a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Kernel < out[j].Kernel })
	return out
}

// Launched is the kernels launched so far, in the order of their first launch.
func (m *Mem) Launched() []string {
	var names []string
	for _, s := range kernels.Specs {
		if _, ok := m.report[s.Name]; ok {
			names = append(names, s.Name)
		}
	}
	return names
}

// Buffers is every buffer allocated so far.
func (m *Mem) Buffers() []*Buffer { return m.bufs }

// alloc makes a zeroed buffer of n bytes.
func (m *Mem) alloc(n int) *Buffer {
	m.t.Helper()
	host, addr, err := m.dev.Alloc(n)
	if err != nil {
		m.t.Fatalf("allocating %d bytes: %v", n, err)
	}
	b := &Buffer{host: host, addr: addr}
	m.bufs = append(m.bufs, b)
	return b
}

// launch prepares kernel name with args and runs it on the device.
func (m *Mem) launch(name string, args ...kernels.Arg) *kernels.Launch {
	m.t.Helper()
	s, ok := kernels.Lookup(name)
	if !ok {
		m.t.Fatalf("no kernel %s", name)
	}
	l, err := s.Prepare(args...)
	if err != nil {
		m.t.Fatalf("%s: %v", name, err)
	}
	if err := m.dev.Launch(s, l, m.used(s, l)); err != nil {
		m.t.Fatalf("%s: %v", name, err)
	}
	if m.compared {
		m.pending, m.compared = m.pending[:0], false
	}
	if !slices.Contains(m.pending, name) {
		m.pending = append(m.pending, name)
	}
	a := m.report[name]
	if a == nil {
		a = &Accuracy{Kernel: name, Exact: true, Tol: toleranceOf(s)}
		m.report[name] = a
	}
	a.Launches++
	return l
}

// toleranceOf is the tolerance of a kernel's dtype, by its name's suffix
// (the float64-only kernels have none: their results are float64).
func toleranceOf(s *kernels.Spec) float64 {
	if len(s.Name) > 4 && s.Name[len(s.Name)-4:] == "_f32" {
		return Tolerance(4)
	}
	return Tolerance(8)
}

// note records a comparison's error against the kernels launched since
// the previous group of comparisons.
func (m *Mem) note(err float64, exact bool) {
	m.compared = true
	for _, k := range m.pending {
		a := m.report[k]
		if err > a.MaxRelErr || err != err {
			a.MaxRelErr = err
		}
		a.Exact = a.Exact && exact
	}
}

// used is the buffers the launch's pointer arguments point into.
func (m *Mem) used(s *kernels.Spec, l *kernels.Launch) []*Buffer {
	var out []*Buffer
	ps := unsafe.Slice((*unsafe.Pointer)(l.Params().Pointer()), len(s.Params))
	for i, prm := range s.Params {
		if !prm.Type.IsPtr() {
			continue
		}
		addr := *(*uintptr)(ps[i])
		if b := m.find(addr); b != nil && !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	return out
}

// find is the buffer addr points into (or just past: an empty slice's end).
func (m *Mem) find(addr uintptr) *Buffer {
	for _, b := range m.bufs {
		if addr >= b.addr && addr <= b.addr+uintptr(len(b.host)) {
			return b
		}
	}
	return nil
}

func p(b *Buffer) kernels.Arg { return kernels.Ptr(b.addr) }

// put copies values into a new buffer of the float type T.
func put[T float32 | float64](m *Mem, v []T) *Buffer {
	m.t.Helper()
	var z T
	b := m.alloc(len(v) * int(unsafe.Sizeof(z)))
	if len(v) > 0 {
		copy(unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b.host))), len(v)), v)
	}
	return b
}

// get reads a buffer as T.
func get[T float32 | float64](b *Buffer) []T {
	var z T
	n := len(b.host) / int(unsafe.Sizeof(z))
	if n == 0 {
		return nil
	}
	return append([]T(nil), unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b.host))), n)...)
}

// newOut makes a buffer of n elements of T filled with NaN, so an element the
// kernel forgets to write shows.
func newOut[T float32 | float64](m *Mem, n int) *Buffer {
	m.t.Helper()
	v := make([]T, n)
	for i := range v {
		v[i] = T(math.NaN())
	}
	return put(m, v)
}

// Tolerance is the relative tolerance for an element of size bytes: 1e-5
// for float32, 1e-12 for float64. The host build stays below 7e-7 and 6e-16
// (package kernels); a GPU's exp and log are a few ulps from the CPU's, far
// inside both.
func Tolerance(size int) float64 {
	if size == 4 {
		return 1e-5
	}
	return 1e-12
}

func tol[T float32 | float64]() float64 {
	var z T
	return Tolerance(int(unsafe.Sizeof(z)))
}

func same(a, b float64) bool {
	return a == b || (a != a && b != b)
}

// compare checks got against want. norm selects the error measure:
// elementwise, |got-want|/|want| (ops whose every element is computed on
// its own), or normwise, max|got-want|/max|want| (sums, whose small
// elements come from cancellation). Both must agree on NaN and infinities.
// A GPU keeps each check's measure: normwise everywhere would hide a wrong
// small result behind a large one (exp of the special inputs reaches 1e43),
// and elementwise is what the host build met while its exp and log were
// the portable ports the PTX runs (package kernels).
func compare[T float32 | float64](t TB, m *Mem, kernel string, got, want []T, norm bool) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d results, want %d", kernel, len(got), len(want))
	}
	scale := 0.0
	for _, w := range want {
		if a := math.Abs(float64(w)); a > scale && !math.IsInf(a, 0) {
			scale = a
		}
	}
	worstErr, exact := 0.0, true
	for i := range got {
		g, w := float64(got[i]), float64(want[i])
		if math.Float64bits(g) != math.Float64bits(w) && !same(g, w) {
			exact = false
		}
		if same(g, w) {
			continue
		}
		if g != g || w != w || math.IsInf(g, 0) || math.IsInf(w, 0) {
			m.note(math.Inf(1), false)
			t.Fatalf("%s: element %d is %v, want %v", kernel, i, g, w)
		}
		den := math.Abs(w)
		if norm {
			den = scale
		}
		e := math.Abs(g-w) / den
		if den == 0 {
			e = math.Abs(g - w)
		}
		if e > worstErr {
			worstErr = e
		}
		if e > tol[T]() {
			m.note(e, false)
			t.Fatalf("%s: element %d is %v, want %v (relative error %.3g > %.0g)", kernel, i, g, w, e, tol[T]())
		}
	}
	m.note(worstErr, exact)
}

// sameBits requires got to be want bit for bit (NaNs alike) on an exact Mem;
// on a GPU it is compare's normwise tolerance.
func sameBits[T float32 | float64](t TB, m *Mem, kernel string, got, want []T) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d results, want %d", kernel, len(got), len(want))
	}
	for i := range got {
		if g, w := float64(got[i]), float64(want[i]); m.exact && math.Float64bits(g) != math.Float64bits(w) && !same(g, w) {
			m.note(math.Abs(g-w)/math.Abs(w), false)
			t.Fatalf("%s: element %d is %v, want the CPU op's %v bit for bit", kernel, i, g, w)
		}
	}
	compare(t, m, kernel, got, want, true)
}

// exactly records a check that compared its results exactly (booleans,
// fills) and found them right.
func (m *Mem) exactly() { m.note(0, true) }
