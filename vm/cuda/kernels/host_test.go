package kernels_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels/kernelstest"
)

// The tests run every kernel through the host build's ooc_host_K launchers,
// called with purego exactly as a driver would get cuLaunchKernel's
// arguments: grid and block as three uint32s, kernelParams as packed by
// kernels.Spec.Prepare. "Device memory" is Go memory: pointers are host
// addresses, which the host build dereferences.

type hostLib struct {
	fns      map[string]uintptr
	setOrder uintptr
}

var (
	libOnce sync.Once
	lib     *hostLib
	libErr  error
)

func loadHost(t testing.TB) *hostLib {
	t.Helper()
	path := kernelstest.BuildHost(t)
	libOnce.Do(func() {
		// purego reads dlerror in a second call; keep both on one thread.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err != nil {
			libErr = err
			return
		}
		l := &hostLib{fns: map[string]uintptr{}}
		for _, s := range kernels.Specs {
			f, err := purego.Dlsym(h, "ooc_host_"+s.Name)
			if err != nil {
				libErr = fmt.Errorf("%s: %v", s.Name, err)
				return
			}
			l.fns[s.Name] = f
		}
		if l.setOrder, libErr = purego.Dlsym(h, "ooc_host_set_order"); libErr == nil {
			lib = l
		}
	})
	if libErr != nil {
		t.Fatalf("loading the host kernels: %v", libErr)
	}
	return lib
}

// guard bytes around every buffer catch out-of-bounds writes without a
// sanitizer (the sanitizer test catches reads too).
const guard = 64

// mem is a test's "device": buffers with guards, launches that check them,
// and a record of everything for the sanitizer replay.
type mem struct {
	t    testing.TB
	lib  *hostLib
	bufs []*buffer
}

type buffer struct {
	raw  []byte // guard, data, guard
	size int
}

func (b *buffer) data() []byte { return b.raw[guard : guard+b.size] }
func (b *buffer) addr() uintptr {
	return uintptr(unsafe.Pointer(unsafe.SliceData(b.raw))) + guard
}

func newMem(t testing.TB) *mem { return &mem{t: t, lib: loadHost(t)} }

// alloc makes a zeroed buffer of n bytes; the guards hold 0xA5.
func (m *mem) alloc(n int) *buffer {
	b := &buffer{raw: make([]byte, n+2*guard), size: n}
	for i := 0; i < guard; i++ {
		b.raw[i], b.raw[guard+n+i] = 0xA5, 0xA5
	}
	m.bufs = append(m.bufs, b)
	return b
}

func f32s(b *buffer) []float32 {
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b.data()))), b.size/4)
}
func f64s(b *buffer) []float64 {
	return unsafe.Slice((*float64)(unsafe.Pointer(unsafe.SliceData(b.data()))), b.size/8)
}

// put copies values into a new buffer of the float type T.
func put[T float32 | float64](m *mem, v []T) *buffer {
	var z T
	b := m.alloc(len(v) * int(unsafe.Sizeof(z)))
	copy(unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b.data()))), len(v)), v)
	return b
}

// get reads a buffer as T.
func get[T float32 | float64](b *buffer) []T {
	var z T
	return append([]T(nil), unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b.data()))), b.size/int(unsafe.Sizeof(z)))...)
}

// newOut makes a buffer of n elements of T filled with NaN, so an element the
// kernel forgets to write shows.
func newOut[T float32 | float64](m *mem, n int) *buffer {
	v := make([]T, n)
	for i := range v {
		v[i] = T(math.NaN())
	}
	return put(m, v)
}

// launch runs kernel name on args twice, blocks and threads forward and then
// in reverse order from the same inputs, and fails the test if the results
// differ in any bit (a race: a result that depends on the order threads run
// in) or if a guard was written.
func (m *mem) launch(name string, args ...kernels.Arg) *kernels.Launch {
	m.t.Helper()
	s, ok := kernels.Lookup(name)
	if !ok {
		m.t.Fatalf("no kernel %s", name)
	}
	l, err := s.Prepare(args...)
	if err != nil {
		m.t.Fatalf("%s: %v", name, err)
	}
	bufs := m.used(s, l)
	before := snapshot(bufs)
	m.run(l, 0)
	after := snapshot(bufs)
	restore(bufs, before)
	m.run(l, 1)
	for i, b := range bufs {
		if !bytes.Equal(b.raw, after[i]) {
			m.t.Fatalf("%s: buffer %d differs between forward and reverse thread order (a race)", name, i)
		}
		for j := 0; j < guard; j++ {
			if b.raw[j] != 0xA5 || b.raw[guard+b.size+j] != 0xA5 {
				m.t.Fatalf("%s: wrote outside buffer %d (%d bytes)", name, i, b.size)
			}
		}
	}
	record(bufs, s, l, before)
	launched[name]++
	return l
}

func (m *mem) run(l *kernels.Launch, order int) {
	if l.Empty() {
		return
	}
	purego.SyscallN(m.lib.setOrder, uintptr(order))
	grid, block := l.Grid, l.Block
	purego.SyscallN(m.lib.fns[l.Kernel], uintptr(unsafe.Pointer(&grid)), uintptr(unsafe.Pointer(&block)),
		uintptr(l.SharedBytes), uintptr(l.Params().Pointer()))
	runtime.KeepAlive(l)
	runtime.KeepAlive(m.bufs)
	purego.SyscallN(m.lib.setOrder, 0)
}

