/* state.c: the fake driver's state, its controls for tests, initialization, error strings,
 * devices and contexts. See fakecuda.h. */
#include "fakecuda.h"

pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

struct knobs knob = {1, 12060, 4LL << 30, 1, 2 << 20, 1, 1LL << 30, 0, 0, 64 << 20, 8, 0, 0};

int initialized;
long long used, pinned_used, launches, modules_loaded, image_bytes, host_syncs, freed_by_destroy;
unsigned long long next_handle = 0x100000;
int memfd = -1;
off_t memfd_end;
vec ctxs, allocs, pinned, handles, resvs, maps, events, streams, modules, functions, legacy;
unsigned long long op_seq;
static long long primary_retains; /* retains ever */
__thread ctx_t *current;

/* Injected failures: rule i makes calls of fails[i].call, after skipping fails[i].after of
 * them, return fails[i].result, fails[i].times times (forever when negative). */
static struct fail_rule {
	char call[64];
	CUresult result;
	long long after, times;
} fails[16];

/* injected returns the failure injected into this call of name, or CUDA_SUCCESS. */
static CUresult injected(const char *name) {
	for (size_t i = 0; i < sizeof fails / sizeof fails[0]; i++) {
		struct fail_rule *f = &fails[i];
		if (!f->call[0] || strcmp(f->call, name) != 0)
			continue;
		if (f->after > 0) {
			f->after--;
			return CUDA_SUCCESS;
		}
		CUresult r = f->result;
		if (f->times > 0 && --f->times == 0)
			f->call[0] = 0;
		return r;
	}
	return CUDA_SUCCESS;
}

void vpush(vec *a, void *x) {
	if (a->n == a->cap) {
		a->cap = a->cap ? 2 * a->cap : 16;
		a->v = realloc(a->v, a->cap * sizeof(void *));
		if (!a->v)
			abort();
	}
	a->v[a->n++] = x;
}

void vdel(vec *a, int i) { a->v[i] = a->v[--a->n]; }

int vfind(vec *a, void *x) {
	for (int i = 0; i < a->n; i++)
		if (a->v[i] == x)
			return i;
	return -1;
}

static int sticky(CUresult r) {
	switch (r) {
	case CUDA_ERROR_DEINITIALIZED: case CUDA_ERROR_ECC_UNCORRECTABLE: case CUDA_ERROR_NVLINK_UNCORRECTABLE:
	case CUDA_ERROR_ILLEGAL_ADDRESS: case CUDA_ERROR_LAUNCH_TIMEOUT: case CUDA_ERROR_CONTEXT_IS_DESTROYED:
	case CUDA_ERROR_ASSERT: case CUDA_ERROR_HARDWARE_STACK_ERROR: case CUDA_ERROR_ILLEGAL_INSTRUCTION:
	case CUDA_ERROR_MISALIGNED_ADDRESS: case CUDA_ERROR_INVALID_ADDRESS_SPACE: case CUDA_ERROR_INVALID_PC:
	case CUDA_ERROR_LAUNCH_FAILED: case CUDA_ERROR_CONTAINED: case CUDA_ERROR_TENSOR_MEMORY_LEAK:
	case CUDA_ERROR_MPS_CLIENT_TERMINATED: case CUDA_ERROR_EXTERNAL_DEVICE:
		return 1;
	}
	return 0;
}

static void lose_all(CUresult r) {
	for (int i = 0; i < ctxs.n; i++)
		((ctx_t *)ctxs.v[i])->lost = r;
}

