package ooc

import (
	"errors"
	"fmt"
	"strings"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/vm"
)

// Trace is a graph walked into the function-sequence and the
// variable-sequence the schedulers plan over.
type Trace struct {
	// Vars are the variables: leaves (inputs, learnables, constants) and the
	// output of every function.
	Vars []vm.Var
	// Funcs is the function-sequence F, in gorgonia's topological order.
	Funcs []vm.Func
	// Seq is the variable-sequence S = V(f_1) ++ ... ++ V(f_N), as variable
	// indices: each function's inputs in operand order, then its output.
	Seq []int
	// Start[i] is start(i), the index in Seq of the first entry of V(f_i).
	// Start has len(Funcs)+1 entries; the last is len(Seq).
	Start []int
	// First and Last are, per variable, the first and last function using it
	// (the producer counts as a use). Both are -1 for an unused leaf.
	First, Last []int
	// Uses lists, per variable, the functions reading it, in order.
	Uses [][]int
}

// DeviceBytes is the device memory a variable takes: its size, or 0 for a
// leaf, which the machine never allocates.
func (t *Trace) DeviceBytes(v int) int64 {
	if t.Vars[v].IsLeaf() {
		return 0
	}
	return t.Vars[v].Bytes
}

// V returns V(f_i), the slice of Seq for function i.
func (t *Trace) V(i int) []int { return t.Seq[t.Start[i]:t.Start[i+1]] }

// NextUse is the first function after i that reads v, or -1.
func (t *Trace) NextUse(v, i int) int {
	for _, u := range t.Uses[v] {
		if u > i {
			return u
		}
	}
	return -1
}

// String prints the function-sequence with each function's variables.
func (t *Trace) String() string {
	var b strings.Builder
	var dev int64
	for v := range t.Vars {
		dev += t.DeviceBytes(v)
	}
	fmt.Fprintf(&b, "trace: %d functions, %d variables (%d device bytes in all), |S| = %d\n",
		len(t.Funcs), len(t.Vars), dev, len(t.Seq))
	for i, f := range t.Funcs {
		fmt.Fprintf(&b, "f%-4d %s\n", i, f.Node.Name())
		for _, v := range t.V(i) {
			x := &t.Vars[v]
			kind := "var"
			switch {
			case x.IsLeaf():
				kind = "leaf"
			case v == f.Output:
				kind = "out"
			}
			fmt.Fprintf(&b, "      %-4s %-10s %v %v %d B, uses f%d..f%d\n",
				kind, shortName(x.Name), x.Dtype, x.Shape, x.Bytes, t.First[v], t.Last[v])
		}
		if f.Workspace > 0 {
			fmt.Fprintf(&b, "      workspace %d B\n", f.Workspace)
		}
	}
	return b.String()
}

func shortName(s string) string {
	if len(s) > 40 {
		return s[:37] + "..."
	}
	return s
}

// statement ops are graph statements, not computations; the VM cannot run them.
var statementOps = map[string]bool{
	"gorgonia.readOp":   true,
	"gorgonia.letOp":    true,
	"gorgonia.devTrans": true,
}

// errNoCost is returned for a graph with nothing to compute.
var errNoCost = errors.New("ooc: the graph has no cost: call gorgonia.Grad(cost, learnables...) before Compile, or name what to compute with WithOutputs")

// NewTrace walks a graph into a trace, pruned to what the cost, the
// learnables' gradients and the extra outputs need.
func NewTrace(g *gorgonia.ExprGraph, outputs ...*gorgonia.Node) (t *Trace, err error) {
	defer func() {
		if r := recover(); r != nil {
			t, err = nil, fmt.Errorf("ooc: tracing the graph panicked: %v", r)
		}
	}()
	if g == nil {
		return nil, errors.New("ooc: nil graph")
	}
	sorted, err := gorgonia.Sort(g)
	if err != nil {
		return nil, fmt.Errorf("ooc: sorting the graph: %w", err)
	}
	// gorgonia.Sort returns roots first; execution order is the reverse.
	order := make([]*gorgonia.Node, len(sorted))
	for i, n := range sorted {
		order[len(sorted)-1-i] = n
	}

	// Statements would be pruned (nothing reads them), which would silently
	// skip what the user asked for: refuse them instead.
	for _, n := range order {
		if op := n.Op(); op != nil && statementOps[fmt.Sprintf("%T", op)] {
			return nil, fmt.Errorf("ooc: node %s: op %v (%T) is a graph statement (gorgonia.Read/Set); the VM cannot run it: remove it from the graph", n.Name(), op, op)
		}
	}
	roles := map[*gorgonia.Node]vm.Role{}
	learnableOf := map[*gorgonia.Node]*gorgonia.Node{}
	for _, n := range order {
		if isCost(n) {
			roles[n] = vm.Output
		}
	}
	haveCost := len(roles) > 0
	for _, n := range outputs {
		if n == nil || n.Graph() != g {
			return nil, fmt.Errorf("ooc: output %v is not a node of this graph", n)
		}
		roles[n] = vm.Output
	}
	if len(roles) == 0 {
		return nil, errNoCost
	}
	if haveCost {
		for _, n := range order {
			if n.Op() == nil && n.Deriv() != nil {
				d := n.Deriv()
				if _, taken := roles[d]; taken {
					return nil, fmt.Errorf("ooc: %s is the gradient of %s and also an output", d.Name(), n.Name())
				}
				roles[d] = vm.Gradient
				learnableOf[d] = n
			}
		}
	}

	keep := map[*gorgonia.Node]bool{}
	var mark func(n *gorgonia.Node)
	mark = func(n *gorgonia.Node) {
		if keep[n] {
			return
		}
		keep[n] = true
		for _, c := range children(g, n) {
			mark(c)
		}
	}
	for n := range roles {
		mark(n)
	}

	t = &Trace{}
	index := map[*gorgonia.Node]int{}
	for _, n := range order {
		if !keep[n] {
			continue
		}
		v := vm.Var{
			Node:     n,
			Name:     n.Name(),
			Shape:    n.Shape(),
			Dtype:    n.Dtype(),
			Producer: -1,
			Role:     roles[n],
		}
		if v.Role == vm.Gradient {
			v.Learnable = learnableOf[n]
		}
		size := int64(v.Dtype.Size())
		if !n.IsScalar() {
			size *= int64(v.Shape.TotalSize())
		}
		v.Bytes = size
		vi := len(t.Vars)
		index[n] = vi
		if isLeaf(n) {
			t.Vars = append(t.Vars, v)
			continue
		}
		f := vm.Func{Node: n, Op: n.Op(), Output: vi, InPlace: -1}
		for _, c := range children(g, n) {
			ci, ok := index[c]
			if !ok {
				return nil, fmt.Errorf("ooc: node %s reads %s, which the topological order puts later", n.Name(), c.Name())
			}
			f.Inputs = append(f.Inputs, ci)
		}
		if w, ok := f.Op.(vm.WorkspaceOp); ok {
			shapes := make([]tensor.Shape, len(f.Inputs))
			for k, ci := range f.Inputs {
				shapes[k] = t.Vars[ci].Shape
			}
			f.Workspace = w.WorkspaceBytes(v.Dtype, shapes)
		}
		v.Producer = len(t.Funcs)
		t.Vars = append(t.Vars, v)
		t.Funcs = append(t.Funcs, f)
	}
	if len(t.Funcs) == 0 {
		return nil, errNoCost
	}
	t.index()
	t.markInPlace()
	return t, nil
}