// used is the buffers the launch's pointer arguments point into.
func (m *mem) used(s *kernels.Spec, l *kernels.Launch) []*buffer {
	var out []*buffer
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

func (m *mem) find(addr uintptr) *buffer {
	for _, b := range m.bufs {
		if addr >= b.addr() && addr <= b.addr()+uintptr(b.size) {
			return b
		}
	}
	return nil
}

func snapshot(bufs []*buffer) [][]byte {
	s := make([][]byte, len(bufs))
	for i, b := range bufs {
		s[i] = append([]byte(nil), b.raw...)
	}
	return s
}

func restore(bufs []*buffer, s [][]byte) {
	for i, b := range bufs {
		copy(b.raw, s[i])
	}
}

func p(b *buffer) kernels.Arg { return kernels.Ptr(b.addr()) }

// ---- accuracy bookkeeping ----

// worst is the largest error seen per kernel and metric, reported by
// TestZAccuracyReport (and in doc.go).
var (
	worstMu  sync.Mutex
	worst    = map[string]float64{}
	inexact  = map[string]bool{}
	launched = map[string]int{}
)

func note(kernel string, err float64, exact bool) {
	worstMu.Lock()
	defer worstMu.Unlock()
	if err > worst[kernel] || !(err == err) {
		worst[kernel] = err
	}
	if !exact {
		inexact[kernel] = true
	}
	if _, ok := worst[kernel]; !ok {
		worst[kernel] = 0
	}
}

// tol is the tolerance for a dtype: relative 1e-5 for float32, 1e-12 for float64.
func tol[T float32 | float64]() float64 {
	var z T
	if unsafe.Sizeof(z) == 4 {
		return 1e-5
	}
	return 1e-12
}

func same(a, b float64) bool {
	return a == b || (a != a && b != b)
}

// compare checks got against want. norm selects the error measure:
// elementwise, |got-want|/|want| (ops whose every element is computed on
// its own), or normwise, max|got-want|/max|want| (sums, whose small
// elements come from cancellation). Both must agree on NaN and infinities.
func compare[T float32 | float64](t testing.TB, kernel string, got, want []T, norm bool) {
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
			t.Fatalf("%s: element %d is %v, want %v (relative error %.3g > %.0g)", kernel, i, g, w, e, tol[T]())
		}
	}
	note(kernel, worstErr, exact)
}

// ---- the sanitizer replay record ----

var (
	recMu  sync.Mutex
	nbufs  uint32
	ncalls uint32
	rbufs  bytes.Buffer
	rcalls bytes.Buffer
)

// record appends the launch to the replay the sanitizer test runs: the
// buffers as they were before it (snapshotted inputs), then the call.
func record(bufs []*buffer, s *kernels.Spec, l *kernels.Launch, before [][]byte) {
	recMu.Lock()
	defer recMu.Unlock()
	if ncalls > 4000 || l.Empty() {
		return
	}
	ids := make([]uint32, len(bufs))
	for i, b := range bufs {
		ids[i] = nbufs
		nbufs++
		binary.Write(&rbufs, binary.LittleEndian, uint64(b.size))
		rbufs.Write(before[i][guard : guard+b.size])
	}
	ncalls++
	binary.Write(&rcalls, binary.LittleEndian, uint32(len(s.Name)))
	rcalls.WriteString(s.Name)
	binary.Write(&rcalls, binary.LittleEndian, l.Grid)
	binary.Write(&rcalls, binary.LittleEndian, l.Block)
	binary.Write(&rcalls, binary.LittleEndian, uint32(len(s.Params)))
	ps := unsafe.Slice((*unsafe.Pointer)(l.Params().Pointer()), len(s.Params))
	for i, prm := range s.Params {
		raw := unsafe.Slice((*byte)(ps[i]), prm.Type.Size())
		if prm.Type.IsPtr() {
			addr := uintptr(binary.LittleEndian.Uint64(raw))
			found := false
			for j, b := range bufs {
				if addr >= b.addr() && addr <= b.addr()+uintptr(b.size) {
					rcalls.WriteByte(0)
					binary.Write(&rcalls, binary.LittleEndian, ids[j])
					binary.Write(&rcalls, binary.LittleEndian, uint64(addr-b.addr()))
					found = true
					break
				}
			}
			if !found {
				panic(fmt.Sprintf("%s: pointer argument %d is in no buffer", s.Name, i))
			}
			continue
		}
		rcalls.WriteByte(1)
		binary.Write(&rcalls, binary.LittleEndian, uint32(len(raw)))
		rcalls.Write(raw)
	}
}

// replayFile is the recorded launches in src/harness.cpp's format.
func replayFile() []byte {
	recMu.Lock()
	defer recMu.Unlock()
	var b bytes.Buffer
	b.WriteString("OOCR")
	binary.Write(&b, binary.LittleEndian, nbufs)
	b.Write(rbufs.Bytes())
	binary.Write(&b, binary.LittleEndian, ncalls)
	b.Write(rcalls.Bytes())
	return b.Bytes()
}