CUresult enter(const char *name, int needctx) {
	CUresult r = injected(name);
	if (r != CUDA_SUCCESS) {
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

CUresult leave(CUresult r) {
	pthread_mutex_unlock(&mu);
	return r;
}

size_t page_size(void) { return (size_t)sysconf(_SC_PAGESIZE); }

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }
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
		{"cc_major", &knob.cc_major}, {"cc_minor", &knob.cc_minor}, {"hold", &knob.hold},
		{"trace", &knob.trace}, {"watch_lo", &knob.watch_lo}, {"watch_hi", &knob.watch_hi},
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
	if (p == &knob.trace)
		trace_reset(); /* each start of a trace begins a new log */
	else if (!p && strcmp(key, "lose") == 0)
		lose_all((CUresult)v);
	else if (!p)
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
	else if (strcmp(key, "primary_retains") == 0)
		v = primary_retains;
	else if (strcmp(key, "host_syncs") == 0)
		v = host_syncs;
	else if (strcmp(key, "freed_by_destroy") == 0)
		v = freed_by_destroy;
	pthread_mutex_unlock(&mu);
	return v;
}

/* fakecuda_fail_at makes calls of the named function return result, doing nothing: after
 * the next `after` calls succeed, `times` calls fail (every later one when times < 0; times
 * 0 removes the rule). A new rule for a function replaces its old one. It returns -1 when
 * no rule is free. */
int fakecuda_fail_at(const char *call, int result, long long after, long long times) {
	pthread_mutex_lock(&mu);
	struct fail_rule *free_rule = NULL, *rule = NULL;
	for (size_t i = 0; i < sizeof fails / sizeof fails[0]; i++) {
		if (fails[i].call[0] && strcmp(fails[i].call, call) == 0)
			rule = &fails[i];
		else if (!fails[i].call[0] && !free_rule)
			free_rule = &fails[i];
	}
	if (!rule)
		rule = free_rule;
	int ret = 0;
	if (!rule)
		ret = -1;
	else if (times == 0)
		rule->call[0] = 0;
	else {
		snprintf(rule->call, sizeof rule->call, "%s", call);
		rule->result = result;
		rule->after = after;
		rule->times = times;
	}
	pthread_mutex_unlock(&mu);
	return ret;
}

/* fakecuda_fail makes the next call of the named function return result, doing nothing. */
void fakecuda_fail(const char *call, int result) { fakecuda_fail_at(call, result, 0, 1); }

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
	CUresult r = injected("cuInit");
	if (r != CUDA_SUCCESS)
		return leave(r);
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
	{CUDA_ERROR_CONTAINED, "CUDA_ERROR_CONTAINED",
	 "Invalid access of peer GPU memory over nvlink or a hardware error"},
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

int valid_device(CUdevice d) { return d >= 0 && d < knob.devices; }

/* device_arg checks a device query's output pointer and device. */
static CUresult device_arg(const void *out, CUdevice d) {
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	return valid_device(d) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

CUresult cuDeviceGet(CUdevice *d, int ordinal) {
	ENTER("cuDeviceGet", 0);
	CUresult r = device_arg(d, ordinal);
	if (r == CUDA_SUCCESS)
		*d = ordinal;
	return leave(r);
}

CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
	ENTER("cuDeviceGetName", 0);
	CUresult r = device_arg(len > 0 ? name : NULL, d);
	if (r == CUDA_SUCCESS)
		snprintf(name, len, "Fake CUDA Device %d (fakecuda)", d);
	return leave(r);
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d) {
	ENTER("cuDeviceTotalMem_v2", 0);
	CUresult r = device_arg(bytes, d);
	if (r == CUDA_SUCCESS)
		*bytes = (size_t)knob.memory;
	return leave(r);
}

CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice d) {
	ENTER("cuDeviceGetAttribute", 0);
	CUresult r = device_arg(attr > 0 && attr <= 200 ? v : NULL, d);
	if (r != CUDA_SUCCESS)
		return leave(r);
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
	c->flags = flags;
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

/* destroy_ctx frees a context and everything left in it; called with mu held. */
static void destroy_ctx(ctx_t *c) {
	land_legacy(c, ~0ULL);
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
}

CUresult cuCtxDestroy_v2(ctx_t *c) {
	pthread_mutex_lock(&mu);
	int i = vfind(&ctxs, c);
	if (!initialized || i < 0 || c->primary)
		return leave(CUDA_ERROR_INVALID_CONTEXT); /* a primary context is released, not destroyed */
	destroy_ctx(c);
	return leave(CUDA_SUCCESS);
}

/* ---- Primary contexts ---- */

#define MAX_DEVICES 16
static ctx_t *primaries[MAX_DEVICES];
static int primary_refs[MAX_DEVICES];
static unsigned primary_flags[MAX_DEVICES];

static CUresult primary_device(CUdevice d) {
	if (!initialized)
		return CUDA_ERROR_NOT_INITIALIZED;
	return valid_device(d) && d < MAX_DEVICES ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

CUresult cuDevicePrimaryCtxRetain(ctx_t **pctx, CUdevice d) {
	ENTER("cuDevicePrimaryCtxRetain", 0);
	CUresult r = primary_device(d);
	if (r != CUDA_SUCCESS || !pctx)
		return leave(r != CUDA_SUCCESS ? r : CUDA_ERROR_INVALID_VALUE);
	if (!primaries[d]) {
		if (used + knob.ctx_overhead > knob.memory)
			return leave(CUDA_ERROR_OUT_OF_MEMORY);
		ctx_t *c = calloc(1, sizeof(ctx_t));
		*c = (ctx_t){d, CUDA_SUCCESS, 1, primary_flags[d]};
		vpush(&ctxs, c);
		used += knob.ctx_overhead;
		primaries[d] = c;
	}
	primary_refs[d]++;
	primary_retains++;
	*pctx = primaries[d];
	return leave(CUDA_SUCCESS);
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
	ENTER("cuDevicePrimaryCtxRelease_v2", 0);
	CUresult r = primary_device(d);
	if (r != CUDA_SUCCESS)
		return leave(r);
	if (!primaries[d] || primary_refs[d] == 0)
		return leave(CUDA_ERROR_INVALID_CONTEXT);
	if (--primary_refs[d] == 0) {
		destroy_ctx(primaries[d]);
		primaries[d] = NULL;
	}
	return leave(CUDA_SUCCESS);
}

CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice d, unsigned flags) {
	ENTER("cuDevicePrimaryCtxSetFlags_v2", 0);
	CUresult r = primary_device(d);
	if (r != CUDA_SUCCESS)
		return leave(r);
	if (flags > 0x3f || (flags & 0x7) == 0x3 || (flags & 0x7) > 0x4)
		return leave(CUDA_ERROR_INVALID_VALUE); /* one scheduling policy: AUTO, SPIN, YIELD or BLOCKING_SYNC */
	primary_flags[d] = flags;
	if (primaries[d])
		primaries[d]->flags = flags;
	return leave(CUDA_SUCCESS);
}

CUresult cuDevicePrimaryCtxGetState(CUdevice d, unsigned *flags, int *active) {
	ENTER("cuDevicePrimaryCtxGetState", 0);
	CUresult r = primary_device(d);
	if (r != CUDA_SUCCESS || !flags || !active)
		return leave(r != CUDA_SUCCESS ? r : CUDA_ERROR_INVALID_VALUE);
	*flags = primary_flags[d];
	*active = primaries[d] != NULL;
	return leave(CUDA_SUCCESS);
}

CUresult cuCtxGetDevice(CUdevice *d) {
	ENTER("cuCtxGetDevice", 1);
	if (!d)
		return leave(CUDA_ERROR_INVALID_VALUE);
	*d = current->dev;
	return leave(CUDA_SUCCESS);
}

CUresult cuCtxGetFlags(unsigned *flags) {
	ENTER("cuCtxGetFlags", 1);
	if (!flags)
		return leave(CUDA_ERROR_INVALID_VALUE);
	*flags = current->flags;
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
	land_legacy(current, ~0ULL);
	drain(current);
	return leave(current->lost);
}
