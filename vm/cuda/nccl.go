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
	"sync/atomic"
	"time"
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

// ErrNCCLFailed is wrapped by the errors of a communicator that failed as a whole: a rank's
// process died or left, the ranks disagreed (world size, a rank given twice, the shape of an
// all-reduce), or a call waited longer than WithNCCLTimeout. The communicator is aborted
// (ncclCommAbort) and every later call returns the same error: close it and end the run.
var ErrNCCLFailed = errors.New("NCCL communicator failed")

// DefaultNCCLTimeout is how long one collective call may wait for the other ranks unless
// WithNCCLTimeout says otherwise: long enough for a rank that evaluates or writes a
// checkpoint between steps; PyTorch's default for NCCL process groups
// (torch.distributed's default_pg_nccl_timeout) is the same.
const DefaultNCCLTimeout = 10 * time.Minute

// An NCCLOption configures NewNCCL and JoinNCCL.
type NCCLOption func(*ncclConfig)

type ncclConfig struct {
	timeout, poll time.Duration
	bad           []string
}

// WithNCCLTimeout bounds how long one collective call (AllReduceMean, and
// AllReduceMeanDevice where NCCL blocks in it, as the fake does) may wait for the other
// ranks: past it the communicator fails (ErrNCCLFailed, saying so). 0 sets no bound; a rank
// that died or failed still ends the wait, through the asynchronous error the communicator's
// watchdog polls.
func WithNCCLTimeout(d time.Duration) NCCLOption {
	return func(c *ncclConfig) {
		if d < 0 {
			c.bad = append(c.bad, fmt.Sprintf("WithNCCLTimeout(%v): want a positive duration, or 0 for none", d))
			return
		}
		c.timeout = d
	}
}

// withNCCLPoll sets how often the watchdog asks NCCL for an asynchronous error (tests).
func withNCCLPoll(d time.Duration) NCCLOption {
	return func(c *ncclConfig) {
		if d > 0 {
			c.poll = d
		}
	}
}

func ncclOptions(opts []NCCLOption) (ncclConfig, error) {
	c := ncclConfig{timeout: DefaultNCCLTimeout, poll: 100 * time.Millisecond}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if len(c.bad) > 0 {
		return c, fmt.Errorf("cuda: %s", strings.Join(c.bad, "; "))
	}
	return c, nil
}

// ncclAvgVersion is the first NCCL with ncclAvg (2.10.0, as ncclGetVersion codes it).
const ncclAvgVersion = 21000

