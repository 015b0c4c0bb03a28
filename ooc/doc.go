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
// The budget covers what the machine allocates on the device: activations,
// gradients and op workspaces. Leaf values (the input batch, the learnables
// and constants) stay in the memory the user bound them in and are reported
// apart, as vm.Stats.LeafBytes.
package ooc
