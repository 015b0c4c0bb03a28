package cuda

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gorgonia-ooc/outofcore/vm/alloc"
)

// Device is one GPU through the CUDA driver: its primary context, three streams, its
// memory as an alloc.Memory and a pool of pinned host buffers. It implements vm.Device
// and vm.AllocatorMaker.
// Its methods are safe for concurrent use.
type Device struct {
	drv  *driver
	info Info
	name string
	dev  int32 // CUdevice
	ctx  uintptr
	// primary: ctx is the device's primary context, retained at Open and released at
	// Close (else one created for the device, and destroyed at Close).
	primary bool
	log     io.Writer
	// search finds cuBLAS and NCCL for this device as Open found its driver.
	search Search

	// mu is held shared by every driver call and exclusively by Close, so that Close
	// never pulls the context from under a call.
	mu      sync.RWMutex
	closed  bool
	closing atomic.Bool
	lost    atomic.Pointer[error] // the sticky error that lost the context

	noVMMNote sync.Once // NewVA says once that it gives best-fit

	mem     *memory
	pinned  *PinnedPool
	streams [numStreams]*Stream
	events  eventPool
	step    stepState
	modules moduleSet
}

// Info describes a device as Open found it.
type Info struct {
	Library       string // the driver library loaded
	DriverVersion int    // cuDriverGetVersion: 12060 is CUDA 12.6
	Ordinal       int
	Name          string // cuDeviceGetName
	// ComputeCapability is major.minor, e.g. "8.0".
	ComputeCapability string
	Multiprocessors   int
	// AsyncEngines is the number of copy engines: 2 lets a swap-in and a swap-out overlap.
	AsyncEngines int
	// TotalMemory is the device's memory; FreeMemory what cuMemGetInfo reported free once
	// this device's context existed.
	TotalMemory, FreeMemory int64
	// Reserve is left to the driver; Capacity is what the allocators may use.
	Reserve, Capacity int64
	// VMM reports virtual memory management (cuMemCreate, cuMemMap, ...) that the device
	// reports and that worked in a round trip at Open: without it only the best-fit
	// allocator runs. Granularity is cuMemGetAllocationGranularity's minimum,
	// the unit of chunk sizes and mapping offsets (0 without VMM).
	VMM         bool
	Granularity int64
	// NoVMMReason says why VMM is off, when it is.
	NoVMMReason string
}

// DefaultReserve is the device memory Open leaves outside the allocators' capacity when
// not told otherwise: 256 MiB or 1/32 of the device, whichever is more. The context's own
// memory is already gone from cuMemGetInfo's free bytes when capacity is computed; the
// reserve is for what the driver and libraries take later, outside the allocators: module
// code and kernels' local memory, cuDNN workspaces, and launch queues (cuBLAS's workspace
// is taken from the capacity: OpenBLAS).
func DefaultReserve(total int64) int64 { return max(256<<20, total/32) }

// Open opens CUDA device ordinal (cuda:N) through the driver library (WithLibrary, else
// $OOC_CUDA_LIBRARY, else the first libcuda.so.1 the Search finds: DefaultSearch or
// WithSearch). It retains the device's primary context, asking for blocking
// synchronization (a host wait sleeps instead of spinning), tries the virtual memory
// management calls once (Info.VMM, Info.NoVMMReason), and makes the compute,
// device-to-host and host-to-device streams.
//
// The errors a machine gives, each wrapping a sentinel: no libcuda (ErrNoDriver), a driver
// older than MinDriverVersion (ErrDriverTooOld), no device or no device with that ordinal
// (ErrNoDevice), a capacity above the free memory (alloc.ErrOutOfMemory).
func Open(ordinal int, opts ...Option) (*Device, error) {
	cfg := newConfig(opts)
	drv, err := findDriver(cfg.library, cfg.search)
	if err != nil {
		return nil, err
	}
	n, err := drv.initDriver()
	if err != nil {
		return nil, err
	}
	if ordinal < 0 || ordinal >= n {
		return nil, fmt.Errorf("cuda: %w: cuda:%d asked for, but this machine has %s", ErrNoDevice, ordinal, countDevices(n))
	}
	d := &Device{drv: drv, name: fmt.Sprintf("cuda:%d", ordinal), log: cfg.log, search: cfg.search}
	d.events.d, d.modules.d = d, d
	d.info = Info{Library: drv.path, DriverVersion: drv.version, Ordinal: ordinal}
	if err := d.describe(ordinal); err != nil {
		return nil, err
	}
	if err := d.openContext(cfg.ownContext); err != nil {
		return nil, err
	}
	if err := d.setUp(cfg); err != nil {
		_ = d.Close()
		return nil, err
	}
	return d, nil
}

