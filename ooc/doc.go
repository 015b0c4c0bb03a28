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
// Schedulers: Auto (the default: the faster of Window and Hybrid for this
// graph and device, by simulated makespan on the device's profile, measured
// in the first step on the CPU device; the program's Scheduler and Timing
// say which it picked and why), Window (Sony's byte-window rule, with an
// automatic window searched in the simulator; WithScheduler(Window{}) gives
// it alone), LMS (IBM's Large Model Support, hyperparameters tuned in the
// simulator), and the offloading
// paper's planners Greedy, DynProg and VDNN, and the recomputing
// Checkpoint and Hybrid (below). Greedy, DynProg and VDNN plan on a chain
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
// # Several devices
//
// CompileParallel trains data parallel: a Builder makes the model graph
// for a batch size; one copy at the whole batch is the script's (it feeds
// the inputs, steps the solver on the learnables, reads the loss) and one
// copy per device, at its share of the batch, is compiled by Compile for
// that device and budget. A step (Parallel.RunAll) copies the script's
// learnables and each replica's rows of the inputs to the replicas, runs
// them concurrently, averages their gradients with an AllReducer
// (HostAllReduce: in process, summed in replica order, so runs repeat bit
// for bit) into the script's learnables, and sets the loss to the
// replicas' mean. One replica is Compile on the whole batch, bit for bit.
// A replica that fails (out of memory, say) fails the step with its
// index and device named, the script's gradients untouched.
//
// On simulated devices grouped behind switches (vm.NewSimGroup, a profile
// with DevicesPerSwitch), the replicas' copies share each switch's host
// link and are co-simulated (vm.CoSimulate). MultiVDNN is the multi-GPU
// paper's vDNN: the original (every layer swapped on every replica), its
// transfer cap (replica i of a switch group swaps layers i%x + j*x) and its
// search of each swap-in's trigger; sweep.RunMultiGPU and ooc multigpu
// compare them with the window scheduler. The cap is also an option of
// Greedy, DynProg and Window (Cap): a replica may swap only its share of
// the activations, the smallest share that plans for every replica of its
// group.
//
// On two or more CUDA devices the default AllReducer is NCCL
// (cuda.NewNCCL) when libnccl.so.2 loads; otherwise CompileParallel says
// so once (WithLog) and averages on the host. An optimizer that updates
// each replica on its device (package train's, with vm/cuda/dispatch's
// Solver on every machine) calls GradientsOnDevices: RunAll then leaves
// the gradients in the devices' buffers for the caller to average there
// (cuda.NCCL.AllReduceMeanDevice) and counts that time with
// CountAllReduce. While CPU replicas run,
// their GEMMs and convolutions split GOMAXPROCS among them
// (WithReplicaWorkers).
//
// Across processes or machines, each process calls CompileParallel with
// WithWorld(rank, size) and an AllReducer spanning every rank (a cuda.NCCL
// each joined with cuda.JoinNCCL): every rank feeds the whole global batch,
// its replicas take their global share of it (replica i of rank r is
// replica r*n+i), and the loss is averaged through the reducer too, so the
// ranks together compute what one process computes with all the replicas
// (TestParallelWorld, and package train's runs across processes).
//
// # Recomputation
//
// A tape may also drop a forward variable after its last forward use and
// rebuild it before the backward reads it: a recompute instruction runs
// its producer again, on compute, into new device memory, preceded where
// needed by the rebuilds of the producer's own dropped operands (a chain
// from the nearest variable still held, or from leaves). The verifier
// counts a rebuild's memory like an exec's and refuses one of a variable
// never computed or of a function the trace does not mark recomputable
// (vm.Func.Recomputable): gorgonia's BatchNorm, GroupNorm, pooling and
// Dropout keep hidden state or draw random numbers, so they are never run
// twice; an op with running statistics (models/layers' batch norm) is,
// with the machine restoring them so a step advances them once; any op may
// say for itself (Recomputer). Recomputing a deterministic op gives the
// same bits, so a tape that recomputes still equals TapeMachine.
// Checkpoint (Chen et al.'s sqrt(n) segments, budget-driven) only
// recomputes; Hybrid keeps, offloads or recomputes each activation,
// keeping the plan the simulator finds fastest. LowerBound bounds swapping
// alone: a tape that recomputes may beat it.
//
// DQN is the DQN paper's planner: a structure2vec Q-network (a gorgonia
// graph, trained with gorgonia's Adam on the CPU) over the activations'
// device operations chooses, per activation, keep, offload or drop; the
// lowering above does the prefetches and rebuilds. It learns by fitted
// Q-iteration in the simulator, seeded; DQN{} plans with trained weights
// shipped in the package (DefaultDQNWeights), or with weights saved by
// SaveDQNWeights (TrainDQN, ooc dqn-train), optionally fine-tuned on the
// problem. Its plan is the shortest prefix of the network's actions that
// fits, repaired towards offloading when none does; DQN's comment says
// how, and what holds.
//
// The budget covers what the machine allocates on the device: activations,
// gradients and op workspaces. Leaf values (the input batch, the learnables
// and constants) stay in the memory the user bound them in and are reported
// apart, as vm.Stats.LeafBytes.
//
// LeastBudget finds about the least budget that works: one under which the
// scheduler plans and from which, as a device's whole memory, the
// allocator serves a step (FitDevice: the scheduling budget lowered by 5%
// steps until the allocator's rounding to chunks or segments fits, as ooc
// train does for its CPU device of -budget bytes). Compile refuses a budget
// under which nothing plans with a *BudgetError naming the function that
// cannot fit and carrying that least budget and the in-core peak ("least
// that works: N bytes, P% of the in-core peak"), so a script can retry
// with it (errors.As); Plan's BudgetError leaves them 0, as searching for
// them costs a plan per step of a bisection.
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
// overwrites another operand of b), so Compile refuses other forms. A Read
// of a leaf reads it at the statement's place in gorgonia's program order
// (vm.Read.After): a Read that comes before the op carrying out a Set of
// that leaf sees the old value, one after it the new, as under
// TapeMachine.
//
// Running again is TapeMachine's: RunAll after a run that finished does
// nothing and returns nil until Reset is called (TapeMachine's program
// counter stays at the end of its tape), leaving every value as it was, so
// a loop that forgets Reset trains one step under both, and a solver then
// moves the weights with the gradients it zeroed (TestRunAllWithoutReset;
// Parallel's RunAll likewise). A scalar a run binds (the loss) is a new
// value at each run, as TapeMachine's after Reset, so a script that keeps
// each step's cost.Value() keeps each step's loss
// (TestScalarValuesHeldAcrossSteps). The machine has TapeMachine's Let and
// Set methods: Set(a, b) binds a to b's value as it is then (a copy, as
// the machine reuses what it binds), and both refuse a node of another
// graph, which TapeMachine, looking nodes up by id, may take
// (TestMachineLetAndSet).
//
// Where the machine differs from TapeMachine on purpose:
//
//   - What a node holds after RunAll: the cost, Read nodes, WithOutputs
//     nodes, the gradients (bound to the learnables) and every scalar of
//     the forward, float, Int or Bool (the terms of a cost a script prints,
//     and a metric nothing reads, which is computed for it) are bound to
//     their values, as TapeMachine binds every node. The forward's other
//     intermediates (a SoftMax prediction a script reads for its
//     accuracy) are bound when their host copies take at most
//     DefaultNodeValueLimit (64 MiB) together, and the backward's (the
//     gradient of the logits, logits.Deriv().Value()) when the forward's
//     and the backward's fit together (TestBackwardNodesBound);
//     WithNodeValues sets that limit (0: none). Each gets a host tensor,
//     made on the first run and reused (not one per step: TapeMachine
//     makes new ones after each Reset, so a script that keeps a tensor
//     value across steps clones it), filled with a copy of its op's result
//     as the op produces it, so a later in-place op cannot change it:
//     where TapeMachine's value of a node was overwritten by an op that
//     wrote in place over it, TapeMachine shows that op's result and ooc
//     shows the node's own. The copies are host memory, as TapeMachine's
//     values are, and are not counted in the device budget (the device
//     peak is the same with and without them, dead ends aside); the
//     forward's copies (12.3 MB a step for the float32 small CNN at batch
//     16) took 2-3% of its forward and backward in core and under 1% at
//     60% of the in-core peak (BenchmarkNodeValues, docs/results.md;
//     with the backward's, 25.2 MB a step, measured too loaded to tell).
//     Above the limit only the scalars are bound: a script that reads a
//     prediction with node.Value() names it with gorgonia.Read or
//     WithOutputs. The forward's non-scalar nodes that the cost does not
//     read (a second head nobody differentiates, a thresholded Bool
//     prediction, an Int class vector: dead ends) are computed and bound
//     like the other intermediates, counted in the same limit, and take
//     device memory like any activation while they are made
//     (TestDeadEndsComputed); when they do not fit with the others they
//     are not computed at all (nor do their ops' states advance: a
//     BatchNorm's running statistics, a Dropout's generator), and the
//     others are bound if they fit alone (TestDeadEndsUnderTheLimit).
//     What gorgonia.Grad builds and leaves unread (a gradient times an
//     operand nothing differentiates, which only a walk of g.AllNodes()
//     finds) is not computed. On a device that computes on itself
//     (CUDA) the same nodes are bound under the same limit and options,
//     each downloaded right after its op (synchronously: the host waits
//     for the copy, so it lands before the op's memory is freed, written
//     over or swapped out) into the same reused host tensor, and the
//     dead ends are computed on the device (TestNodeValuesOnCUDA, on the
//     fake driver). Each costs a device-to-host copy and a host stall per
//     step: a GPU script that reads only the loss passes
//     WithNodeValues(0), as package train does.
//   - A run that fails leaves nothing to resume: the next RunAll runs the
//     whole step. TapeMachine resumes at the instruction that failed.
//   - Close returns the device memory, and a RunAll after it is an error;
//     TapeMachine's Close does nothing on the CPU and it runs on.
//   - gorgonia's VMOpts are not ooc Options (Compile does not take them:
//     Go refuses the program). BindDualValues and EvalMode have ooc's
//     BindDualValues and Inference(); WithLogger, WithValueFmt,
//     WithWatchlist, WithNaNWatch, WithInfWatch, WithPointerWatch,
//     TraceExec, LogFwd, LogBwd, ExecuteFwdOnly, ExecuteBwdOnly,
//     WithManualGradient, WithEngine and WithPrecompiled have no
//     counterpart: the machine neither logs nor watches its ops.
//
// Hidden state and randomness: ops keep theirs in the op, which the
// machine runs exactly once per step (never recomputed), so BatchNorm's
// running statistics advance as under TapeMachine and Inference() (like
// EvalMode) predicts from them; Compile, like creating a training
// TapeMachine, resets them. Dropout draws from a generator gorgonia seeds
// from the clock per op: two graphs built apart agree only when their
// generators are seeded alike; the same graph run by TapeMachine and then
// by ooc continues one sequence. A script may run TapeMachine on a graph
// first and then compile it: the learnables TapeMachine bound to dual
// values keep them, and their gradients are ooc's.
//
// Reshape is a view: it takes no memory, its result is read from its
// operand's memory, and swapping it swaps that memory. Elementwise ops write
// over an operand they read for the last time when sizes match, whatever the
// shapes (an activation after a reshape). Every op writes its result into
// device memory; an op that cannot (gorgonia's own ops without a way to
// write into memory they are given) returns it on the host heap, and that
// memory counts in the budget while the op runs (vm.Func.HostBytes).
//
// # Where TapeMachine reads clobbered memory
//
// gorgonia's Reshape (and Ravel) returns a tensor over its operand's
// memory, and Concat of a single operand returns the operand's tensor
// itself (Transpose and Slice copy: the views gorgonia makes,
// TestGorgoniaViews), but TapeMachine gives such a view a register of its
// own when the operand is still live, and lets a later elementwise op
// write in place over either register once that register is dead: the
// other, still to be read, then holds the elementwise op's result. A
// transformer block written the usual way, Add(norm, ffn(Reshape(norm))),
// computes its feed-forward weight's gradient from norm + ffn(norm) under
// TapeMachine, and so does one whose feed-forward reads Concat(norm) of
// one head. Compile replays the
// program TapeMachine runs (gorgonia.Compile's, read by reflection) over
// which memory each register holds, and has each function read the value
// TapeMachine's register holds when it runs (a view of that node in the
// operand's shape), so loss, gradients and weights still equal
// TapeMachine's (TestTapeMachineViewClobber; the transformer of
// TestRealProgramsBitForBit). The replay follows whole tensors shared by
// these views; should the program not read as gorgonia v0.9.18's does, it
// substitutes nothing. ooc computes no view: it reads the operand's memory
// in the view's shape.
//
// Gradients are those of the learnables gorgonia.Grad or
// gorgonia.Backpropagate differentiated for: Backpropagate from outputs of
// any shape, with output gradients the script supplies, needs no scalar
// cost. Where gorgonia gives two learnables one gradient node (the
// operands of one Add), each still gets its own gradient under
// BindDualValues, as TapeMachine gives it: the machine binds such a
// learnable to a gorgonia dual value holding its weight and gradient, as
// TapeMachine does (vm/dual.go), so a solver zeroing one leaves the
// other's.
//
// Inference() compiles the forward only: the backward gorgonia.Grad added is
// left out, batch norm and dropout run in inference mode, and the forward's
// activations go out of core as a training step's do. A graph with no
// gradients runs forward only without it.
//
// # Supported gorgonia ops
//
// Each op below is a row of TestGorgoniaOps: a small training graph puts it
// between learnable elementwise layers and runs two Adam steps, float32 and
// float64, in core, at half the in-core peak and at the least feasible
// budget, with fresh device memory poisoned. "Exact" means loss, every
// gradient and the weights after each step (for a forward-only graph: the
// cost and the op's result) equal gorgonia's TapeMachine bit for bit there.
// We match TapeMachine, bugs included: where gorgonia's op is wrong, ooc
// is wrong the same way, and the right op is named.
//
// Exact, forward and backward:
//
//   - nn.go: Rectify, LeakyRelu, BinaryXent, Conv2d (stride, pad,
//     dilation), Conv1d, Im2Col, MaxPool2D (also padded), MaxPool1D,
//     BatchNorm (training mode), Dropout. Dropout's gradient divides by p
//     instead of 1-p, and its generator is clock-seeded per op, so two runs
//     agree only when the test seeds both alike. Conv2d's im2col node is 9x
//     its input for a 3x3 kernel, BatchNorm is six activation-sized nodes,
//     MaxPool2D allocates an int argmax per output when the graph is built
//     and Rectify is two nodes: models/layers' Conv2D, BatchNorm, MaxPool2D
//     and ReLU do the same in one node each, with less memory.
//   - AveragePool2D and AveragePool1D (AveragePool2D with a 1xk kernel):
//     exact, but AveragePool2D's values are wrong; use layers.AvgPool2D.
//   - SoftMax, LogSoftMax (last axis or axis 0), Sparsemax, GroupNorm,
//     Upsample2D, ByIndices, Mish, MinBetween, MaxBetween.
//   - Mul (matrix-matrix, matrix-vector, vector-vector), BatchedMatMul
//     (also transposed), Tensordot, Div, Auto, ReduceAdd, ReduceMul.
//   - Max, Mean and Sum over one axis or all axes, Norm (p = 2, 3),
//     LogSumExp of a vector (over an axis of a matrix it fails to build: it
//     subtracts the max without broadcasting). Mean and Sum over two axes
//     of a 4-D tensor are exact too, but gorgonia's values are wrong (Sum
//     over axes 2 and 3 of a 2x3x4x4 tensor): reduce one axis at a time
//     from the last.
//   - Slice (ranges, steps, single indices, down to a scalar), Transpose,
//     Concat, Unconcat, Broadcast, ConvType (Int to float, and float to Int
//     and back: gorgonia converts nothing else).
//   - Reshape and Ravel: exact, TapeMachine's bug included. TapeMachine is
//     wrong around a reshape: its register allocator does not know that a
//     reshape shares its operand's memory, so an elementwise op may write
//     in place over one while the other is still to be read (the row
//     checks that TapeMachine and LispMachine differ). ooc reads there what
//     TapeMachine reads (see "Where TapeMachine reads clobbered memory").
//   - api_gen.go: Abs, Sin, Cos, Exp, Log, Log2, Log1p, Expm1, Neg, Square,
//     Sqrt, Cube, Inverse, InverseSqrt, Tanh, Sigmoid, Softplus; Add, Sub,
//     HadamardProd, HadamardDiv, Pow (also with a scalar); BroadcastAdd,
//     BroadcastSub, BroadcastHadamardProd, BroadcastHadamardDiv,
//     BroadcastPow.
//   - CTCLoss, as the cost: its result is a 0-d tensor (TapeMachine fails
//     to multiply it by a scalar), and its gradient op panics unless the
//     gradient it gets is a scalar (op_ctc_loss.go:571).
//   - GaussianRandomNode and BinomialRandomNode with a degenerate
//     distribution, UniformRandomNode multiplied by zero: gorgonia seeds
//     them from the clock at every run, so only such graphs can be compared.
//
// Exact, with no gradient through the op (learnables after it only):
// Sign, Ceil, Floor, SizeOf, and the comparisons Lt, Gt, Lte, Gte, Eq, Ne
// and their Broadcast forms, with retSame.
//
// Exact, forward only (gorgonia.Grad cannot go through the op):
//
//   - GlobalAveragePool2D (no gradient: Grad panics); use
//     layers.GlobalAvgPool2D.
//   - OuterProd: its symbolic gradient multiplies the wrong operands (x by
//     the output's gradient, for x's; operatorLinAlg.go:262), and Grad
//     fails on vectors of lengths 6 and 5.
//   - DiagFlat: its type is wrong for a tensor operand, so its result can
//     be read but is the operand of no op.
//   - ApplyOp of NewAddOp, NewSubOp, NewHadamardProdOp (ExternalOp).
//
// Every op above writes its result into device memory (package
// vm/prealloc runs gorgonia's ops into memory the machine owns, equal to
// Do), except Sparsemax and its gradient, clamp, the random nodes and ops
// with a scalar result: they run Do, and their result on the host heap
// counts in the budget while they run.
//
// Also exact, in whole programs (TestMoreUsersProgramsBitForBit,
// TestSolversBitForBit, TestUsersProgramsEverySchedulerAndOption and their
// neighbours in users_test.go, statements_test.go, customop_test.go; and
// TestRealProgramsBitForBit: gorgonia's examples iris, logisticregression,
// charRNN, convnet, resnet and stacked_autoencoder ported with their own
// loops, and VAE, GAN, transformer, seq2seq, DQN, word2vec, REINFORCE,
// FGSM and other patterns; TestStackedDenoisingAutoencoderBitForBit: the
// stacked autoencoder's pretraining whole, three layers of 1000, 500 and
// 250 in one machine, where TapeMachine equals LispMachine too):
// BatchNorm over a 2-D batch of features, a user's own op through ApplyOp
// (run by Do, its result on the host heap counted in the budget),
// gorgonia.Backpropagate from outputs of any shape, two Grad calls of two
// costs, two learnables with one gradient node, every gorgonia solver
// with its options (BarzilaiBorwein in float64 only: its Step fails on
// float32 weights whatever ran the step, solvers.go:1530), under every
// scheduler and option.
//
// Refused by Compile, with an error naming the node:
//
//   - At: gorgonia marks its op as a statement that TapeMachine never
//     executes (the ops reading it get At's operand). Slice with single
//     indices gives the element.
//   - YOLOv3: its op rewrites its operand in place and returns it as its
//     result; ooc assumes operands are left as they were.
//   - gorgonia.Set forms that TapeMachine does not carry out (see
//     TestSetRefusedWhereTapeMachineDoesNotAssign).
//
// float32 matrix-vector and vector products go through gonum's SIMD dot
// product, whose summation order depends on the operands' addresses modulo
// 16 bytes. ooc's blocks are 512-byte aligned; Go's heap gives 16-byte
// alignment to every allocation but those of 17 to 24 bytes or under 16
// (size classes), so with such a vector TapeMachine's own last bits change
// from run to run (the rows use 32-byte vectors).
package ooc