// The values of nccl.h's enums this package passes.
const (
	ncclSuccess    = 0
	ncclInProgress = 7
	ncclSum        = 0
	ncclAvg        = 4
	ncclFloat32    = 7
	ncclFloat64    = 8
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
	// Optional: asyncError and abort (NCCL 2.4 and newer) make the watchdog; lastError
	// (2.13 and newer) says more about a failure.
	asyncError, abort, lastError uintptr
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
	l.asyncError, _ = purego.Dlsym(h, "ncclCommGetAsyncError")
	l.abort, _ = purego.Dlsym(h, "ncclCommAbort")
	l.lastError, _ = purego.Dlsym(h, "ncclGetLastError")
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

// errorText is ncclGetErrorString's description of a result and, where NCCL has
// ncclGetLastError, its account of the last failure (which names a dead peer).
func (l *ncclLib) errorText(r int32) string {
	p, _, _ := purego.SyscallN(l.errorString, uintptr(r))
	s := fmt.Sprintf("ncclResult_t %d", r)
	if p != 0 {
		s = fmt.Sprintf("%s (ncclResult_t %d)", goString(*(**byte)(unsafe.Pointer(&p))), r)
	}
	if l.lastError != 0 && r != ncclSuccess {
		// NCCL keeps one text per process and does not look at the comm.
		if p, _, _ := purego.SyscallN(l.lastError, 0); p != 0 {
			if last := strings.TrimSpace(goString(*(**byte)(unsafe.Pointer(&p)))); last != "" {
				s += ": " + last
			}
		}
	}
	return s
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
//
// A watchdog goroutine (where NCCL has ncclCommGetAsyncError and ncclCommAbort) asks NCCL
// for an asynchronous error every 100 ms and watches how long a call has been waiting
// (WithNCCLTimeout): when a rank of the communicator dies, leaves or disagrees, or a call
// waits too long, it aborts the communicator, so that a blocked call returns, and the call
// and every later one fail with ErrNCCLFailed and NCCL's account of why (ncclGetLastError:
// the fake NCCL names the dead rank and its pid). PyTorch's NCCL watchdog does the same.
type NCCL struct {
	lib    *ncclLib
	cfg    ncclConfig
	ranks  []*ncclRank
	nranks int
	mu     sync.Mutex // serialises the calls
	closed bool

	hmu    sync.Mutex // guards the ranks' comm handles and failed, which the watchdog changes
	failed error      // why the communicator was aborted (ErrNCCLFailed)
	since  atomic.Int64
	stop   chan struct{}
	done   chan struct{}
}

type ncclRank struct {
	d          *Device
	rank       int
	comm       uintptr // 0 once destroyed or aborted (hmu)
	buf, bufSz uintptr // device staging buffer, grown as needed
}

// NewNCCL makes a communicator of the given devices, all in this process: device i is rank
// i of len(devices).
func NewNCCL(devices []*Device, opts ...NCCLOption) (*NCCL, error) {
	if len(devices) == 0 {
		return nil, errors.New("cuda: NewNCCL: no devices")
	}
	if slices.Contains(devices, nil) {
		return nil, fmt.Errorf("cuda: NewNCCL: device %d is nil", slices.Index(devices, nil))
	}
	cfg, err := ncclOptions(opts)
	if err != nil {
		return nil, err
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
	return joinNCCL(l, cfg, devices, ranks, len(devices), id)
}

// JoinNCCL makes device d rank `rank` of a communicator of nranks ranks named by id, which
// rank 0 made with NewUniqueID and passed on by file (ReadUniqueID) or environment
// (UniqueIDFromEnv). It returns when every rank has joined (ncclCommInitRank's contract):
// one process per GPU, on one machine or several. Ranks that disagree on nranks, or two
// that give the same rank, fail every rank's join (the fake NCCL says which; a real NCCL
// may instead wait).
func JoinNCCL(d *Device, rank, nranks int, id UniqueID, opts ...NCCLOption) (*NCCL, error) {
	if nranks < 1 || rank < 0 || rank >= nranks {
		return nil, fmt.Errorf("cuda: JoinNCCL: rank %d of %d", rank, nranks)
	}
	if d == nil {
		return nil, errors.New("cuda: JoinNCCL: device is nil")
	}
	cfg, err := ncclOptions(opts)
	if err != nil {
		return nil, err
	}
	l, err := findNCCL(d.search)
	if err != nil {
		return nil, err
	}
	return joinNCCL(l, cfg, []*Device{d}, []int{rank}, nranks, id)
}

func joinNCCL(l *ncclLib, cfg ncclConfig, devices []*Device, ranks []int, nranks int, id UniqueID) (*NCCL, error) {
	c := &NCCL{lib: l, cfg: cfg, nranks: nranks}
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
		var comm uintptr
		if l.initScalable != 0 {
			res = ncclCall(l.initScalable, uintptr(unsafe.Pointer(&comm)), uintptr(nranks), uintptr(r.rank), 1,
				uintptr(unsafe.Pointer(&id[0])), 0)
		} else {
			idCopy := id // passed by reference on arm64: the callee may write its copy
			res = ncclCall(l.initRank, uintptr(unsafe.Pointer(&comm)), uintptr(nranks), uintptr(unsafe.Pointer(&idCopy[0])),
				uintptr(r.rank))
		}
		if err := l.check("ncclCommInitRank", res); err != nil {
			return fmt.Errorf("rank %d of %d: %w", r.rank, nranks, err)
		}
		c.hmu.Lock()
		r.comm = comm
		c.hmu.Unlock()
		return nil
	})
	if err != nil {
		if l.abort != 0 {
			c.fail(err) // the local ranks that joined: a real NCCL's destroy could wait for the others
		}
		return nil, errors.Join(fmt.Errorf("cuda: NCCL (%s): %w", l.path, err), c.Close())
	}
	if l.asyncError != 0 && l.abort != 0 {
		c.stop, c.done = make(chan struct{}), make(chan struct{})
		go c.watch()
	}
	return c, nil
}

// watch is the watchdog: it polls the communicator's asynchronous error and the age of
// the call in progress, and aborts the communicator when either says it failed.
func (c *NCCL) watch() {
	defer close(c.done)
	tick := time.NewTicker(c.cfg.poll)
	defer tick.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-tick.C:
		}
		if err := c.poll(); err != nil {
			c.fail(err)
			return
		}
	}
}