func countDevices(n int) string {
	switch n {
	case 0:
		return "none"
	case 1:
		return "one (cuda:0)"
	}
	return fmt.Sprintf("%d (cuda:0 to cuda:%d)", n, n-1)
}

// describe fills in the device's Info from device queries, which need no context.
func (d *Device) describe(ordinal int) error {
	drv := d.drv
	wrap := func(f fn, r Result) error { return d.wrap(drv.check(f, r)) }
	if err := wrap(fnDeviceGet, drv.call(fnDeviceGet, uintptr(unsafe.Pointer(&d.dev)), uintptr(ordinal))); err != nil {
		return err
	}
	name := make([]byte, 256)
	if err := wrap(fnDeviceGetName, drv.call(fnDeviceGetName, uintptr(unsafe.Pointer(&name[0])), uintptr(len(name)), uintptr(d.dev))); err != nil {
		return err
	}
	d.info.Name = goString(&name[0])
	var total uint64
	if err := wrap(fnDeviceTotalMem, drv.call(fnDeviceTotalMem, uintptr(unsafe.Pointer(&total)), uintptr(d.dev))); err != nil {
		return err
	}
	d.info.TotalMemory = int64(total)
	attrs := map[int32]*int{attrMultiprocessorCount: &d.info.Multiprocessors, attrAsyncEngineCount: &d.info.AsyncEngines}
	var major, minor, vmm, uva int
	attrs[attrComputeMajor], attrs[attrComputeMinor], attrs[attrVMMSupported], attrs[attrUnifiedAddressing] = &major, &minor, &vmm, &uva
	for attr, dst := range attrs {
		var v int32
		if err := wrap(fnDeviceGetAttribute, drv.call(fnDeviceGetAttribute, uintptr(unsafe.Pointer(&v)), uintptr(attr), uintptr(d.dev))); err != nil {
			return fmt.Errorf("%w (attribute %d)", err, attr)
		}
		*dst = int(v)
	}
	d.info.ComputeCapability = fmt.Sprintf("%d.%d", major, minor)
	switch {
	case !drv.vmm:
		d.info.NoVMMReason = fmt.Sprintf("the driver (CUDA %s) lacks the virtual memory management functions", versionString(drv.version))
	case vmm == 0:
		d.info.NoVMMReason = "the device reports CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 0"
	case uva == 0:
		d.info.NoVMMReason = "the device has no unified addressing, which cuMemAddressReserve needs"
	default:
		d.info.VMM = true
	}
	return nil
}

// openContext retains the device's primary context, the one the CUDA runtime and so
// NCCL, cuBLAS and cuDNN work in: a stream of another context handed to NCCL is used in
// the wrong context. It asks for blocking synchronization first (a host wait sleeps rather
// than spins); cuDevicePrimaryCtxSetFlags_v2 applies that to a primary context another
// user of this process made already, and where the driver refuses, the context keeps its
// flags and Open says so on the log. own makes a context of the device's own instead
// (cuCtxCreate_v2), for the tests. Either is current on the calling thread only; every
// later call path sets it again (see do).
func (d *Device) openContext(own bool) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	drv := d.drv
	if own {
		return d.wrap(drv.check(fnCtxCreate, drv.call(fnCtxCreate, uintptr(unsafe.Pointer(&d.ctx)), ctxSchedBlockingSync, uintptr(d.dev))))
	}
	if err := drv.check(fnDevicePrimaryCtxSetFlags, drv.call(fnDevicePrimaryCtxSetFlags, uintptr(d.dev), ctxSchedBlockingSync)); err != nil {
		fmt.Fprintf(d.log, "cuda: %s: the primary context keeps its scheduling flags (%v): host waits may spin\n", d.name, d.wrap(err))
	}
	if err := d.wrap(drv.check(fnDevicePrimaryCtxRetain, drv.call(fnDevicePrimaryCtxRetain, uintptr(unsafe.Pointer(&d.ctx)), uintptr(d.dev)))); err != nil {
		return err
	}
	d.primary = true
	if err := d.wrap(drv.check(fnCtxSetCurrent, drv.call(fnCtxSetCurrent, d.ctx))); err != nil {
		return errors.Join(err, d.closeContext())
	}
	return nil
}

// closeContext releases the primary context (the driver destroys it when its last user
// releases it) or destroys the device's own, with the thread locked.
func (d *Device) closeContext() error {
	if d.primary {
		return d.drv.check(fnDevicePrimaryCtxRelease, d.drv.call(fnDevicePrimaryCtxRelease, uintptr(d.dev)))
	}
	return d.drv.check(fnCtxDestroy, d.drv.call(fnCtxDestroy, d.ctx))
}

