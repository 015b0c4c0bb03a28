package cuda

import (
	"bufio"
	"cmp"
	_ "embed"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"strings"

	"github.com/gorgonia-ooc/outofcore/vm/alloc"
)

// The allocator checks: traces of allocations and frees replayed on package alloc's
// allocators over a device's memory, with the bytes of every block written and read back
// through the driver. The tests run them on the fake driver, Doctor on a real one.

// traceOp is one step of a trace: allocate size bytes as tensor id, or free tensor id.
type traceOp struct {
	alloc bool
	id    int
	size  int64
}

//go:embed checkdata/swaptrace.txt
var swapTraceText string

// swapTrace is vm/alloc's headline swap-like trace (BenchmarkSwapTrace): 48 layers, two
// training steps, activations of 1 to 200 MiB swapped out of order under a 256 MiB
// budget, 1056 steps.
func swapTrace() []traceOp {
	t, err := parseTrace(swapTraceText)
	if err != nil {
		panic(err) // embedded data: a broken file is a build error
	}
	return t
}

// parseTrace reads "a ID SIZE" and "f ID" lines; # starts a comment.
func parseTrace(text string) ([]traceOp, error) {
	var t []traceOp
	sc := bufio.NewScanner(strings.NewReader(text))
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || s[0] == '#' {
			continue
		}
		var o traceOp
		var kind string
		n, _ := fmt.Sscan(s, &kind, &o.id, &o.size)
		switch {
		case kind == "a" && n == 3 && o.size > 0:
			o.alloc = true
		case kind == "f" && n == 2:
		default:
			return nil, fmt.Errorf("trace line %d: %q: want \"a ID SIZE\" or \"f ID\"", line, s)
		}
		t = append(t, o)
	}
	return t, sc.Err()
}

// randomTrace allocates and frees at random, sizes from bytes to largest, keeping the live
// bytes near target so that a capacity a little above it makes VA evict and remap.
func randomTrace(seed int64, steps int, target, largest int64) []traceOp {
	rng := rand.New(rand.NewSource(seed))
	var t []traceOp
	var live []traceOp
	var bytes int64
	for id := 0; len(t) < steps; {
		if len(live) > 0 && (bytes > target || rng.Intn(3) == 0) {
			i := rng.Intn(len(live))
			t = append(t, traceOp{id: live[i].id})
			bytes -= live[i].size
			live = slices.Delete(live, i, i+1)
			continue
		}
		var size int64
		switch r := rng.Intn(10); {
		case r < 3:
			size = 1 + rng.Int63n(4096)
		case r < 6:
			size = 4096 + rng.Int63n(4<<20)
		default:
			size = 1 + rng.Int63n(largest)
		}
		o := traceOp{alloc: true, id: id, size: size}
		id++
		t = append(t, o)
		live = append(live, o)
		bytes += size
	}
	return t
}

// traceCheck replays traces on an allocator over a device's memory and checks after every
// step what must hold on any memory: live blocks are disjoint and 256-byte aligned, the
// counters add up (Requested is the live bytes; requested <= mapped <= reserved <=
// capacity; Reserved is what the memory has in use), and every block keeps the bytes
// written into it, through the driver, until it is freed. Bytes are sampled: both ends of
// a block and 64 bytes in every MiB, so every chunk of a VA block is seen.
type traceCheck struct {
	d         *Device
	mem       alloc.Memory
	a         alloc.Allocator
	live      map[int]*alloc.Block
	requested int64 // the live blocks' bytes
	ooms      int
	buf       []byte
}

func newTraceCheck(d *Device, a alloc.Allocator) *traceCheck {
	return &traceCheck{d: d, mem: d.Memory(), a: a, live: map[int]*alloc.Block{}, buf: make([]byte, sampleLen)}
}

const sampleLen = 64

// samples calls f with the offsets of a block's samples.
func samples(size int64, f func(off int64) error) error {
	for off := int64(0); off < size; off += 1 << 20 {
		if err := f(off); err != nil {
			return err
		}
	}
	if size > sampleLen {
		return f(size - sampleLen)
	}
	return nil
}

// pattern fills p with the bytes tensor id holds from offset off.
func pattern(p []byte, id int, off int64) {
	for i := range p {
		x := uint64(id+1)*0x9e3779b97f4a7c15 + uint64(off+int64(i))*0xd6e8feb86659fd93
		p[i] = byte(x>>32 ^ x>>51)
	}
}

// run replays a trace; a failed allocation must be an out-of-memory error.
func (c *traceCheck) run(trace []traceOp) error {
	for i, o := range trace {
		if err := c.step(o); err != nil {
			return fmt.Errorf("step %d (%+v): %w", i, o, err)
		}
	}
	return nil
}

