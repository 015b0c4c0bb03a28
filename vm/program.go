package vm

import (
	"encoding/json"
	"fmt"
	"strings"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// OpCode is the kind of one tape instruction.
type OpCode uint8

// The instructions of a tape.
const (
	Exec      OpCode = iota // run a function; allocates its output (and workspace)
	SwapIn                  // allocate a variable on the device and start copying it in from host memory
	SwapOut                 // start copying a variable to host memory; its device memory stays until Free
	Wait                    // compute waits until a swap-in of the variable has landed
	Free                    // release a variable's device memory (after any swap-out of it has landed)
	Recompute               // re-run the function that produced a dropped variable
)

var opNames = [...]string{"exec", "swapin", "swapout", "wait", "free", "recompute"}

func (o OpCode) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return fmt.Sprintf("OpCode(%d)", uint8(o))
}

// Role says what a variable is to the user of the graph.
type Role uint8

// Roles of variables.
const (
	Intermediate Role = iota // computed and consumed inside the step; nobody outside reads it
	Output                   // its value is bound to its node after RunAll (the cost, or a requested output)
	Gradient                 // the gradient of a learnable; stored in the learnable's gradient after RunAll
)

// Var is one variable of the program: the value of one graph node.
type Var struct {
	Node  *gorgonia.Node
	Name  string
	Shape tensor.Shape
	Dtype tensor.Dtype
	Bytes int64 // size on the device

	// Producer is the index in Funcs of the function computing the variable,
	// or -1 for a leaf (an input, a learnable or a constant), which lives in
	// memory the user owns and is never allocated by the machine.
	Producer int
	Role     Role
	// Learnable is the node whose gradient this is (Role == Gradient).
	Learnable *gorgonia.Node
	// Shared are further learnables whose gradient is this same node:
	// gorgonia's Grad gives the operands of one Add one gradient node.
	Shared []*gorgonia.Node
	// Bind marks an intermediate whose value is bound to its node after
	// RunAll although nothing names it, as TapeMachine leaves every node
	// bound: a scalar, which costs nothing to keep (the terms of a cost a
	// script prints), or any node of the forward when the planner finds
	// the host copies affordable (a prediction read for an accuracy). The
	// value is copied to a host tensor made on the first run and reused,
	// right after the variable is computed (on a backend, downloaded there
	// and then: see Machine's download).
	Bind bool

	// View marks a variable that shares the memory of variable Base, as
	// gorgonia's Reshape shares its operand's: it takes no memory of its
	// own, functions read it from Base's memory with its own shape, and it
	// lives as long as Base. Base is never itself a view. A view of a leaf is
	// a leaf (its value is made from Base's when a run starts); a view of a
	// computed variable has Base's producer.
	View bool
	Base int
}

// IsLeaf reports whether the variable is an input, learnable or constant
// (or a view of one).
func (v *Var) IsLeaf() bool { return v.Producer < 0 }

// Func is one function (op node) of the program.
type Func struct {
	Node      *gorgonia.Node
	Op        gorgonia.Op
	Inputs    []int // variable indices, in operand order
	Output    int   // variable index
	Workspace int64 // scratch device memory one call needs
	// InPlace is the operand (a variable index) whose device memory the
	// output takes over, or -1: an elementwise op at its operand's last use
	// writes its result where the operand was, as frameworks do in place.
	InPlace int
	// Args are the operands as the op sees them, in operand order, when
	// some are views: Inputs[k] is then the variable whose memory Args[k]
	// lives in. Nil when Args would equal Inputs.
	Args []int
	// HostBytes is memory the op takes outside the device while it runs:
	// the result an op with no way to write into device memory returns on
	// the host heap before the machine copies it in. The budget counts it
	// like workspace.
	HostBytes int64
	// Recomputable marks a function a tape may run again (a Recompute
	// instruction) to rebuild its dropped output: its result depends on its
	// operands alone, so running it again gives the same bits. Ops with
	// randomness or with state a second run would disturb are not (gorgonia's
	// BatchNorm, Dropout, pooling masks); an op whose only state is running
	// statistics the machine saves and restores around the rerun is.
	Recomputable bool
}

// Transient is the memory a function holds only while it runs: its
// workspace and any host result (HostBytes).
func (f *Func) Transient() int64 { return f.Workspace + f.HostBytes }

