package kernels

import (
	"fmt"
	"strings"
	"unsafe"
)

// Param is one kernel parameter: its name (as in the CUDA source), its C type,
// and whether the kernel only reads it (In: a const pointer).
type Param struct {
	Name string
	Type Type
	In   bool
}

// Spec describes one kernel entry of the PTX module: what to pass, how to
// launch it for given sizes, and what it costs.
type Spec struct {
	// Name is the PTX entry (cuModuleGetFunction) and, prefixed with
	// "ooc_host_", the host build's launcher.
	Name string
	// Mirrors names the CPU op whose results the kernel reproduces (and the
	// tests compare it with).
	Mirrors string
	// Params are the arguments in order, as cuLaunchKernel's kernelParams.
	Params []Param
	// Barrier kernels reduce through shared memory with __syncthreads: their
	// block size is fixed (Block) and the host build runs them as fibers.
	Barrier bool

	// shape gives the grid and block for a call: the grid from the sizes
	// among the arguments, the block fixed per kernel.
	shape func(c Call) (grid, block uint32)
	// cost gives the bytes the kernel must move (each operand read or written
	// once, at the element size) and its floating-point operations.
	cost func(c Call) (bytes, flops int64)
}

// Call is a Spec with its arguments, for reading sizes by parameter name.
type Call struct {
	spec *Spec
	args []Arg
}

// Int returns the integer argument of the named parameter (0 if absent).
func (c Call) Int(name string) int64 {
	for i, p := range c.spec.Params {
		if p.Name == name && (p.Type == I32 || p.Type == I64) {
			return int64(c.args[i].u)
		}
	}
	panic(fmt.Sprintf("kernels: %s has no integer parameter %q", c.spec.Name, name))
}

// Layout returns the layout argument (a zero Layout if absent).
func (c Call) Layout() Layout {
	for i, p := range c.spec.Params {
		if p.Type == LayoutT {
			return *c.args[i].lay
		}
	}
	return Layout{}
}

// Conv returns the convolution geometry argument.
func (c Call) Conv() ConvGeom {
	for i, p := range c.spec.Params {
		if p.Type == ConvGeomT {
			return *c.args[i].geomC
		}
	}
	return ConvGeom{}
}

// Pool returns the pooling geometry argument.
func (c Call) Pool() PoolGeom {
	for i, p := range c.spec.Params {
		if p.Type == PoolGeomT {
			return *c.args[i].geomP
		}
	}
	return PoolGeom{}
}

// ElemSize is the byte size of the kernel's float type (from its name's suffix; 8 for untyped kernels).
func (s *Spec) ElemSize() int64 {
	if strings.HasSuffix(s.Name, "_f32") {
		return 4
	}
	return 8
}

// Launch is a prepared kernel launch: the configuration to pass to
// cuLaunchKernel and what the launch moves and computes, for the VM's
// records and the simulator's roofline.
type Launch struct {
	Kernel      string
	Grid, Block [3]uint32
	SharedBytes uint32 // dynamic shared memory: none of these kernels uses any
	Bytes       int64  // bytes read and written, each operand once
	FLOPs       int64  // floating-point operations (a multiply-add is 2)
	params      *Params
}

// Empty reports a launch with no blocks: CUDA refuses a zero grid, so the
// caller skips it (every kernel here then has nothing to do).
func (l *Launch) Empty() bool { return l.Grid[0] == 0 || l.Grid[1] == 0 || l.Grid[2] == 0 }

// Params is the packed argument list.
func (l *Launch) Params() *Params { return l.params }

func (l *Launch) String() string {
	return fmt.Sprintf("%s<<<(%d,%d,%d),(%d,%d,%d)>>> %d B %d FLOP", l.Kernel,
		l.Grid[0], l.Grid[1], l.Grid[2], l.Block[0], l.Block[1], l.Block[2], l.Bytes, l.FLOPs)
}

