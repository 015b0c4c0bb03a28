package cuda

import (
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
	"gorgonia.org/tensor"
)

// NCCLLibrary is the NCCL soname looked for in each place of the Search, unless
// $OOC_NCCL_LIBRARY (NCCLLibraryEnv) names a library.
const NCCLLibrary = "libnccl.so.2"

// NCCLLibraryEnv names the environment variable that, when set, is the only NCCL tried.
const NCCLLibraryEnv = "OOC_NCCL_LIBRARY"

// UniqueIDEnv names the environment variable UniqueIDFromEnv reads: a communicator's
// unique id in hex (UniqueID.String), for processes started with it.
const UniqueIDEnv = "OOC_NCCL_ID"

// ErrNoNCCL is wrapped by the errors of NewNCCL, JoinNCCL and NewUniqueID when no usable
// NCCL library loads; callers fall back to averaging on the host.
var ErrNoNCCL = errors.New("no usable NCCL library")

// ncclAvgVersion is the first NCCL with ncclAvg (2.10.0, as ncclGetVersion codes it).
const ncclAvgVersion = 21000

// The values of nccl.h's enums this package passes.
const (
	ncclSuccess = 0
	ncclSum     = 0
	ncclAvg     = 4
	ncclFloat32 = 7
	ncclFloat64 = 8
)

// UniqueID is an ncclUniqueId (NCCL_UNIQUE_ID_BYTES = 128): rank 0 makes it, every rank of
// the communicator joins with it.
type UniqueID [128]byte

// String is the id in hex, as UniqueIDEnv and ReadUniqueID take it.
func (id UniqueID) String() string { return hex.EncodeToString(id[:]) }

// ParseUniqueID reads an id written by UniqueID.String.
func ParseUniqueID(s string) (UniqueID, error) {
	var id UniqueID
	b, err := hex.DecodeString(strings.TrimSpace(s))
	if err != nil || len(b) != len(id) {
		return id, fmt.Errorf("cuda: an NCCL unique id is %d hex digits; got %d characters that are not one", 2*len(id), len(strings.TrimSpace(s)))
	}
	copy(id[:], b)
	return id, nil
}

// ReadUniqueID reads an id from a file written with WriteFile, for ranks in other
// processes (or on other machines sharing the file).
func ReadUniqueID(path string) (UniqueID, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return UniqueID{}, fmt.Errorf("cuda: NCCL unique id: %w", err)
	}
	id, err := ParseUniqueID(string(b))
	if err != nil {
		return id, fmt.Errorf("%s: %w", path, err)
	}
	return id, nil
}

// WriteFile writes the id in hex to path (mode 0600: whoever reads it can join).
func (id UniqueID) WriteFile(path string) error {
	return os.WriteFile(path, []byte(id.String()+"\n"), 0o600)
}

// UniqueIDFromEnv reads $OOC_NCCL_ID; ok is false when it is unset.
func UniqueIDFromEnv() (id UniqueID, ok bool, err error) {
	s := os.Getenv(UniqueIDEnv)
	if s == "" {
		return id, false, nil
	}
	id, err = ParseUniqueID(s)
	if err != nil {
		return id, true, fmt.Errorf("$%s: %w", UniqueIDEnv, err)
	}
	return id, true, nil
}

// ncclLib is a loaded NCCL.
type ncclLib struct {
	path                                                                             string
	version                                                                          int
	getVersion, getUniqueID, initRank, initScalable, allReduce, destroy, errorString uintptr
}

var (
	ncclMu   sync.Mutex
	ncclLibs = map[string]*ncclLib{}
)

// findNCCL loads $OOC_NCCL_LIBRARY, else the first NCCLLibrary the search finds.
func findNCCL(s Search) (*ncclLib, error) {
	var l *ncclLib
	_, err := s.find(ncclLibrary, ErrNoNCCL, func(p string) (err error) {
		l, err = loadNCCL(p)
		return err
	})
	return l, err
}

