// Package cuda is the CUDA device of the out-of-core VM: an NVIDIA GPU reached through the
// CUDA driver API, with its memory carved by package alloc's allocators, pinned host
// buffers for swapped-out data, and three streams that let swaps overlap compute.
//
// It loads libcuda.so.1 at run time with purego's dlopen, so one pure-Go binary (it builds
// with CGO_ENABLED=0) runs on CPU-only machines, where opening a device fails with a clear
// error, and on GPU machines. Nothing of the CUDA toolkit is needed to build or test it.
//
// # Finding the libraries
//
// libcuda, cuBLAS and NCCL are found by a Search (DefaultSearch, or WithSearch): the
// override ($OOC_CUDA_LIBRARY, $OOC_CUBLAS_LIBRARY, $OOC_NCCL_LIBRARY) when set, and
// nothing else then; else the sonames (libcuda.so.1; libcublas.so.13, .12, .11;
// libnccl.so.2) through the dynamic loader, then $CUDA_HOME and $CUDA_PATH (lib64, lib),
// then /usr/local/cuda*/lib64 newest version first, then nvidia/*/lib (and nvidia/*/*/lib)
// under the site-packages of the python3 on $PATH, where pip's wheels put them (CUDA 13's
// nvidia/cu13/lib, NCCL's nvidia/nccl/lib): a machine with PyTorch may have cuBLAS nowhere
// else. A stubs directory is never searched. A library found by path is loaded by its full
// path, cuBLAS after the libcublasLt beside it (loaded globally, so that cuBLAS's own
// dependency resolves to that one and not to another version on LD_LIBRARY_PATH). When
// nothing loads, the error lists every place tried and says what to install or set; a
// library found but refused (too old, lacking a function) is reported as such. Doctor
// prints where each library came from and its version. The tests install the fake
// libraries the ways a machine has them (fakecuda.Install, a fake python3) and check that
// the search alone finds them.
// Linking the package in (package ooc and cmd/ooc do) registers the device names "cuda"
// and "cuda:N" with vm.NewDevice.
//
// # Use
//
//	d, err := cuda.Open(0)              // or vm.NewDevice("cuda:0", budget)
//	a, err := d.NewVA(40 << 20)         // VA over cuMemCreate/cuMemMap; best-fit without VMM (vm.NewVA calls it)
//	b, err := a.Alloc(n)                // b.Addr() is a device pointer; b.Bytes() is nil
//	buf, err := d.Pinned().Get(n)       // a pinned host buffer, reused across steps
//	in, err := d.CopyIn(b.Addr(), buf.Bytes)   // swap-in on the host-to-device stream
//	err = d.WaitFor(in)                        // compute waits, on the device, where it reads b
//	err = d.Launch(f, grid, block, 0, b.Addr(), uint32(n))
//	out, err := d.CopyOut(buf.Bytes, b.Addr()) // swap-out on the device-to-host stream
//	err = out.Wait()                           // only then may b's memory be reused
//	step, err := d.EndStep()                   // one host synchronization; stall time from events
//
// The swap protocol a VM follows is spelled out in copy.go: a swap-out's block is reused
// only after its copy's event completed; compute waits on a swap-in's event only at the
// instruction that reads it; a step ends with one synchronization.
//
// # The next input batch
//
// A training step's input batch is copied in during the step before it, by
// vm.Machine.StageNext (train's trainer hands each batch over one step early). The batch
// goes into one of two pinned buffers per input, alternating, so that staging batch N+2
// never writes the buffer batch N+1's copy may still be reading. In step N, right after
// the last instruction that reads the input (in a training step usually the first
// convolution's weight gradient; for the labels, the loss), the machine calls
// CopyInNext: compute records an event, the host-to-device stream waits for it and copies
// batch N+1 into the input's device memory, and records a second event. Step N's EndStep
// does not wait for that copy, so it runs beside the rest of the backward and whatever is
// queued after the step (the optimizer update on the device); step N+1 uploads nothing at
// its start, and compute waits on the second event just before step N+1's first
// instruction that reads the input. Ordering is by events alone; the host never waits for
// the copy. The fake driver's trace (Trace; dispatch's TestStagedUploadOrder) shows that
// order, and staged and plain uploads train smallcnn to the same bits on it. How much time
// this hides on a GPU is not measured: no GPU has run it.
//
// # Compute
//
// The device only moves and launches; package vm/cuda/dispatch makes a machine compute on
// it: LaunchPacked launches a kernel of package kernels with its prepared kernelParams, and
// OpenBLAS dlopens cuBLAS (libcublas.so.13, .12 or .11 as the search finds it, or
// $OOC_CUBLAS_LIBRARY) for Gemm on the compute stream, with a workspace of
// BLASWorkspaceBytes from the device's memory
// (cublasSetWorkspace_v2), which the planner counts inside the budget. ComputesOnDevice
// tells package vm that a machine on this device needs that backend. The tests' fake cuBLAS (internal/fakecuda, BuildBLAS) is a host GEMM with
// cuBLAS's column-major contract that drains the handle's stream before it computes and
// refuses to compute without a workspace inside a driver allocation; told
// so by the environment (dispatchtest sets it), it does package blas's per-element
// arithmetic, so a product on the fake device is the CPU device's bits.
//
// # NCCL
//
// NCCL averages data-parallel gradients across GPUs (package ooc's AllReducer; CompileParallel
// uses it by default on two or more CUDA devices). It is found like the driver
// (libnccl.so.2 by the devices' search, or $OOC_NCCL_LIBRARY); where it is missing, every entry point fails with an
// error wrapping ErrNoNCCL and package ooc averages on the host, saying so once. NewNCCL makes
// one communicator of this process's devices; JoinNCCL makes one device a rank of a
// communicator spanning processes or machines, its UniqueID (ncclGetUniqueId) handed from rank
// 0 by file (WriteFile, ReadUniqueID) or environment ($OOC_NCCL_ID, UniqueIDFromEnv).
// AllReduceMean stages each rank's host buffer on its device and runs ncclAllReduce with ncclAvg
// (before NCCL 2.10, a sum divided on the host) on the device's compute stream;
// AllReduceMeanDevice averages buffers already on the devices in place (ncclAvg only), as
// ooc train does with each replica's gradients before its update on the device. Each rank's
// calls run on a goroutine of their own with the device's context current and outside
// ncclGroupStart/End. That context is the device's primary one, the context NCCL's own work
// runs in (inside groups NCCL switches to it, NVIDIA/nccl#565), so the compute stream handed
// to ncclAllReduce belongs to the context NCCL uses. ncclCommInitRank takes the 128-byte ncclUniqueId by value, which
// purego cannot pass on amd64 (16 stack words, beyond its 15 arguments); there the id goes
// through ncclCommInitRankScalable (NCCL 2.23 and newer), which takes a pointer, and an older
// NCCL is refused with a message saying so (on arm64 the ABI passes the struct by reference,
// so ncclCommInitRank works).
//
// A communicator that fails must not hang its ranks. Where NCCL has ncclCommGetAsyncError and
// ncclCommAbort (2.4 and newer), a watchdog goroutine per NCCL polls the asynchronous error
// every 100 ms and times the call in progress against WithNCCLTimeout (DefaultNCCLTimeout,
// 10 minutes; 0 for none): when a rank died, left or disagreed, or a call waited too long, it
// aborts the communicator, so that a blocked call returns, and that call and every later one
// fail with ErrNCCLFailed and NCCL's own account (ncclGetLastError, 2.13 and newer), which
// names the dead rank (Err says the same at any time). Close aborts nothing more and
// destroys what is left.
//
// The tests run against a fake libnccl (internal/fakecuda/nccl), built in the test, that checks
// contexts (a stream outside the device's primary context is refused with ncclInvalidArgument),
// ranks and rounds and reduces in rank order. Its ranks meet through POSIX shared memory named
// by the unique id, so they may be threads of one process or processes of their own, each with
// its own fake driver: the tests run ranks as separate processes (the test binary run again)
// and get, bit for bit, what the same ranks give in one process; they kill a rank (SIGKILL,
// left a zombie) while another waits for it, and that rank's call fails within a second naming
// the dead rank and its pid (the fake looks at its peers' pids: kill(pid, 0) and
// /proc/PID/stat); ranks that disagree on the world size, or two that give the same rank, fail
// every rank, saying which. What this proves: the binding (symbols, argument order, the id's
// layout, enum values), the Go logic (threads, contexts, staging, scaling, the watchdog and
// the abort) and ranks in separate processes of one machine. What it does not: NCCL's
// algorithms, its transports between machines (sockets, InfiniBand), how a real NCCL reports
// a peer lost across a network, its speed; no real NCCL has run this code: no machine of
// this project has a GPU.
//
// # Driver, errors
//
// The driver's functions are bound by their ABI names (cuDevicePrimaryCtxRelease_v2,
// cuMemAlloc_v2, cuMemcpyHtoDAsync_v2, ...), after checking cuDriverGetVersion against
// MinDriverVersion (CUDA 11.0, for the _v2 primary-context calls; the virtual memory
// management API came with 10.2) and that each function is there. Struct layouts and enum
// values are written from NVIDIA's cuda.h (12.6; the primary-context calls and the CUresult
// values checked against CUDA 13.0's, through cudarc's generated bindings) and checked
// against a C compiler's layout in the tests. A failed call is an *Error carrying the call,
// the CUresult and the driver's cuGetErrorName and cuGetErrorString. The errors a GPU user
// meets each wrap a sentinel: ErrNoDriver ("no NVIDIA driver: tried ..."),
// ErrDriverTooOld, ErrNoDevice (none, or a bad ordinal), alloc.ErrOutOfMemory (with the free
// and unusable bytes), and ErrContextLost after a sticky error (a kernel's illegal address,
// CUDA_ERROR_CONTAINED, an uncorrectable ECC error: the list, and the header it was checked
// against, is at Result.sticky): every later call fails with it, and the device still closes.
//
// # Contexts and goroutines
//
// A CUDA context is current per OS thread, and Go moves goroutines between threads. Every
// call path locks its goroutine to its thread and makes the device's context current there
// (cuCtxSetCurrent, a thread-local store) before its driver calls; see Device.do. This
// keeps the driver's own thread safety: concurrent allocations, copies and a host wait on
// an event do not queue behind each other, as they would behind one driver goroutine. The
// context is the device's primary context (cuDevicePrimaryCtxRetain), the one the CUDA
// runtime, NCCL, cuBLAS and cuDNN use, with blocking synchronization asked for first
// (cuDevicePrimaryCtxSetFlags_v2) so a host wait sleeps rather than spins. It is shared:
// two devices of one ordinal in a process use the same context, Close frees everything the
// device made and then releases the context (cuDevicePrimaryCtxRelease_v2), which the
// driver destroys at its last release. Capacity is cuMemGetInfo's free memory once that
// context exists, minus DefaultReserve (256 MiB or 1/32 of the device, for module code,
// kernels' local memory and library workspaces), or the budget given (WithCapacity).
//
// # Memory
//
// Device.Memory is an alloc.Memory, so both allocators of package alloc run on it
// unchanged: segments are cuMemAlloc_v2 allocations (best-fit); chunks are cuMemCreate
// handles, ranges cuMemAddressReserve reservations, and a batched Map of n chunks is n
// cuMemMap calls and one cuMemSetAccess (VA). Chunk sizes must be multiples of the device's
// granularity (cuMemGetAllocationGranularity); Device.ChunkSize rounds to it. VMM is tried,
// not inferred: Open reserves, creates, maps, gives access to, unmaps, releases and frees one
// granule, and a device where any of that fails (or whose attributes say no VMM) runs
// without it, Info.NoVMMReason naming the call and result: it refuses chunks with ErrNoVMM,
// and Device.NewVA gives best-fit there and says so once. Package ooc makes every allocator
// through the device (vm.NewVA, vm.NewBestFit: Device implements vm.AllocatorMaker). A chunk
// call that fails mid-run with a result other than out-of-memory (a GPU proxy's
// CUDA_ERROR_NOT_SUPPORTED, say) comes back from Alloc naming the call and the result, with
// what that Alloc mapped undone. Device memory is not host-addressable: Segment and Range
// Data are nil, Addr is the device pointer.
//
// cuMemUnmap and cuMemFree_v2 need not wait for work still queued on the memory (PyTorch's
// expandable segments synchronize before unmapping because unmap "does not appear to
// synchronize in all cases"); a kernel reading a range unmapped under it faults with
// CUDA_ERROR_ILLEGAL_ADDRESS and loses the context. So the device's allocators record an
// event on the compute stream at every free, at the range or segment that held the block,
// and the memory waits for that event before unmapping the range (VA eviction inside Alloc)
// or freeing the segment (best-fit returning cached segments); by then it has nearly always
// completed. Without such an event (an allocator made around Memory() directly) the memory
// synchronizes the compute stream first.
// One difference from the driver: cuda.h allows cuMemRelease of a mapped handle (the memory
// goes at the last unmap); alloc.Memory's contract refuses it, and so does this package.
//
// # The fake driver, and what it proves
//
// The tests run against internal/fakecuda: a C library exporting the same symbols, built
// by the system C compiler inside the test (a test skips, saying what to install, without
// one). Device memory there is host memory: VMM reservations, chunks and maps are real
// mmaps of a memfd with real bookkeeping that refuses what the header says the driver
// refuses; each stream is a worker thread running its queue in order, with knobs that slow
// copies and kernels down, so a missing event wait gives a wrong result, not a lucky one;
// kernels are host builds of the CUDA C sources loaded from OOC_FAKECUDA_KERNELS. It is as
// strict as the header allows where the real driver may be lax: cuMemUnmap and cuMemFree_v2
// do not wait for queued work, and a queued copy or kernel touching memory given back
// before it ran loses the context with CUDA_ERROR_ILLEGAL_ADDRESS; a synchronous
// cuMemcpyHtoD from pageable memory lands on the legacy stream, after the first later copy
// or kernel of a non-blocking stream; primary and created contexts are told apart; and
// any driver call can be made to fail at its Nth call or always (fakecuda.FailAt).
//
// The fake proves the bindings (symbol names, argument order, struct layouts, enum
// values), the Go logic (contexts per call path, bookkeeping, the allocators on device
// memory, event ordering across streams, stall accounting, error paths) and that bytes
// survive remapping. It cannot prove the real driver's semantics where the header is
// silent, its timing or bandwidth, kernels' behaviour on a GPU, or what a real fault does.
// For that, on a machine with a GPU: "ooc doctor" (Doctor), or go test -tags gpu
// ./vm/cuda/..., runs the same allocator and ordering checks against the real driver. Neither
// has run on a GPU yet: no machine of this project has one.
package cuda