// poll asks NCCL whether the communicator failed, and checks the call in progress against
// the timeout; nil when neither.
func (c *NCCL) poll() error {
	c.hmu.Lock()
	defer c.hmu.Unlock()
	if c.failed != nil {
		return c.failed
	}
	for _, r := range c.ranks {
		if r.comm == 0 || c.lib.asyncError == 0 {
			continue
		}
		var res int32
		if e := ncclCall(c.lib.asyncError, r.comm, uintptr(unsafe.Pointer(&res))); e != ncclSuccess {
			return fmt.Errorf("%w at rank %d of %d (this process): ncclCommGetAsyncError: %s", ErrNCCLFailed, r.rank, c.nranks, c.lib.errorText(e))
		}
		if res != ncclSuccess && res != ncclInProgress {
			return fmt.Errorf("%w at rank %d of %d (this process): %s", ErrNCCLFailed, r.rank, c.nranks, c.lib.errorText(res))
		}
	}
	if since := c.since.Load(); since != 0 && c.cfg.timeout > 0 {
		if waited := time.Since(time.Unix(0, since)); waited > c.cfg.timeout {
			return fmt.Errorf("%w: %s waited %v for the other ranks, more than the timeout of %v (cuda.WithNCCLTimeout): a rank did not reach the same call",
				ErrNCCLFailed, c.localRanks(), waited.Round(time.Millisecond), c.cfg.timeout)
		}
	}
	return nil
}

// localRanks names this process's ranks, e.g. "rank 1 of 4".
func (c *NCCL) localRanks() string {
	var ns []string
	for _, r := range c.ranks {
		ns = append(ns, fmt.Sprint(r.rank))
	}
	word := "rank"
	if len(ns) > 1 {
		word = "ranks"
	}
	return fmt.Sprintf("%s %s of %d", word, strings.Join(ns, ", "), c.nranks)
}

// fail records why the communicator failed (the first reason stays) and aborts it: a call
// blocked in NCCL returns. A call that read its handle (comm) just before may then reach
// NCCL with the aborted comm: the fake NCCL keeps aborted comms to refuse such calls; a
// real NCCL's collectives only queue work, a window PyTorch's watchdog shares.
func (c *NCCL) fail(err error) {
	c.hmu.Lock()
	defer c.hmu.Unlock()
	if c.failed == nil {
		c.failed = fmt.Errorf("%w; the communicator was aborted", err)
	}
	for _, r := range c.ranks {
		if r.comm != 0 {
			ncclCall(c.lib.abort, r.comm) // its result adds nothing: the communicator is gone either way
			r.comm = 0
		}
	}
}

// comm is r's communicator handle for a call, or why there is none.
func (c *NCCL) comm(r *ncclRank) (uintptr, error) {
	c.hmu.Lock()
	defer c.hmu.Unlock()
	if c.failed != nil {
		return 0, c.failed
	}
	if r.comm == 0 {
		return 0, ErrClosed
	}
	return r.comm, nil
}