func (c *traceCheck) step(o traceOp) error {
	if !o.alloc {
		b, ok := c.live[o.id]
		if !ok {
			return nil // the trace frees what an out-of-memory never allocated
		}
		if err := c.verify(o.id, b); err != nil {
			return err
		}
		delete(c.live, o.id)
		c.requested -= b.Size()
		if err := c.a.Free(b); err != nil {
			return err
		}
		if err := c.a.Free(b); !errors.Is(err, alloc.ErrInvalidFree) {
			return fmt.Errorf("second free: %v, want alloc.ErrInvalidFree", err)
		}
		return c.checkStats()
	}
	b, err := c.a.Alloc(o.size)
	if errors.Is(err, alloc.ErrOutOfMemory) {
		c.ooms++
		return nil
	}
	if err != nil {
		return err
	}
	if b.Size() != o.size || b.Addr()%256 != 0 || b.Bytes() != nil {
		return fmt.Errorf("block of %d bytes at %#x with %d host bytes: want its size, 256-byte alignment, no host bytes",
			b.Size(), b.Addr(), len(b.Bytes()))
	}
	if _, dup := c.live[o.id]; dup {
		return fmt.Errorf("trace allocates tensor %d twice", o.id)
	}
	c.live[o.id] = b
	c.requested += b.Size()
	if err := c.checkDisjoint(); err != nil {
		return err
	}
	if err := samples(b.Size(), func(off int64) error { return c.write(o.id, b, off) }); err != nil {
		return err
	}
	return c.checkStats()
}

func (c *traceCheck) span(b *alloc.Block, off int64) (uintptr, []byte) {
	n := min(int64(sampleLen), b.Size()-off)
	return b.Addr() + uintptr(off), c.buf[:n]
}

func (c *traceCheck) write(id int, b *alloc.Block, off int64) error {
	at, p := c.span(b, off)
	pattern(p, id, off)
	return c.d.copySync(at, p)
}

func (c *traceCheck) verify(id int, b *alloc.Block) error {
	want := make([]byte, sampleLen)
	return samples(b.Size(), func(off int64) error {
		at, p := c.span(b, off)
		if err := c.d.readSync(p, at); err != nil {
			return err
		}
		pattern(want[:len(p)], id, off)
		if string(p) != string(want[:len(p)]) {
			return fmt.Errorf("tensor %d (%d bytes at %#x): bytes at offset %d changed", id, b.Size(), b.Addr(), off)
		}
		return nil
	})
}

// verifyAll checks every live block's bytes.
func (c *traceCheck) verifyAll() error {
	for id, b := range c.live {
		if err := c.verify(id, b); err != nil {
			return err
		}
	}
	return nil
}

func (c *traceCheck) checkDisjoint() error {
	blocks := make([]*alloc.Block, 0, len(c.live))
	for _, b := range c.live {
		blocks = append(blocks, b)
	}
	slices.SortFunc(blocks, func(x, y *alloc.Block) int { return cmp.Compare(x.Addr(), y.Addr()) })
	for i := 1; i < len(blocks); i++ {
		if p := blocks[i-1]; p.Addr()+uintptr(p.Size()) > blocks[i].Addr() {
			return fmt.Errorf("blocks overlap: [%#x +%d) and [%#x +%d)", p.Addr(), p.Size(), blocks[i].Addr(), blocks[i].Size())
		}
	}
	return nil
}

func (c *traceCheck) checkStats() error {
	switch s := c.a.Stats(); {
	case s.Requested != c.requested:
		return fmt.Errorf("Requested = %d, live blocks hold %d", s.Requested, c.requested)
	case s.Mapped < s.Requested || s.Reserved < s.Mapped || s.Reserved > s.Capacity:
		return fmt.Errorf("want requested <= mapped <= reserved <= capacity: %v", s)
	case s.Reserved != c.mem.Used():
		return fmt.Errorf("Reserved = %d but the memory has %d in use", s.Reserved, c.mem.Used())
	default:
		return nil
	}
}

// finish checks and frees every live block, closes the allocator and checks the memory got
// every byte back. The allocator is closed whatever went wrong before.
func (c *traceCheck) finish() (alloc.Stats, error) {
	err := c.verifyAll()
	for id, b := range c.live {
		delete(c.live, id)
		c.requested -= b.Size()
		err = errors.Join(err, c.a.Free(b))
	}
	s := c.a.Stats()
	if err = errors.Join(err, c.a.Close()); err != nil {
		return s, err
	}
	if used := c.mem.Used(); used != 0 {
		return s, fmt.Errorf("the memory has %d bytes in use after the allocator closed", used)
	}
	return s, nil
}
