/* fakenccl.c: a fake NCCL for the tests, built as libnccl.so.2 by fakecuda.BuildNCCL.
 *
 * It exports what package vm/cuda binds (ncclGetVersion, ncclGetUniqueId, ncclCommInitRank,
 * ncclCommInitRankScalable, ncclAllReduce, ncclCommDestroy, ncclGetErrorString) with the ABI
 * of NVIDIA's nccl.h: ncclUniqueId is 128 bytes passed by value to ncclCommInitRank and by
 * pointer to ncclCommInitRankScalable; ncclResult_t, ncclRedOp_t and ncclDataType_t values
 * as the header numbers them. Only ranks of this process exist: a unique id names a clique
 * of ranks in this library instance, not a network address.
 *
 * What it checks, as the real library requires: a communicator is created with a CUDA
 * context current (the fake driver's, $OOC_FAKENCCL_DRIVER: the same library file package
 * cuda loaded, so the same instance), and every operation on it runs with that same context
 * current (NCCL's rule for contexts other than the primary one, NVIDIA/nccl#565), and every
 * all-reduce's stream belongs to the device's primary context (ncclInvalidArgument
 * otherwise: the real library's kernels run there, see primary_stream); rank in
 * range, not joined twice, the same nranks everywhere; every rank's all-reduce of a round
 * has the same count, type and operation; ncclAvg only from version 2.10 on.
 *
 * How it runs: ncclCommInitRank returns when all ranks have joined, as the real one does
 * outside a group. ncclAllReduce drains its stream (cuStreamSynchronize), contributes its
 * buffers and blocks until every rank of the clique has contributed; the last one reduces
 * in rank order (sum: rank 0 + rank 1 + ..., in the element type; ncclAvg: that sum divided
 * by nranks) and writes every rank's result. The real call queues a kernel and returns; the
 * fake's result is there when the call returns, so everything queued on the stream after it
 * sees the result too. It proves the binding (symbols, argument order, the id's layout and
 * enum values) and the Go logic (one thread per rank, contexts, staging, scaling), not
 * NCCL's algorithms, its speed or its reduction order (rings and trees sum in other
 * orders, so real results match the host's only within rounding). */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { ncclSuccess = 0, ncclUnhandledCudaError = 1, ncclSystemError = 2, ncclInternalError = 3,
       ncclInvalidArgument = 4, ncclInvalidUsage = 5, ncclRemoteError = 6, ncclInProgress = 7,
       ncclTimeout = 8 };
enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4 };
enum { ncclFloat32 = 7, ncclFloat64 = 8 };

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct { char internal[NCCL_UNIQUE_ID_BYTES]; } ncclUniqueId;

static const char magic[] = "fakenccl";

static struct {
	long long version, timeout_ms;
} knob = {22304, 20000};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static long long next_id, comms, allreduces;
static char fail_call[64];
static int fail_result;

static struct {
	int loaded;
	int (*sync)(uintptr_t);
	int (*current)(void **);
	int (*device)(int *);
	int (*stream_ctx)(uintptr_t, void **);
	int (*primary_state)(int, unsigned *, int *);
	int (*retain)(void **, int);
	int (*release)(int);
} drv;

typedef struct clique {
	struct clique *next;
	char id[NCCL_UNIQUE_ID_BYTES];
	int nranks, joined, live;
	unsigned char *has; /* rank has joined */
	unsigned char *in;  /* rank has contributed to the current round */
	const void **send;
	void **recv;
	int arrived, mismatch, last_mismatch;
	size_t count;
	int dtype, op;
	unsigned long long round;
} clique_t;

typedef struct {
	clique_t *c;
	int rank;
	void *ctx;
	int dev; /* the device of ctx */
} comm_t;

static clique_t *cliques;

/* ---- Controls for the tests ---- */

int fakenccl_set(const char *key, long long v) {
	pthread_mutex_lock(&mu);
	int r = 0;
	if (strcmp(key, "version") == 0)
		knob.version = v;
	else if (strcmp(key, "timeout_ms") == 0)
		knob.timeout_ms = v;
	else
		r = -1;
	pthread_mutex_unlock(&mu);
	return r;
}

