/* streams.c: streams as worker threads, asynchronous copies, events, modules and kernel
 * launches. */
#include "fakecuda.h"

static void *kernels_lib;
static char kernels_path[4096];

static void sleep_us(long long us) {
	if (us <= 0)
		return;
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
	nanosleep(&ts, NULL);
}

/* ---- Streams ---- */

static void run_op(op_t *o) {
	switch (o->kind) {
	case OP_COPY:
		memcpy(o->dst, o->src, o->n);
		break;
	case OP_KERNEL:
		o->fn(o->grid, o->block, o->shared, o->params);
		break;
	}
}

/* run_checked runs a copy or kernel on a stream's worker, with mu held: after its delay,
 * unless memory it touches went meanwhile (o->fault, which loses the context as the fault
 * would on the GPU) or the context is lost (a lost context runs nothing more). */
static void run_checked(stream_t *s, op_t *o) {
	long long delay = o->kind == OP_COPY ? knob.copy_delay_us : knob.kernel_delay_us;
	pthread_mutex_unlock(&mu);
	sleep_us(delay);
	pthread_mutex_lock(&mu);
	if (o->fault && !s->ctx->lost)
		s->ctx->lost = o->fault;
	if (!s->ctx->lost) {
		o->running = 1;
		pthread_mutex_unlock(&mu);
		run_op(o);
		pthread_mutex_lock(&mu);
		o->running = 0;
	}
	free(o->staging);
}

/* touches reports whether op o reads or writes [p, p+n): a copy by its device side, a
 * kernel by any pointer argument inside it (8-byte arguments when the sizes are known). */
static int touches(const op_t *o, uintptr_t p, size_t n) {
	if (o->kind == OP_COPY)
		return o->dev < p + n && p < o->dev + o->n;
	if (o->kind != OP_KERNEL)
		return 0;
	for (int i = 0; i < 64 && o->params[i]; i++) {
		if (o->sizes && o->sizes[i] != 8)
			continue;
		uintptr_t v = (uintptr_t)*(const unsigned long long *)o->params[i];
		if (v >= p && v < p + n)
			return 1;
	}
	return 0;
}

/* doom marks every copy and kernel queued in context c that touches [p, p+n), which is
 * about to be unmapped or freed, to fault when its stream reaches it, and waits for those
 * running now (their host memory must not go from under them). Called with mu held. */
