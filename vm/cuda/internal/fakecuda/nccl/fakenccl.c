/* fakenccl.c: a fake NCCL for the tests, built as libnccl.so.2 by fakecuda.BuildNCCL.
 *
 * It exports what package vm/cuda binds (ncclGetVersion, ncclGetUniqueId, ncclCommInitRank,
 * ncclCommInitRankScalable, ncclAllReduce, ncclCommDestroy, ncclCommAbort,
 * ncclCommGetAsyncError, ncclGetErrorString, ncclGetLastError) with the ABI of NVIDIA's
 * nccl.h: ncclUniqueId is 128 bytes passed by value to ncclCommInitRank and by pointer to
 * ncclCommInitRankScalable; ncclResult_t, ncclRedOp_t and ncclDataType_t values as the
 * header numbers them.
 *
 * Ranks meet across processes of one machine. A unique id names a POSIX shared-memory
 * segment (shm_open, "/fakenccl-" and a hash of the whole id): the first rank to join
 * creates it, the others map it, whether they are threads of one process or processes of
 * their own, each with its own fake driver. Why shared memory and not a socket: ranks of one
 * process and of several then take the same path, a round's data is copied once into the
 * segment and once out, and a dead peer is told by its pid, which every rank records when
 * it joins. Why no process-shared condition variable: glibc's can be left waiting on a
 * waiter that was killed, which is the case this transport must survive; a waiting rank
 * sleeps in short, growing steps (20 us to 1 ms) and looks again. The segment's lock is a
 * robust process-shared mutex, so a rank killed while holding it fails the communicator
 * instead of hanging it. The last rank to leave (destroyed, aborted, or found dead) unlinks
 * the segment; one all of whose ranks were killed stays in /dev/shm. At most 64 ranks.
 *
 * What it checks, as the real library requires: a communicator is created with a CUDA
 * context current (the fake driver's, $OOC_FAKENCCL_DRIVER: the same library file package
 * cuda loaded, so the same instance), and every operation on it runs with that same context
 * current (NCCL's rule for contexts other than the primary one, NVIDIA/nccl#565), and every
 * all-reduce's stream belongs to the device's primary context (ncclInvalidArgument
 * otherwise: the real library's kernels run there, see primary_stream); rank in range; ncclAvg
 * only from version 2.10 on.
 *
 * What fails a communicator (its ncclCommGetAsyncError result from then on, every blocked
 * and later call's result, ncclGetLastError's text naming the cause): a rank that joins with
 * another world size (ncclInvalidUsage; the joiner gets ncclInvalidArgument), a rank that
 * joins twice (ncclInvalidUsage), a rank whose process is gone (kill(pid, 0), and
 * /proc/PID/stat for a zombie or a reused pid: ncclRemoteError, naming the rank and pid),
 * a rank that destroys or aborts its communicator while others wait for it, ranks whose
 * all-reduces of one round differ in count, type or operation (ncclInvalidUsage), and a
 * wait longer than the timeout (knob timeout_ms, or $OOC_FAKENCCL_TIMEOUT_MS; default 60 s:
 * ncclRemoteError, naming the ranks waited for). Waiting ranks look at their peers' pids
 * every poll_ms (100) milliseconds, and so does ncclCommGetAsyncError, as the real library's
 * proxy thread notices a closed connection in the background.
 *
 * How it runs: ncclCommInitRank returns when all ranks have joined, as the real one does
 * outside a group. ncclAllReduce drains its stream (cuStreamSynchronize) and runs one round
 * per slot of the buffer (a slot is slot_bytes, 1 MiB or $OOC_FAKENCCL_SLOT_BYTES, of each
 * rank's data): it copies its
 * part into the segment and blocks until every rank has contributed; the last one reduces in
 * rank order (sum: rank 0 + rank 1 + ..., in the element type; ncclAvg: that sum divided by
 * nranks) and every rank copies the result out. The real call queues a kernel and returns;
 * the fake's result is there when the call returns, so everything queued on the stream after
 * it sees the result too. It proves the binding (symbols, argument order, the id's layout and
 * enum values) and the Go logic (one thread per rank, contexts, staging, scaling, the
 * failure of a peer), not NCCL's algorithms, its transports between machines, its speed or
 * its reduction order (rings and trees sum in other orders, so real results match the
 * host's only within rounding). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
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

#define MAX_RANKS 64
#define SHM_MAGIC 0x66616b656e63636cULL /* "fakenccl" */

