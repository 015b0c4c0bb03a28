// Package dist is the world a training process is in when a run spans
// several processes (one per GPU, on one machine or many), and how those
// processes meet: rank 0 makes the NCCL unique id and hands it to every other
// rank, after which NCCL does the all-reduce between them. It depends on the
// standard library only; package cuda makes the id and joins the
// communicator, package train runs one rank.
//
// # The world
//
// A World is this process's Rank (0..Size-1), the world Size, its LocalRank
// among the processes of its machine (which picks its GPU), and the
// rendezvous: rank 0's Master "host:port" for TCP, or a File on a path every
// rank sees, with a RunID. FromEnv (Resolve, for any lookup) reads it, in
// this order:
//
//   - explicit settings (Flags; a command registers them with
//     Flags.Register as -rank, -world-size, -local-rank, -master,
//     -rendezvous-file, -run-id, -rendezvous-timeout);
//   - torchrun's variables: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
//     MASTER_PORT (ooc launch sets these too);
//   - Slurm's, for a task srun started (SLURM_STEP_ID or
//     SLURM_STEP_NUM_TASKS set): SLURM_PROCID, SLURM_STEP_NUM_TASKS
//     (else SLURM_NTASKS), SLURM_LOCALID; the master is MASTER_ADDR and
//     MASTER_PORT when set, else the first host of SLURM_STEP_NODELIST
//     (SLURM_JOB_NODELIST, SLURM_NODELIST; forms "gpu17", "gpu[017-020,031]",
//     "a,b" are read, a name with two bracket groups is not) or
//     SLURM_LAUNCH_NODE_IPADDR, at port 20000 + the job id's last four digits
//     (SlurmPort).
//
// Torchrun's variables, when RANK or WORLD_SIZE is set, hide Slurm's, as a
// launcher run inside a Slurm task sets them for its children. A flag that
// disagrees with the environment is an error, not a choice; so are a rank out
// of range, a world size below 1, a value that is not a number, a LOCAL_RANK
// not below the world size, a rank without a world size (or the reverse),
// MASTER_ADDR without MASTER_PORT (or the reverse) and a master that is not a
// host:port. Every such error is a *ConfigError naming the flag or variable
// and its value. World.Multi says whether there is anyone to meet at all: a
// process with none of these settings is a world of one and Share just makes
// the id. Resolve takes a world with no rendezvous (a caller may hand the id
// out its own way: ooc train's -nccl-id file); World.Transport is "" for it,
// and Share (World.Validate) refuses it, saying what to set.
//
// # The rendezvous
//
// Share(ctx, w, create) runs create on rank 0 and returns its bytes on every
// rank, within w.Timeout (DefaultTimeout, 10 minutes, when zero: cluster
// jobs start their tasks minutes apart).
//
// TCP (the default, at w.Master): rank 0 listens (on the loopback address
// when the master is one, else on every interface), each other rank connects,
// retrying until rank 0 is up, and says its rank, world size and run id.
// Rank 0 refuses a world-size mismatch, a rank seen twice, a second rank 0
// and a rank out of range: it tells every rank that checked in why and
// returns the error, so no rank waits out its timeout on a broken
// configuration. A rank of another run (another job given the same port) is
// told so and refused alone, without stopping this run; connections that are
// not ranks at all (a port scan) are dropped and ignored. Rank 0 answers only when all Size-1 ranks have checked
// in, so Share is also a barrier. A master that cannot be reached is an error
// naming it after the timeout; a rank that never comes is named in rank 0's
// error, and the ranks that came hear that rank 0 gave up. When create fails
// on rank 0, the ranks that check in within ten seconds are told its error
// and rank 0 returns it.
//
// File (w.File, for clusters where ranks share a file system but a port is
// hard to agree on): rank 0 writes the file atomically (a temporary file in
// the same directory, synced, renamed over the path); the others poll until
// it appears. A file left by an earlier run must not be taken, or the ranks
// would join a communicator nobody creates and hang in NCCL. So the file
// carries the run id and the world size, and a reader takes only a file of
// its own run (a file of another run is waited out; one of this run with
// another world size is an error). The run id is required for the file
// rendezvous: -run-id or $OOC_RUN_ID, else torchrun's TORCHELASTIC_RUN_ID
// with its TORCHELASTIC_RESTART_COUNT, else Slurm's SLURM_JOB_ID with
// SLURM_STEP_ID and SLURM_RESTART_COUNT, so that a restarted or requeued job
// is a new run; ooc launch makes a random one. Deleting the file first
// instead would race with readers of the earlier file. Rank 0 returns as soon
// as the file is written: the file transport is no barrier (NCCL's
// communicator set-up is one).
//
// # Recipes
//
// ooc train is one rank whenever these variables say so: it resolves its
// world with FromEnv (its -world-size and -rank, when given, must agree with
// the environment), rank 0 makes the NCCL id (cuda.NewUniqueID) and Share
// hands it to the others, and "-device cuda" becomes the rank's own GPU,
// cuda:LOCAL_RANK (cuda:0 when CUDA_VISIBLE_DEVICES shows the process one
// GPU, as Slurm's per-task binding does). Ranks started by hand with
// -world-size, -rank and -nccl-id FILE keep that file hand-off and their
// -device.
//
// One machine with N GPUs: ooc launch starts N copies of ooc with the
// torchrun variables set (MASTER_ADDR=127.0.0.1, a free MASTER_PORT, a random
// OOC_RUN_ID), prefixes each line of their output with "[rank R]", forwards
// SIGINT and SIGTERM, and exits with the first failure's status after
// stopping the others:
//
//	ooc launch -nproc 4 -- train -device cuda -model resnet50 -data cifar10:/data/cifar -checkpoint run.ckpt
//
// Several machines, torchrun-style (any launcher that sets the variables;
// here by hand, on each of two machines with 4 GPUs, node 0 at 10.0.0.1):
//
//	# on every machine, for LOCAL_RANK in 0..3, with NODE 0 or 1:
//	RANK=$((NODE*4+LOCAL_RANK)) WORLD_SIZE=8 LOCAL_RANK=$LOCAL_RANK \
//	MASTER_ADDR=10.0.0.1 MASTER_PORT=29500 ooc train -device cuda ...
//
// Slurm: one task per GPU, started by srun. The batch script's own shell
// has SLURM_PROCID and SLURM_NTASKS too, describing the allocation, but no
// step (SLURM_STEP_ID): an ooc run there is a process on its own, not rank 0
// of ranks that never start. (That the batch shell has no SLURM_STEP_ID is
// what Slurm's documentation and published environments show; it was not
// tried on a real Slurm here.)
//
//	#!/bin/bash
//	#SBATCH --nodes=2 --ntasks-per-node=4 --gpus-per-node=4
//	srun ooc train -device cuda -model resnet50 -data cifar10:/shared/cifar -checkpoint /shared/run.ckpt
//
// The master is then the step's first node at port 20000 + the job id's last
// four digits; export MASTER_ADDR and MASTER_PORT in the script to choose
// them, or export OOC_RENDEZVOUS_FILE=/shared/ooc-id to meet through a file on
// a shared file system (its run id is the job's and step's).
//
// # What was proven here and what was not
//
// Proven on one machine: the environment parser (tables, a fuzz target),
// both transports with ranks as goroutines and as separate processes on
// loopback (go test ./dist, -race clean), the refusals above between
// processes, and ooc launch's environment, output, signal forwarding and
// failure handling with short-lived ooc children (cmd/ooc's launch tests).
// And, on the FAKE CUDA driver and fake libnccl only (no GPU): "ooc launch
// -nproc 2 -- train -device cuda" trains two ranks that meet through the TCP
// rendezvous on loopback, and its checkpoint equals, bit for bit, the one
// two ranks started by hand with -nccl-id write (cmd/ooc's TestLaunchTrain).
// Not proven: a real network between machines, a real Slurm or torchrun,
// a real NCCL or GPU.
package dist
