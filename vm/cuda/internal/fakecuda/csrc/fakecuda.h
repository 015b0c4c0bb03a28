/*
 * fakecuda.h: the fake CUDA driver's types and shared state.
 *
 * fakecuda: a fake CUDA driver (libcuda.so.1) for tests on machines without a GPU.
 *
 * It exports the driver-API symbols package vm/cuda binds, by their ABI names
 * (cuCtxCreate_v2, cuMemAlloc_v2, ...), with the struct layouts and enum values of
 * NVIDIA's cuda.h (12.6). Device memory is host memory, so a "device pointer" is a host
 * address that host code (the host builds of kernels) can dereference:
 *
 *   - cuMemAlloc_v2 is an anonymous mmap;
 *   - cuMemCreate is a stretch of one memfd, cuMemAddressReserve a PROT_NONE mmap,
 *     cuMemMap an mmap(MAP_FIXED|MAP_SHARED) of the chunk's stretch (still PROT_NONE),
 *     cuMemSetAccess an mprotect, so bytes follow a chunk from one range to another, and
 *     a kernel touching memory without access faults as it would on the GPU;
 *   - the bookkeeping refuses what the driver documents as refused: misaligned sizes and
 *     offsets, a map over a mapping, a map at a non-zero handle offset, an unmap that
 *     cuts a mapping, copies to or from device addresses that are not mapped with access;
 *   - each stream is a worker thread running its queue in order; events record when the
 *     worker reaches them; cuMemUnmap and cuMemFree do not wait for queued work, as the
 *     driver need not: a queued copy or kernel (by its pointer arguments) that touches
 *     memory unmapped or freed before it ran fails the context with
 *     CUDA_ERROR_ILLEGAL_ADDRESS instead of running, and every later call returns it; cuStreamWaitEvent makes a worker block until the event's
 *     record has run. Knobs delay copies and kernels, or hold a stream's queue until
 *     released, so that a missing wait shows up as a wrong result rather than being
 *     saved by luck;
 *   - a synchronous cuMemcpyHtoD_v2 from pageable memory returns once the bytes are
 *     staged, as the header says, and lands on the legacy stream: at the next call ordered
 *     with that stream (a synchronous copy, cuStreamSynchronize(0), cuCtxSynchronize, work
 *     on stream 0) or, the worst order the non-blocking streams allow, right after the
 *     first copy or kernel queued on one of them after it has run;
 *   - cuModuleGetFunction(mod, "K") looks up ooc_host_K in the shared library named by
 *     OOC_FAKECUDA_KERNELS; cuLaunchKernel queues a call of it on the stream's worker.
 *
 * Contexts are either created (cuCtxCreate_v2, destroyed by cuCtxDestroy_v2) or a device's
 * primary context: cuDevicePrimaryCtxRetain makes it at the first retain and
 * cuDevicePrimaryCtxRelease_v2 destroys it at the last release, taking what is left in it;
 * cuCtxDestroy_v2 refuses it. Its flags (cuDevicePrimaryCtxSetFlags_v2) persist while it
 * is inactive, as the driver's do. Each stream belongs to the context current at its
 * creation (cuStreamGetCtx), which the fake NCCL checks against the primary one.
 *
 * One global mutex guards all state: the fake is for correctness, not speed. The sources:
 * state.c (state, control, initialization, devices, contexts), memory.c (segments,
 * virtual memory management, pinned memory, synchronous copies), streams.c (stream workers,
 * asynchronous copies, events, modules, launches).
 *
 * Control from tests (not part of CUDA): fakecuda_set / fakecuda_get for knobs and
 * counters, fakecuda_fail to make the next call of a function fail with a given result
 * (a sticky result also loses the context), fakecuda_fail_at for the Nth call or every
 * call from the Nth on, fakecuda_layout for the sizes and offsets
 * of the ABI structs as this compiler lays them out.
 *
 * Where the header documents something the fake cannot check (a kernel's memory
 * accesses, the real driver's timing), the fake does not pretend to.
 */
#ifndef FAKECUDA_H
#define FAKECUDA_H

#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* ---- Types and values of cuda.h (CUDA 12.6) ---- */

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;

typedef struct CUmemLocation_st {
	int type; /* CUmemLocationType */
	int id;
} CUmemLocation;

typedef struct CUmemAllocationProp_st {
	int type;                 /* CUmemAllocationType */
	int requestedHandleTypes; /* CUmemAllocationHandleType */
	CUmemLocation location;
	void *win32HandleMetaData;
	struct {
		unsigned char compressionType;
		unsigned char gpuDirectRDMACapable;
		unsigned short usage;
		unsigned char reserved[4];
	} allocFlags;
} CUmemAllocationProp;