void doom(ctx_t *c, uintptr_t p, size_t n) {
	land_legacy(c, ~0ULL); /* the driver orders a free after the legacy stream's copies */
	for (;;) {
		int running = 0;
		for (int i = 0; i < streams.n; i++) {
			stream_t *s = streams.v[i];
			if (s->ctx != c)
				continue;
			for (op_t *o = s->head; o; o = o->next) {
				if (!touches(o, p, n))
					continue;
				if (o->running)
					running = 1;
				else if (!o->fault)
					o->fault = CUDA_ERROR_ILLEGAL_ADDRESS;
			}
		}
		if (!running)
			return;
		pthread_cond_wait(&cv, &mu);
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
		while ((!s->head || knob.hold == (long long)(uintptr_t)s) && !s->quit)
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
		default:
			run_checked(s, o);
			land_legacy(s->ctx, o->issued);
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
	o->issued = ++op_seq;
	if (!s) {
		land_legacy(current, ~0ULL);
		if (o->kind == OP_RECORD) {
			record_now(o->ev, o->seq);
		} else if (o->kind == OP_WAIT) {
			while (o->ev->completed < o->seq && !current->lost)
				pthread_cond_wait(&cv, &mu);
		} else {
			long long delay = o->kind == OP_COPY ? knob.copy_delay_us : knob.kernel_delay_us;
			pthread_mutex_unlock(&mu);
			sleep_us(delay);
			run_op(o);
			pthread_mutex_lock(&mu);
			free(o->staging);
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

void drain(ctx_t *c) {
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
void stop_stream(stream_t *s) {
	s->quit = 1;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	pthread_join(s->th, NULL);
	pthread_mutex_lock(&mu);
	vdel(&streams, vfind(&streams, s));
	free(s);
}
/* ---- Asynchronous copies ---- */

/* copy_async queues a copy between host memory and device memory at dev (written if
 * to_device). Copies from pageable memory are staged at the call, as the driver stages
 * them, so the caller may reuse its buffer at once; copies to pageable memory return when
 * done. Copies to and from pinned memory are asynchronous: the buffer belongs to the
 * stream until then. */
static CUresult copy_async(void *dst, const void *src, size_t n, uintptr_t dev, int to_device, uintptr_t hs) {
	stream_t *s = stream_of(hs);
	if ((hs && !s) || !device_ok(dev, n, to_device) || (n && (!dst || !src)))
		return CUDA_ERROR_INVALID_VALUE;
	op_t *o = new_op(OP_COPY);
	o->dst = dst;
	o->src = src;
	o->n = n;
	o->dev = dev;
	trace_op(to_device ? TRACE_HTOD : TRACE_DTOH, hs, NULL, 0, dev, n, 0);
	int pageable = !region_at(&pinned, (uintptr_t)(to_device ? src : dst), n);
	if (pageable && to_device) {
		o->staging = malloc(n ? n : 1);
		memcpy(o->staging, src, n);
		o->src = o->staging;
	}
	unsigned long long ticket = enqueue(s, o);
	if (pageable && !to_device)
		wait_ticket(s, ticket);
	return CUDA_SUCCESS;
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, uintptr_t hs) {
	ENTER("cuMemcpyHtoDAsync_v2", 1);
	return leave(copy_async((void *)dst, src, n, dst, 1, hs));
}

CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, uintptr_t hs) {
	ENTER("cuMemcpyDtoHAsync_v2", 1);
	return leave(copy_async(dst, (const void *)src, n, src, 0, hs));
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

CUresult cuStreamGetCtx(uintptr_t h, ctx_t **pctx) {
	ENTER("cuStreamGetCtx", 1);
	int i = vfind(&streams, (void *)h);
	if (!pctx || (h && i < 0))
		return leave(h && i < 0 ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_VALUE);
	stream_t *s = h ? streams.v[i] : NULL;
	*pctx = s ? s->ctx : current; /* the legacy stream is the current context's */
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
	trace_op(TRACE_HOST_WAIT, 0, NULL, 0, 0, 0, 0);
	if (s)
		wait_ticket(s, s->enq);
	else
		land_legacy(current, ~0ULL);
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

/* event_op queues a record of (OP_RECORD) or a wait for (OP_WAIT) an event on a stream. */
static CUresult event_op(int kind, uintptr_t he, uintptr_t hs) {
	event_t *e = event_of(he);
	stream_t *s = stream_of(hs);
	if (!e || (hs && !s))
		return CUDA_ERROR_INVALID_HANDLE;
	if (kind == OP_WAIT && e->recorded == 0)
		return CUDA_SUCCESS; /* an event never recorded is complete */
	op_t *o = new_op(kind);
	o->ev = e;
	o->seq = kind == OP_RECORD ? ++e->recorded : e->recorded;
	trace_op(kind == OP_RECORD ? TRACE_RECORD : TRACE_WAIT, hs, e, o->seq, 0, 0, 0);
	enqueue(s, o);
	return CUDA_SUCCESS;
}

CUresult cuEventRecord(uintptr_t he, uintptr_t hs) {
	ENTER("cuEventRecord", 1);
	return leave(event_op(OP_RECORD, he, hs));
}

CUresult cuStreamWaitEvent(uintptr_t hs, uintptr_t he, unsigned int flags) {
	ENTER("cuStreamWaitEvent", 1);
	return leave(flags != 0 ? CUDA_ERROR_INVALID_VALUE : event_op(OP_WAIT, he, hs));
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
	trace_op(TRACE_HOST_WAIT, 0, e, target, 0, 0, 0);
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
	snprintf(sym, sizeof sym, "ooc_params_%s", name);
	const unsigned *sizes = (const unsigned *)dlsym(kernels_lib, sym);
	function_t *f = calloc(1, sizeof(function_t));
	*f = (function_t){m, fn, sizes};
	vpush(&functions, f);
	*pf = f;
	return leave(CUDA_SUCCESS);
}

/* cuLaunchKernel copies the arguments at the call, as the driver does. The driver knows
 * each parameter's size from the kernel image; the fake knows them when the kernel library
 * exports ooc_params_K (the project's kernels do), else it reads 8 bytes per argument, up
 * to a NULL entry: package cuda's Launch terminates kernelParams with NULL and gives every
 * argument an 8-byte slot. */
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
	o->sizes = f->sizes;
	o->grid[0] = gx, o->grid[1] = gy, o->grid[2] = gz;
	o->block[0] = bx, o->block[1] = by, o->block[2] = bz;
	o->shared = shared;
	if (f->sizes) {
		/* Sizes known: each argument is copied whole (structs too) into 8-byte aligned slots. */
		size_t off = 0;
		for (int i = 0; f->sizes[i]; i++) {
			size_t words = (f->sizes[i] + 7) / 8;
			if (!params || !params[i] || i == 64 || off + words > 64) {
				free(o);
				return leave(CUDA_ERROR_INVALID_VALUE);
			}
			memcpy(&o->slots[off], params[i], f->sizes[i]);
			o->params[i] = &o->slots[off];
			off += words;
		}
	} else {
		for (int i = 0; params && params[i]; i++) {
			if (i == 64) {
				free(o);
				return leave(CUDA_ERROR_INVALID_VALUE);
			}
			memcpy(&o->slots[i], params[i], 8);
			o->params[i] = &o->slots[i];
		}
	}
	launches++;
	int watched = 0;
	for (int i = 0; i < 64 && o->params[i]; i++)
		if (!f->sizes || f->sizes[i] == 8)
			watched |= trace_watched(o->params[i]);
	trace_op(TRACE_KERNEL, hs, NULL, 0, 0, 0, watched);
	enqueue(s, o);
	return leave(CUDA_SUCCESS);
}
void release_module(void *x) { free(((module_t *)x)->image); }

