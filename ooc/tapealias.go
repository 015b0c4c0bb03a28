package ooc

import (
	"fmt"
	"maps"
	"reflect"
	"slices"

	"gorgonia.org/gorgonia"

	"github.com/gorgonia-ooc/outofcore/vm"
)

// TapeMachine reads some operands clobbered, and ooc reads them as
// TapeMachine does.
//
// gorgonia's Reshape returns a tensor over its operand's memory, and
// Concat of one operand the operand's tensor itself (isView), but
// TapeMachine's register allocator gives such a view a register of its own
// when the operand is still live, and knows nothing of the sharing
// (regalloc.go).
// A later elementwise op may then write its result in place over the
// operand's register, which is the reshape's memory too, while the reshape
// is still to be read: the reader gets the elementwise op's result instead.
// A transformer written the usual way does this: Add(norm, ffn(norm))
// writes over norm, and the gradient of the feed-forward's first weight,
// computed from Reshape(norm), reads norm + ffn(norm); so does one computed
// from Concat(norm) (TestTapeMachineViewClobber).
//
// tapeClobbers replays TapeMachine's program (gorgonia.Compile's, the one
// TapeMachine runs) over which memory each register holds, and returns,
// per op node, the operands that TapeMachine reads with another node's
// value, and that node. Compile then has the function read that node, through
// a view of the operand's shape, as TapeMachine does.
//
// The program's instructions are unexported; they are read by reflection,
// as vm/dual.go reads a node's binding (gorgonia v0.9.18). Anything not
// as expected there makes the replay give up: nothing is substituted then,
// and the trace is what it would be without it.
func tapeClobbers(g *gorgonia.ExprGraph, nodes []*gorgonia.Node) (subs map[*gorgonia.Node]map[int]*gorgonia.Node) {
	defer func() {
		if recover() != nil {
			subs = nil
		}
	}()
	if !mayClobber(nodes) {
		return nil
	}
	prog, _, err := gorgonia.Compile(g)
	if err != nil || prog == nil {
		return nil
	}
	byID := make(map[int64]*gorgonia.Node, len(nodes))
	for _, n := range nodes {
		byID[n.ID()] = n
	}
	instrs := reflect.ValueOf(prog).Elem().FieldByName("instructions")
	if instrs.Kind() != reflect.Slice {
		return nil
	}
	regID := func(r reflect.Value) int { return int(r.FieldByName("id").Int()) }

	// A register holds a tensor; a tensor lies over a buffer; a buffer
	// holds the value of the node that last wrote it.
	type tensorState struct {
		buf   int
		bytes int64
	}
	regs := map[int]*tensorState{}
	content := map[int]*gorgonia.Node{}
	nextBuf := 0
	newTensor := func(writer *gorgonia.Node, bytes int64) *tensorState {
		nextBuf++
		content[nextBuf] = writer
		return &tensorState{buf: nextBuf, bytes: bytes}
	}
	dataOf := func(n *gorgonia.Node) *gorgonia.Node {
		for isView(n) {
			n = operands(n)[0]
		}
		return n
	}

	for k := 0; k < instrs.Len(); k++ {
		in := instrs.Index(k)
		for in.Kind() == reflect.Interface || in.Kind() == reflect.Pointer {
			in = in.Elem()
		}
		switch in.Type().Name() {
		case "loadArg":
			n := byID[in.FieldByName("index").Int()]
			if n == nil {
				return nil
			}
			regs[regID(in.FieldByName("writeTo"))] = newTensor(n, nodeBytes(n))
		case "alloc":
			n := byID[in.FieldByName("id").Int()]
			if n == nil {
				return nil
			}
			r := regID(in.FieldByName("writeTo"))
			if t := regs[r]; t == nil || t.bytes != nodeBytes(n) {
				regs[r] = newTensor(nil, nodeBytes(n))
			}
		case "execOp":
			n := byID[in.FieldByName("id").Int()]
			if n == nil {
				return nil
			}
			ops := operands(n)
			readFrom := in.FieldByName("readFrom")
			if readFrom.Len() != len(ops) {
				return nil
			}
			for j := 0; j < readFrom.Len(); j++ {
				t := regs[regID(readFrom.Index(j))]
				if t == nil {
					return nil
				}
				w, d := content[t.buf], dataOf(ops[j])
				// A leaf's register is written over only by another leaf's
				// loadArg (inputs TapeMachine merged, mergedInputs); a
				// computed value's only by another computed value.
				if w == nil || w == d || isLeaf(d) != isLeaf(w) || nodeBytes(w) != nodeBytes(ops[j]) {
					continue
				}
				if subs == nil {
					subs = map[*gorgonia.Node]map[int]*gorgonia.Node{}
				}
				if subs[n] == nil {
					subs[n] = map[int]*gorgonia.Node{}
				}
				subs[n][j] = w
			}
			dest := regID(in.FieldByName("writeTo"))
			held := regs[dest]
			op := n.Op()
			_, prealloc := op.(gorgonia.UsePreallocDoer)
			_, unsafeDo := op.(gorgonia.UnsafeDoer)
			switch {
			case isView(n):
				// Do gives a tensor over the operand's memory (Concat: the
				// operand's tensor), Reshape's UnsafeDo the operand's
				// tensor reshaped: the same buffer either way.
				t := regs[regID(readFrom.Index(0))]
				regs[dest] = &tensorState{buf: t.buf, bytes: t.bytes}
			case held != nil && prealloc && held.bytes == nodeBytes(n):
				// UsePreallocDo into the tensor the register holds
				// (preallocated, or an operand the op overwrites).
				content[held.buf] = n
			case held == nil && in.FieldByName("useUnsafe").Bool() && unsafeDo:
				ow := op.OverwritesInput()
				if ow < 0 || ow >= readFrom.Len() {
					return nil
				}
				t := regs[regID(readFrom.Index(ow))]
				content[t.buf] = n
				regs[dest] = &tensorState{buf: t.buf, bytes: t.bytes}
			default:
				regs[dest] = newTensor(n, nodeBytes(n))
			}
		}
	}
	return subs
}