typedef struct CUmemAccessDesc_st {
	CUmemLocation location;
	int flags; /* CUmemAccess_flags */
} CUmemAccessDesc;

enum {
	CUDA_SUCCESS = 0,
	CUDA_ERROR_INVALID_VALUE = 1,
	CUDA_ERROR_OUT_OF_MEMORY = 2,
	CUDA_ERROR_NOT_INITIALIZED = 3,
	CUDA_ERROR_DEINITIALIZED = 4,
	CUDA_ERROR_NO_DEVICE = 100,
	CUDA_ERROR_INVALID_DEVICE = 101,
	CUDA_ERROR_INVALID_IMAGE = 200,
	CUDA_ERROR_INVALID_CONTEXT = 201,
	CUDA_ERROR_ECC_UNCORRECTABLE = 214,
	CUDA_ERROR_NVLINK_UNCORRECTABLE = 220,
	CUDA_ERROR_CONTAINED = 226,
	CUDA_ERROR_INVALID_HANDLE = 400,
	CUDA_ERROR_NOT_FOUND = 500,
	CUDA_ERROR_NOT_READY = 600,
	CUDA_ERROR_ILLEGAL_ADDRESS = 700,
	CUDA_ERROR_LAUNCH_TIMEOUT = 702,
	CUDA_ERROR_CONTEXT_IS_DESTROYED = 709,
	CUDA_ERROR_ASSERT = 710,
	CUDA_ERROR_HARDWARE_STACK_ERROR = 714,
	CUDA_ERROR_ILLEGAL_INSTRUCTION = 715,
	CUDA_ERROR_MISALIGNED_ADDRESS = 716,
	CUDA_ERROR_INVALID_ADDRESS_SPACE = 717,
	CUDA_ERROR_INVALID_PC = 718,
	CUDA_ERROR_LAUNCH_FAILED = 719,
	CUDA_ERROR_TENSOR_MEMORY_LEAK = 721,
	CUDA_ERROR_NOT_PERMITTED = 800,
	CUDA_ERROR_NOT_SUPPORTED = 801,
	CUDA_ERROR_MPS_CLIENT_TERMINATED = 810,
	CUDA_ERROR_EXTERNAL_DEVICE = 911,
	CUDA_ERROR_UNKNOWN = 999,
};

enum {
	CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
	CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT = 40,
	CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING = 41,
	CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
	CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
	CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 102,
	CU_MEM_ALLOCATION_TYPE_PINNED = 1,
	CU_MEM_LOCATION_TYPE_DEVICE = 1,
	CU_MEM_ACCESS_FLAGS_PROT_NONE = 0,
	CU_MEM_ACCESS_FLAGS_PROT_READ = 1,
	CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3,
	CU_EVENT_DISABLE_TIMING = 2,
};

typedef void (*host_kernel)(const unsigned int grid[3], const unsigned int block[3], unsigned int shared, void **params);

/* ---- State (state.c) ---- */

typedef struct {
	void **v;
	int n, cap;
} vec;

typedef struct ctx_s {
	int dev;
	CUresult lost; /* a sticky error: every call in the context returns it */
	int primary;   /* the device's primary context (cuDevicePrimaryCtxRetain) */
	unsigned flags;
} ctx_t;

typedef struct {
	ctx_t *ctx;
	uintptr_t ptr;
	size_t size;
} region_t; /* cuMemAlloc and cuMemHostAlloc */

typedef struct {
	ctx_t *ctx;
	unsigned long long id;
	size_t size;
	off_t off; /* in the memfd */
	int mapped, released;
} handle_t;

typedef struct {
	ctx_t *ctx;
	uintptr_t va;
	size_t size;
} resv_t;

typedef struct {
	uintptr_t va;
	size_t size;
	handle_t *h;
	int access;
} map_t;

typedef struct {
	ctx_t *ctx;
	unsigned flags;
	unsigned long long recorded, completed;
	struct timespec t;
} event_t;

enum { OP_COPY, OP_KERNEL, OP_RECORD, OP_WAIT };

typedef struct op_s {
	struct op_s *next;
	int kind;
	void *dst;
	const void *src;
	size_t n;
	uintptr_t dev; /* a copy's device side: [dev, dev+n) */
	CUresult fault; /* set when memory the op touches went before it ran */
	int running;    /* its copy or kernel is running: its memory must stay */
	const unsigned *sizes; /* a kernel's parameter sizes (function_t), or NULL */
	unsigned long long issued; /* op_seq when queued */
	void *staging; /* freed after the copy */
	event_t *ev;
	unsigned long long seq;
	host_kernel fn;
	unsigned grid[3], block[3], shared;
	void *params[65];
	unsigned long long slots[64];
} op_t;

