/*
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
 *     worker reaches them; cuStreamWaitEvent makes a worker block until the event's
 *     record has run. Knobs delay copies and kernels, so that a missing wait shows up as
 *     a wrong result rather than being saved by luck;
 *   - cuModuleGetFunction(mod, "K") looks up ooc_host_K in the shared library named by
 *     OOC_FAKECUDA_KERNELS; cuLaunchKernel queues a call of it on the stream's worker.
 *
 * One global mutex guards all state: the fake is for correctness, not speed.
 *
 * Control from tests (not part of CUDA): fakecuda_set / fakecuda_get for knobs and
 * counters, fakecuda_fail to make the next call of a function fail with a given result
 * (a sticky result also loses the context), fakecuda_layout for the sizes and offsets
 * of the ABI structs as this compiler lays them out.
 *
 * Where the header documents something the fake cannot check (a kernel's memory
 * accesses, the real driver's timing), the fake does not pretend to.
 */
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
	CUDA_ERROR_NOT_PERMITTED = 800,
	CUDA_ERROR_NOT_SUPPORTED = 801,
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

/* ---- State ---- */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER; /* broadcast on every change of queues and events */

static struct {
	long long devices, driver_version, memory, vmm, granularity, pinned, pinned_limit;
	long long copy_delay_us, kernel_delay_us, ctx_overhead, cc_major, cc_minor;
} knob = {1, 12060, 4LL << 30, 1, 2 << 20, 1, 1LL << 30, 0, 0, 64 << 20, 8, 0};

typedef struct {
	void **v;
	int n, cap;
} vec;

static void vpush(vec *a, void *x) {
	if (a->n == a->cap) {
		a->cap = a->cap ? 2 * a->cap : 16;
		a->v = realloc(a->v, a->cap * sizeof(void *));
		if (!a->v)
			abort();
	}
	a->v[a->n++] = x;
}

static void vdel(vec *a, int i) { a->v[i] = a->v[--a->n]; }

static int vfind(vec *a, void *x) {
	for (int i = 0; i < a->n; i++)
		if (a->v[i] == x)
			return i;
	return -1;
}

typedef struct ctx_s {
	int dev;
	CUresult lost; /* a sticky error: every call in the context returns it */
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
	void *staging; /* freed after the copy */
	event_t *ev;
	unsigned long long seq;
	host_kernel fn;
	unsigned grid[3], block[3], shared;
	void *params[65];
	unsigned long long slots[64];
} op_t;

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
} function_t;

static int initialized;
static long long used;  /* device bytes in use, contexts' overhead included */
static long long pinned_used;
static long long launches, modules_loaded, image_bytes;
static long long host_syncs; /* calls that make the host wait for the device */
static long long freed_by_destroy; /* objects a context destroy had to free: what the caller left */
static unsigned long long next_handle = 0x100000;
static int memfd = -1;
static off_t memfd_end;
static vec ctxs, allocs, pinned, handles, resvs, maps, events, streams, modules, functions;
static __thread ctx_t *current;
static char fail_call[64];
static CUresult fail_result;
static void *kernels_lib;
static char kernels_path[4096];

static int sticky(CUresult r) {
	switch (r) {
	case CUDA_ERROR_DEINITIALIZED: case CUDA_ERROR_ECC_UNCORRECTABLE: case CUDA_ERROR_NVLINK_UNCORRECTABLE:
	case CUDA_ERROR_ILLEGAL_ADDRESS: case CUDA_ERROR_LAUNCH_TIMEOUT: case CUDA_ERROR_CONTEXT_IS_DESTROYED:
	case CUDA_ERROR_ASSERT: case CUDA_ERROR_HARDWARE_STACK_ERROR: case CUDA_ERROR_ILLEGAL_INSTRUCTION:
	case CUDA_ERROR_MISALIGNED_ADDRESS: case CUDA_ERROR_INVALID_ADDRESS_SPACE: case CUDA_ERROR_INVALID_PC:
	case CUDA_ERROR_LAUNCH_FAILED:
		return 1;
	}
	return 0;
}

static void lose_all(CUresult r) {
	for (int i = 0; i < ctxs.n; i++)
		((ctx_t *)ctxs.v[i])->lost = r;
}

/* enter checks, under mu, an injected failure, initialization and (if needctx) the
 * calling thread's current context. */
static CUresult enter(const char *name, int needctx) {
	if (fail_call[0] && strcmp(fail_call, name) == 0) {
		CUresult r = fail_result;
		fail_call[0] = 0;
		if (sticky(r))
			lose_all(r);
		return r;
	}
	if (!initialized)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!needctx)
		return CUDA_SUCCESS;
	if (!current || vfind(&ctxs, current) < 0)
		return CUDA_ERROR_INVALID_CONTEXT;
	return current->lost;
}

#define ENTER(name, needctx)                                                                                           \
	pthread_mutex_lock(&mu);                                                                                           \
	do {                                                                                                               \
		CUresult r_ = enter(name, needctx);                                                                            \
		if (r_ != CUDA_SUCCESS) {                                                                                      \
			pthread_mutex_unlock(&mu);                                                                                 \
			return r_;                                                                                                 \
		}                                                                                                              \
	} while (0)

static CUresult leave(CUresult r) {
	pthread_mutex_unlock(&mu);
	return r;
}

static void sleep_us(long long us) {
	if (us <= 0)
		return;
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
	nanosleep(&ts, NULL);
}

static size_t page_size(void) { return (size_t)sysconf(_SC_PAGESIZE); }

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

/* ---- Address checks ---- */

static region_t *region_at(vec *rs, uintptr_t p, size_t n) {
	for (int i = 0; i < rs->n; i++) {
		region_t *r = rs->v[i];
		if (p >= r->ptr && p + n <= r->ptr + r->size && p + n >= p)
			return r;
	}
	return NULL;
}

static map_t *map_containing(uintptr_t p) {
	for (int i = 0; i < maps.n; i++) {
		map_t *m = maps.v[i];
		if (p >= m->va && p < m->va + m->size)
			return m;
	}
	return NULL;
}

/* device_ok reports whether [p, p+n) is device memory the caller may read (or write):
 * inside one cuMemAlloc allocation, or covered without a hole by mappings with access. */
