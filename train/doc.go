// Package train is the training loop of outofcore as a library: a Trainer
// runs a models.Model on a datasets.Dataset with a machine ooc.Compile made
// under a device-memory budget, evaluates it on a test set after each epoch,
// and keeps a checkpoint from which the run continues bit for bit.
//
// # Starting a run
//
// Open builds the model and data a Config names (Config.Model, a
// models.Build name; Config.Data, a datasets.Open spec). New takes a model and
// datasets the caller built. Either compiles the step with the Config's
// scheduler (auto: ooc's default, the faster of window and hybrid by
// simulated makespan on times measured in the first step; window; or
// baseline: in core), budget (bytes, or a percentage of the in-core peak)
// and allocator; extra ooc.Options go to ooc.Compile.
// Config.Check validates everything, output paths included, before any work.
//
// # Budgets
//
// With a scheduler that swaps on the CPU device, Config.Budget is the device:
// the Trainer makes a CPU device of exactly that many bytes (at least one
// chunk; best-fit: one 2 MiB segment), so the allocator can never reserve
// more, as on a GPU of that memory. The VA chunk, unless Config.Chunk gives
// it, is chosen for the device (a power of two about 1/24 of it, from one 4
// KiB page, the CPU device's granularity, to 40 MiB; halved twice more if
// that serves a step at a higher scheduling budget). Because allocators round
// blocks up to chunks or segments, a step's requested bytes must stay below
// the device's size: the Trainer replays one step's allocations on an
// accounted device of the same size (ooc.FitDevice: a simulated step, no
// compute, of the window scheduler's tape, which the first step runs) and
// lowers the scheduling budget by 5% of the budget until the allocator
// serves it. A budget whose device serves no plan is refused, with about the
// least budget that works (ooc.LeastBudget, the same search). An ooc.WithDevice among the extra
// options replaces the device (the scheduling budget is still fitted to a
// CPU device of Config.Budget bytes).
//
// On a CUDA device (Config.Device) a budget also holds cuBLAS's workspace,
// which ooc plans beside the program (vm.Program.Reserve): a budget in bytes
// includes it, and a percentage, which is of the program's in-core peak, and
// a checkpoint's budget for ooc eval, which is its program's, get it added.
//
// # Training
//
// Fit trains until Config.Epochs (or Config.Steps) are done. It reports
// through the Progress callback (EpochStart, StepDone, EpochDone, Evaluated,
// Saved events), evaluates after each epoch (batch norm in inference mode,
// its running statistics restored exactly afterwards), saves the checkpoint
// after each epoch, every Config.SaveEvery steps and at the end, and writes
// Config.History and Config.Plot at the end. When its context is cancelled
// it stops after the current step, saves, and returns an *InterruptedError.
// Evaluate evaluates the test set at any time. Describe and Summary print
// what a run is about to do and what it did.
//
// # Checkpoints
//
// A checkpoint (format version 2; version 1 files are read) holds the
// weights, the batch norms' running statistics, the optimizer's state
// (gorgonia's solvers keep it in unexported fields, read through reflect),
// the data position, the whole run's per-step losses and per-epoch records,
// and the run's Config. Every section carries a CRC-32C, so damage is
// reported with its offset; writes are atomic (temporary file, fsync,
// rename, directory fsync), and a new Trainer removes the temporary files an
// interrupted write of its checkpoint left. Resume continues a run from
// Load's Checkpoint and a Config, usually RunConfig(ck) with changes to its
// duration, memory or outputs: those do not change the values computed, so
// the resumed run ends with the same weights as an uninterrupted one.
// EvaluateCheckpoint evaluates a checkpoint on a split of its data.
//
// # Devices
//
// Config.Device "cpu" (the default) runs the steps on a CPU device of the
// budget's size. "cuda" or "cuda:N" computes on a CUDA device through
// vm/cuda/dispatch, the evaluation's forward pass too: the optimizer update
// runs there as well (dispatch.Solver; weights and optimizer state stay on
// the device and come to the host for evaluations and checkpoints) unless
// Config.HostUpdate, and Config.LaunchTable receives the kernel launch
// table. Several CPU devices ("cpu,cpu", "cpu*N", or Config.Devices N)
// train data parallel through ooc.CompileParallel in the same loop: the
// Trainer's model is the whole-batch script graph, each device runs a
// replica with its share of the batch under the budget, and batch-norm
// statistics are replica 0's (evaluated on a replica-sized model of their
// own). Several CUDA devices ("cuda:0,cuda:1", "cuda*N", or "cuda" with
// Config.Devices N; each device once, never mixed with cpu) train the
// same way with the update on every device, as on one: each replica has a
// dispatch.Solver, its weights and optimizer state on its device, and
// between a step and the update the replicas' gradient buffers are
// averaged in place, by NCCL on the devices when it loads (ncclAvg),
// otherwise through the host (ooc.CompileParallel says so once); replica
// 0's weights and state are the run's (evaluated on its device,
// checkpointed). The checkpoint records all of these, so a resume restores
// them; CUDA and several devices compute the CPU device's values up to
// float rounding, and "cpu*1" exactly.
//
// # Across processes
//
// Config.WorldSize N > 1 makes the process rank Config.Rank of a run across
// N processes, on one machine or several, one CUDA device each (Device
// "cuda" or "cuda:LOCAL_RANK"): the rank joins the NCCL communicator
// Config.NCCLID names (rank 0 made it with cuda.NewUniqueID and handed it
// on; ooc train -nccl-id FILE does it through a file) and compiles its
// replica with ooc.WithWorld. Every rank loads the same global batch (one
// seed: one order, one augmentation) and trains on its share, the rows a
// one-process run on N devices gives its replica Rank; each step averages
// the loss and then the gradients across the ranks with NCCL on the
// devices, and every rank updates its own weights, which stay equal. Rank 0
// evaluates, reports and writes the checkpoint and the other outputs (the
// other ranks never touch them), so its checkpoint is a one-process run's;
// a resume reads it on every rank and continues the same world. Before
// each step the ranks agree whether to stop (an all-reduce of one float):
// when any rank's context is cancelled (a signal that reached one process),
// all stop after the same step, rank 0 saves it, and each Fit returns an
// *InterruptedError (Err: the context's, or ErrOtherRankStopped). A rank
// that dies fails the others' next collective call (cuda.ErrNCCLFailed,
// naming the rank where NCCL can), and their Fit returns that error:
// nothing is saved after the failure, so the last checkpoint, written
// atomically, stays the last good one.
//
// What is proven, on this project's machines, which have no GPU: with the
// fake CUDA driver and the fake NCCL (whose ranks meet through shared
// memory and sum in rank order), two and four ranks as separate processes
// of one machine train smallcnn bit for bit as one process on two and four
// fake devices (-device cuda*N): every rank's loss and weights after every
// step, and rank 0's checkpoint; a two-rank run stopped and resumed does
// too; a rank killed with SIGKILL mid-run brings the other down within a
// second, naming it, with the checkpoint intact; SIGTERM to one rank
// stops both after the same step (TestRanksAcrossProcesses, TestRankKilled,
// TestRankInterrupted; four ranks, the resume and the SIGTERM with
// OOC_MULTIPROC_FULL=1).
// What is not: a real NCCL, GPUs, ranks on several machines over a real
// network, and speed; a real NCCL sums in ring or tree order, so its ranks
// agree with each other but match one process only within rounding.
//
// # Solvers
//
// Config.Optimizer names the update rule (sgd, momentum, adam: gorgonia's)
// and Config.Solver whose code runs it: "fast" (the default), package
// solvers' in-place multi-core rewrite, or "gorgonia", gorgonia's own
// solvers. Both step the same bits, and checkpoints hold the state of either
// in gorgonia's form (Adam's step count, the per-learnable velocity or
// mean and variance), so a run saved under one resumes under the other. A
// further rule plugs in at newSolver, with its state in exportSolver and
// importSolver, so that checkpoints hold it.
package train