/* A synchronous copy from pageable memory to the device (cuMemcpyHtoD_v2): staged at the
 * call, landing later on the legacy stream, unordered with the non-blocking streams. */
typedef struct {
	ctx_t *ctx;
	void *dst, *staging;
	size_t n;
	unsigned long long issued; /* op_seq when made */
} legacy_t;

typedef struct {
	ctx_t *ctx;
	pthread_t th;
	op_t *head, *tail;
	unsigned long long enq, done;
	int quit;
} stream_t;

typedef struct {
	ctx_t *ctx;
	char *image;
	size_t size;
} module_t;

typedef struct {
	module_t *mod;
	host_kernel fn;
	/* sizes are the parameters' byte sizes, 0-terminated, when the kernel library exports
	 * ooc_params_K (the real driver reads them from the kernel image); NULL otherwise,
	 * and then every argument is taken as one 8-byte slot. */
	const unsigned *sizes;
} function_t;

/* Everything shared between the sources is hidden: each copy of the library loaded from its
 * own path must keep its own state, even when another copy's symbols are global. */
#pragma GCC visibility push(hidden)

extern pthread_mutex_t mu;
extern pthread_cond_t cv; /* broadcast on every change of queues and events */

extern struct knobs {
	long long devices, driver_version, memory, vmm, granularity, pinned, pinned_limit;
	long long copy_delay_us, kernel_delay_us, ctx_overhead, cc_major, cc_minor;
	long long hold; /* a stream (its handle) whose worker runs nothing until this changes */
	long long trace, watch_lo, watch_hi; /* trace.c */
} knob;

extern int initialized;
extern long long used; /* device bytes in use, contexts' overhead included */
extern long long pinned_used;
extern long long launches, modules_loaded, image_bytes;
extern long long host_syncs;       /* calls that make the host wait for the device */
extern long long freed_by_destroy; /* objects a context destroy had to free: what the caller left */
extern unsigned long long next_handle;
extern int memfd;
extern off_t memfd_end;
extern vec ctxs, allocs, pinned, handles, resvs, maps, events, streams, modules, functions, legacy;
extern unsigned long long op_seq; /* counts queued ops and legacy copies, in order */
extern __thread ctx_t *current;

void vpush(vec *a, void *x);
void vdel(vec *a, int i);
int vfind(vec *a, void *x);
int valid_device(CUdevice d);
size_t page_size(void);
size_t round_up(size_t n, size_t to);

/* enter checks, under mu, an injected failure, initialization and (if needctx) the
 * calling thread's current context; ENTER returns its error from the calling function. */
CUresult enter(const char *name, int needctx);
CUresult leave(CUresult r);

/* ---- The trace of queued work (trace.c) ---- */

enum { TRACE_RECORD = 1, TRACE_WAIT, TRACE_HTOD, TRACE_DTOH, TRACE_KERNEL, TRACE_HOST_WAIT };

typedef struct {
	long long kind;
	unsigned long long stream, event, seq, addr;
	long long n, watched;
} trace_entry;

void trace_reset(void);
void trace_op(long long kind, uintptr_t stream, const event_t *e, unsigned long long seq, uintptr_t addr, size_t n,
              int watched);
int trace_watched(const unsigned long long *slot);

#define ENTER(name, needctx)                                                                                           \
	pthread_mutex_lock(&mu);                                                                                           \
	do {                                                                                                               \
		CUresult r_ = enter(name, needctx);                                                                            \
		if (r_ != CUDA_SUCCESS) {                                                                                      \
			pthread_mutex_unlock(&mu);                                                                                 \
			return r_;                                                                                                 \
		}                                                                                                              \
	} while (0)

/* ---- memory.c ---- */

region_t *region_at(vec *rs, uintptr_t p, size_t n);
int device_ok(uintptr_t p, size_t n, int write);
void release_alloc(void *x);
void release_pinned(void *x);
void release_resv(void *x);
void release_handle(void *x);

/* ---- streams.c ---- */

void drain(ctx_t *c);
void doom(ctx_t *c, uintptr_t p, size_t n);
void land_legacy(ctx_t *c, unsigned long long before);
void stop_stream(stream_t *s);
void release_module(void *x);

#pragma GCC visibility pop

#endif