// loadNCCL dlopens the NCCL at path, once per path (NCCL keeps threads of its own and is
// not meant to be unloaded).
func loadNCCL(path string) (*ncclLib, error) {
	ncclMu.Lock()
	defer ncclMu.Unlock()
	if l, ok := ncclLibs[path]; ok {
		return l, nil
	}
	h, err := dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, fmt.Errorf("cuda: %w: %s %s (%w)", ErrNoNCCL, path, missing(path, err), err)
	}
	l := &ncclLib{path: path}
	var missing []string
	for _, s := range []struct {
		name string
		p    *uintptr
	}{{"ncclGetVersion", &l.getVersion}, {"ncclGetUniqueId", &l.getUniqueID}, {"ncclAllReduce", &l.allReduce},
		{"ncclCommDestroy", &l.destroy}, {"ncclGetErrorString", &l.errorString}, {"ncclCommInitRank", &l.initRank}} {
		if *s.p, _ = purego.Dlsym(h, s.name); *s.p == 0 {
			missing = append(missing, s.name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("cuda: %w: %s lacks %s", ErrNoNCCL, path, strings.Join(missing, ", "))
	}
	var v int32
	if r := ncclCall(l.getVersion, uintptr(unsafe.Pointer(&v))); r != ncclSuccess {
		return nil, fmt.Errorf("cuda: %w: %s: ncclGetVersion: %s", ErrNoNCCL, path, l.errorText(r))
	}
	l.version = int(v)
	l.initScalable, _ = purego.Dlsym(h, "ncclCommInitRankScalable")
	// ncclCommInitRank takes the 128-byte id by value. On arm64 the ABI passes such a
	// struct by reference, so a pointer is the right argument; on amd64 it is copied onto
	// the stack, 16 words that purego's 15-argument calls cannot hold. There the id goes
	// through ncclCommInitRankScalable (NCCL 2.23 and newer), which takes a pointer.
	if l.initScalable == 0 && runtime.GOARCH != "arm64" {
		return nil, fmt.Errorf("cuda: %w: %s is NCCL %s, which lacks ncclCommInitRankScalable (2.23 and newer have it); "+
			"its ncclCommInitRank takes the unique id by value, which this binding cannot pass on %s: install NCCL 2.23 or newer",
			ErrNoNCCL, path, ncclVersionString(l.version), runtime.GOARCH)
	}
	ncclLibs[path] = l
	return l, nil
}

// ncclVersionString writes ncclGetVersion's code as NCCL writes versions: 22304 is 2.23.4
// (before 2.9 the code was 1000*major + 100*minor + patch).
func ncclVersionString(v int) string {
	if v < 20900 {
		return fmt.Sprintf("%d.%d.%d", v/1000, v%1000/100, v%100)
	}
	return fmt.Sprintf("%d.%d.%d", v/10000, v%10000/100, v%100)
}

//go:uintptrescapes
func ncclCall(f uintptr, args ...uintptr) int32 {
	r, _, _ := purego.SyscallN(f, args...)
	return int32(r)
}

// errorText is ncclGetErrorString's description of a result.
func (l *ncclLib) errorText(r int32) string {
	p, _, _ := purego.SyscallN(l.errorString, uintptr(r))
	if p == 0 {
		return fmt.Sprintf("ncclResult_t %d", r)
	}
	return fmt.Sprintf("%s (ncclResult_t %d)", goString(*(**byte)(unsafe.Pointer(&p))), r)
}

func (l *ncclLib) check(call string, r int32) error {
	if r == ncclSuccess {
		return nil
	}
	return fmt.Errorf("%s: %s", call, l.errorText(r))
}

// NewUniqueID asks NCCL for a new communicator id (ncclGetUniqueId): rank 0 makes it and
// hands it to the others (WriteFile, or $OOC_NCCL_ID through UniqueID.String). It finds
// NCCL with DefaultSearch.
func NewUniqueID() (UniqueID, error) {
	l, err := findNCCL(DefaultSearch())
	if err != nil {
		return UniqueID{}, err
	}
	return l.newUniqueID()
}

func (l *ncclLib) newUniqueID() (UniqueID, error) {
	var id UniqueID
	if err := l.check("ncclGetUniqueId", ncclCall(l.getUniqueID, uintptr(unsafe.Pointer(&id[0])))); err != nil {
		return id, fmt.Errorf("cuda: %s: %w", l.path, err)
	}
	return id, nil
}

// NCCL averages gradients across devices with ncclAllReduce: one communicator rank per
// device of this process, all of one communicator that may span other processes and
// machines. It implements package ooc's AllReducer: AllReduceMean gets one host buffer per
// local rank, stages each on its device and leaves in every one the mean over all ranks of
// the communicator.
//
// Every call on a rank runs on a goroutine of its own, locked to its thread with the
// device's context current, and outside ncclGroupStart/End: NCCL works in the context
// current when a communicator was made, and within a group it switches to the device's
// primary context (NVIDIA/nccl#565), which is not the one this package's devices create.
// Methods are safe for concurrent use (calls are serialised).
type NCCL struct {
	lib    *ncclLib
	ranks  []*ncclRank
	nranks int
	mu     sync.Mutex
	closed bool
}

type ncclRank struct {
	d          *Device
	rank       int
	comm       uintptr
	buf, bufSz uintptr // device staging buffer, grown as needed
}

// NewNCCL makes a communicator of the given devices, all in this process: device i is rank
// i of len(devices).
func NewNCCL(devices []*Device) (*NCCL, error) {
	if len(devices) == 0 {
		return nil, errors.New("cuda: NewNCCL: no devices")
	}
	if slices.Contains(devices, nil) {
		return nil, fmt.Errorf("cuda: NewNCCL: device %d is nil", slices.Index(devices, nil))
	}
	l, err := findNCCL(devices[0].search)
	if err != nil {
		return nil, err
	}
	id, err := l.newUniqueID()
	if err != nil {
		return nil, err
	}
	ranks := make([]int, len(devices))
	for i := range ranks {
		ranks[i] = i
	}
	return joinNCCL(l, devices, ranks, len(devices), id)
}

// JoinNCCL makes device d rank `rank` of a communicator of nranks ranks named by id, which
// rank 0 made with NewUniqueID and passed on by file (ReadUniqueID) or environment
// (UniqueIDFromEnv). It returns when every rank has joined (ncclCommInitRank's contract):
// one process per GPU, on one machine or several.
func JoinNCCL(d *Device, rank, nranks int, id UniqueID) (*NCCL, error) {
	if nranks < 1 || rank < 0 || rank >= nranks {
		return nil, fmt.Errorf("cuda: JoinNCCL: rank %d of %d", rank, nranks)
	}
	if d == nil {
		return nil, errors.New("cuda: JoinNCCL: device is nil")
	}
	l, err := findNCCL(d.search)
	if err != nil {
		return nil, err
	}
	return joinNCCL(l, []*Device{d}, []int{rank}, nranks, id)
}

func joinNCCL(l *ncclLib, devices []*Device, ranks []int, nranks int, id UniqueID) (*NCCL, error) {
	c := &NCCL{lib: l, nranks: nranks}
	for i, d := range devices {
		if d == nil {
			return nil, fmt.Errorf("cuda: NCCL: device %d is nil", i)
		}
		c.ranks = append(c.ranks, &ncclRank{d: d, rank: ranks[i]})
	}
	// Every rank joins on its own thread at once: outside a group, each call returns only
	// when all ranks have joined.
	err := c.each(func(r *ncclRank, drv *driver) error {
		var res int32
		if l.initScalable != 0 {
			res = ncclCall(l.initScalable, uintptr(unsafe.Pointer(&r.comm)), uintptr(nranks), uintptr(r.rank), 1,
				uintptr(unsafe.Pointer(&id[0])), 0)
		} else {
			idCopy := id // passed by reference on arm64: the callee may write its copy
			res = ncclCall(l.initRank, uintptr(unsafe.Pointer(&r.comm)), uintptr(nranks), uintptr(unsafe.Pointer(&idCopy[0])),
				uintptr(r.rank))
		}
		if err := l.check("ncclCommInitRank", res); err != nil {
			r.comm = 0
			return fmt.Errorf("rank %d of %d: %w", r.rank, nranks, err)
		}
		return nil
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("cuda: NCCL (%s): %w", l.path, err), c.Close())
	}
	return c, nil
}

// each runs f for every local rank concurrently, each in its device's context.
func (c *NCCL) each(f func(*ncclRank, *driver) error) error {
	errs := make([]error, len(c.ranks))
	var wg sync.WaitGroup
	for i, r := range c.ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = r.d.do(func(drv *driver) error { return f(r, drv) })
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Name implements ooc.AllReducer.
func (c *NCCL) Name() string { return "nccl" }

// Ranks is the number of ranks of the communicator, in this process and others.
func (c *NCCL) Ranks() int { return c.nranks }

// Version is the NCCL version loaded, e.g. 2.23.4.
func (c *NCCL) Version() string { return ncclVersionString(c.lib.version) }

// Library is the path NCCL was loaded from.
func (c *NCCL) Library() string { return c.lib.path }

// AllReduceMean implements ooc.AllReducer: bufs holds one buffer per local rank, in rank
// order. Each is copied to its device, all-reduced there on the device's compute stream
// (ncclAvg; before NCCL 2.10, a sum divided by the rank count on the host) and copied back.
func (c *NCCL) AllReduceMean(dt tensor.Dtype, bufs [][]byte) error {
	if len(bufs) != len(c.ranks) {
		return fmt.Errorf("cuda: NCCL all-reduce of %d buffers on %d local ranks", len(bufs), len(c.ranks))
	}
	for _, b := range bufs[1:] {
		if len(b) != len(bufs[0]) {
			return fmt.Errorf("cuda: NCCL all-reduce of buffers of %d and %d bytes", len(bufs[0]), len(b))
		}
	}
	var ty, size int
	switch dt {
	case tensor.Float32:
		ty, size = ncclFloat32, 4
	case tensor.Float64:
		ty, size = ncclFloat64, 8
	default:
		return fmt.Errorf("cuda: NCCL all-reduce of %v gradients is not supported (float32 and float64 are)", dt)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	n := len(bufs[0])
	if n == 0 {
		return nil
	}
	op := ncclAvg
	if c.lib.version < ncclAvgVersion {
		op = ncclSum
	}
	index := map[*ncclRank]int{}
	for i, r := range c.ranks {
		index[r] = i
	}
	err := c.each(func(r *ncclRank, drv *driver) error {
		host := bufs[index[r]]
		if err := r.grow(drv, uintptr(n)); err != nil {
			return err
		}
		s := r.d.streams[Compute].h
		if err := drv.check(fnMemcpyHtoDAsync, drv.call(fnMemcpyHtoDAsync, r.buf, uintptr(unsafe.Pointer(&host[0])), uintptr(n), s)); err != nil {
			return err
		}
		if err := c.lib.check("ncclAllReduce", ncclCall(c.lib.allReduce, r.buf, r.buf, uintptr(n/size), uintptr(ty), uintptr(op), r.comm, s)); err != nil {
			return fmt.Errorf("rank %d of %d: %w", r.rank, c.nranks, err)
		}
		if err := drv.check(fnMemcpyDtoHAsync, drv.call(fnMemcpyDtoHAsync, uintptr(unsafe.Pointer(&host[0])), r.buf, uintptr(n), s)); err != nil {
			return err
		}
		// The host buffer is Go memory: it must not be read or freed before the copy is done.
		return drv.check(fnStreamSynchronize, drv.call(fnStreamSynchronize, s))
	})
	if err != nil {
		return fmt.Errorf("cuda: NCCL: %w", err)
	}
	if op == ncclSum {
		for _, b := range bufs {
			divide(dt, b, c.nranks)
		}
	}
	return nil
}

// AllReduceMeanDevice averages, in place, buffers already in device memory: addrs holds one
// address per local rank, in rank order, each count elements of dt on its rank's device (a
// device-side optimizer's gradient). The all-reduce runs on each device's compute stream
// (ncclAvg) and is not waited for: work queued after it on that stream sees the mean. NCCL
// before 2.10 has no ncclAvg; there it returns an error and the caller averages on the host.
func (c *NCCL) AllReduceMeanDevice(dt tensor.Dtype, addrs []uintptr, count int) error {
	if len(addrs) != len(c.ranks) {
		return fmt.Errorf("cuda: NCCL all-reduce of %d buffers on %d local ranks", len(addrs), len(c.ranks))
	}
	var ty int
	switch dt {
	case tensor.Float32:
		ty = ncclFloat32
	case tensor.Float64:
		ty = ncclFloat64
	default:
		return fmt.Errorf("cuda: NCCL all-reduce of %v gradients is not supported (float32 and float64 are)", dt)
	}
	if !c.AveragesOnDevice() {
		return fmt.Errorf("cuda: NCCL %s has no ncclAvg (2.10 and later): average device buffers on the host", c.Version())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	if count == 0 {
		return nil
	}
	index := map[*ncclRank]int{}
	for i, r := range c.ranks {
		index[r] = i
	}
	err := c.each(func(r *ncclRank, drv *driver) error {
		a := addrs[index[r]]
		if err := c.lib.check("ncclAllReduce", ncclCall(c.lib.allReduce, a, a, uintptr(count), uintptr(ty), uintptr(ncclAvg), r.comm, r.d.streams[Compute].h)); err != nil {
			return fmt.Errorf("rank %d of %d: %w", r.rank, c.nranks, err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("cuda: NCCL: %w", err)
	}
	return nil
}

// AveragesOnDevice reports whether the loaded NCCL averages on the devices (ncclAvg, NCCL
// 2.10 and later), which AllReduceMeanDevice needs.
func (c *NCCL) AveragesOnDevice() bool { return c.lib.version >= ncclAvgVersion }

// divide divides a buffer of floats by n in place.
func divide(dt tensor.Dtype, b []byte, n int) {
	switch dt {
	case tensor.Float32:
		xs := unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
		for i := range xs {
			xs[i] /= float32(n)
		}
	case tensor.Float64:
		xs := unsafe.Slice((*float64)(unsafe.Pointer(&b[0])), len(b)/8)
		for i := range xs {
			xs[i] /= float64(n)
		}
	}
}

// grow makes the rank's staging buffer at least n bytes (outside the allocators' capacity:
// gradients are staged one learnable at a time, so it is one learnable's size).
func (r *ncclRank) grow(drv *driver, n uintptr) error {
	if r.bufSz >= n {
		return nil
	}
	if err := r.freeStaging(drv); err != nil {
		return err
	}
	if err := drv.check(fnMemAlloc, drv.call(fnMemAlloc, uintptr(unsafe.Pointer(&r.buf)), n)); err != nil {
		return fmt.Errorf("staging %d bytes for NCCL: %w", n, err)
	}
	r.bufSz = n
	return nil
}

// freeStaging frees the rank's staging buffer, once the compute stream has run what is
// queued on it: cuMemFree_v2 need not wait, and a call that failed half-way (an
// ncclAllReduce refused after its copy in was queued) left work on the buffer.
func (r *ncclRank) freeStaging(drv *driver) error {
	if r.buf == 0 {
		return nil
	}
	if err := drv.check(fnStreamSynchronize, drv.call(fnStreamSynchronize, r.d.streams[Compute].h)); err != nil {
		return err
	}
	err := drv.check(fnMemFree, drv.call(fnMemFree, r.buf))
	r.buf, r.bufSz = 0, 0
	return err
}

// Close destroys the communicators and frees the staging buffers. The devices stay open;
// close the NCCL first.
func (c *NCCL) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	return c.each(func(r *ncclRank, drv *driver) error {
		var errs []error
		if r.comm != 0 {
			errs = append(errs, c.lib.check("ncclCommDestroy", ncclCall(c.lib.destroy, r.comm)))
			r.comm = 0
		}
		errs = append(errs, r.freeStaging(drv))
		return errors.Join(errs...)
	})
}
