/* fakecublas.c: a fake cuBLAS for the tests, built as libcublas.so.13 by fakecuda.BuildBLAS.
 *
 * It exports the six calls package vm/cuda binds (cublasCreate_v2, cublasDestroy_v2,
 * cublasSetStream_v2, cublasSetWorkspace_v2, cublasSgemm_v2, cublasDgemm_v2) with cuBLAS's
 * column-major contract, and the version queries (cublasGetProperty, cublasGetVersion_v2:
 * 13.1.0, the CUDA 13 cuBLAS it is named after).
 * Built with FAKECUBLAS_LT (fakecuda.Install), it needs libcublasLt.so.13 as the real one
 * does (cublasCreate_v2 calls into it), with no RUNPATH: it loads only where something
 * loaded that sibling first.
 * The contract:
 * C = alpha op(A) op(B) + beta C, op(A) m x k, leading dimensions in elements, alpha and
 * beta read through host pointers (CUBLAS_POINTER_MODE_HOST, the default), C not read
 * when beta is 0. Device memory of the fake driver is host memory, so the product is a
 * host loop accumulated in the element type (float32 for Sgemm, as cuBLAS's own float32
 * GEMMs accumulate in float32).
 *
 * Arithmetic: each element of C gets the arithmetic of the CPU device's GEMM (package blas),
 * so that the fake CUDA device and the CPU device differ only where their kernels do, not in
 * every product. The environment, read at cublasCreate_v2, says which (dispatchtest.Setenv
 * sets it from package blas):
 *   OOC_FAKECUBLAS_KBLOCK=n  the k sum is cut in blocks of n (blas.KBlock), each summed in
 *                            order from 0, scaled by alpha and added to C one after another
 *                            (the first with the caller's beta, the later ones with 1);
 *                            unset or 0: one block;
 *   OOC_FAKECUBLAS_FMA=1     one fused multiply-add per term and for the beta update (the
 *                            avx2 and avx512 kernels); unset or 0: a multiply then an add,
 *                            each rounded (the portable kernel). The library is built with
 *                            -ffp-contract=off so the compiler fuses nothing itself.
 * With alpha or k zero, C = beta C (0 when beta is 0), as package blas. A real GPU's cuBLAS
 * sums in orders of its own: this is for comparing the fake device with the CPU op for op.
 *
 * Workspace: package vm/cuda gives cuBLAS a workspace from the device's budgeted memory,
 * so that cuBLAS allocates none of its own. The fake holds it to that:
 * cublasSetWorkspace_v2 refuses (CUBLAS_STATUS_INVALID_VALUE) a workspace under 16 KiB
 * (cuBLAS's minimum), not 256-byte aligned, or not inside one allocation of the fake
 * driver (cuMemGetAddressRange_v2); cublasSetStream_v2 drops the workspace, as cuBLAS's
 * does (it resets to the default pool); and a GEMM without a workspace, or whose
 * workspace is no longer allocated, fails with CUBLAS_STATUS_ALLOC_FAILED: a real cuBLAS
 * would take memory outside the budget there.
 *
 * Stream order: real cuBLAS queues its kernels on the handle's stream. The fake drains
 * that stream first (cuStreamSynchronize of the fake driver named by
 * $OOC_FAKECUBLAS_DRIVER, the same library file package cuda loaded, so the same
 * instance) and then computes on the calling thread: everything queued before the call is
 * done before the product reads its operands, and everything queued after it runs after.
 * It proves the binding and the column-major arithmetic, not cuBLAS's speed or its
 * algorithms. */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

enum { OK = 0, NOT_INITIALIZED = 1, ALLOC_FAILED = 3, INVALID_VALUE = 7, EXECUTION_FAILED = 13 };

typedef int (*stream_sync_fn)(uintptr_t);
typedef int (*addr_range_fn)(uintptr_t *, size_t *, uintptr_t);

typedef struct {
	uintptr_t stream;
	stream_sync_fn sync;
	addr_range_fn range; /* the driver's cuMemGetAddressRange_v2 */
	uintptr_t ws;        /* the workspace; 0: none */
	size_t wsize;
	long kblock; /* OOC_FAKECUBLAS_KBLOCK; 0: the whole k */
	int fma;     /* OOC_FAKECUBLAS_FMA */
} handle_t;

static long env_long(const char *name) {
	const char *v = getenv(name);
	return v && *v ? strtol(v, NULL, 10) : 0;
}

/* cuBLAS's libraryPropertyType and its CUBLAS_VERSION coding (major*10000 + minor*100 + patch). */
enum { MAJOR_VERSION = 0, MINOR_VERSION = 1, PATCH_LEVEL = 2 };
enum { VER_MAJOR = 13, VER_MINOR = 1, VER_PATCH = 0 };

int cublasGetProperty(int type, int *value) {
	if (!value)
		return INVALID_VALUE;
	switch (type) {
	case MAJOR_VERSION: *value = VER_MAJOR; return OK;
	case MINOR_VERSION: *value = VER_MINOR; return OK;
	case PATCH_LEVEL: *value = VER_PATCH; return OK;
	}
	return INVALID_VALUE;
}