static int device_ok(uintptr_t p, size_t n, int write) {
	if (n == 0)
		return 1;
	if (p + n < p)
		return 0;
	if (region_at(&allocs, p, n))
		return 1;
	for (uintptr_t at = p; at < p + n;) {
		map_t *m = map_containing(at);
		if (!m || m->access == CU_MEM_ACCESS_FLAGS_PROT_NONE || (write && m->access != CU_MEM_ACCESS_FLAGS_PROT_READWRITE))
			return 0;
		at = m->va + m->size;
	}
	return 1;
}

/* ---- Streams ---- */

static void run_op(op_t *o, long long copy_delay, long long kernel_delay) {
	switch (o->kind) {
	case OP_COPY:
		sleep_us(copy_delay);
		memcpy(o->dst, o->src, o->n);
		free(o->staging);
		break;
	case OP_KERNEL:
		sleep_us(kernel_delay);
		o->fn(o->grid, o->block, o->shared, o->params);
		break;
	}
}

static void record_now(event_t *e, unsigned long long seq) {
	if (seq >= e->completed) {
		e->completed = seq;
		clock_gettime(CLOCK_MONOTONIC, &e->t);
	}
}

static void *worker(void *arg) {
	stream_t *s = arg;
	pthread_mutex_lock(&mu);
	for (;;) {
		while (!s->head && !s->quit)
			pthread_cond_wait(&cv, &mu);
		if (!s->head)
			break;
		op_t *o = s->head; /* stays queued while it runs: a stream is idle when its queue is empty */
		switch (o->kind) {
		case OP_RECORD:
			record_now(o->ev, o->seq);
			break;
		case OP_WAIT:
			while (o->ev->completed < o->seq && !s->ctx->lost)
				pthread_cond_wait(&cv, &mu);
			break;
		default: {
			long long cd = knob.copy_delay_us, kd = knob.kernel_delay_us;
			pthread_mutex_unlock(&mu);
			run_op(o, cd, kd);
			pthread_mutex_lock(&mu);
		}
		}
		s->head = o->next;
		if (!s->head)
			s->tail = NULL;
		s->done++;
		free(o);
		pthread_cond_broadcast(&cv);
	}
	pthread_mutex_unlock(&mu);
	return NULL;
}

static stream_t *stream_of(uintptr_t h) {
	int i = vfind(&streams, (void *)h);
	if (i < 0)
		return NULL;
	stream_t *s = streams.v[i];
	return s->ctx == current ? s : NULL;
}

/* enqueue queues o on s and returns its ticket: the stream's done count once it has run.
 * The legacy stream 0 is synchronous here: o runs at once on the calling thread. */
static unsigned long long enqueue(stream_t *s, op_t *o) {
	if (!s) {
		if (o->kind == OP_RECORD) {
			record_now(o->ev, o->seq);
		} else if (o->kind == OP_WAIT) {
			while (o->ev->completed < o->seq && !current->lost)
				pthread_cond_wait(&cv, &mu);
		} else {
			long long cd = knob.copy_delay_us, kd = knob.kernel_delay_us;
			pthread_mutex_unlock(&mu);
			run_op(o, cd, kd);
			pthread_mutex_lock(&mu);
		}
		free(o);
		return 0;
	}
	if (s->tail)
		s->tail->next = o;
	else
		s->head = o;
	s->tail = o;
	s->enq++;
	pthread_cond_broadcast(&cv);
	return s->enq;
}

static void wait_ticket(stream_t *s, unsigned long long ticket) {
	while (s && s->done < ticket)
		pthread_cond_wait(&cv, &mu);
}

static void drain(ctx_t *c) {
	for (int i = 0; i < streams.n; i++) {
		stream_t *s = streams.v[i];
		if (s->ctx == c)
			wait_ticket(s, s->enq);
	}
}

static op_t *new_op(int kind) {
	op_t *o = calloc(1, sizeof(op_t));
	if (!o)
		abort();
	o->kind = kind;
	return o;
}

/* stop_stream ends a stream's worker after its queue drains; called with mu held. */
static void stop_stream(stream_t *s) {
	s->quit = 1;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	pthread_join(s->th, NULL);
	pthread_mutex_lock(&mu);
	vdel(&streams, vfind(&streams, s));
	free(s);
}

/* ---- Control, for tests ---- */

static long long *knob_named(const char *key) {
	static const struct {
		const char *name;
		long long *p;
	} all[] = {
		{"devices", &knob.devices}, {"driver_version", &knob.driver_version}, {"memory", &knob.memory},
		{"vmm", &knob.vmm}, {"granularity", &knob.granularity}, {"pinned", &knob.pinned},
		{"pinned_limit", &knob.pinned_limit}, {"copy_delay_us", &knob.copy_delay_us},
		{"kernel_delay_us", &knob.kernel_delay_us}, {"ctx_overhead", &knob.ctx_overhead},
		{"cc_major", &knob.cc_major}, {"cc_minor", &knob.cc_minor},
	};
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		if (strcmp(all[i].name, key) == 0)
			return all[i].p;
	return NULL;
}

/* fakecuda_set sets a knob; "lose" loses every context with the given sticky result, as
 * a faulting kernel would. It returns -1 for an unknown key. */
int fakecuda_set(const char *key, long long v) {
	pthread_mutex_lock(&mu);
	int ret = 0;
	long long *p = knob_named(key);
	if (p)
		*p = v;
	else if (strcmp(key, "lose") == 0)
		lose_all((CUresult)v);
	else
		ret = -1;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	return ret;
}

