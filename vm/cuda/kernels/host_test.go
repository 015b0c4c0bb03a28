package kernels_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels/kernelcheck"
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
	libOnce.Do(func() { lib, libErr = openHost(kernelstest.BuildHost(t)) })
	if libErr != nil {
		t.Fatalf("loading the host kernels: %v", libErr)
	}
	return lib
}

// openHost dlopens a host build and looks up its launchers.
func openHost(path string) (lib *hostLib, libErr error) {
	func() {
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
	}()
	return lib, libErr
}

// guard bytes around every buffer catch out-of-bounds writes without a
// sanitizer (the sanitizer test catches reads too).
const guard = 64

// hostDev is the kernelcheck.Device of the tests: buffers are Go memory with
// guards, launches run twice (forward and reverse thread order) and are
// recorded for the sanitizer replay.
type hostDev struct {
	t   testing.TB
	lib *hostLib
	raw map[uintptr][]byte // guard, data, guard, by data address
}

// newMem is a kernelcheck.Mem on the host build, exact (the host build
// promises the CPU op's bits where package kernels says so); its accuracy
// goes into the report at the end of the test.
func newMem(t testing.TB) *kernelcheck.Mem {
	d := &hostDev{t: t, lib: loadHost(t), raw: map[uintptr][]byte{}}
	m := kernelcheck.NewMem(t, d, true)
	t.Cleanup(func() { keep(m) })
	return m
}

// Alloc makes a zeroed buffer of n bytes; the guards hold 0xA5.
func (d *hostDev) Alloc(n int) ([]byte, uintptr, error) {
	raw := make([]byte, n+2*guard)
	for i := 0; i < guard; i++ {
		raw[i], raw[guard+n+i] = 0xA5, 0xA5
	}
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(raw))) + guard
	d.raw[addr] = raw
	return raw[guard : guard+n], addr, nil
}

// Launch runs the kernel twice, blocks and threads forward and then in
// reverse order from the same inputs, and fails if the results differ in
// any bit (a race: a result that depends on the order threads run in) or if
// a guard was written.
func (d *hostDev) Launch(s *kernels.Spec, l *kernels.Launch, bufs []*kernelcheck.Buffer) error {
	raws := make([][]byte, len(bufs))
	for i, b := range bufs {
		raws[i] = d.raw[b.Addr()]
	}
	before := snapshot(raws)
	d.run(l, 0)
	after := snapshot(raws)
	restore(raws, before)
	d.run(l, 1)
	for i, r := range raws {
		if !bytes.Equal(r, after[i]) {
			return fmt.Errorf("buffer %d differs between forward and reverse thread order (a race)", i)
		}
		n := bufs[i].Size()
		for j := 0; j < guard; j++ {
			if r[j] != 0xA5 || r[guard+n+j] != 0xA5 {
				return fmt.Errorf("wrote outside buffer %d (%d bytes)", i, n)
			}
		}
	}
	runtime.KeepAlive(raws)
	record(bufs, s, l, before)
	return nil
}

func (d *hostDev) run(l *kernels.Launch, order int) {
	if l.Empty() {
		return
	}
	purego.SyscallN(d.lib.setOrder, uintptr(order))
	grid, block := l.Grid, l.Block
	purego.SyscallN(d.lib.fns[l.Kernel], uintptr(unsafe.Pointer(&grid)), uintptr(unsafe.Pointer(&block)),
		uintptr(l.SharedBytes), uintptr(l.Params().Pointer()))
	runtime.KeepAlive(l)
	purego.SyscallN(d.lib.setOrder, 0)
}

func snapshot(raws [][]byte) [][]byte {
	s := make([][]byte, len(raws))
	for i, r := range raws {
		s[i] = append([]byte(nil), r...)
	}
	return s
}

func restore(raws [][]byte, s [][]byte) {
	for i, r := range raws {
		copy(r, s[i])
	}
}

// ---- accuracy bookkeeping ----

// worst is the largest error seen per kernel, reported by
// TestZAccuracyReport (and in doc.go).
var (
	worstMu  sync.Mutex
	worst    = map[string]float64{}
	inexact  = map[string]bool{}
	launched = map[string]int{}
)

// keep adds a test's accuracy to the report.
func keep(m *kernelcheck.Mem) {
	worstMu.Lock()
	defer worstMu.Unlock()
	for _, a := range m.Report() {
		if e, ok := worst[a.Kernel]; !ok || a.MaxRelErr > e || a.MaxRelErr != a.MaxRelErr {
			worst[a.Kernel] = a.MaxRelErr
		}
		if !a.Exact {
			inexact[a.Kernel] = true
		}
		launched[a.Kernel] += a.Launches
	}
}

// runGroup runs a kernelcheck group's cases (f32, then f64) on the host build.
func runGroup(t *testing.T, group string) {
	cs := kernelcheck.Group(group)
	if len(cs) == 0 {
		t.Fatalf("no kernelcheck group %q", group)
	}
	for _, c := range cs {
		c.Run(t, newMem(t))
	}
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
func record(bufs []*kernelcheck.Buffer, s *kernels.Spec, l *kernels.Launch, before [][]byte) {
	recMu.Lock()
	defer recMu.Unlock()
	if ncalls > 4000 || l.Empty() {
		return
	}
	ids := make([]uint32, len(bufs))
	for i, b := range bufs {
		ids[i] = nbufs
		nbufs++
		binary.Write(&rbufs, binary.LittleEndian, uint64(b.Size()))
		rbufs.Write(before[i][guard : guard+b.Size()])
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
				if addr >= b.Addr() && addr <= b.Addr()+uintptr(b.Size()) {
					rcalls.WriteByte(0)
					binary.Write(&rcalls, binary.LittleEndian, ids[j])
					binary.Write(&rcalls, binary.LittleEndian, uint64(addr-b.Addr()))
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
