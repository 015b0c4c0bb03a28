/* trace.c: a log of what is queued on streams, for tests of ordering. With the knob trace
 * set, every event record and wait, asynchronous copy and kernel launch is appended, in the
 * order the calls were made, with its stream, and every host wait on an event or stream with
 * no stream; fakecuda_trace reads the log. A launch is marked when one of its 8-byte
 * arguments points into [watch_lo, watch_hi): a kernel that reads or writes that memory. */
#include "fakecuda.h"

static trace_entry *log_v;
static long long log_n, log_cap;

void trace_reset(void) {
	free(log_v);
	log_v = NULL;
	log_n = log_cap = 0;
}

/* trace_op appends one entry; called with mu held. */
void trace_op(long long kind, uintptr_t stream, const event_t *e, unsigned long long seq, uintptr_t addr, size_t n,
              int watched) {
	if (!knob.trace)
		return;
	if (log_n == log_cap) {
		long long cap = log_cap ? 2 * log_cap : 4096;
		trace_entry *v = realloc(log_v, (size_t)cap * sizeof *v);
		if (!v)
			abort();
		log_v = v;
		log_cap = cap;
	}
	log_v[log_n++] = (trace_entry){kind, (unsigned long long)stream, (unsigned long long)(uintptr_t)e, seq,
	                               (unsigned long long)addr, (long long)n, watched};
}

/* trace_watched reports whether an argument slot holds a pointer into the watched range. */
int trace_watched(const unsigned long long *slot) {
	return knob.watch_hi > knob.watch_lo && *slot >= (unsigned long long)knob.watch_lo &&
	       *slot < (unsigned long long)knob.watch_hi;
}

/* fakecuda_trace copies up to max entries of the log into out and returns how many the
 * log holds. */
long long fakecuda_trace(trace_entry *out, long long max) {
	pthread_mutex_lock(&mu);
	long long n = log_n;
	if (out && max > 0)
		memcpy(out, log_v, (size_t)(n < max ? n : max) * sizeof *out);
	pthread_mutex_unlock(&mu);
	return n;
}