// setUp sizes the capacity, finds the granularity and makes the streams and pools.
func (d *Device) setUp(cfg config) error {
	err := d.do(func(drv *driver) error {
		var free, total uint64
		if err := drv.check(fnMemGetInfo, drv.call(fnMemGetInfo, uintptr(unsafe.Pointer(&free)), uintptr(unsafe.Pointer(&total)))); err != nil {
			return err
		}
		d.info.FreeMemory = int64(free)
		if d.info.VMM {
			d.tryVMM(drv)
		}
		for k := range d.streams {
			s := &Stream{d: d, kind: StreamKind(k)}
			if err := drv.check(fnStreamCreate, drv.call(fnStreamCreate, uintptr(unsafe.Pointer(&s.h)), streamNonBlocking)); err != nil {
				return err
			}
			d.streams[k] = s
		}
		return nil
	})
	if err != nil {
		return err
	}
	d.info.Reserve = cfg.reserve
	if d.info.Reserve < 0 {
		d.info.Reserve = DefaultReserve(d.info.TotalMemory)
	}
	usable := d.info.FreeMemory - d.info.Reserve
	switch {
	case cfg.capacity < 0:
		return fmt.Errorf("cuda: %s: capacity %d is negative", d.name, cfg.capacity)
	case cfg.capacity > usable || usable <= 0:
		return fmt.Errorf("cuda: %s (%s): %w: capacity %d bytes asked for, but %d bytes are free and %d are reserved for the driver (WithReserve)",
			d.name, d.info.Name, alloc.ErrOutOfMemory, cfg.capacity, d.info.FreeMemory, d.info.Reserve)
	case cfg.capacity > 0:
		d.info.Capacity = cfg.capacity
	default:
		d.info.Capacity = usable
	}
	d.mem = newMemory(d, d.info.Capacity, d.info.Granularity)
	d.pinned = newPinnedPool(d, cfg.pinnedLimit)
	if !d.info.VMM {
		fmt.Fprintf(d.log, "cuda: %s (%s) has no virtual memory management: %s; only the best-fit allocator runs on it\n",
			d.name, d.info.Name, d.info.NoVMMReason)
	}
	return nil
}

// tryVMM turns VMM off, saying why, unless the driver both reports a granularity and
// maps, gives access to and unmaps one chunk of it. Attributes alone are not enough: under a
// virtual machine's GPU proxy (gVisor's, for one) the device reports VMM support while
// cuMemCreate or cuMemMap fail with results that are not out-of-memory.
func (d *Device) tryVMM(drv *driver) {
	g, err := granularity(drv, d.dev)
	if err == nil {
		err = vmmRoundTrip(drv, d.dev, g)
	}
	if err != nil {
		d.info.VMM, d.info.Granularity = false, 0
		d.info.NoVMMReason = fmt.Sprintf("the virtual memory management round trip at Open failed: %v", d.wrap(err))
		return
	}
	d.info.Granularity = g
}

// vmmRoundTrip reserves, creates, maps, gives access to, unmaps, releases and frees one
// granule, the calls the VA allocator makes, undoing what succeeded when a call fails.
func vmmRoundTrip(drv *driver, dev int32, g int64) error {
	var p, h uint64
	if err := drv.check(fnMemAddressReserve, drv.call(fnMemAddressReserve, uintptr(unsafe.Pointer(&p)), uintptr(g), uintptr(g), 0, 0)); err != nil {
		return err
	}
	free := func() error { return drv.check(fnMemAddressFree, drv.call(fnMemAddressFree, uintptr(p), uintptr(g))) }
	prop := allocationProp(dev)
	if err := drv.check(fnMemCreate, drv.call(fnMemCreate, uintptr(unsafe.Pointer(&h)), uintptr(g), uintptr(unsafe.Pointer(&prop)), 0)); err != nil {
		return errors.Join(err, free())
	}
	release := func() error { return drv.check(fnMemRelease, drv.call(fnMemRelease, uintptr(h))) }
	if err := drv.check(fnMemMap, drv.call(fnMemMap, uintptr(p), uintptr(g), 0, uintptr(h), 0)); err != nil {
		return errors.Join(err, release(), free())
	}
	desc := memAccessDesc{location: memLocation{typ: memLocationTypeDevice, id: dev}, flags: memAccessFlagsProtReadWrite}
	access := drv.check(fnMemSetAccess, drv.call(fnMemSetAccess, uintptr(p), uintptr(g), uintptr(unsafe.Pointer(&desc)), 1))
	unmap := drv.check(fnMemUnmap, drv.call(fnMemUnmap, uintptr(p), uintptr(g)))
	return errors.Join(access, unmap, release(), free())
}

// granularity asks the driver for the minimum mapping granularity of device memory.
func granularity(drv *driver, dev int32) (int64, error) {
	prop := allocationProp(dev)
	var g uint64
	err := drv.check(fnMemGetAllocationGranularity, drv.call(fnMemGetAllocationGranularity,
		uintptr(unsafe.Pointer(&g)), uintptr(unsafe.Pointer(&prop)), memAllocGranularityMinimum))
	return int64(g), err
}