static struct {
	long long version, timeout_ms, poll_ms, slot_bytes;
} knob = {-1, -1, 100, -1};

/* mu guards this process's state: knobs, counters, the mapped cliques, comms' busy counts. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static long long next_id, comms, allreduces;
static char fail_call[64];
static int fail_result;
static char last_error[512];

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

/* A rank's state in the segment. */
enum { rank_none = 0, rank_joined, rank_left, rank_dead };

/* shm_t is the shared segment's header; nranks+1 slots of slot bytes follow it: each rank's
 * part of the round, then the result. */
typedef struct {
	_Atomic unsigned long long magic; /* SHM_MAGIC once the creator has set it up */
	pthread_mutex_t mu;               /* robust, process-shared */
	int nranks, joined, attached;     /* attached: joined, not left, not dead */
	int holder;                       /* the rank holding mu, -1 for none */
	int failed;                       /* ncclResult_t that failed the communicator; 0 while healthy */
	char why[256];
	size_t slot;
	struct {
		int state, pid;
		unsigned long long start; /* the process's start time (/proc/PID/stat), 0 unknown */
	} rank[MAX_RANKS];
	unsigned long long round;
	int arrived;
	size_t count;
	int dtype, op;
	unsigned char in[MAX_RANKS];
} shm_t;

/* clique_t is this process's mapping of one segment, shared by its local ranks. */
typedef struct clique {
	struct clique *next;
	char id[NCCL_UNIQUE_ID_BYTES];
	char name[64];
	shm_t *s;
	size_t size;
	int refs;
} clique_t;

typedef struct {
	clique_t *c;
	int rank;
	void *ctx;
	int dev;   /* the device of ctx */
	int busy;  /* calls in progress on it (under mu) */
	int gone;  /* aborted: freed when the last busy call leaves */
} comm_t;

static clique_t *cliques;

/* ---- Controls for the tests ---- */

static long long env_knob(const char *name, long long def) {
	const char *v = getenv(name);
	if (!v || !*v)
		return def;
	char *end;
	long long x = strtoll(v, &end, 10);
	return *end == 0 && x > 0 ? x : def;
}

/* nccl_version is the knob version, else $OOC_FAKENCCL_VERSION (for ranks in other processes), else
 * 22304: NCCL 2.23.4 (mu held). */
static long long nccl_version(void) {
	if (knob.version < 0)
		knob.version = env_knob("OOC_FAKENCCL_VERSION", 22304);
	return knob.version;
}

/* timeout_ms is the knob, else $OOC_FAKENCCL_TIMEOUT_MS, else 60 s (mu held). */
static long long timeout_ms(void) {
	if (knob.timeout_ms < 0)
		knob.timeout_ms = env_knob("OOC_FAKENCCL_TIMEOUT_MS", 60000);
	return knob.timeout_ms;
}

/* slot_bytes is the knob, else $OOC_FAKENCCL_SLOT_BYTES, else 1 MiB (mu held): the bytes
 * of each rank one round carries. The segment's creator sets it for every rank. */
static long long slot_bytes(void) {
	if (knob.slot_bytes < 0)
		knob.slot_bytes = env_knob("OOC_FAKENCCL_SLOT_BYTES", 1 << 20);
	return knob.slot_bytes < 8 ? 8 : (knob.slot_bytes + 7) / 8 * 8; /* whole doubles, aligned */
}