/* fakecuda_get returns a knob or a counter of live objects; -1 for an unknown key. */
long long fakecuda_get(const char *key) {
	pthread_mutex_lock(&mu);
	long long v = -1;
	long long *p = knob_named(key);
	int live_handles = 0;
	for (int i = 0; i < handles.n; i++)
		live_handles += !((handle_t *)handles.v[i])->released;
	if (p)
		v = *p;
	else if (strcmp(key, "used") == 0)
		v = used;
	else if (strcmp(key, "allocs") == 0)
		v = allocs.n;
	else if (strcmp(key, "handles") == 0)
		v = live_handles;
	else if (strcmp(key, "handles_held") == 0) /* released but still mapped ones too */
		v = handles.n;
	else if (strcmp(key, "mappings") == 0)
		v = maps.n;
	else if (strcmp(key, "reservations") == 0)
		v = resvs.n;
	else if (strcmp(key, "pinned_bytes") == 0)
		v = pinned_used;
	else if (strcmp(key, "pinned_allocs") == 0)
		v = pinned.n;
	else if (strcmp(key, "streams") == 0)
		v = streams.n;
	else if (strcmp(key, "events") == 0)
		v = events.n;
	else if (strcmp(key, "modules") == 0)
		v = modules.n;
	else if (strcmp(key, "modules_loaded") == 0)
		v = modules_loaded;
	else if (strcmp(key, "image_bytes") == 0)
		v = image_bytes;
	else if (strcmp(key, "launches") == 0)
		v = launches;
	else if (strcmp(key, "contexts") == 0)
		v = ctxs.n;
	else if (strcmp(key, "host_syncs") == 0)
		v = host_syncs;
	else if (strcmp(key, "freed_by_destroy") == 0)
		v = freed_by_destroy;
	pthread_mutex_unlock(&mu);
	return v;
}

/* fakecuda_fail makes the next call of the named function return result, doing nothing. */
void fakecuda_fail(const char *call, int result) {
	pthread_mutex_lock(&mu);
	snprintf(fail_call, sizeof fail_call, "%s", call);
	fail_result = result;
	pthread_mutex_unlock(&mu);
}

/* fakecuda_layout gives sizes and offsets of the ABI structs as the C compiler lays them out. */
long long fakecuda_layout(const char *what) {
	static const struct {
		const char *name;
		long long v;
	} all[] = {
		{"CUmemAllocationProp", sizeof(CUmemAllocationProp)},
		{"CUmemAllocationProp.type", offsetof(CUmemAllocationProp, type)},
		{"CUmemAllocationProp.requestedHandleTypes", offsetof(CUmemAllocationProp, requestedHandleTypes)},
		{"CUmemAllocationProp.location", offsetof(CUmemAllocationProp, location)},
		{"CUmemAllocationProp.win32HandleMetaData", offsetof(CUmemAllocationProp, win32HandleMetaData)},
		{"CUmemAllocationProp.allocFlags", offsetof(CUmemAllocationProp, allocFlags)},
		{"CUmemAllocationProp.allocFlags.usage", offsetof(CUmemAllocationProp, allocFlags.usage)},
		{"CUmemLocation", sizeof(CUmemLocation)},
		{"CUmemLocation.id", offsetof(CUmemLocation, id)},
		{"CUmemAccessDesc", sizeof(CUmemAccessDesc)},
		{"CUmemAccessDesc.flags", offsetof(CUmemAccessDesc, flags)},
	};
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		if (strcmp(all[i].name, what) == 0)
			return all[i].v;
	return -1;
}

/* ---- Initialization, errors, devices ---- */

CUresult cuInit(unsigned int flags) {
	pthread_mutex_lock(&mu);
	if (fail_call[0] && strcmp(fail_call, "cuInit") == 0) {
		fail_call[0] = 0;
		return leave(fail_result);
	}
	if (flags != 0)
		return leave(CUDA_ERROR_INVALID_VALUE);
	if (knob.devices <= 0)
		return leave(CUDA_ERROR_NO_DEVICE);
	initialized = 1;
	return leave(CUDA_SUCCESS);
}

CUresult cuDriverGetVersion(int *v) {
	if (!v)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&mu);
	*v = (int)knob.driver_version;
	return leave(CUDA_SUCCESS);
}