// Operands are the variables the op is called with, in operand order (a
// view is passed as itself, not as its base).
func (f *Func) Operands() []int {
	if f.Args != nil {
		return f.Args
	}
	return f.Inputs
}

// Read is a gorgonia.Read statement of the graph: after a run, *Into holds
// the value of Var (a value of its own, overwritten in place by the next
// run, as gorgonia's TapeMachine does).
type Read struct {
	Var  int
	Into *gorgonia.Value
	// After is where the statement stands in the program: it reads once
	// function After has run (-1: before any). It matters for a leaf (or a
	// view of one), whose value a Set may change during the run: the read
	// sees the value at its place, as TapeMachine's read instruction does.
	// A computed variable is read when it is computed (it does not change
	// afterwards).
	After int
}

// Set is a gorgonia.Set statement: after a run, the leaf variable To holds
// the value of From (written into To's value in place when it has the
// right size, as gorgonia's TapeMachine does).
type Set struct {
	To, From int
}

// Instr is one tape instruction. Exec and Recompute name a function; the
// others name a variable.
type Instr struct {
	Op    OpCode
	Func  int // for Exec and Recompute; -1 otherwise
	Var   int // the variable acted on (for Exec: the function's output)
	Bytes int64
}

// Program is a lowered tape over the variables and functions of a graph.
type Program struct {
	Vars   []Var
	Funcs  []Func
	Instrs []Instr
	// Budget is the device-memory budget the program was planned and verified
	// for; the machine's allocator enforces it.
	Budget int64
	// Reserve is what the device's backend holds beside the program for its
	// whole run (cuBLAS's workspace on a CUDA device: vm.Reserver). The
	// budget given to the planner covers it: Budget is that budget less
	// Reserve.
	Reserve int64
	// Scheduler names the scheduler that planned the program.
	Scheduler string
	// Peak is the most device memory the tape holds at once, by the
	// verifier's replay (variables and workspace, before allocator rounding).
	Peak int64
	// Window is the schedule-window the window scheduler used, in bytes
	// (the one it chose, in its automatic mode); 0 for other schedulers.
	Window int64
	// Timing says where the op and copy times a scheduler planned with came
	// from (a device profile, a measured step, or none).
	Timing string

	// Reads and Sets are the graph's gorgonia.Read and gorgonia.Set
	// statements.
	Reads []Read
	Sets  []Set
	// Inference marks a forward-only program: ops with a training mode
	// (batch norm, dropout) run in inference mode.
	Inference bool
}

// String prints the tape one instruction a line.
func (p *Program) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "program: %d instructions, %d functions, %d variables, budget %d bytes, peak %d bytes, scheduler %s",
		len(p.Instrs), len(p.Funcs), len(p.Vars), p.Budget, p.Peak, p.Scheduler)
	if p.Window > 0 {
		fmt.Fprintf(&b, " (window %d bytes)", p.Window)
	}
	if p.Reserve > 0 {
		fmt.Fprintf(&b, ", backend reserve %d bytes beside the budget", p.Reserve)
	}
	if p.Inference {
		b.WriteString(", inference")
	}
	b.WriteByte('\n')
	if p.Timing != "" {
		fmt.Fprintf(&b, "timing: %s\n", p.Timing)
	}
	for i, in := range p.Instrs {
		fmt.Fprintf(&b, "%5d  %-9s %-12d %s\n", i, in.Op, in.Bytes, p.Vars[in.Var].Name)
	}
	return b.String()
}

type jsonInstr struct {
	Op    string `json:"op"`
	Node  string `json:"node"`
	Bytes int64  `json:"bytes"`
}

// MarshalJSON exports the tape as an array of {"op", "node", "bytes"}.
func (p *Program) MarshalJSON() ([]byte, error) {
	out := make([]jsonInstr, len(p.Instrs))
	for i, in := range p.Instrs {
		out[i] = jsonInstr{Op: in.Op.String(), Node: p.Vars[in.Var].Name, Bytes: in.Bytes}
	}
	return json.Marshal(out)
}

// Count returns how many instructions of the given kind the tape holds and
// their bytes in all.
func (p *Program) Count(op OpCode) (n int, bytes int64) {
	for _, in := range p.Instrs {
		if in.Op == op {
			n++
			bytes += in.Bytes
		}
	}
	return n, bytes
}