int fakenccl_set(const char *key, long long v) {
	pthread_mutex_lock(&mu);
	int r = 0;
	if (strcmp(key, "version") == 0)
		knob.version = v;
	else if (strcmp(key, "timeout_ms") == 0)
		knob.timeout_ms = v;
	else if (strcmp(key, "poll_ms") == 0 && v > 0)
		knob.poll_ms = v;
	else if (strcmp(key, "slot_bytes") == 0 && v >= 8)
		knob.slot_bytes = v;
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
		r = nccl_version();
	else if (strcmp(key, "timeout_ms") == 0)
		r = timeout_ms();
	else if (strcmp(key, "slot_bytes") == 0)
		r = slot_bytes();
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
		snprintf(last_error, sizeof last_error, "fakenccl: %s failed as the test asked (fakenccl_fail)", name);
	}
	pthread_mutex_unlock(&mu);
	return r;
}

/* ---- Helpers ---- */

/* set_error records the text ncclGetLastError returns and returns r. */
static int set_error(int r, const char *format, ...) {
	char buf[sizeof last_error];
	va_list ap;
	va_start(ap, format);
	vsnprintf(buf, sizeof buf, format, ap);
	va_end(ap);
	pthread_mutex_lock(&mu);
	memcpy(last_error, buf, sizeof buf);
	pthread_mutex_unlock(&mu);
	return r;
}

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

static long long now_ms(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000LL + t.tv_nsec / 1000000;
}

/* proc_stat reads a process's state letter and start time (field 22 of /proc/PID/stat);
 * 0 when it cannot. */
static int proc_stat(int pid, char *state, unsigned long long *start) {
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	char *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
	if (!p || sscanf(p + 1, " %c", state) != 1)
		return 0;
	p += 2;
	for (int field = 3; field < 22 && p; field++) { /* p is at field 3, the state */
		p = strchr(p, ' ');
		if (p)
			p++;
	}
	return p && sscanf(p, "%llu", start) == 1;
}

/* alive reports whether the process that joined as pid at start still runs: not gone, not
 * a zombie (killed but not yet reaped), not another process that reused its pid. */
static int alive(int pid, unsigned long long start) {
	if (kill(pid, 0) != 0 && errno == ESRCH)
		return 0;
	char state;
	unsigned long long st;
	if (!proc_stat(pid, &state, &st))
		return access("/proc/self/stat", R_OK) != 0; /* no /proc: kill's word only */
	return state != 'Z' && state != 'X' && (start == 0 || st == start);
}

static unsigned long long my_start(void) {
	char state;
	unsigned long long st = 0;
	return proc_stat(getpid(), &state, &st) ? st : 0;
}

static unsigned char *slot(shm_t *s, int k) { return (unsigned char *)(s + 1) + (size_t)k * s->slot; }

static size_t shm_size(int nranks, size_t slot) {
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t n = sizeof(shm_t) + (size_t)(nranks + 1) * slot;
	return (n + page - 1) / page * page;
}

/* poison fails the communicator with r (the first cause stays) (s->mu held). */
static void poison(shm_t *s, int r, const char *format, ...) {
	if (!s->failed) {
		va_list ap;
		va_start(ap, format);
		vsnprintf(s->why, sizeof s->why, format, ap);
		va_end(ap);
		s->failed = r;
	}
	set_error(r, "fakenccl: %s", s->why);
}

static void shm_lock(shm_t *s, int rank) {
	int r = pthread_mutex_lock(&s->mu);
	if (r == EOWNERDEAD) {
		pthread_mutex_consistent(&s->mu);
		int k = s->holder;
		if (k >= 0 && k < s->nranks && s->rank[k].state == rank_joined) {
			s->rank[k].state = rank_dead;
			s->attached--;
			poison(s, ncclRemoteError, "rank %d of %d (pid %d) died holding the communicator's lock", k, s->nranks, s->rank[k].pid);
		} else {
			poison(s, ncclRemoteError, "a rank died holding the communicator's lock");
		}
	}
	s->holder = rank;
}

static void shm_unlock(shm_t *s) {
	s->holder = -1;
	pthread_mutex_unlock(&s->mu);
}

/* check_peers fails the communicator when a rank's process is gone or, for a rank that
 * waits for the others (waiting), when a rank has left it (s->mu held). A rank that left
 * after its last call is no failure: nobody waits for it. */
