package vm

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gorgonia-ooc/outofcore/vm/alloc"
)

// Device is where a Machine's values live and its ops run.
type Device interface {
	// Name says what the device is, e.g. "cpu" or "sim:v100-nvlink".
	Name() string
	// Memory is the device's physical memory, from which allocators carve blocks.
	Memory() alloc.Memory
	// Capacity is the physical memory in bytes.
	Capacity() int64
	// Simulated reports whether times and memory are modelled rather than real.
	Simulated() bool
	Close() error
}

// DefaultCPUCapacity is the device memory of a CPU device made with capacity
// 0: 8 GiB, or half the machine's RAM if that is less. Address space is
// reserved lazily, so an unused capacity costs nothing.
func DefaultCPUCapacity() int64 {
	const c = 8 << 30
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err == nil {
		if half := int64(si.Totalram) * int64(si.Unit) / 2; half > 0 && half < c {
			return half
		}
	}
	return c
}

// CPU is a device whose memory is real host memory and whose ops are
// gorgonia's CPU ops. Its "device memory" is package alloc's recycled host
// memory (alloc.NewRecycledHostMemory: mmap'ed segments, and chunks charged
// to the capacity whose ranges keep their pages from one step to the next),
// so swapping copies real bytes and a budget is enforced on real
// allocations, without a page-table change per swap.
type CPU struct {
	mem      alloc.Memory
	capacity int64
}

// NewCPU makes a CPU device with the given memory capacity in bytes
// (0: DefaultCPUCapacity).
func NewCPU(capacity int64) (*CPU, error) {
	if capacity < 0 {
		return nil, fmt.Errorf("vm: CPU device capacity %d is negative", capacity)
	}
	if capacity == 0 {
		capacity = DefaultCPUCapacity()
	}
	mem, err := alloc.NewRecycledHostMemory(capacity)
	if err != nil {
		return nil, fmt.Errorf("vm: CPU device: %w", err)
	}
	return &CPU{mem: mem, capacity: capacity}, nil
}

// Name implements Device.
func (c *CPU) Name() string { return "cpu" }

// Memory implements Device.
func (c *CPU) Memory() alloc.Memory { return c.mem }

// Capacity implements Device.
func (c *CPU) Capacity() int64 { return c.capacity }

// Simulated implements Device: the CPU device is real.
func (c *CPU) Simulated() bool { return false }

// Close implements Device: it unmaps the device memory. Allocators over it
// must be closed first.
func (c *CPU) Close() error { return c.mem.Close() }

// LinkBandwidth is the bandwidth of a swap on the CPU device, which is a
// memory copy: bytes/s, measured once per process (best of 5 copies of
// 64 MiB, more than a cache holds).
func (c *CPU) LinkBandwidth() float64 {
	memcpyOnce.Do(func() {
		src := make([]byte, 64<<20)
		dst := make([]byte, len(src))
		// Both written first: untouched pages all map the kernel's one zero page, which a
		// copy reads from the cache, and the first write to a page faults. Either made the
		// measured link 2.5 times faster than a swap is (37 against 14 GB/s here).
		for i := range src {
			src[i] = byte(i)
		}
		copy(dst, src)
		best := time.Duration(1 << 62)
		for i := 0; i < 5; i++ {
			t := time.Now()
			copy(dst, src)
			best = min(best, time.Since(t))
		}
		memcpyBandwidth = float64(len(src)) / max(best, time.Nanosecond).Seconds()
	})
	return memcpyBandwidth
}

var (
	memcpyOnce      sync.Once
	memcpyBandwidth float64
)

// LinkMeasurer is implemented by real devices that know the bandwidth of
// their host link (bytes/s each way), for planners that time copies.
type LinkMeasurer interface {
	LinkBandwidth() float64
}