// mayClobber is a cheap necessary condition for tapeClobbers to find
// anything (gorgonia.Compile takes several times as long as the trace): a
// view (isView) of a computed node, and an op that may write over that
// node or one of its views (an op overwriting its operand, with a result of the
// operand's size, calling nothing external) reading one of them.
func mayClobber(nodes []*gorgonia.Node) bool {
	data := map[*gorgonia.Node]*gorgonia.Node{} // view -> the computed node whose memory it shares
	viewed := map[*gorgonia.Node]bool{}
	for _, n := range nodes {
		if ops := operands(n); isView(n) {
			d := ops[0]
			if b, ok := data[d]; ok {
				d = b
			}
			if !isLeaf(d) {
				data[n], viewed[d] = d, true
			}
		}
	}
	if len(viewed) == 0 {
		return mergedInputs(nodes)
	}
	for _, n := range nodes {
		// TapeMachine lets an op write over its operand's register only if
		// the op calls nothing external (regalloc.go).
		if n.Op() == nil || isView(n) || n.Op().CallsExtern() {
			continue
		}
		ops := operands(n)
		if k := n.Op().OverwritesInput(); k >= 0 && k < len(ops) && nodeBytes(ops[k]) == nodeBytes(n) {
			if _, shares := data[ops[k]]; shares || viewed[ops[k]] {
				return true
			}
		}
	}
	return mergedInputs(nodes)
}

// mergedInputs reports whether two of the inputs have one hash. An input's
// hash is its type, shape and name when it was added to the graph, and is
// kept (gorgonia caches it): inputs made unnamed and of one shape, or named
// after they were made (gorgonia's stacked autoencoder example names its
// biases b_0, b_1 so, and leaves its reconstruction biases unnamed), share
// it. TapeMachine's compiler takes nodes of one hash for one value (its
// common-subexpression elimination, dataflow.replacements): it loads both
// inputs into one register, the later over the earlier, and an op reading
// the earlier after that reads the later one
// (TestTapeMachineMergedInputs).
func mergedInputs(nodes []*gorgonia.Node) bool {
	seen := map[uint32]*gorgonia.Node{}
	for _, n := range nodes {
		if n.Op() != nil {
			continue
		}
		h := n.Hashcode()
		if o, ok := seen[h]; ok && o != n {
			return true
		}
		seen[h] = n
	}
	return false
}

// nodeBytes is the size of a node's value; 0 for a statement (gorgonia.Read
// or Set), which has no type, so that no value's size matches it.
func nodeBytes(n *gorgonia.Node) int64 {
	if n.Type() == nil {
		return 0
	}
	b := int64(n.Dtype().Size())
	if !n.IsScalar() {
		b *= int64(n.Shape().TotalSize())
	}
	return b
}

// readAsTapeMachine has each function read what TapeMachine reads in its
// place (tapeClobbers): the operand becomes a view, in the operand's shape,
// of the variable holding the node TapeMachine reads, which therefore
// lives until then (newTrace keeps it). A substitution that ooc's order
// cannot honour (the node computed later) is an error rather than a silent
// difference.
func (t *Trace) readAsTapeMachine(subs map[*gorgonia.Node]map[int]*gorgonia.Node, index map[*gorgonia.Node]int) error {
	for i := range t.Funcs {
		f := &t.Funcs[i]
		sub := subs[f.Node]
		if len(sub) == 0 {
			continue
		}
		if f.Args == nil {
			f.Args = append([]int(nil), f.Inputs...)
		}
		for _, k := range slices.Sorted(maps.Keys(sub)) {
			w := sub[k]
			wi, ok := index[w]
			op := &t.Vars[f.Args[k]]
			if !ok || t.Vars[wi].View || (t.Vars[wi].IsLeaf() && !op.Shape.Eq(t.Vars[wi].Shape)) || t.Vars[wi].Producer >= i {
				return fmt.Errorf("ooc: %s reads %s under TapeMachine, whose register for %s holds %s by then "+
					"(an op wrote in place over the memory a view, Reshape or Concat of one operand, shares, or TapeMachine took two inputs of one hash for one), "+
					"and ooc cannot read it there",
					f.Node.Name(), op.Name, op.Name, w.Name())
			}
			if op.Shape.Eq(t.Vars[wi].Shape) {
				f.Args[k], f.Inputs[k] = wi, wi
				continue
			}
			v := vm.Var{
				Node: op.Node, Name: op.Name + "@" + w.Name(), Shape: op.Shape, Dtype: op.Dtype, Bytes: op.Bytes,
				Producer: t.Vars[wi].Producer, Role: vm.Intermediate, View: true, Base: wi,
			}
			f.Args[k], f.Inputs[k] = len(t.Vars), wi
			t.Vars = append(t.Vars, v)
		}
	}
	return nil
}