static void check_peers(shm_t *s, int waiting) {
	int me = getpid();
	for (int k = 0; k < s->nranks && !s->failed; k++) {
		switch (s->rank[k].state) {
		case rank_joined:
			if (s->rank[k].pid != me && !alive(s->rank[k].pid, s->rank[k].start)) {
				s->rank[k].state = rank_dead;
				s->attached--;
				poison(s, ncclRemoteError, "rank %d of %d (pid %d) is gone: its process exited or was killed", k, s->nranks, s->rank[k].pid);
			}
			break;
		case rank_left:
			if (waiting)
				poison(s, ncclRemoteError, "rank %d of %d (pid %d) left the communicator (ncclCommDestroy or ncclCommAbort) while the others wait for it",
			       k, s->nranks, s->rank[k].pid);
			break;
		}
	}
}

/* waiting lists the ranks a wait is for (those in[k] is 0 for, or not yet joined). */
static void waiting(shm_t *s, int joins, char *out, size_t n) {
	out[0] = 0;
	size_t used = 0;
	for (int k = 0; k < s->nranks && used + 16 < n; k++) {
		int missing = joins ? s->rank[k].state == rank_none : !s->in[k];
		if (missing)
			used += (size_t)snprintf(out + used, n - used, "%s%d", used ? ", " : "", k);
	}
}

/* wait_for waits, s->mu held, until done(s, arg), and returns ncclSuccess; or until the
 * communicator fails (a dead or departed peer, a timeout, an abort) and returns why. */
static int wait_for(comm_t *m, int (*done)(shm_t *, void *), void *arg, int joins) {
	shm_t *s = m->c->s;
	pthread_mutex_lock(&mu);
	long long start = now_ms(), limit = timeout_ms(), poll = knob.poll_ms;
	pthread_mutex_unlock(&mu);
	long long next_check = start + poll;
	useconds_t pause = 20;
	for (;;) {
		/* A failure comes first: a round that failed may look complete (a rank that then
		 * saw the failure left its part behind). */
		if (s->failed)
			return set_error(s->failed, "fakenccl: %s", s->why);
		if (done(s, arg))
			return ncclSuccess;
		long long t = now_ms();
		if (t >= next_check) {
			check_peers(s, 1);
			next_check = t + poll;
			continue;
		}
		if (t - start >= limit) {
			char who[200];
			waiting(s, joins, who, sizeof who);
			poison(s, ncclRemoteError, "rank %d of %d waited %lld ms (the timeout) for rank(s) %s to %s", m->rank, s->nranks, t - start, who,
			       joins ? "join" : "reach the same all-reduce");
			continue;
		}
		shm_unlock(s);
		usleep(pause);
		if (pause < 1000)
			pause *= 2;
		shm_lock(s, m->rank);
	}
}

static uint64_t fnv(const char *p, size_t n) {
	uint64_t h = 14695981039346656037ULL; /* FNV-1a, as Go's hash/fnv.New64a */
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)p[i]) * 1099511628211ULL;
	return h;
}

/* map_segment creates or maps the segment of id; the creator sets it up for nranks. It
 * returns NULL, the error recorded, when it cannot. */