long long fakenccl_get(const char *key) {
	pthread_mutex_lock(&mu);
	long long r = -1;
	if (strcmp(key, "comms") == 0)
		r = comms;
	else if (strcmp(key, "allreduces") == 0)
		r = allreduces;
	else if (strcmp(key, "version") == 0)
		r = knob.version;
	pthread_mutex_unlock(&mu);
	return r;
}

/* fakenccl_fail makes the next call of the named function return result and do nothing. */
void fakenccl_fail(const char *call, int result) {
	pthread_mutex_lock(&mu);
	strncpy(fail_call, call, sizeof fail_call - 1);
	fail_result = result;
	pthread_mutex_unlock(&mu);
}

static int failing(const char *name) {
	pthread_mutex_lock(&mu);
	int r = 0;
	if (fail_call[0] && strcmp(fail_call, name) == 0) {
		fail_call[0] = 0;
		r = fail_result;
	}
	pthread_mutex_unlock(&mu);
	return r;
}

/* ---- Helpers ---- */

static int load_driver(void) {
	if (drv.loaded)
		return 1;
	const char *path = getenv("OOC_FAKENCCL_DRIVER");
	if (!path || !*path)
		return 0;
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return 0;
	drv.sync = (int (*)(uintptr_t))dlsym(h, "cuStreamSynchronize");
	drv.current = (int (*)(void **))dlsym(h, "cuCtxGetCurrent");
	drv.device = (int (*)(int *))dlsym(h, "cuCtxGetDevice");
	drv.stream_ctx = (int (*)(uintptr_t, void **))dlsym(h, "cuStreamGetCtx");
	drv.primary_state = (int (*)(int, unsigned *, int *))dlsym(h, "cuDevicePrimaryCtxGetState");
	drv.retain = (int (*)(void **, int))dlsym(h, "cuDevicePrimaryCtxRetain");
	drv.release = (int (*)(int))dlsym(h, "cuDevicePrimaryCtxRelease_v2");
	drv.loaded = drv.sync && drv.current && drv.device && drv.stream_ctx && drv.primary_state && drv.retain && drv.release;
	return drv.loaded;
}

static void *current_context(void) {
	void *c = NULL;
	if (!load_driver() || drv.current(&c) != 0)
		return NULL;
	return c;
}

/* primary_stream reports whether stream belongs to the primary context of device dev: the
 * context NCCL's own work runs in (the real library launches its kernels there, so a
 * stream of another context is used in the wrong one). */
static int primary_stream(int dev, uintptr_t stream) {
	void *sctx = NULL, *p = NULL;
	unsigned flags;
	int active = 0;
	if (drv.stream_ctx(stream, &sctx) != 0 || drv.primary_state(dev, &flags, &active) != 0 || !active)
		return 0;
	if (drv.retain(&p, dev) != 0) /* the handle, without keeping a reference */
		return 0;
	drv.release(dev);
	return sctx == p;
}

/* wait_until waits on cv (mu held) until *done or the timeout; 0 on timeout. */
static int wait_until(int (*done)(void *), void *arg) {
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	t.tv_sec += knob.timeout_ms / 1000;
	t.tv_nsec += (knob.timeout_ms % 1000) * 1000000L;
	if (t.tv_nsec >= 1000000000L) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000L;
	}
	while (!done(arg))
		if (pthread_cond_timedwait(&cv, &mu, &t) == ETIMEDOUT)
			return done(arg);
	return 1;
}

/* ---- The API ---- */

int ncclGetVersion(int *version) {
	int r = failing("ncclGetVersion");
	if (r)
		return r;
	if (!version)
		return ncclInvalidArgument;
	*version = (int)knob.version;
	return ncclSuccess;
}

const char *ncclGetErrorString(int result) {
	switch (result) {
	case ncclSuccess: return "no error";
	case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
	case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
	case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
	case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
	case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
	case ncclRemoteError: return "remote process exited or there was a network error";
	case ncclInProgress: return "NCCL operation in progress";
	case ncclTimeout: return "NCCL operation timed out";
	}
	return "unknown result code";
}

