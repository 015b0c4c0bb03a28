package cuda

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"unsafe"
)

// Module is code loaded into a device's context: PTX text, which the driver compiles for
// the GPU, or a cubin.
type Module struct {
	d *Device
	h uintptr // CUmodule
}

// Function is a kernel of a module.
type Function struct {
	m    *Module
	h    uintptr // CUfunction
	name string
}

var errNoModule = errors.New("cuda: no module (LoadModule makes them)")

// Dim3 is a grid or block shape; a zero Y or Z counts as 1.
type Dim3 struct{ X, Y, Z uint32 }

type moduleSet struct {
	d      *Device
	mu     sync.Mutex
	closed bool
	set    map[*Module]struct{}
}

// LoadModule loads a module image (cuModuleLoadData). PTX must be text; a NUL is added at
// the end, as the driver reads it as a C string.
func (d *Device) LoadModule(image []byte) (*Module, error) {
	if len(image) == 0 {
		return nil, fmt.Errorf("cuda: %s: empty module image", d.name)
	}
	img := append(append(make([]byte, 0, len(image)+1), image...), 0)
	ms := &d.modules
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.closed {
		return nil, ErrClosed
	}
	m := &Module{d: d}
	err := d.do(func(drv *driver) error {
		return drv.check(fnModuleLoadData, drv.call(fnModuleLoadData, uintptr(unsafe.Pointer(&m.h)), uintptr(unsafe.Pointer(&img[0]))))
	})
	if err != nil {
		return nil, err
	}
	if ms.set == nil {
		ms.set = map[*Module]struct{}{}
	}
	ms.set[m] = struct{}{}
	return m, nil
}

// Function looks a kernel up by name (its extern "C" name).
func (m *Module) Function(name string) (*Function, error) {
	if m == nil || m.d == nil {
		return nil, errNoModule
	}
	f := &Function{m: m, name: name}
	cname := append([]byte(name), 0)
	err := m.d.do(func(drv *driver) error {
		return drv.check(fnModuleGetFunction, drv.call(fnModuleGetFunction, uintptr(unsafe.Pointer(&f.h)), m.h, uintptr(unsafe.Pointer(&cname[0]))))
	})
	if err != nil {
		return nil, fmt.Errorf("kernel %q: %w", name, err)
	}
	return f, nil
}

// Name is the kernel's name.
func (f *Function) Name() string { return f.name }

// Unload unloads the module; its functions must not be launched again.
func (m *Module) Unload() error {
	if m == nil || m.d == nil {
		return errNoModule
	}
	ms := &m.d.modules
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if _, ok := ms.set[m]; !ok {
		return fmt.Errorf("cuda: %s: module unloaded already", m.d.name)
	}
	delete(ms.set, m)
	return m.d.do(func(drv *driver) error { return drv.check(fnModuleUnload, drv.call(fnModuleUnload, m.h)) })
}

func (ms *moduleSet) close() error {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.closed {
		return nil
	}
	ms.closed = true
	var errs []error
	for m := range ms.set {
		errs = append(errs, closeError(ms.d.do(func(drv *driver) error { return drv.check(fnModuleUnload, drv.call(fnModuleUnload, m.h)) })))
	}
	ms.set = nil
	return errors.Join(errs...)
}

// Launch queues kernel f on the compute stream with the given grid and block shapes,
// dynamic shared memory and arguments. Arguments are device pointers (uintptr, as
// alloc.Block.Addr gives them) or scalars: int32, uint32, int64, uint64, int, float32,
// float64. The driver copies them at the call.
//
// kernelParams is built as the driver reads it, an array of pointers to the arguments,
// with two additions the real driver ignores and the fake driver of internal/fakecuda
// needs, since it cannot read parameter sizes from a kernel image: each argument sits in
// an 8-byte slot, and the array ends with a NULL.
func (d *Device) Launch(f *Function, grid, block Dim3, sharedBytes uint32, args ...any) error {
	if f == nil || f.m == nil || f.m.d != d {
		return fmt.Errorf("cuda: %s: launch of a kernel of another device, or none", d.name)
	}
	grid, block = grid.norm(), block.norm()
	if grid.X == 0 || block.X == 0 {
		return fmt.Errorf("cuda: %s: launch of %s with an empty grid %v or block %v", d.name, f.name, grid, block)
	}
	n := len(args)
	// buf holds the pointer array, its NULL, then the argument slots. The pointers are
	// integers to the collector, so nothing needs pinning: buf is kept alive by the call.
	buf := make([]uint64, 2*n+1)
	for i, a := range args {
		v, err := argBits(a)
		if err != nil {
			return fmt.Errorf("cuda: %s: launch of %s: argument %d: %w", d.name, f.name, i, err)
		}
		buf[n+1+i] = v
		buf[i] = uint64(uintptr(unsafe.Pointer(&buf[n+1+i])))
	}
	st := &d.step
	st.mu.Lock()
	defer st.mu.Unlock()
	if err := d.begin(); err != nil {
		return err
	}
	return d.do(func(drv *driver) error {
		return drv.check(fnLaunchKernel, drv.call(fnLaunchKernel, f.h,
			uintptr(grid.X), uintptr(grid.Y), uintptr(grid.Z), uintptr(block.X), uintptr(block.Y), uintptr(block.Z),
			uintptr(sharedBytes), d.streams[Compute].h, uintptr(unsafe.Pointer(&buf[0])), 0))
	})
}

func (g Dim3) norm() Dim3 {
	g.Y, g.Z = max(g.Y, 1), max(g.Z, 1)
	return g
}

// argBits is an argument's bytes, little-endian in an 8-byte slot.
func argBits(a any) (uint64, error) {
	switch v := a.(type) {
	case uintptr:
		return uint64(v), nil
	case int32:
		return uint64(uint32(v)), nil
	case uint32:
		return uint64(v), nil
	case int64:
		return uint64(v), nil
	case uint64:
		return v, nil
	case int:
		return uint64(v), nil
	case float32:
		return uint64(math.Float32bits(v)), nil
	case float64:
		return math.Float64bits(v), nil
	}
	return 0, fmt.Errorf("%T is not a kernel argument (want a uintptr device pointer, an integer or a float)", a)
}