// collective runs f on every local rank as one collective call: the watchdog times it, and
// a failure that is the communicator's (a dead or departed rank, a timeout) is reported as
// that, with NCCL's account of it.
func (c *NCCL) collective(f func(*ncclRank, *driver, uintptr) error) error {
	c.hmu.Lock()
	failed := c.failed
	c.hmu.Unlock()
	if failed != nil {
		return fmt.Errorf("cuda: NCCL: %w", failed)
	}
	c.since.Store(time.Now().UnixNano())
	err := c.each(func(r *ncclRank, drv *driver) error {
		comm, err := c.comm(r)
		if err != nil {
			return err
		}
		return f(r, drv, comm)
	})
	c.since.Store(0)
	if err == nil {
		return nil
	}
	if c.lib.abort != 0 {
		// A failed call: is it the communicator's failure? Then abort it now, not at the
		// watchdog's next look.
		if ferr := c.poll(); ferr != nil {
			c.fail(ferr)
		}
	}
	c.hmu.Lock()
	failed = c.failed
	c.hmu.Unlock()
	if failed != nil {
		return fmt.Errorf("cuda: NCCL: %w", failed)
	}
	return fmt.Errorf("cuda: NCCL: %w", err)
}

// Err is why the communicator failed (wrapping ErrNCCLFailed), or nil while it works.
func (c *NCCL) Err() error {
	if c.lib.abort != 0 {
		if err := c.poll(); err != nil {
			c.fail(err)
		}
	}
	c.hmu.Lock()
	defer c.hmu.Unlock()
	return c.failed
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
	err := c.collective(func(r *ncclRank, drv *driver, comm uintptr) error {
		host := bufs[index[r]]
		if err := r.grow(drv, uintptr(n)); err != nil {
			return err
		}
		s := r.d.streams[Compute].h
		if err := drv.check(fnMemcpyHtoDAsync, drv.call(fnMemcpyHtoDAsync, r.buf, uintptr(unsafe.Pointer(&host[0])), uintptr(n), s)); err != nil {
			return err
		}
		if err := c.lib.check("ncclAllReduce", ncclCall(c.lib.allReduce, r.buf, r.buf, uintptr(n/size), uintptr(ty), uintptr(op), comm, s)); err != nil {
			return fmt.Errorf("rank %d of %d: %w", r.rank, c.nranks, err)
		}
		if err := drv.check(fnMemcpyDtoHAsync, drv.call(fnMemcpyDtoHAsync, uintptr(unsafe.Pointer(&host[0])), r.buf, uintptr(n), s)); err != nil {
			return err
		}
		// The host buffer is Go memory: it must not be read or freed before the copy is done.
		return drv.check(fnStreamSynchronize, drv.call(fnStreamSynchronize, s))
	})
	if err != nil {
		return err
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
	return c.collective(func(r *ncclRank, drv *driver, comm uintptr) error {
		a := addrs[index[r]]
		if err := c.lib.check("ncclAllReduce", ncclCall(c.lib.allReduce, a, a, uintptr(count), uintptr(ty), uintptr(ncclAvg), comm, r.d.streams[Compute].h)); err != nil {
			return fmt.Errorf("rank %d of %d: %w", r.rank, c.nranks, err)
		}
		return nil
	})
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

// Close destroys the communicators (those a failure aborted are gone already), stops the
// watchdog and frees the staging buffers. The devices stay open; close the NCCL first.
func (c *NCCL) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	if c.stop != nil {
		close(c.stop)
		<-c.done
	}
	return c.each(func(r *ncclRank, drv *driver) error {
		var errs []error
		c.hmu.Lock()
		comm := r.comm
		r.comm = 0
		c.hmu.Unlock()
		if comm != 0 {
			errs = append(errs, c.lib.check("ncclCommDestroy", ncclCall(c.lib.destroy, comm)))
		}
		errs = append(errs, r.freeStaging(drv))
		return errors.Join(errs...)
	})
}