int ncclGetUniqueId(ncclUniqueId *id) {
	int r = failing("ncclGetUniqueId");
	if (r)
		return r;
	if (!id)
		return ncclInvalidArgument;
	memset(id, 0, sizeof *id);
	memcpy(id->internal, magic, sizeof magic);
	pthread_mutex_lock(&mu);
	long long n = ++next_id;
	pthread_mutex_unlock(&mu);
	long long pid = getpid();
	memcpy(id->internal + 16, &pid, sizeof pid);
	memcpy(id->internal + 24, &n, sizeof n);
	/* The tail is not zero, so that a binding passing only part of the id is caught. */
	for (int i = 32; i < NCCL_UNIQUE_ID_BYTES; i++)
		id->internal[i] = (char)(i * 7 + n);
	return ncclSuccess;
}

static int all_joined(void *c) { return ((clique_t *)c)->joined == ((clique_t *)c)->nranks; }

static int init_rank(comm_t **comm, int nranks, const ncclUniqueId *id, int rank) {
	if (!comm || !id || nranks < 1 || rank < 0 || rank >= nranks)
		return ncclInvalidArgument;
	if (memcmp(id->internal, magic, sizeof magic) != 0)
		return ncclInvalidArgument;
	void *ctx = current_context();
	int dev = -1;
	if (!ctx || drv.device(&dev) != 0)
		return ncclUnhandledCudaError;
	pthread_mutex_lock(&mu);
	clique_t *c = cliques;
	while (c && memcmp(c->id, id->internal, NCCL_UNIQUE_ID_BYTES) != 0)
		c = c->next;
	if (!c) {
		c = calloc(1, sizeof *c);
		memcpy(c->id, id->internal, NCCL_UNIQUE_ID_BYTES);
		c->nranks = nranks;
		c->has = calloc(nranks, 1);
		c->in = calloc(nranks, 1);
		c->send = calloc(nranks, sizeof *c->send);
		c->recv = calloc(nranks, sizeof *c->recv);
		c->next = cliques;
		cliques = c;
	}
	if (c->nranks != nranks || c->has[rank]) {
		pthread_mutex_unlock(&mu);
		return c->nranks != nranks ? ncclInvalidArgument : ncclInvalidUsage;
	}
	c->has[rank] = 1;
	c->joined++;
	c->live++;
	comms++;
	pthread_cond_broadcast(&cv);
	int ok = wait_until(all_joined, c);
	if (ok) {
		comm_t *m = calloc(1, sizeof *m);
		m->c = c;
		m->rank = rank;
		m->ctx = ctx;
		m->dev = dev;
		*comm = m;
	} else {
		c->joined--;
		c->live--;
		c->has[rank] = 0;
		comms--;
	}
	pthread_mutex_unlock(&mu);
	return ok ? ncclSuccess : ncclRemoteError;
}

int ncclCommInitRank(comm_t **comm, int nranks, ncclUniqueId id, int rank) {
	int r = failing("ncclCommInitRank");
	return r ? r : init_rank(comm, nranks, &id, rank);
}

int ncclCommInitRankScalable(comm_t **comm, int nranks, int rank, int nId, ncclUniqueId *ids, void *config) {
	(void)config;
	int r = failing("ncclCommInitRankScalable");
	if (r)
		return r;
	if (nId < 1 || !ids)
		return ncclInvalidArgument;
	return init_rank(comm, nranks, &ids[0], rank);
}

int ncclCommDestroy(comm_t *comm) {
	int r = failing("ncclCommDestroy");
	if (r)
		return r;
	if (!comm)
		return ncclInvalidArgument;
	pthread_mutex_lock(&mu);
	clique_t *c = comm->c;
	comms--;
	if (--c->live == 0) {
		clique_t **p = &cliques;
		while (*p != c)
			p = &(*p)->next;
		*p = c->next;
		free(c->has);
		free(c->in);
		free(c->send);
		free((void *)c->recv);
		free(c);
	}
	pthread_mutex_unlock(&mu);
	free(comm);
	return ncclSuccess;
}