// NewDevice makes a device from its command-line name: "cpu" (real memory
// of the given capacity; 0: DefaultCPUCapacity), "sim:PROFILE" (capacity
// 0: the profile's own), or a name a device package registered (vm/cuda:
// "cuda", "cuda:N"). An unknown name wraps ErrUnknownDevice.
func NewDevice(spec string, capacity int64) (Device, error) {
	if name, ok := strings.CutPrefix(spec, "sim:"); ok {
		p, err := LookupProfile(name)
		if err != nil {
			return nil, err
		}
		if capacity > 0 {
			p.Capacity = capacity
		}
		return NewSim(p)
	}
	if spec == "cpu" || spec == "" {
		return NewCPU(capacity)
	}
	prefix, _, _ := strings.Cut(spec, ":")
	devicesMu.RLock()
	open, ok := devices[prefix]
	devicesMu.RUnlock()
	if ok {
		return open(spec, capacity)
	}
	return nil, fmt.Errorf("vm: %w %q (want %s)", ErrUnknownDevice, spec, knownDevices())
}

// ErrUnknownDevice is wrapped by NewDevice for a name no device answers to.
var ErrUnknownDevice = errors.New("unknown device")

// An Opener opens a device from its full command-line name (e.g. "cuda:1") and a
// capacity in bytes (0: the device's own).
type Opener func(spec string, capacity int64) (Device, error)

var (
	devicesMu sync.RWMutex
	devices   = map[string]Opener{}
)

// RegisterDevice makes NewDevice open the names prefix and prefix:ARG with open. Device
// packages register themselves in an init function (vm/cuda registers "cuda"), so that
// package vm need not import them: a program gets a device by importing its package,
// if only for effect. It panics if the prefix is taken, or is cpu or sim: that is a
// programming error, found at init.
func RegisterDevice(prefix string, open Opener) {
	devicesMu.Lock()
	defer devicesMu.Unlock()
	if _, taken := devices[prefix]; taken || prefix == "cpu" || prefix == "sim" || prefix == "" || strings.Contains(prefix, ":") || open == nil {
		panic(fmt.Sprintf("vm: RegisterDevice(%q): the name is taken or not a plain name", prefix))
	}
	devices[prefix] = open
}

// knownDevices lists the device names NewDevice takes, for error messages.
func knownDevices() string {
	devicesMu.RLock()
	defer devicesMu.RUnlock()
	names := []string{"cpu", "sim:PROFILE"}
	for p := range devices {
		names = append(names, p, p+":N")
	}
	slices.Sort(names[2:])
	if _, ok := devices["cuda"]; !ok {
		names = append(names, "or cuda with github.com/gorgonia-ooc/outofcore/vm/cuda linked in")
	}
	return strings.Join(names, ", ")
}

// AllocatorMaker is implemented by devices that make the allocators over their memory
// themselves: a CUDA device whose virtual memory management failed its trial at Open gives
// best-fit for VA, and its allocators order the unmapping and freeing of device memory
// after the device work queued on it. Every allocator for a device is made through NewVA
// or NewBestFit, so that the device's choice is never bypassed.
type AllocatorMaker interface {
	// NewVA returns the VA allocator with chunks of about chunkSize bytes (the device may
	// round it to its mapping granularity), or what the device uses instead.
	NewVA(chunkSize int64) (alloc.Allocator, error)
	// NewBestFit returns the best-fit allocator over the device's memory.
	NewBestFit() alloc.Allocator
}

// NewVA makes the VA allocator for d with physical chunks of chunkSize bytes: the
// device's own (AllocatorMaker) when it makes its allocators, else alloc.NewVA over its
// memory.
func NewVA(d Device, chunkSize int64) (alloc.Allocator, error) {
	if m, ok := d.(AllocatorMaker); ok {
		return m.NewVA(chunkSize)
	}
	return alloc.NewVA(d.Memory(), chunkSize)
}

// NewBestFit makes the best-fit allocator for d: the device's own (AllocatorMaker) when
// it makes its allocators, else alloc.NewBestFit over its memory.
func NewBestFit(d Device) alloc.Allocator {
	if m, ok := d.(AllocatorMaker); ok {
		return m.NewBestFit()
	}
	return alloc.NewBestFit(d.Memory())
}
