/* fakecublas.c: a fake cuBLAS for the tests, built as libcublas.so.12 by fakecuda.BuildBLAS.
 *
 * It exports the five calls package vm/cuda binds (cublasCreate_v2, cublasDestroy_v2,
 * cublasSetStream_v2, cublasSgemm_v2, cublasDgemm_v2) with cuBLAS's column-major contract:
 * C = alpha op(A) op(B) + beta C, op(A) m x k, leading dimensions in elements, alpha and
 * beta read through host pointers (CUBLAS_POINTER_MODE_HOST, the default), C not read
 * when beta is 0. Device memory of the fake driver is host memory, so the product is a
 * plain host loop, accumulated in the element type in the order of k (float32 for Sgemm,
 * as cuBLAS's own float32 GEMMs accumulate in float32).
 *
 * Stream order: real cuBLAS queues its kernels on the handle's stream. The fake drains
 * that stream first (cuStreamSynchronize of the fake driver named by
 * $OOC_FAKECUBLAS_DRIVER, the same library file package cuda loaded, so the same
 * instance) and then computes on the calling thread: everything queued before the call is
 * done before the product reads its operands, and everything queued after it runs after.
 * It proves the binding and the column-major arithmetic, not cuBLAS's speed or its
 * algorithms. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

enum { OK = 0, NOT_INITIALIZED = 1, INVALID_VALUE = 7, EXECUTION_FAILED = 13 };

typedef int (*stream_sync_fn)(uintptr_t);

typedef struct {
	uintptr_t stream;
	stream_sync_fn sync;
} handle_t;

int cublasCreate_v2(handle_t **h) {
	if (!h)
		return INVALID_VALUE;
	const char *path = getenv("OOC_FAKECUBLAS_DRIVER");
	if (!path || !*path)
		return NOT_INITIALIZED;
	void *drv = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!drv)
		return NOT_INITIALIZED;
	stream_sync_fn sync = (stream_sync_fn)dlsym(drv, "cuStreamSynchronize");
	if (!sync)
		return NOT_INITIALIZED;
	*h = calloc(1, sizeof(handle_t));
	(*h)->sync = sync;
	return OK;
}

int cublasDestroy_v2(handle_t *h) {
	if (!h)
		return NOT_INITIALIZED;
	free(h);
	return OK;
}

int cublasSetStream_v2(handle_t *h, uintptr_t stream) {
	if (!h)
		return NOT_INITIALIZED;
	h->stream = stream;
	return OK;
}

#define GEMM(NAME, T)                                                                              \
	int NAME(handle_t *h, int ta, int tb, int m, int n, int k, const T *alpha, const T *A, int lda, \
	         const T *B, int ldb, const T *beta, T *C, int ldc) {                                   \
		if (!h)                                                                                    \
			return NOT_INITIALIZED;                                                                \
		if (m < 0 || n < 0 || k < 0 || ldc < (m > 1 ? m : 1) || ta < 0 || ta > 1 || tb < 0 ||      \
		    tb > 1 || lda < ((ta ? k : m) > 1 ? (ta ? k : m) : 1) ||                               \
		    ldb < ((tb ? n : k) > 1 ? (tb ? n : k) : 1) || !alpha || !beta)                        \
			return INVALID_VALUE;                                                                  \
		if (h->sync(h->stream) != 0)                                                               \
			return EXECUTION_FAILED;                                                               \
		for (int j = 0; j < n; j++)                                                                \
			for (int i = 0; i < m; i++) {                                                          \
				T s = 0;                                                                           \
				for (int l = 0; l < k; l++) {                                                      \
					T a = ta ? A[l + (long)i * lda] : A[i + (long)l * lda];                        \
					T b = tb ? B[j + (long)l * ldb] : B[l + (long)j * ldb];                        \
					s += a * b;                                                                    \
				}                                                                                  \
				T *c = &C[i + (long)j * ldc];                                                      \
				*c = *beta == 0 ? *alpha * s : *alpha * s + *beta * *c;                            \
			}                                                                                      \
		return OK;                                                                                 \
	}

GEMM(cublasSgemm_v2, float)
GEMM(cublasDgemm_v2, double)