#define REDUCE(T)                                                                                  \
	for (size_t i = 0; i < c->count; i++) {                                                        \
		T acc = ((const T *)c->send[0])[i];                                                        \
		for (int k = 1; k < c->nranks; k++) {                                                      \
			T x = ((const T *)c->send[k])[i];                                                      \
			switch (c->op) {                                                                       \
			case ncclProd: acc *= x; break;                                                        \
			case ncclMax: acc = x > acc ? x : acc; break;                                          \
			case ncclMin: acc = x < acc ? x : acc; break;                                          \
			default: acc += x;                                                                     \
			}                                                                                      \
		}                                                                                          \
		if (c->op == ncclAvg)                                                                      \
			acc /= (T)c->nranks;                                                                   \
		((T *)tmp)[i] = acc;                                                                       \
	}

/* reduce computes the round into a temporary first: send and recv buffers may alias. */
static int reduce(clique_t *c) {
	size_t size = c->count * (c->dtype == ncclFloat64 ? 8 : 4);
	void *tmp = malloc(size ? size : 1);
	if (!tmp)
		return ncclSystemError;
	if (c->dtype == ncclFloat64) {
		REDUCE(double)
	} else {
		REDUCE(float)
	}
	for (int k = 0; k < c->nranks; k++)
		memcpy(c->recv[k], tmp, size);
	free(tmp);
	return ncclSuccess;
}

typedef struct {
	clique_t *c;
	unsigned long long round;
} round_t;

static int round_over(void *p) { return ((round_t *)p)->c->round != ((round_t *)p)->round; }
typedef struct {
	clique_t *c;
	int rank;
} slot_t;

static int slot_free(void *p) { return !((slot_t *)p)->c->in[((slot_t *)p)->rank]; }

int ncclAllReduce(const void *send, void *recv, size_t count, int dtype, int op, comm_t *comm, uintptr_t stream) {
	int r = failing("ncclAllReduce");
	if (r)
		return r;
	if (!comm || (count && (!send || !recv)))
		return ncclInvalidArgument;
	if (dtype != ncclFloat32 && dtype != ncclFloat64)
		return ncclInvalidArgument; /* the fake reduces floats only */
	if (op < ncclSum || op > ncclAvg || (op == ncclAvg && knob.version < 21000))
		return ncclInvalidArgument;
	if (current_context() != comm->ctx)
		return ncclInvalidUsage;
	if (!primary_stream(comm->dev, stream))
		return ncclInvalidArgument;
	if (drv.sync(stream) != 0)
		return ncclUnhandledCudaError;
	clique_t *c = comm->c;
	pthread_mutex_lock(&mu);
	/* A rank a round ahead of the others waits for the round it would join to start. */
	slot_t slot = {c, comm->rank};
	if (!wait_until(slot_free, &slot)) {
		pthread_mutex_unlock(&mu);
		return ncclRemoteError;
	}
	if (c->arrived == 0) {
		c->count = count;
		c->dtype = dtype;
		c->op = op;
		c->mismatch = 0;
	} else if (c->count != count || c->dtype != dtype || c->op != op) {
		c->mismatch = 1;
	}
	c->in[comm->rank] = 1;
	c->send[comm->rank] = send;
	c->recv[comm->rank] = recv;
	round_t me = {c, c->round};
	int result = ncclSuccess;
	if (++c->arrived == c->nranks) {
		c->last_mismatch = c->mismatch;
		if (!c->mismatch)
			result = reduce(c);
		c->arrived = 0;
		memset(c->in, 0, c->nranks);
		c->round++;
		allreduces++;
		pthread_cond_broadcast(&cv);
	} else if (!wait_until(round_over, &me)) {
		pthread_mutex_unlock(&mu);
		return ncclRemoteError;
	}
	if (c->last_mismatch)
		result = ncclInvalidUsage;
	pthread_mutex_unlock(&mu);
	return result;
}