// allocationProp describes pinned device memory on dev, with no export handle.
func allocationProp(dev int32) memAllocationProp {
	return memAllocationProp{typ: memAllocationTypePinned, location: memLocation{typ: memLocationTypeDevice, id: dev}}
}

// do runs f on a locked OS thread with the device's context current.
//
// Context handling: a CUDA context is current per OS thread, and Go moves goroutines
// between threads at any time. Every call path therefore locks its goroutine to its thread
// and makes the context current there (cuCtxSetCurrent, a thread-local store) before its
// driver calls. The alternative, one locked goroutine that makes every driver call, would
// serialize all of them: a host wait for an event would hold up allocations and launches
// from other goroutines, and each call would pay a channel round trip. The driver is
// thread-safe, so concurrent calls from many threads in one context are fine.
func (d *Device) do(f func(*driver) error) error {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.closed {
		return ErrClosed
	}
	if err := d.lostError(); err != nil {
		return err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := d.drv.check(fnCtxSetCurrent, d.drv.call(fnCtxSetCurrent, d.ctx)); err != nil {
		return d.wrap(err)
	}
	return d.wrap(f(d.drv))
}

// wrap names the device in a driver error and notes a sticky one: the context is lost.
func (d *Device) wrap(err error) error {
	var ce *Error
	if !errors.As(err, &ce) {
		return err
	}
	if ce.Device == "" {
		ce.Device = d.name
	}
	if ce.Result.sticky() {
		d.lost.CompareAndSwap(nil, &err)
	}
	return err
}

// lostError is the error every call of a lost device returns.
func (d *Device) lostError() error {
	if p := d.lost.Load(); p != nil {
		return fmt.Errorf("cuda: %s: %w (%v): close the device; the driver wants the process restarted before CUDA is used again",
			d.name, ErrContextLost, *p)
	}
	return nil
}

// Name implements vm.Device: cuda:N.
func (d *Device) Name() string { return d.name }

// Memory implements vm.Device: device memory for package alloc's allocators (see memory).
func (d *Device) Memory() alloc.Memory { return d.mem }

// Capacity implements vm.Device: the bytes the allocators may use.
func (d *Device) Capacity() int64 { return d.info.Capacity }

// Simulated implements vm.Device: a CUDA device is real.
func (d *Device) Simulated() bool { return false }

// Info describes the device.
func (d *Device) Info() Info { return d.info }

// Pinned is the device's pool of pinned host buffers for swapped-out data.
func (d *Device) Pinned() *PinnedPool { return d.pinned }

// MemoryStats counts the driver calls of the device's memory.
func (d *Device) MemoryStats() MemoryStats { return d.mem.Stats() }

// FreeMemory asks the driver how much device memory is free now, and how much there is.
func (d *Device) FreeMemory() (free, total int64, err error) {
	var f, t uint64
	err = d.do(func(drv *driver) error {
		return drv.check(fnMemGetInfo, drv.call(fnMemGetInfo, uintptr(unsafe.Pointer(&f)), uintptr(unsafe.Pointer(&t))))
	})
	return int64(f), int64(t), err
}

// Lost reports the error that lost the device's context, or nil.
func (d *Device) Lost() error { return d.lostError() }

// Close waits for queued work, returns every device and pinned byte, destroys the
// modules, events and streams, and releases the primary context. That context is shared
// (the CUDA runtime, NCCL, cuBLAS and other devices of this ordinal use it), so Close frees
// everything the device made itself rather than leave it to the context's end, which comes
// only with the last release. Allocators over Memory() must be closed first. A device whose
// context was lost closes too: then only the context is released (the driver wants the
// process restarted anyway). Close is idempotent.
//
// Everything but the context goes through the ordinary call paths (each part's own lock,
// then the device's), so Close takes locks in the order every other method does.
func (d *Device) Close() error {
	if !d.closing.CompareAndSwap(false, true) {
		return nil
	}
	errs := []error{d.do(func(drv *driver) error { return drv.check(fnCtxSynchronize, drv.call(fnCtxSynchronize)) })}
	errs = append(errs, d.modules.close(), d.mem.Close(), d.pinned.close(), d.events.close())
	errs = append(errs, d.do(func(drv *driver) error {
		var errs []error
		for _, s := range d.streams {
			if s != nil {
				errs = append(errs, drv.check(fnStreamDestroy, drv.call(fnStreamDestroy, s.h)))
			}
		}
		return errors.Join(errs...)
	}))
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := d.closeContext(); err != nil && d.lost.Load() == nil {
		errs = append(errs, d.wrap(err))
	}
	for i, err := range errs {
		errs[i] = closeError(err)
	}
	return errors.Join(errs...)
}
