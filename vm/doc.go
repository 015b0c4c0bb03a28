// Package vm runs a lowered out-of-core training program on a device.
//
// A Program is a tape of instructions over the variables of a Gorgonia graph:
// exec runs one op, swapout starts copying a variable to host memory, free
// releases its device memory (after any copy out has landed), swapin brings it
// back, wait makes compute block until a swap-in has landed, and recompute
// re-runs a forward op whose output was dropped. Package ooc builds programs
// from graphs; this package only executes them, faithfully, and counts what
// that cost.
//
// A Machine implements gorgonia.VM. Device memory for every value it computes
// (activations, gradients, workspace) comes from an allocator of package
// vm/alloc over the device's physical memory, so a budget is a hard limit, as
// on a GPU: an allocation past it fails with an out-of-memory error. Leaf
// values (inputs, learnables, constants) stay where the user bound them.
// Allocators for a device are made through NewVA and NewBestFit, which defer
// to a device that makes its own (AllocatorMaker: a CUDA device falls back to
// best-fit where virtual memory management failed, and orders unmapping after
// queued work).
//
// On the CPU device the ops are gorgonia's own CPU ops, run on tensors whose
// bytes are device memory, so a Machine's results equal gorgonia's
// TapeMachine bit for bit. New puts the program's ops that have a training
// mode (gorgonia.TrainModeOp) in the program's mode, as TapeMachine does when
// it is made; a machine on a simulated device runs no op and leaves them
// alone, since planners simulate tapes over the user's own ops. The tensor
// headers an op gets over device memory are kept per operand and output of
// each function from one step to the next (a step would otherwise make one
// per use), and reused only while still exactly the header that would be
// built: an op that reshaped or transposed its header in place gets a new
// one. The user is never handed one of them: results and gradients are
// copied into host values of the machine's (see publish). So are view leaves'
// headers, while their base is the same tensor over the same memory. The
// blocks a step frees go back to the allocator at its end (alloc.Recycler)
// and the copy engines reuse their events; the scalar ops of a loss write
// into their blocks (prealloc.ScalarFor). A steady step of the bundled
// models then allocates nothing on the Go heap: the scalar values it
// publishes (a new value per scalar node per run, as TapeMachine) are carved
// from a slab of 64 runs' worth, and bound to their nodes without
// gorgonia's UnsafeLet, whose shape check clones the node's shape on every
// call (letScalar: it writes the node's field, found by reflection once and
// checked against the pinned gorgonia, as bindGradient's dual values are).
// Ops prealloc leaves to gorgonia's own
// UsePreallocDo (elementwise comparisons, for one)
// still allocate inside gorgonia and tensor.
//
// On the CPU device the machine also fuses, at run time, an op with the one
// after it where nothing can tell (Fuser: models/layers' batch norm and the
// ReLU after it): the next exec (only swaps, waits and frees come between)
// has the first op's output as its one operand and writes over it in place,
// nothing else reads that output, no instruction but the first exec names
// it (no swap, free or recompute), the user is handed nothing of it (no
// output, bound node value, Read or Set), and the second function is never
// recomputed. The first exec
// then computes both in one pass and the second only takes over the memory
// and publishes it, so the tape, its memory and every result stay as
// planned, bit for bit. Simulated devices and backends fuse nothing, nor
// does a first step that measures op times for a replan. Fused lists the
// pairs; SetFusion(false) runs every function on its own.
//
// A device whose memory the host cannot address (a GPU) computes through a
// Backend, registered by its package (vm/cuda/dispatch for CUDA): the
// backend plans every function when the machine is made (an op it cannot
// run is an error then), the machine hands it device addresses, swaps run on
// the device's copy streams, leaves live in device blocks outside the budget
// (uploaded each run, or kept there for an optimizer on the device, see
// KeepOnDevice and GradientSink), and what the user reads is downloaded.
// Device memory the backend needs beside the program is inside the budget:
// what it holds while bound (Reserver: cuBLAS's workspace) is set aside
// from the budget, and scratch one call of an op needs on it that the op
// does not declare (WorkspaceBackend: CUDA's tensordot transposes) becomes
// that function's Workspace when the trace is made.
//
// A script that knows the next input batch hands it over early with
// Machine.StageNext: on a backend with copy streams (a Stager) the batch is
// then copied in during the run before, right after that run's last read of
// the input, and the run it is for does not upload it at its start. On the
// CPU device and simulated devices StageNext changes nothing (leaves are
// read where the script keeps them; the simulator does not model their
// upload).
package vm
