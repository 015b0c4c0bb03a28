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
// scheduler (window, or baseline: in core), budget (bytes, or a percentage of
// the in-core peak) and allocator; extra ooc.Options go to ooc.Compile.
// Config.Check validates everything, output paths included, before any work.
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
// own). The checkpoint records all of these, so a resume restores them;
// CUDA and several devices compute the CPU device's values up to float
// rounding, and "cpu*1" exactly.
//
// # Solvers
//
// Config.Optimizer names the solver (sgd, momentum, adam: gorgonia's). A
// further solver plugs in at newSolver, with its state in exportSolver and
// importSolver, so that checkpoints hold it.
package train