// Params holds arguments packed as cuLaunchKernel's kernelParams wants them:
// an array of pointers, the i-th pointing at argument i's bytes. The memory
// is Go's and stays put (Go's heap does not move); keep the Params reachable
// until the launch call returns.
type Params struct {
	slots []uint64 // argument bytes, each argument 8-byte aligned
	ptrs  []unsafe.Pointer
}

// Pointer is the void** to pass as kernelParams (and to the host build's
// ooc_host_K launchers). nil when the kernel has no parameters.
func (p *Params) Pointer() unsafe.Pointer {
	if len(p.ptrs) == 0 {
		return nil
	}
	return unsafe.Pointer(&p.ptrs[0])
}

// maxGrid caps grid-stride kernels: every kernel loops, so any grid covers
// any size, and a larger one only adds blocks that find no work.
const maxGrid = 1 << 16

// Prepare checks the arguments against the parameters, packs them and works
// out the launch configuration and cost.
func (s *Spec) Prepare(args ...Arg) (*Launch, error) {
	if len(args) != len(s.Params) {
		return nil, fmt.Errorf("kernels: %s takes %d arguments, got %d", s.Name, len(s.Params), len(args))
	}
	words := 0
	for _, p := range s.Params {
		words += (p.Type.Size() + 7) / 8
	}
	pk := &Params{slots: make([]uint64, words), ptrs: make([]unsafe.Pointer, len(args))}
	raw := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(pk.slots))), 8*words)
	off := 0
	for i, p := range s.Params {
		if err := args[i].encode(p.Type, raw[off:off+p.Type.Size()]); err != nil {
			return nil, fmt.Errorf("kernels: %s argument %d (%s): %v", s.Name, i, p.Name, err)
		}
		if (p.Type == I64 || p.Type == I32) && int64(args[i].u) < 0 {
			return nil, fmt.Errorf("kernels: %s argument %d (%s) is negative: %d", s.Name, i, p.Name, int64(args[i].u))
		}
		pk.ptrs[i] = unsafe.Pointer(&raw[off])
		off += (p.Type.Size() + 7) / 8 * 8
	}
	c := Call{spec: s, args: args}
	grid, block := s.shape(c)
	bytes, flops := s.cost(c)
	return &Launch{Kernel: s.Name, Grid: [3]uint32{grid, 1, 1}, Block: [3]uint32{block, 1, 1},
		Bytes: bytes, FLOPs: flops, params: pk}, nil
}

// Lookup finds a kernel by name.
func Lookup(name string) (*Spec, bool) {
	s, ok := byName[name]
	return s, ok
}

var byName = func() map[string]*Spec {
	m := make(map[string]*Spec, len(Specs))
	for _, s := range Specs {
		if m[s.Name] != nil {
			panic("kernels: two specs named " + s.Name)
		}
		m[s.Name] = s
	}
	return m
}()

// Launch shapes.

const threads = 256 // OOC_BLOCK: every kernel's block size

// perElement: one thread per element of a grid-stride loop over n.
func perElement(n func(Call) int64) func(Call) (uint32, uint32) {
	return func(c Call) (uint32, uint32) {
		b := (n(c) + threads - 1) / threads
		return uint32(min(b, maxGrid)), threads
	}
}

// perChannel: one block per channel, up to maxGrid (blocks loop over channels).
func perChannel(c Call) (uint32, uint32) {
	return uint32(min(c.Int("C"), maxGrid)), threads
}

// oneBlock: a single block.
func oneBlock(Call) (uint32, uint32) { return 1, threads }

// param name helpers keep the tables short.
func ptr(t Type, name string) Param    { return Param{Name: name, Type: t} }
func in(t Type, name string) Param     { return Param{Name: name, Type: t, In: true} }
func i64(name string) Param            { return Param{Name: name, Type: I64} }
func i32(name string) Param            { return Param{Name: name, Type: I32} }
func scalar(t Type, name string) Param { return Param{Name: name, Type: t} }

// dtypes are the float types every kernel comes in.
var dtypes = []dtype{{"f32", F32Ptr, F32, 4}, {"f64", F64Ptr, F64, 8}}