static const struct {
	CUresult r;
	const char *name, *desc;
} errs[] = {
	{CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
	{CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
	{CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
	{CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
	{CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
	{CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
	{CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
	{CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
	{CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
	{CUDA_ERROR_ECC_UNCORRECTABLE, "CUDA_ERROR_ECC_UNCORRECTABLE", "uncorrectable ECC error encountered"},
	{CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
	{CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
	{CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
	{CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
	{CUDA_ERROR_LAUNCH_TIMEOUT, "CUDA_ERROR_LAUNCH_TIMEOUT", "the launch timed out and was terminated"},
	{CUDA_ERROR_CONTEXT_IS_DESTROYED, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "context is destroyed"},
	{CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
	{CUDA_ERROR_NOT_PERMITTED, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
	{CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
	{CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

static CUresult error_text(CUresult r, const char **s, int desc) {
	if (!s)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++)
		if (errs[i].r == r) {
			*s = desc ? errs[i].desc : errs[i].name;
			return CUDA_SUCCESS;
		}
	*s = NULL;
	return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorName(CUresult r, const char **s) { return error_text(r, s, 0); }
CUresult cuGetErrorString(CUresult r, const char **s) { return error_text(r, s, 1); }

CUresult cuDeviceGetCount(int *n) {
	ENTER("cuDeviceGetCount", 0);
	if (!n)
		return leave(CUDA_ERROR_INVALID_VALUE);
	*n = (int)knob.devices;
	return leave(CUDA_SUCCESS);
}

static int valid_device(CUdevice d) { return d >= 0 && d < knob.devices; }

CUresult cuDeviceGet(CUdevice *d, int ordinal) {
	ENTER("cuDeviceGet", 0);
	if (!d)
		return leave(CUDA_ERROR_INVALID_VALUE);
	if (!valid_device(ordinal))
		return leave(CUDA_ERROR_INVALID_DEVICE);
	*d = ordinal;
	return leave(CUDA_SUCCESS);
}

CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
	ENTER("cuDeviceGetName", 0);
	if (!name || len <= 0)
		return leave(CUDA_ERROR_INVALID_VALUE);
	if (!valid_device(d))
		return leave(CUDA_ERROR_INVALID_DEVICE);
	snprintf(name, len, "Fake CUDA Device %d (fakecuda)", d);
	return leave(CUDA_SUCCESS);
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d) {
	ENTER("cuDeviceTotalMem_v2", 0);
	if (!bytes)
		return leave(CUDA_ERROR_INVALID_VALUE);
	if (!valid_device(d))
		return leave(CUDA_ERROR_INVALID_DEVICE);
	*bytes = (size_t)knob.memory;
	return leave(CUDA_SUCCESS);
}

CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice d) {
	ENTER("cuDeviceGetAttribute", 0);
	if (!v || attr <= 0 || attr > 200)
		return leave(CUDA_ERROR_INVALID_VALUE);
	if (!valid_device(d))
		return leave(CUDA_ERROR_INVALID_DEVICE);
	switch (attr) {
	case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 4; break;
	case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: *v = 2; break;
	case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: *v = 1; break;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = (int)knob.cc_major; break;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = (int)knob.cc_minor; break;
	case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: *v = knob.vmm != 0; break;
	default: *v = 0;
	}
	return leave(CUDA_SUCCESS);
}

/* ---- Contexts ---- */

CUresult cuCtxCreate_v2(ctx_t **pctx, unsigned int flags, CUdevice d) {
	ENTER("cuCtxCreate_v2", 0);
	if (!pctx || flags > 0x3f)
		return leave(CUDA_ERROR_INVALID_VALUE);
	if (!valid_device(d))
		return leave(CUDA_ERROR_INVALID_DEVICE);
	if (used + knob.ctx_overhead > knob.memory)
		return leave(CUDA_ERROR_OUT_OF_MEMORY);
	ctx_t *c = calloc(1, sizeof(ctx_t));
	c->dev = d;
	vpush(&ctxs, c);
	used += knob.ctx_overhead;
	current = c;
	*pctx = c;
	return leave(CUDA_SUCCESS);
}

static void free_where(vec *a, ctx_t *c, void (*release)(void *)) {
	for (int i = a->n - 1; i >= 0; i--) {
		if (*(ctx_t **)a->v[i] == c) {
			void *x = a->v[i];
			vdel(a, i);
			freed_by_destroy++;
			if (release)
				release(x);
			free(x);
		}
	}
}

static void release_alloc(void *x) {
	region_t *r = x;
	munmap((void *)r->ptr, round_up(r->size, page_size()));
	used -= r->size;
}

static void release_pinned(void *x) {
	region_t *r = x;
	munmap((void *)r->ptr, round_up(r->size, page_size()));
	pinned_used -= r->size;
}

static void release_resv(void *x) {
	resv_t *r = x;
	for (int i = maps.n - 1; i >= 0; i--) {
		map_t *m = maps.v[i];
		if (m->va >= r->va && m->va < r->va + r->size) {
			m->h->mapped--;
			vdel(&maps, i);
			free(m);
		}
	}
	munmap((void *)r->va, r->size);
}

/* release_handle gives a handle's memory back: a released handle counts as used until
 * its last mapping goes, as the driver frees it only then. */
static void release_handle(void *x) {
	handle_t *h = x;
	fallocate(memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, h->off, h->size);
	used -= h->size;
}

static void release_module(void *x) { free(((module_t *)x)->image); }

CUresult cuCtxDestroy_v2(ctx_t *c) {
	pthread_mutex_lock(&mu);
	int i = vfind(&ctxs, c);
	if (!initialized || i < 0)
		return leave(CUDA_ERROR_INVALID_CONTEXT);
	for (int j = streams.n - 1; j >= 0; j--) {
		stream_t *s = streams.v[j];
		if (s->ctx == c) {
			freed_by_destroy++;
			stop_stream(s);
			j = streams.n; /* the list changed while mu was released */
		}
	}
	free_where(&resvs, c, release_resv); /* unmaps first, as the driver must */
	free_where(&handles, c, release_handle);
	free_where(&allocs, c, release_alloc);
	free_where(&pinned, c, release_pinned);
	free_where(&events, c, NULL);
	free_where(&modules, c, release_module);
	for (int j = functions.n - 1; j >= 0; j--)
		if (vfind(&modules, ((function_t *)functions.v[j])->mod) < 0) {
			free(functions.v[j]);
			vdel(&functions, j);
		}
	used -= knob.ctx_overhead;
	vdel(&ctxs, vfind(&ctxs, c));
	free(c);
	if (current == c)
		current = NULL;
	return leave(CUDA_SUCCESS);
}

CUresult cuCtxSetCurrent(ctx_t *c) {
	ENTER("cuCtxSetCurrent", 0);
	if (c && vfind(&ctxs, c) < 0)
		return leave(CUDA_ERROR_INVALID_CONTEXT);
	current = c;
	return leave(CUDA_SUCCESS);
}

CUresult cuCtxGetCurrent(ctx_t **pc) {
	ENTER("cuCtxGetCurrent", 0);
	if (!pc)
		return leave(CUDA_ERROR_INVALID_VALUE);
	*pc = current;
	return leave(CUDA_SUCCESS);
}

CUresult cuCtxSynchronize(void) {
	ENTER("cuCtxSynchronize", 1);
	host_syncs++;
	drain(current);
	return leave(current->lost);
}

/* ---- Memory: segments ---- */

CUresult cuMemGetInfo_v2(size_t *free_, size_t *total) {
	ENTER("cuMemGetInfo_v2", 1);
	if (!free_ || !total)
		return leave(CUDA_ERROR_INVALID_VALUE);
	*free_ = (size_t)(knob.memory - used);
	*total = (size_t)knob.memory;
	return leave(CUDA_SUCCESS);
}

static void *map_anon(size_t size) {
	void *p = mmap(NULL, round_up(size, page_size()), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t size) {
	ENTER("cuMemAlloc_v2", 1);
	if (!dptr || size == 0)
		return leave(CUDA_ERROR_INVALID_VALUE);
	if ((long long)size > knob.memory - used)
		return leave(CUDA_ERROR_OUT_OF_MEMORY);
	void *p = map_anon(size);
	if (!p)
		return leave(CUDA_ERROR_OUT_OF_MEMORY);
	region_t *r = calloc(1, sizeof(region_t));
	*r = (region_t){current, (uintptr_t)p, size};
	vpush(&allocs, r);
	used += size;
	*dptr = (CUdeviceptr)(uintptr_t)p;
	return leave(CUDA_SUCCESS);
}

static int region_index(vec *rs, uintptr_t p) {
	for (int i = 0; i < rs->n; i++)
		if (((region_t *)rs->v[i])->ptr == p && ((region_t *)rs->v[i])->ctx == current)
			return i;
	return -1;
}

CUresult cuMemFree_v2(CUdeviceptr dptr) {
	ENTER("cuMemFree_v2", 1);
	int i = region_index(&allocs, (uintptr_t)dptr);
	if (i < 0)
		return leave(CUDA_ERROR_INVALID_VALUE);
	drain(current); /* the driver synchronizes before freeing: queued work may still use it */
	i = region_index(&allocs, (uintptr_t)dptr);
	if (i < 0)
		return leave(CUDA_ERROR_INVALID_VALUE);
	region_t *r = allocs.v[i];
	vdel(&allocs, i);
	release_alloc(r);
	free(r);
	return leave(CUDA_SUCCESS);
}

/* ---- Memory: virtual memory management ---- */

static CUresult check_prop(const CUmemAllocationProp *p) {
	if (!knob.vmm)
		return CUDA_ERROR_NOT_SUPPORTED;
	if (!p || p->type != CU_MEM_ALLOCATION_TYPE_PINNED || p->requestedHandleTypes != 0 ||
	    p->location.type != CU_MEM_LOCATION_TYPE_DEVICE || p->win32HandleMetaData != NULL ||
	    p->allocFlags.compressionType != 0 || p->allocFlags.gpuDirectRDMACapable != 0 || p->allocFlags.usage != 0)
		return CUDA_ERROR_INVALID_VALUE;
	for (int i = 0; i < 4; i++)
		if (p->allocFlags.reserved[i])
			return CUDA_ERROR_INVALID_VALUE;
	if (!valid_device(p->location.id))
		return CUDA_ERROR_INVALID_DEVICE;
	return CUDA_SUCCESS;
}

CUresult cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *prop, int option) {
	ENTER("cuMemGetAllocationGranularity", 1);
	CUresult r = check_prop(prop);
	if (r != CUDA_SUCCESS)
		return leave(r);
	if (!g || (option != 0 && option != 1))
		return leave(CUDA_ERROR_INVALID_VALUE);
	*g = (size_t)knob.granularity;
	return leave(CUDA_SUCCESS);
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t size, const CUmemAllocationProp *prop, unsigned long long flags) {
	ENTER("cuMemCreate", 1);
	CUresult r = check_prop(prop);
	if (r != CUDA_SUCCESS)
		return leave(r);
	if (!h || flags != 0 || size == 0 || size % knob.granularity != 0)
		return leave(CUDA_ERROR_INVALID_VALUE);
	if ((long long)size > knob.memory - used)
		return leave(CUDA_ERROR_OUT_OF_MEMORY);
	if (memfd < 0 && (memfd = memfd_create("fakecuda-device-memory", MFD_CLOEXEC)) < 0)
		return leave(CUDA_ERROR_OUT_OF_MEMORY);
	if (ftruncate(memfd, memfd_end + (off_t)size) != 0)
		return leave(CUDA_ERROR_OUT_OF_MEMORY);
	handle_t *x = calloc(1, sizeof(handle_t));
	*x = (handle_t){current, next_handle++, size, memfd_end, 0, 0};
	memfd_end += (off_t)size; /* offsets are never reused: released stretches are punched out */
	vpush(&handles, x);
	used += size;
	*h = x->id;
	return leave(CUDA_SUCCESS);
}

static int handle_index(CUmemGenericAllocationHandle id) {
	for (int i = 0; i < handles.n; i++)
		if (((handle_t *)handles.v[i])->id == id)
			return i;
	return -1;
}

/* cuMemRelease of a mapped handle is legal (cuda.h: "The generic memory handle can be
 * freed when there are still outstanding mappings"): the memory goes at the last unmap. */
CUresult cuMemRelease(CUmemGenericAllocationHandle id) {
	ENTER("cuMemRelease", 1);
	int i = handle_index(id);
	if (i < 0 || ((handle_t *)handles.v[i])->released)
		return leave(CUDA_ERROR_INVALID_VALUE);
	handle_t *h = handles.v[i];
	h->released = 1;
	if (h->mapped == 0) {
		vdel(&handles, i);
		release_handle(h);
		free(h);
	}
	return leave(CUDA_SUCCESS);
}

CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr, unsigned long long flags) {
	ENTER("cuMemAddressReserve", 1);
	(void)addr; /* a hint: the driver may place the range elsewhere */
	if (!ptr || flags != 0 || size == 0 || size % page_size() != 0 || (alignment & (alignment - 1)) != 0)
		return leave(CUDA_ERROR_INVALID_VALUE);
	size_t align = alignment ? alignment : (size_t)knob.granularity;
	if (align < page_size())
		align = page_size();
	void *p = mmap(NULL, size + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return leave(CUDA_ERROR_OUT_OF_MEMORY);
	uintptr_t start = round_up((uintptr_t)p, align);
	if (start > (uintptr_t)p)
		munmap(p, start - (uintptr_t)p);
	if ((uintptr_t)p + align > start)
		munmap((void *)(start + size), (uintptr_t)p + align - start);
	resv_t *r = calloc(1, sizeof(resv_t));
	*r = (resv_t){current, start, size};
	vpush(&resvs, r);
	*ptr = (CUdeviceptr)start;
	return leave(CUDA_SUCCESS);
}

static resv_t *resv_containing(uintptr_t p, size_t n) {
	for (int i = 0; i < resvs.n; i++) {
		resv_t *r = resvs.v[i];
		if (p >= r->va && p + n <= r->va + r->size && p + n > p)
			return r;
	}
	return NULL;
}

/* The fake refuses to free a reservation with mappings in it; the header leaves that case
 * unspecified, and a real driver's behaviour there is not something to rely on. */
CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
	ENTER("cuMemAddressFree", 1);
	for (int i = 0; i < resvs.n; i++) {
		resv_t *r = resvs.v[i];
		if (r->va != ptr)
			continue;
		if (r->size != size)
			return leave(CUDA_ERROR_INVALID_VALUE);
		for (int j = 0; j < maps.n; j++)
			if (((map_t *)maps.v[j])->va >= r->va && ((map_t *)maps.v[j])->va < r->va + r->size)
				return leave(CUDA_ERROR_INVALID_VALUE);
		vdel(&resvs, i);
		munmap((void *)r->va, r->size);
		free(r);
		return leave(CUDA_SUCCESS);
	}
	return leave(CUDA_ERROR_INVALID_VALUE);
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle id, unsigned long long flags) {
	ENTER("cuMemMap", 1);
	size_t g = (size_t)knob.granularity;
	int i = handle_index(id);
	if (i < 0 || flags != 0 || offset != 0 || size == 0 || size % g != 0 || ptr % g != 0)
		return leave(CUDA_ERROR_INVALID_VALUE);
	handle_t *h = handles.v[i];
	if (h->released || size > h->size || !resv_containing(ptr, size))
		return leave(CUDA_ERROR_INVALID_VALUE);
	for (int j = 0; j < maps.n; j++) {
		map_t *m = maps.v[j];
		if (m->va < ptr + size && ptr < m->va + m->size)
			return leave(CUDA_ERROR_INVALID_VALUE); /* "can only create mappings on VA ranges that are not currently mapped" */
	}
	if (mmap((void *)ptr, size, PROT_NONE, MAP_SHARED | MAP_FIXED, memfd, h->off) == MAP_FAILED)
		return leave(CUDA_ERROR_OUT_OF_MEMORY);
	map_t *m = calloc(1, sizeof(map_t));
	*m = (map_t){ptr, size, h, CU_MEM_ACCESS_FLAGS_PROT_NONE};
	vpush(&maps, m);
	h->mapped++;
	return leave(CUDA_SUCCESS);
}

/* whole_maps reports whether [p, p+n) is covered, with no hole, by mappings that lie
 * entirely inside it, and calls f on each. */
static int whole_maps(uintptr_t p, size_t n, void (*f)(map_t *, void *), void *arg) {
	if (n == 0 || p + n < p)
		return 0;
	for (int j = 0; j < maps.n; j++) {
		map_t *m = maps.v[j];
		int overlaps = m->va < p + n && p < m->va + m->size;
		if (overlaps && (m->va < p || m->va + m->size > p + n))
			return 0;
	}
	for (uintptr_t at = p; at < p + n;) {
		map_t *m = map_containing(at);
		if (!m)
			return 0;
		at = m->va + m->size;
	}
	if (f)
		for (int j = maps.n - 1; j >= 0; j--) {
			map_t *m = maps.v[j];
			if (m->va >= p && m->va < p + n)
				f(m, arg);
		}
	return 1;
}

static void set_access(map_t *m, void *arg) { m->access = *(int *)arg; }

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count) {
	ENTER("cuMemSetAccess", 1);
	if (!desc || count == 0 || ptr % knob.granularity != 0 || size % knob.granularity != 0)
		return leave(CUDA_ERROR_INVALID_VALUE);
	int flags = -1;
	for (size_t k = 0; k < count; k++) {
		if (desc[k].location.type != CU_MEM_LOCATION_TYPE_DEVICE)
			return leave(CUDA_ERROR_INVALID_VALUE);
		if (!valid_device(desc[k].location.id))
			return leave(CUDA_ERROR_INVALID_DEVICE);
		if (desc[k].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE && desc[k].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
		    desc[k].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
			return leave(CUDA_ERROR_INVALID_VALUE);
		if (desc[k].location.id == current->dev)
			flags = desc[k].flags;
	}
	if (!whole_maps(ptr, size, NULL, NULL))
		return leave(CUDA_ERROR_INVALID_VALUE); /* "must be a fully mapped address range" */
	if (flags < 0)
		return leave(CUDA_SUCCESS); /* other devices only: nothing this one sees changes */
	int prot = flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE ? PROT_READ | PROT_WRITE
	           : flags == CU_MEM_ACCESS_FLAGS_PROT_READ    ? PROT_READ
	                                                       : PROT_NONE;
	if (mprotect((void *)ptr, size, prot) != 0)
		return leave(CUDA_ERROR_INVALID_VALUE);
	whole_maps(ptr, size, set_access, &flags);
	return leave(CUDA_SUCCESS);
}

static void drop_map(map_t *m, void *arg) {
	(void)arg;
	handle_t *h = m->h;
	vdel(&maps, vfind(&maps, m));
	free(m);
	if (--h->mapped == 0 && h->released) {
		vdel(&handles, vfind(&handles, h));
		release_handle(h);
		free(h);
	}
}

/* cuMemUnmap "cannot unmap a sub-range of an address range mapped by cuMemCreate /
 * cuMemMap": the span must consist of whole mappings. */
CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
	ENTER("cuMemUnmap", 1);
	if (!whole_maps(ptr, size, NULL, NULL))
		return leave(CUDA_ERROR_INVALID_VALUE);
	drain(current); /* synchronous, as the header notes: queued work may use the memory */
	if (!whole_maps(ptr, size, NULL, NULL))
		return leave(CUDA_ERROR_INVALID_VALUE);
	if (mmap((void *)ptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) == MAP_FAILED)
		return leave(CUDA_ERROR_INVALID_VALUE);
	whole_maps(ptr, size, drop_map, NULL);
	return leave(CUDA_SUCCESS);
}

/* ---- Pinned host memory ---- */

CUresult cuMemHostAlloc(void **pp, size_t size, unsigned int flags) {
	ENTER("cuMemHostAlloc", 1);
	if (!pp || size == 0 || (flags & ~7u) != 0)
		return leave(CUDA_ERROR_INVALID_VALUE);
	if (!knob.pinned || (long long)size > knob.pinned_limit - pinned_used)
		return leave(CUDA_ERROR_OUT_OF_MEMORY);
	void *p = map_anon(size);
	if (!p)
		return leave(CUDA_ERROR_OUT_OF_MEMORY);
	region_t *r = calloc(1, sizeof(region_t));
	*r = (region_t){current, (uintptr_t)p, size};
	vpush(&pinned, r);
	pinned_used += size;
	*pp = p;
	return leave(CUDA_SUCCESS);
}

CUresult cuMemFreeHost(void *p) {
	ENTER("cuMemFreeHost", 1);
	int i = region_index(&pinned, (uintptr_t)p);
	if (i < 0)
		return leave(CUDA_ERROR_INVALID_VALUE);
	drain(current);
	i = region_index(&pinned, (uintptr_t)p);
	if (i < 0)
		return leave(CUDA_ERROR_INVALID_VALUE);
	region_t *r = pinned.v[i];
	vdel(&pinned, i);
	release_pinned(r);
	free(r);
	return leave(CUDA_SUCCESS);
}

/* ---- Copies ---- */

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
	ENTER("cuMemcpyHtoD_v2", 1);
	if (!device_ok(dst, n, 1) || (n && !src))
		return leave(CUDA_ERROR_INVALID_VALUE);
	memcpy((void *)dst, src, n);
	return leave(CUDA_SUCCESS);
}

CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
	ENTER("cuMemcpyDtoH_v2", 1);
	if (!device_ok(src, n, 0) || (n && !dst))
		return leave(CUDA_ERROR_INVALID_VALUE);
	memcpy(dst, (const void *)src, n);
	return leave(CUDA_SUCCESS);
}

/* Copies from pageable memory are staged at the call, as the driver stages them, so the
 * caller may reuse its buffer at once; copies to pageable memory return when done. Copies
 * to and from pinned memory are asynchronous: the buffer belongs to the stream until then. */
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, uintptr_t hs) {
	ENTER("cuMemcpyHtoDAsync_v2", 1);
	stream_t *s = stream_of(hs);
	if ((hs && !s) || !device_ok(dst, n, 1) || (n && !src))
		return leave(CUDA_ERROR_INVALID_VALUE);
	op_t *o = new_op(OP_COPY);
	o->dst = (void *)dst;
	o->src = src;
	o->n = n;
	if (!region_at(&pinned, (uintptr_t)src, n)) {
		o->staging = malloc(n ? n : 1);
		memcpy(o->staging, src, n);
		o->src = o->staging;
	}
	enqueue(s, o);
	return leave(CUDA_SUCCESS);
}

CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, uintptr_t hs) {
	ENTER("cuMemcpyDtoHAsync_v2", 1);
	stream_t *s = stream_of(hs);
	if ((hs && !s) || !device_ok(src, n, 0) || (n && !dst))
		return leave(CUDA_ERROR_INVALID_VALUE);
	op_t *o = new_op(OP_COPY);
	o->dst = dst;
	o->src = (const void *)src;
	o->n = n;
	int pageable = !region_at(&pinned, (uintptr_t)dst, n);
	unsigned long long ticket = enqueue(s, o);
	if (pageable)
		wait_ticket(s, ticket);
	return leave(CUDA_SUCCESS);
}

/* ---- Streams and events ---- */

CUresult cuStreamCreate(uintptr_t *ph, unsigned int flags) {
	ENTER("cuStreamCreate", 1);
	if (!ph || flags > 1)
		return leave(CUDA_ERROR_INVALID_VALUE);
	stream_t *s = calloc(1, sizeof(stream_t));
	s->ctx = current;
	if (pthread_create(&s->th, NULL, worker, s) != 0) {
		free(s);
		return leave(CUDA_ERROR_OUT_OF_MEMORY);
	}
	vpush(&streams, s);
	*ph = (uintptr_t)s;
	return leave(CUDA_SUCCESS);
}

CUresult cuStreamDestroy_v2(uintptr_t h) {
	ENTER("cuStreamDestroy_v2", 1);
	stream_t *s = stream_of(h);
	if (!s)
		return leave(CUDA_ERROR_INVALID_HANDLE);
	stop_stream(s);
	return leave(CUDA_SUCCESS);
}

CUresult cuStreamSynchronize(uintptr_t h) {
	ENTER("cuStreamSynchronize", 1);
	host_syncs++;
	stream_t *s = stream_of(h);
	if (h && !s)
		return leave(CUDA_ERROR_INVALID_HANDLE);
	if (s)
		wait_ticket(s, s->enq);
	return leave(current->lost);
}

CUresult cuStreamQuery(uintptr_t h) {
	ENTER("cuStreamQuery", 1);
	stream_t *s = stream_of(h);
	if (h && !s)
		return leave(CUDA_ERROR_INVALID_HANDLE);
	return leave(s && s->done < s->enq ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS);
}

static event_t *event_of(uintptr_t h) {
	int i = vfind(&events, (void *)h);
	if (i < 0)
		return NULL;
	event_t *e = events.v[i];
	return e->ctx == current ? e : NULL;
}

CUresult cuEventCreate(uintptr_t *ph, unsigned int flags) {
	ENTER("cuEventCreate", 1);
	if (!ph || (flags & ~7u) != 0)
		return leave(CUDA_ERROR_INVALID_VALUE);
	event_t *e = calloc(1, sizeof(event_t));
	e->ctx = current;
	e->flags = flags;
	vpush(&events, e);
	*ph = (uintptr_t)e;
	return leave(CUDA_SUCCESS);
}

/* Destroying an event with work still queued on it would leave the workers a dangling
 * pointer: the fake waits for the event's streams instead, which the driver need not. */
CUresult cuEventDestroy_v2(uintptr_t h) {
	ENTER("cuEventDestroy_v2", 1);
	event_t *e = event_of(h);
	if (!e)
		return leave(CUDA_ERROR_INVALID_HANDLE);
	drain(current);
	vdel(&events, vfind(&events, e));
	free(e);
	return leave(CUDA_SUCCESS);
}

CUresult cuEventRecord(uintptr_t he, uintptr_t hs) {
	ENTER("cuEventRecord", 1);
	event_t *e = event_of(he);
	stream_t *s = stream_of(hs);
	if (!e || (hs && !s))
		return leave(CUDA_ERROR_INVALID_HANDLE);
	op_t *o = new_op(OP_RECORD);
	o->ev = e;
	o->seq = ++e->recorded;
	enqueue(s, o);
	return leave(CUDA_SUCCESS);
}

CUresult cuStreamWaitEvent(uintptr_t hs, uintptr_t he, unsigned int flags) {
	ENTER("cuStreamWaitEvent", 1);
	event_t *e = event_of(he);
	stream_t *s = stream_of(hs);
	if (!e || (hs && !s))
		return leave(CUDA_ERROR_INVALID_HANDLE);
	if (flags != 0)
		return leave(CUDA_ERROR_INVALID_VALUE);
	if (e->recorded == 0)
		return leave(CUDA_SUCCESS); /* an event never recorded is complete */
	op_t *o = new_op(OP_WAIT);
	o->ev = e;
	o->seq = e->recorded;
	enqueue(s, o);
	return leave(CUDA_SUCCESS);
}

CUresult cuEventQuery(uintptr_t h) {
	ENTER("cuEventQuery", 1);
	event_t *e = event_of(h);
	if (!e)
		return leave(CUDA_ERROR_INVALID_HANDLE);
	return leave(e->completed >= e->recorded ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY);
}

CUresult cuEventSynchronize(uintptr_t h) {
	ENTER("cuEventSynchronize", 1);
	host_syncs++;
	event_t *e = event_of(h);
	if (!e)
		return leave(CUDA_ERROR_INVALID_HANDLE);
	unsigned long long target = e->recorded;
	ctx_t *c = current;
	while (e->completed < target && !c->lost)
		pthread_cond_wait(&cv, &mu);
	return leave(c->lost);
}

CUresult cuEventElapsedTime(float *ms, uintptr_t hstart, uintptr_t hend) {
	ENTER("cuEventElapsedTime", 1);
	event_t *a = event_of(hstart), *b = event_of(hend);
	if (!ms || !a || !b || (a->flags & CU_EVENT_DISABLE_TIMING) || (b->flags & CU_EVENT_DISABLE_TIMING) ||
	    a->recorded == 0 || b->recorded == 0)
		return leave(CUDA_ERROR_INVALID_HANDLE);
	if (a->completed < a->recorded || b->completed < b->recorded)
		return leave(CUDA_ERROR_NOT_READY);
	*ms = (float)((b->t.tv_sec - a->t.tv_sec) * 1e3 + (b->t.tv_nsec - a->t.tv_nsec) / 1e6);
	return leave(CUDA_SUCCESS);
}

/* ---- Modules and kernels ---- */

/* cuModuleLoadData records the image and accepts it as it is: the fake does not parse PTX
 * or cubins. Kernels come from the host library named by OOC_FAKECUDA_KERNELS. */
CUresult cuModuleLoadData(module_t **pm, const void *image) {
	ENTER("cuModuleLoadData", 1);
	if (!pm || !image)
		return leave(CUDA_ERROR_INVALID_VALUE);
	module_t *m = calloc(1, sizeof(module_t));
	m->ctx = current;
	m->size = strnlen(image, 64 << 20);
	m->image = malloc(m->size + 1);
	memcpy(m->image, image, m->size);
	m->image[m->size] = 0;
	vpush(&modules, m);
	modules_loaded++;
	image_bytes = (long long)m->size;
	*pm = m;
	return leave(CUDA_SUCCESS);
}

CUresult cuModuleUnload(module_t *m) {
	ENTER("cuModuleUnload", 1);
	int i = vfind(&modules, m);
	if (i < 0 || m->ctx != current)
		return leave(CUDA_ERROR_INVALID_HANDLE);
	drain(current);
	vdel(&modules, i);
	for (int j = functions.n - 1; j >= 0; j--)
		if (((function_t *)functions.v[j])->mod == m) {
			free(functions.v[j]);
			vdel(&functions, j);
		}
	release_module(m);
	free(m);
	return leave(CUDA_SUCCESS);
}

CUresult cuModuleGetFunction(function_t **pf, module_t *m, const char *name) {
	ENTER("cuModuleGetFunction", 1);
	if (!pf || !name)
		return leave(CUDA_ERROR_INVALID_VALUE);
	if (vfind(&modules, m) < 0 || m->ctx != current)
		return leave(CUDA_ERROR_INVALID_HANDLE);
	const char *path = getenv("OOC_FAKECUDA_KERNELS");
	if (!path || !*path)
		return leave(CUDA_ERROR_NOT_FOUND);
	if (!kernels_lib || strcmp(path, kernels_path) != 0) {
		void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
		if (!lib)
			return leave(CUDA_ERROR_NOT_FOUND);
		kernels_lib = lib; /* never closed: functions of earlier libraries may still be queued */
		snprintf(kernels_path, sizeof kernels_path, "%s", path);
	}
	char sym[512];
	snprintf(sym, sizeof sym, "ooc_host_%s", name);
	host_kernel fn = (host_kernel)dlsym(kernels_lib, sym);
	if (!fn)
		return leave(CUDA_ERROR_NOT_FOUND);
	function_t *f = calloc(1, sizeof(function_t));
	*f = (function_t){m, fn};
	vpush(&functions, f);
	*pf = f;
	return leave(CUDA_SUCCESS);
}

/* cuLaunchKernel copies the arguments at the call, as the driver does. The driver knows
 * each parameter's size from the kernel image; the fake does not, so it reads 8 bytes per
 * argument, up to a NULL entry: package cuda terminates kernelParams with NULL and gives
 * every argument an 8-byte slot. */
CUresult cuLaunchKernel(function_t *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, uintptr_t hs, void **params, void **extra) {
	ENTER("cuLaunchKernel", 1);
	stream_t *s = stream_of(hs);
	if (vfind(&functions, f) < 0 || (hs && !s))
		return leave(CUDA_ERROR_INVALID_HANDLE);
	if (!gx || !gy || !gz || !bx || !by || !bz || (unsigned long long)bx * by * bz > 1024)
		return leave(CUDA_ERROR_INVALID_VALUE);
	if (extra)
		return leave(CUDA_ERROR_NOT_SUPPORTED);
	op_t *o = new_op(OP_KERNEL);
	o->fn = f->fn;
	o->grid[0] = gx, o->grid[1] = gy, o->grid[2] = gz;
	o->block[0] = bx, o->block[1] = by, o->block[2] = bz;
	o->shared = shared;
	for (int i = 0; params && params[i]; i++) {
		if (i == 64) {
			free(o);
			return leave(CUDA_ERROR_INVALID_VALUE);
		}
		memcpy(&o->slots[i], params[i], 8);
		o->params[i] = &o->slots[i];
	}
	launches++;
	enqueue(s, o);
	return leave(CUDA_SUCCESS);
}
