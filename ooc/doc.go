// Package ooc compiles a Gorgonia training graph into an out-of-core program
// and a machine that runs it under a device-memory budget.
//
// Compile walks gorgonia's topological order of the graph (forward, the
// backward that gorgonia.Grad added, and any update ops) into a Trace: the
// function-sequence F = (f_1 .. f_N) and the variable-sequence S, each
// function's inputs and then its output, with every variable's size and its
// first and last use. A Scheduler turns the trace, the budget B and the
// schedule-window W into a Schedule of swap-ins, swap-outs and releases;
// lowering turns that into a tape of vm instructions (exec, swapin, swapout,
// wait, free, recompute), and a verifier replays the tape's memory
// accounting before anything runs, refusing a tape that could exceed B or
// read a variable that is not resident.
//
// A training script changes one line:
//
//	m := gorgonia.NewTapeMachine(g, gorgonia.BindDualValues(ps...))
//
// becomes
//
//	m, err := ooc.Compile(g, ooc.BindDualValues(ps...), ooc.WithBudget(b))
//
// and after m.RunAll() the cost's Value() and every learnable's Grad() hold
// what the TapeMachine would have computed, bit for bit on the CPU device.
//
// Schedulers: Window (the default: Sony's byte-window rule, with an
// automatic window searched in the simulator), LMS (IBM's Large Model
// Support, hyperparameters tuned in the simulator), and the offloading
// paper's planners Greedy, DynProg and VDNN. Those three plan on a chain
// (see Chain and ChainOf): the activations, forward variables the backward
// reads, in the order the forward makes them, split the forward into
// stages F_0..F_L and, by their last reads, the backward into B_L..B_0; what
// else a stage holds is its extra memory. Every DAG has such a chain, which
// may overstate memory where a DAG frees an activation early but never
// understates it, and every plan is checked by the verifier on the real
// tape, so a chain can make a plan slower, never wrong. LowerBound is the
// paper's bound on any schedule's makespan; makespan / LowerBound scores
// them (sweep.Compare, ooc compare).
//
// The budget covers what the machine allocates on the device: activations,
// gradients and op workspaces. Leaf values (the input batch, the learnables
// and constants) stay in the memory the user bound them in and are reported
// apart, as vm.Stats.LeafBytes.
//
// # Gorgonia programs as written
//
// The trace takes each node's operands from the node itself (Operands), as
// TapeMachine does, and sorts the graph on them: gorgonia's own id lookups
// (ExprGraph.From, Node, and gorgonia.Sort, which walks them) go stale when
// RemoveNode runs, which BinaryXent's and Log(SoftMax)'s stabilisations and
// Grad's pruning do on ordinary graphs.
//
// gorgonia.Read statements store their node's value when it is computed
// (a clone on the first run, then a copy into the value the script holds,
// as TapeMachine does), so a value read is never stale, whatever was
// swapped. gorgonia.Set(a, b) is carried out as TapeMachine carries it out:
// b's op writes over its operand a (a learnable or input tensor) in place,
// at once, so what reads a later in the step sees the new value;
// TapeMachine does nothing else for a Set (it leaves a unchanged, or
// overwrites another operand of b), so Compile refuses other forms. A read
// of a leaf that a Set assigns sees the value after the run. What a node
// holds after RunAll: the cost, Read nodes and WithOutputs nodes are bound
// to their values (overwritten in place by the next run), gradients to the
// learnables; other nodes are not (their memory was reused).
//
// Reshape is a view: it takes no memory, its result is read from its
// operand's memory, and swapping it swaps that memory. Elementwise ops write
// over an operand they read for the last time when sizes match, whatever the
// shapes (an activation after a reshape). Every op writes its result into
// device memory; an op that cannot (gorgonia's own ops without a way to
// write into memory they are given) returns it on the host heap, and that
// memory counts in the budget while the op runs (vm.Func.HostBytes).
//
// Inference() compiles the forward only: the backward gorgonia.Grad added is
// left out, batch norm and dropout run in inference mode, and the forward's
// activations go out of core as a training step's do. A graph with no
// gradients runs forward only without it.
package ooc