// inPlaceOps are gorgonia's elementwise ops: each output element depends
// only on the operands' elements at the same index, so the result may be
// written where a same-shaped operand was.
var inPlaceOps = map[string]bool{
	"gorgonia.elemBinOp":   true,
	"gorgonia.elemUnaryOp": true,
}

// InPlacer is implemented by ops that may write their result over an operand
// (models/layers' ReLU and batch-norm gradients): they read every element of
// it that an output element depends on before writing that output element.
type InPlacer interface {
	InPlaceSafe(operand int) bool
}

func inPlaceSafe(op gorgonia.Op, operand int) bool {
	if ip, ok := op.(InPlacer); ok {
		return ip.InPlaceSafe(operand)
	}
	return inPlaceOps[fmt.Sprintf("%T", op)]
}

// markInPlace lets an elementwise function take over the memory of an
// operand it reads last, when they have the same shape and dtype.
func (t *Trace) markInPlace() {
	for i := range t.Funcs {
		f := &t.Funcs[i]
		out := &t.Vars[f.Output]
		for k, v := range f.Inputs {
			in := &t.Vars[v]
			if !inPlaceSafe(f.Op, k) || in.IsLeaf() || in.Role != vm.Intermediate || t.Last[v] != i || in.Bytes != out.Bytes ||
				in.Dtype != out.Dtype || !in.Shape.Eq(out.Shape) || in.Node.IsScalar() || out.Node.IsScalar() || count(f.Inputs, v) != 1 {
				continue
			}
			f.InPlace = v
			break
		}
	}
}

func count(s []int, v int) int {
	n := 0
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}

// index fills Seq, Start, First, Last and Uses from Vars and Funcs.
func (t *Trace) index() {
	n := len(t.Vars)
	t.First, t.Last, t.Uses = make([]int, n), make([]int, n), make([][]int, n)
	for i := range t.First {
		t.First[i], t.Last[i] = -1, -1
	}
	t.Seq, t.Start = t.Seq[:0], t.Start[:0]
	for i, f := range t.Funcs {
		t.Start = append(t.Start, len(t.Seq))
		t.Seq = append(t.Seq, f.Inputs...)
		t.Seq = append(t.Seq, f.Output)
		for _, v := range append(f.Inputs, f.Output) {
			if t.First[v] < 0 {
				t.First[v] = i
			}
			t.Last[v] = i
			if v != f.Output {
				if u := t.Uses[v]; len(u) == 0 || u[len(u)-1] != i {
					t.Uses[v] = append(u, i)
				}
			}
		}
	}
	t.Start = append(t.Start, len(t.Seq))
}

// isLeaf reports whether the node is an input, a learnable or a constant.
func isLeaf(n *gorgonia.Node) bool {
	if n.Op() == nil {
		return true
	}
	_, isConst := n.Op().(interface{ Value() gorgonia.Value })
	return isConst && len(children(n.Graph(), n)) == 0
}

// isCost recognises the cost of gorgonia.Grad: a scalar op node whose
// gradient is the constant 1 that Grad seeds the backward with.
func isCost(n *gorgonia.Node) bool {
	d := n.Deriv()
	if n.Op() == nil || !n.IsScalar() || d == nil || isLeaf(n) {
		return false
	}
	_, isConst := d.Op().(interface{ Value() gorgonia.Value })
	return isConst
}

// children returns a node's operands in order (duplicates kept).
func children(g *gorgonia.ExprGraph, n *gorgonia.Node) []*gorgonia.Node {
	it := g.From(n.ID())
	if it == nil {
		return nil
	}
	var out []*gorgonia.Node
	for it.Next() {
		out = append(out, it.Node().(*gorgonia.Node))
	}
	return out
}