#ifdef FAKECUBLAS_LT
int fakecublasLt_linked(void); /* in the fake libcublasLt.so.13 */
#endif

int cublasCreate_v2(handle_t **h) {
	if (!h)
		return INVALID_VALUE;
#ifdef FAKECUBLAS_LT
	if (!fakecublasLt_linked())
		return NOT_INITIALIZED;
#endif
	const char *path = getenv("OOC_FAKECUBLAS_DRIVER");
	if (!path || !*path)
		return NOT_INITIALIZED;
	void *drv = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!drv)
		return NOT_INITIALIZED;
	stream_sync_fn sync = (stream_sync_fn)dlsym(drv, "cuStreamSynchronize");
	addr_range_fn range = (addr_range_fn)dlsym(drv, "cuMemGetAddressRange_v2");
	if (!sync || !range)
		return NOT_INITIALIZED;
	*h = calloc(1, sizeof(handle_t));
	(*h)->sync = sync;
	(*h)->range = range;
	(*h)->kblock = env_long("OOC_FAKECUBLAS_KBLOCK");
	(*h)->fma = env_long("OOC_FAKECUBLAS_FMA") != 0;
	if ((*h)->kblock < 0)
		(*h)->kblock = 0;
	return OK;
}

int cublasGetVersion_v2(handle_t *h, int *version) {
	if (!h)
		return NOT_INITIALIZED;
	if (!version)
		return INVALID_VALUE;
	*version = VER_MAJOR * 10000 + VER_MINOR * 100 + VER_PATCH;
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
	h->ws = 0; /* cuBLAS resets the workspace to its default pool */
	h->wsize = 0;
	return OK;
}

/* inside reports whether [p, p+n) lies in one allocation of the driver. */
static int inside(handle_t *h, uintptr_t p, size_t n) {
	uintptr_t base;
	size_t size;
	return p && h->range(&base, &size, p) == 0 && p + n >= p && p + n <= base + size;
}

int cublasSetWorkspace_v2(handle_t *h, void *ws, size_t n) {
	if (!h)
		return NOT_INITIALIZED;
	if (n < 16384 || (uintptr_t)ws % 256 != 0 || !inside(h, (uintptr_t)ws, n))
		return INVALID_VALUE;
	h->ws = (uintptr_t)ws;
	h->wsize = n;
	return OK;
}

#define GEMM(NAME, T, FMA)                                                                         \
	int NAME(handle_t *h, int ta, int tb, int m, int n, int k, const T *alpha, const T *A, int lda, \
	         const T *B, int ldb, const T *beta, T *C, int ldc) {                                   \
		if (!h)                                                                                    \
			return NOT_INITIALIZED;                                                                \
		if (m < 0 || n < 0 || k < 0 || ldc < (m > 1 ? m : 1) || ta < 0 || ta > 1 || tb < 0 ||      \
		    tb > 1 || lda < ((ta ? k : m) > 1 ? (ta ? k : m) : 1) ||                               \
		    ldb < ((tb ? n : k) > 1 ? (tb ? n : k) : 1) || !alpha || !beta)                        \
			return INVALID_VALUE;                                                                  \
		if (!h->ws || !inside(h, h->ws, h->wsize))                                                 \
			return ALLOC_FAILED;                                                                   \
		if (h->sync(h->stream) != 0)                                                               \
			return EXECUTION_FAILED;                                                               \
		long kb = h->kblock > 0 ? h->kblock : (k > 0 ? k : 1);                                     \
		int fused = h->fma;                                                                        \
		for (int j = 0; j < n; j++)                                                                \
			for (int i = 0; i < m; i++) {                                                          \
				T *c = &C[i + (long)j * ldc];                                                      \
				if (k == 0 || *alpha == 0) {                                                       \
					*c = *beta == 0 ? 0 : *beta * *c;                                              \
					continue;                                                                      \
				}                                                                                  \
				T cv = *beta == 0 ? 0 : *c, bt = *beta;                                            \
				for (long l0 = 0; l0 < k; l0 += kb) {                                              \
					long l1 = l0 + kb < k ? l0 + kb : k;                                           \
					T s = 0;                                                                       \
					for (long l = l0; l < l1; l++) {                                               \
						T a = ta ? A[l + (long)i * lda] : A[i + l * lda];                          \
						T b = tb ? B[j + l * ldb] : B[l + (long)j * ldb];                          \
						s = fused ? FMA(a, b, s) : s + a * b;                                      \
					}                                                                              \
					T t = *alpha * s;                                                              \
					cv = bt == 0 ? t : (fused ? FMA(bt, cv, t) : t + bt * cv);                     \
					bt = 1;                                                                        \
				}                                                                                  \
				*c = cv;                                                                           \
			}                                                                                      \
		return OK;                                                                                 \
	}

GEMM(cublasSgemm_v2, float, fmaf)
GEMM(cublasDgemm_v2, double, fma)