static shm_t *map_segment(const char *name, int nranks, size_t *size) {
	pthread_mutex_lock(&mu);
	size_t slot = (size_t)slot_bytes();
	long long limit = timeout_ms();
	pthread_mutex_unlock(&mu);
	int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd >= 0) {
		*size = shm_size(nranks, slot);
		shm_t *s = MAP_FAILED;
		if (ftruncate(fd, (off_t)*size) == 0)
			s = mmap(NULL, *size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		close(fd);
		if (s == MAP_FAILED) {
			shm_unlink(name);
			set_error(ncclSystemError, "fakenccl: shared memory %s of %zu bytes: %s", name, *size, strerror(errno));
			return NULL;
		}
		pthread_mutexattr_t a;
		pthread_mutexattr_init(&a);
		pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
		pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
		pthread_mutex_init(&s->mu, &a);
		pthread_mutexattr_destroy(&a);
		s->nranks = nranks;
		s->holder = -1;
		s->slot = slot;
		atomic_store_explicit(&s->magic, SHM_MAGIC, memory_order_release);
		return s;
	}
	if (errno != EEXIST || (fd = shm_open(name, O_RDWR, 0)) < 0) {
		set_error(ncclSystemError, "fakenccl: shared memory %s: %s", name, strerror(errno));
		return NULL;
	}
	/* The creator may not have sized it or set it up yet. */
	long long start = now_ms();
	struct stat st;
	shm_t *h = MAP_FAILED;
	for (;;) {
		if (fstat(fd, &st) == 0 && (size_t)st.st_size >= sizeof(shm_t)) {
			if (h == MAP_FAILED)
				h = mmap(NULL, sizeof(shm_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
			if (h != MAP_FAILED && atomic_load_explicit(&h->magic, memory_order_acquire) == SHM_MAGIC)
				break;
		}
		if (now_ms() - start > limit) {
			if (h != MAP_FAILED)
				munmap(h, sizeof(shm_t));
			close(fd);
			set_error(ncclSystemError, "fakenccl: shared memory %s was not set up within %lld ms", name, limit);
			return NULL;
		}
		usleep(200);
	}
	*size = shm_size(h->nranks, h->slot);
	munmap(h, sizeof(shm_t));
	shm_t *s = mmap(NULL, *size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (s == MAP_FAILED) {
		set_error(ncclSystemError, "fakenccl: shared memory %s of %zu bytes: %s", name, *size, strerror(errno));
		return NULL;
	}
	return s;
}

/* attach finds or maps this process's clique of id (mu held). */
static clique_t *attach(const ncclUniqueId *id, int nranks) {
	for (clique_t *c = cliques; c; c = c->next)
		if (memcmp(c->id, id->internal, NCCL_UNIQUE_ID_BYTES) == 0) {
			c->refs++;
			return c;
		}
	clique_t *c = calloc(1, sizeof *c);
	memcpy(c->id, id->internal, NCCL_UNIQUE_ID_BYTES);
	snprintf(c->name, sizeof c->name, "/fakenccl-%016llx", (unsigned long long)fnv(id->internal, NCCL_UNIQUE_ID_BYTES));
	pthread_mutex_unlock(&mu); /* map_segment may wait for the creator */
	c->s = map_segment(c->name, nranks, &c->size);
	pthread_mutex_lock(&mu);
	if (!c->s) {
		free(c);
		return NULL;
	}
	/* Another local rank may have mapped it meanwhile: keep one mapping. */
	for (clique_t *o = cliques; o; o = o->next)
		if (memcmp(o->id, id->internal, NCCL_UNIQUE_ID_BYTES) == 0) {
			munmap(c->s, c->size);
			free(c);
			o->refs++;
			return o;
		}
	c->refs = 1;
	c->next = cliques;
	cliques = c;
	return c;
}

/* detach drops a local reference to a clique, unmapping it with the last (mu held). */
static void detach(clique_t *c) {
	if (--c->refs > 0)
		return;
	clique_t **p = &cliques;
	while (*p != c)
		p = &(*p)->next;
	*p = c->next;
	munmap(c->s, c->size);
	free(c);
}

/* leave marks rank's departure from the segment; the last one attached unlinks it
 * (s->mu held). A rank that comes after every other has left (a communicator that failed
 * before it joined) makes a fresh segment and waits there alone until the timeout, as a
 * real NCCL's late rank would: nothing is left behind in /dev/shm. */
static void leave(clique_t *c, int rank) {
	shm_t *s = c->s;
	if (s->rank[rank].state == rank_joined) {
		s->rank[rank].state = rank_left;
		s->attached--;
	}
	if (s->attached <= 0)
		shm_unlink(c->name);
}

/* ---- The API ---- */

int ncclGetVersion(int *version) {
	int r = failing("ncclGetVersion");
	if (r)
		return r;
	if (!version)
		return ncclInvalidArgument;
	pthread_mutex_lock(&mu);
	*version = (int)nccl_version();
	pthread_mutex_unlock(&mu);
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

/* ncclGetLastError is the text of this process's last error, as the real library's: the
 * comm is not looked at. */
const char *ncclGetLastError(void *comm) {
	(void)comm;
	return last_error;
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
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	long long ns = t.tv_sec * 1000000000LL + t.tv_nsec; /* unique across runs that reuse a pid */
	memcpy(id->internal + 16, &pid, sizeof pid);
	memcpy(id->internal + 24, &n, sizeof n);
	memcpy(id->internal + 32, &ns, sizeof ns);
	/* The tail is not zero, so that a binding passing only part of the id is caught. */
	for (int i = 40; i < NCCL_UNIQUE_ID_BYTES; i++)
		id->internal[i] = (char)(i * 7 + n);
	return ncclSuccess;
}

static int all_joined(shm_t *s, void *arg) {
	(void)arg;
	return s->joined == s->nranks;
}

static int init_rank(comm_t **comm, int nranks, const ncclUniqueId *id, int rank) {
	if (!comm || !id || nranks < 1 || rank < 0 || rank >= nranks)
		return set_error(ncclInvalidArgument, "fakenccl: rank %d of %d", rank, nranks);
	if (nranks > MAX_RANKS)
		return set_error(ncclInvalidArgument, "fakenccl: %d ranks; the fake holds at most %d", nranks, MAX_RANKS);
	if (memcmp(id->internal, magic, sizeof magic) != 0)
		return set_error(ncclInvalidArgument, "fakenccl: the unique id is not one ncclGetUniqueId made");
	void *ctx = current_context();
	int dev = -1;
	if (!ctx || drv.device(&dev) != 0)
		return set_error(ncclUnhandledCudaError, "fakenccl: no CUDA context is current");
	pthread_mutex_lock(&mu);
	clique_t *c = attach(id, nranks);
	pthread_mutex_unlock(&mu);
	if (!c)
		return ncclSystemError;
	comm_t *m = calloc(1, sizeof *m);
	m->c = c;
	m->rank = rank;
	m->ctx = ctx;
	m->dev = dev;
	shm_t *s = c->s;
	shm_lock(s, rank);
	int result = ncclSuccess;
	if (s->failed) {
		result = set_error(s->failed, "fakenccl: %s", s->why);
	} else if (s->nranks != nranks) {
		poison(s, ncclInvalidUsage, "rank %d joined saying the communicator has %d ranks; the ranks before it said %d: every rank must give the same world size",
		       rank, nranks, s->nranks);
		result = ncclInvalidArgument;
	} else if (s->rank[rank].state != rank_none) {
		poison(s, ncclInvalidUsage, "rank %d of %d joined twice (pids %d and %d): every rank needs a number of its own", rank, nranks, s->rank[rank].pid,
		       (int)getpid());
		result = ncclInvalidUsage;
	} else {
		s->rank[rank].state = rank_joined;
		s->rank[rank].pid = getpid();
		s->rank[rank].start = my_start();
		s->joined++;
		s->attached++;
		if ((result = wait_for(m, all_joined, NULL, 1)) != ncclSuccess)
			leave(c, rank);
	}
	shm_unlock(s);
	pthread_mutex_lock(&mu);
	if (result == ncclSuccess) {
		comms++;
		*comm = m;
	} else {
		detach(c);
		free(m);
	}
	pthread_mutex_unlock(&mu);
	return result;
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

/* enter marks a call in progress on comm; 0 if the comm was aborted. */
static int enter(comm_t *m) {
	pthread_mutex_lock(&mu);
	int ok = !m->gone;
	if (ok)
		m->busy++;
	pthread_mutex_unlock(&mu);
	return ok;
}

/* release drops an aborted comm's mapping once no call is in progress on it (mu held).
 * The comm itself is kept (a few bytes): a thread that read the handle before the abort
 * may still call with it, and must find it gone rather than freed. */
static void release(comm_t *m) {
	if (m->gone && m->busy == 0 && m->c) {
		detach(m->c);
		m->c = NULL;
	}
}

static int finish(comm_t *m, int result) {
	pthread_mutex_lock(&mu);
	m->busy--;
	release(m);
	pthread_mutex_unlock(&mu);
	return result;
}

int ncclCommDestroy(comm_t *comm) {
	int r = failing("ncclCommDestroy");
	if (r)
		return r;
	if (!comm)
		return ncclInvalidArgument;
	pthread_mutex_lock(&mu);
	if (comm->busy || comm->gone) {
		pthread_mutex_unlock(&mu);
		return set_error(ncclInvalidUsage, "fakenccl: ncclCommDestroy of a communicator in use or aborted");
	}
	pthread_mutex_unlock(&mu);
	shm_t *s = comm->c->s;
	shm_lock(s, comm->rank);
	leave(comm->c, comm->rank);
	shm_unlock(s);
	pthread_mutex_lock(&mu);
	comms--;
	detach(comm->c);
	pthread_mutex_unlock(&mu);
	free(comm);
	return ncclSuccess;
}

/* ncclCommAbort fails the communicator for every rank and frees this one; a call blocked on
 * it in another thread returns the failure (and the comm is freed when it has). */
int ncclCommAbort(comm_t *comm) {
	int r = failing("ncclCommAbort");
	if (r)
		return r;
	if (!comm)
		return ncclInvalidArgument;
	pthread_mutex_lock(&mu);
	int gone = comm->gone;
	comm->gone = 1;
	comm->busy++; /* the mapping stays until this call is done with it */
	pthread_mutex_unlock(&mu);
	if (gone)
		return finish(comm, set_error(ncclInvalidUsage, "fakenccl: ncclCommAbort of an aborted communicator"));
	shm_t *s = comm->c->s;
	shm_lock(s, comm->rank);
	poison(s, ncclRemoteError, "rank %d of %d (pid %d) aborted its communicator", comm->rank, s->nranks, (int)getpid());
	leave(comm->c, comm->rank);
	shm_unlock(s);
	pthread_mutex_lock(&mu);
	comms--;
	pthread_mutex_unlock(&mu);
	return finish(comm, ncclSuccess);
}

/* ncclCommGetAsyncError reports a failure of the communicator, after looking at the peers'
 * processes: a thread may poll it while another is blocked in a call. */
int ncclCommGetAsyncError(comm_t *comm, int *asyncError) {
	int r = failing("ncclCommGetAsyncError");
	if (r)
		return r;
	if (!comm || !asyncError)
		return ncclInvalidArgument;
	if (!enter(comm))
		return set_error(ncclInvalidUsage, "fakenccl: ncclCommGetAsyncError on an aborted communicator");
	shm_t *s = comm->c->s;
	shm_lock(s, comm->rank);
	check_peers(s, 0);
	*asyncError = s->failed;
	if (s->failed)
		set_error(s->failed, "fakenccl: %s", s->why);
	shm_unlock(s);
	return finish(comm, ncclSuccess);
}

#define REDUCE(T)                                                                                  \
	for (size_t i = 0; i < n; i++) {                                                               \
		T acc = ((const T *)slot(s, 0))[i];                                                        \
		for (int k = 1; k < s->nranks; k++) {                                                      \
			T x = ((const T *)slot(s, k))[i];                                                      \
			switch (s->op) {                                                                       \
			case ncclProd: acc *= x; break;                                                        \
			case ncclMax: acc = x > acc ? x : acc; break;                                          \
			case ncclMin: acc = x < acc ? x : acc; break;                                          \
			default: acc += x;                                                                     \
			}                                                                                      \
		}                                                                                          \
		if (s->op == ncclAvg)                                                                      \
			acc /= (T)s->nranks;                                                                   \
		((T *)out)[i] = acc;                                                                       \
	}

/* reduce combines the round's parts, in rank order, into the result slot. */
static void reduce(shm_t *s) {
	size_t n = s->count;
	void *out = slot(s, s->nranks);
	if (s->dtype == ncclFloat64) {
		REDUCE(double)
	} else {
		REDUCE(float)
	}
}

typedef struct {
	unsigned long long round;
	int rank;
} round_t;

static int round_over(shm_t *s, void *p) { return s->round != ((round_t *)p)->round; }
static int slot_free(shm_t *s, void *p) { return !s->in[((round_t *)p)->rank]; }

static const char *type_name(int dtype) { return dtype == ncclFloat64 ? "float64" : "float32"; }

/* round runs one round: n elements of each rank from send into recv. */
static int one_round(comm_t *m, const void *send, void *recv, size_t n, int dtype, int op, int last) {
	shm_t *s = m->c->s;
	size_t size = n * (dtype == ncclFloat64 ? 8 : 4);
	shm_lock(s, m->rank);
	round_t me = {0, m->rank};
	int result = wait_for(m, slot_free, &me, 0); /* never waits: a rank leaves a round only once it is over */
	if (result != ncclSuccess)
		goto out;
	if (s->arrived == 0) {
		s->count = n;
		s->dtype = dtype;
		s->op = op;
	} else if (s->count != n || s->dtype != dtype || s->op != op) {
		poison(s, ncclInvalidUsage, "ranks' all-reduces differ in round %llu: rank %d's is %zu %s elements with operation %d, an earlier rank's %zu %s with %d",
		       s->round, m->rank, n, type_name(dtype), op, s->count, type_name(s->dtype), s->op);
		result = ncclInvalidUsage;
		goto out;
	}
	if (size)
		memcpy(slot(s, m->rank), send, size);
	s->in[m->rank] = 1;
	me.round = s->round;
	if (++s->arrived == s->nranks) {
		reduce(s);
		s->arrived = 0;
		memset(s->in, 0, (size_t)s->nranks);
		s->round++;
		if (last) {
			pthread_mutex_lock(&mu);
			allreduces++;
			pthread_mutex_unlock(&mu);
		}
	} else if ((result = wait_for(m, round_over, &me, 0)) != ncclSuccess) {
		goto out;
	}
	/* The result stays until every rank has copied it: the next round's reduction needs
	 * every rank's next part, which each gives only after this copy. */
	if (size)
		memcpy(recv, slot(s, s->nranks), size);
out:
	shm_unlock(s);
	return result;
}

int ncclAllReduce(const void *send, void *recv, size_t count, int dtype, int op, comm_t *comm, uintptr_t stream) {
	int r = failing("ncclAllReduce");
	if (r)
		return r;
	if (!comm || (count && (!send || !recv)))
		return set_error(ncclInvalidArgument, "fakenccl: ncclAllReduce: no communicator or no buffer");
	if (dtype != ncclFloat32 && dtype != ncclFloat64)
		return set_error(ncclInvalidArgument, "fakenccl: ncclAllReduce: type %d (the fake reduces float32 and float64 only)", dtype);
	pthread_mutex_lock(&mu);
	long long v = nccl_version();
	pthread_mutex_unlock(&mu);
	if (op < ncclSum || op > ncclAvg || (op == ncclAvg && v < 21000))
		return set_error(ncclInvalidArgument, "fakenccl: ncclAllReduce: operation %d is not one this version has", op);
	if (!enter(comm))
		return set_error(ncclInvalidUsage, "fakenccl: ncclAllReduce on an aborted communicator");
	if (current_context() != comm->ctx)
		return finish(comm, set_error(ncclInvalidUsage, "fakenccl: ncclAllReduce: the current context is not the one the communicator was made in"));
	if (!primary_stream(comm->dev, stream))
		return finish(comm, set_error(ncclInvalidArgument, "fakenccl: ncclAllReduce: the stream is not of the device's primary context"));
	if (drv.sync(stream) != 0)
		return finish(comm, set_error(ncclUnhandledCudaError, "fakenccl: ncclAllReduce: cuStreamSynchronize failed"));
	size_t esize = dtype == ncclFloat64 ? 8 : 4, per = comm->c->s->slot / esize, off = 0;
	/* Round by round, a slot's worth each; an empty all-reduce is one empty round, so that
	 * every rank stays in step. */
	do {
		size_t n = count - off < per ? count - off : per;
		r = one_round(comm, (const char *)send + off * esize, (char *)recv + off * esize, n, dtype, op, off + n == count);
		off += n;
	} while (r == ncclSuccess && off < count);
	return finish(comm, r);
}
