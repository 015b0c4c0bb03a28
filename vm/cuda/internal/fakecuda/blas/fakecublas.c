/* fakecublas.c: a fake cuBLAS for the tests, built as libcublas.so.13 by fakecuda.BuildBLAS.
 *
 * It exports the calls package vm/cuda binds (cublasCreate_v2, cublasDestroy_v2,
 * cublasSetStream_v2, cublasSetWorkspace_v2, cublasSetPointerMode_v2, and for float32 and
 * float64 gemm_v2, gemmBatched, gemv_v2, ger_v2 and dot_v2) with cuBLAS's column-major
 * contract and argument checks (INVALID_VALUE for a bad size, leading dimension, increment
 * or operation), and the version queries (cublasGetProperty, cublasGetVersion_v2: 13.1.0,
 * the CUDA 13 cuBLAS it is named after).
 * Built with FAKECUBLAS_LT (fakecuda.Install), it needs libcublasLt.so.13 as the real one
 * does (cublasCreate_v2 calls into it), with no RUNPATH: it loads only where something
 * loaded that sibling first.
 * The contract:
 * C = alpha op(A) op(B) + beta C, op(A) m x k, leading dimensions in elements, alpha and
 * beta read through the pointer mode (host pointers in CUBLAS_POINTER_MODE_HOST, the
 * default; device addresses in DEVICE mode; one on the wrong side is refused), C not read
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
	int mode;    /* cublasPointerMode_t: MODE_HOST (the default) or MODE_DEVICE */
} handle_t;

enum { MODE_HOST = 0, MODE_DEVICE = 1 };

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


int cublasSetPointerMode_v2(handle_t *h, int mode) {
	if (!h)
		return NOT_INITIALIZED;
	if (mode != MODE_HOST && mode != MODE_DEVICE)
		return INVALID_VALUE;
	h->mode = mode;
	return OK;
}

int cublasGetPointerMode_v2(handle_t *h, int *mode) {
	if (!h)
		return NOT_INITIALIZED;
	if (!mode)
		return INVALID_VALUE;
	*mode = h->mode;
	return OK;
}

/* on_side reports whether a scalar argument or a dot's result of n bytes lies on the side
 * the pointer mode says: host memory in CUBLAS_POINTER_MODE_HOST, device memory in DEVICE
 * mode. A real cuBLAS would read host memory from a kernel, or write device memory from
 * the host, and fault; the fake refuses the call (INVALID_VALUE) instead. */
static int on_side(handle_t *h, const void *p, size_t n) {
	if (!p)
		return 0;
	int dev = inside(h, (uintptr_t)p, n);
	return h->mode == MODE_DEVICE ? dev : !dev;
}

/* start is what every computing call does before it reads its operands: a workspace, or a
 * real cuBLAS would allocate outside the budget (ALLOC_FAILED), and the stream drained. */
static int start(handle_t *h) {
	if (!h->ws || !inside(h, h->ws, h->wsize))
		return ALLOC_FAILED;
	if (h->sync(h->stream) != 0)
		return EXECUTION_FAILED;
	return OK;
}

static int max1(int v) { return v > 1 ? v : 1; }

/* gemm_bad: cuBLAS's argument checks of a GEMM (ta, tb: 0 N, 1 T, 2 C). */
static int gemm_bad(int ta, int tb, int m, int n, int k, int lda, int ldb, int ldc) {
	return m < 0 || n < 0 || k < 0 || ta < 0 || ta > 2 || tb < 0 || tb > 2 || ldc < max1(m) ||
	       lda < max1(ta ? k : m) || ldb < max1(tb ? n : k);
}

/* GEMM_BODY defines the column-major product C = alpha op(A) op(B) + beta C with package
 * blas's per-element arithmetic (see the top of the file). */
#define GEMM_BODY(NAME, T, FMA)                                                                  \
	static void NAME(handle_t *h, int ta, int tb, int m, int n, int k, T alpha, const T *A,      \
	                 int lda, const T *B, int ldb, T beta, T *C, int ldc) {                      \
		long kb = h->kblock > 0 ? h->kblock : (k > 0 ? k : 1);                                   \
		int fused = h->fma;                                                                      \
		for (int j = 0; j < n; j++)                                                              \
			for (int i = 0; i < m; i++) {                                                        \
				T *c = &C[i + (long)j * ldc];                                                    \
				if (k == 0 || alpha == 0) {                                                      \
					*c = beta == 0 ? 0 : beta * *c;                                              \
					continue;                                                                    \
				}                                                                                \
				T cv = beta == 0 ? 0 : *c, bt = beta;                                            \
				for (long l0 = 0; l0 < k; l0 += kb) {                                            \
					long l1 = l0 + kb < k ? l0 + kb : k;                                         \
					T s = 0;                                                                     \
					for (long l = l0; l < l1; l++) {                                             \
						T a = ta ? A[l + (long)i * lda] : A[i + l * lda];                        \
						T b = tb ? B[j + l * ldb] : B[l + (long)j * ldb];                        \
						s = fused ? FMA(a, b, s) : s + a * b;                                    \
					}                                                                            \
					T t = alpha * s;                                                             \
					cv = bt == 0 ? t : (fused ? FMA(bt, cv, t) : t + bt * cv);                   \
					bt = 1;                                                                      \
				}                                                                                \
				*c = cv;                                                                         \
			}                                                                                    \
	}

GEMM_BODY(gemm32, float, fmaf)
GEMM_BODY(gemm64, double, fma)

#define GEMM(NAME, T, BODY)                                                                       \
	int NAME(handle_t *h, int ta, int tb, int m, int n, int k, const T *alpha, const T *A, int lda, \
	         const T *B, int ldb, const T *beta, T *C, int ldc) {                                   \
		if (!h)                                                                                    \
			return NOT_INITIALIZED;                                                                \
		if (gemm_bad(ta, tb, m, n, k, lda, ldb, ldc) || !on_side(h, alpha, sizeof(T)) ||           \
		    !on_side(h, beta, sizeof(T)))                                                          \
			return INVALID_VALUE;                                                                  \
		int st = start(h);                                                                         \
		if (st != OK)                                                                              \
			return st;                                                                             \
		BODY(h, ta, tb, m, n, k, *alpha, A, lda, B, ldb, *beta, C, ldc);                           \
		return OK;                                                                                 \
	}

GEMM(cublasSgemm_v2, float, gemm32)
GEMM(cublasDgemm_v2, double, gemm64)

/* The batched GEMM: Aarray, Barray and Carray are arrays of batchCount matrix addresses in
 * device memory (a real cuBLAS reads them in its kernels: an array in host memory is
 * refused), each product done as cublas{S,D}gemm_v2 does it. */
#define GEMM_BATCHED(NAME, T, BODY)                                                               \
	int NAME(handle_t *h, int ta, int tb, int m, int n, int k, const T *alpha, const T *const *A,  \
	         int lda, const T *const *B, int ldb, const T *beta, T *const *C, int ldc, int batch) { \
		if (!h)                                                                                    \
			return NOT_INITIALIZED;                                                                \
		if (gemm_bad(ta, tb, m, n, k, lda, ldb, ldc) || batch < 0 || !on_side(h, alpha, sizeof(T)) || \
		    !on_side(h, beta, sizeof(T)))                                                          \
			return INVALID_VALUE;                                                                  \
		size_t bytes = (size_t)batch * sizeof(void *);                                             \
		if (batch > 0 && (!inside(h, (uintptr_t)A, bytes) || !inside(h, (uintptr_t)B, bytes) ||    \
		                  !inside(h, (uintptr_t)C, bytes)))                                        \
			return INVALID_VALUE;                                                                  \
		int st = start(h);                                                                         \
		if (st != OK)                                                                              \
			return st;                                                                             \
		for (int i = 0; i < batch; i++)                                                            \
			BODY(h, ta, tb, m, n, k, *alpha, A[i], lda, B[i], ldb, *beta, C[i], ldc);              \
		return OK;                                                                                 \
	}

GEMM_BATCHED(cublasSgemmBatched, float, gemm32)
GEMM_BATCHED(cublasDgemmBatched, double, gemm64)

/* Level 1 and 2: the arithmetic of gonum's amd64 kernels, which package blas's
 * Implementation (gorgonia's and tensor's BLAS) runs for MatVecMul (Dgemv, Sgemv), Outer
 * (Dger, Sger) and Inner (Ddot, Sdot) on the CPU device. cuBLAS is column-major and gonum
 * row-major: a column-major m x n matrix with leading dimension lda is gonum's row-major
 * n x m one, so gemv(N) is gonum's gemv(T) of the same memory, gemv(T) gonum's gemv(N), and
 * ger(m, n, x, y) gonum's ger(n, m, y, x). The order of every sum is gonum's:
 *   Ddot (f64.DotUnitary): four partial sums, element i into sum i mod 4 while four remain,
 *     the rest into sum 0; then (s0 + s2) + (s1 + s3).
 *   Sdot (f32.DotUnitary): elements into sum 0 until y's address is 16-byte aligned; then
 *     blocks of 16 into two sets of four lanes (lane j: i+j, i+8+j; i+4+j, i+12+j), the sets
 *     added; blocks of 4 into the lanes; the rest into lane 0; (s0 + s1) + (s2 + s3).
 *   gemv(T) in float64 (f64.GemvN): per output, two lanes (columns c and c+2 into lane 0,
 *     c+1 and c+3 into lane 1, then a pair), the lanes added, then an odd last column;
 *     except the last output of an odd count, whose odd last column goes into lane 0 before
 *     the lanes are added. y = alpha s + beta y (+0 for beta 0: y is cleared first).
 *   gemv(T) in float32: each output alpha times Sdot's sum of its column and x (y = alpha s,
 *     or y beta + alpha s).
 *   gemv(N): y cleared (beta 0) or scaled, then column after column y += (alpha x_j) A_ij, in
 *     order: each output summed in order.
 *   ger: A_ij = (alpha y_j) x_i + A_ij.
 * A multiply and an add, each rounded: gonum's kernels fuse nothing. Strided vectors (inc
 * other than 1, negative ones from the far end as BLAS has it) take the same order, and
 * Sdot aligns only a unit-stride y: gonum's strided kernels order some sums otherwise,
 * and the dispatch passes unit strides. */
#define AT(p, i, n, inc) (p)[(inc) > 0 ? (long)(i) * (inc) : ((long)(n)-1 - (long)(i)) * -(long)(inc)]

static double dot64(long n, const double *x, int incx, const double *y, int incy) {
	double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
	long i = 0;
	for (; i + 4 <= n; i += 4) {
		s0 += AT(x, i, n, incx) * AT(y, i, n, incy);
		s1 += AT(x, i + 1, n, incx) * AT(y, i + 1, n, incy);
		s2 += AT(x, i + 2, n, incx) * AT(y, i + 2, n, incy);
		s3 += AT(x, i + 3, n, incx) * AT(y, i + 3, n, incy);
	}
	for (; i < n; i++)
		s0 += AT(x, i, n, incx) * AT(y, i, n, incy);
	s0 += s2;
	s1 += s3;
	return s0 + s1;
}

static float dot32(long n, const float *x, int incx, const float *y, int incy) {
	float s[4] = {0, 0, 0, 0}, p[4] = {0, 0, 0, 0};
	long i = 0;
	if (n <= 0)
		return 0;
	if (incy == 1 && (uintptr_t)y % 16 != 0) {
		for (long trim = (16 - (uintptr_t)y % 16) / 4; trim > 0 && i < n; trim--, i++)
			s[0] += AT(x, i, n, incx) * y[i];
		if (i == n)
			goto end;
	}
	long blocks = (n - i) / 16, tail = (n - i) % 16;
	if (blocks > 0) {
		for (; blocks > 0; blocks--, i += 16)
			for (int j = 0; j < 4; j++) {
				s[j] += AT(x, i + j, n, incx) * AT(y, i + j, n, incy);
				p[j] += AT(x, i + 4 + j, n, incx) * AT(y, i + 4 + j, n, incy);
				s[j] += AT(x, i + 8 + j, n, incx) * AT(y, i + 8 + j, n, incy);
				p[j] += AT(x, i + 12 + j, n, incx) * AT(y, i + 12 + j, n, incy);
			}
		for (int j = 0; j < 4; j++)
			s[j] += p[j];
		if (tail == 0)
			goto end;
	}
	for (long t = tail / 4; t > 0; t--, i += 4)
		for (int j = 0; j < 4; j++)
			s[j] += AT(x, i + j, n, incx) * AT(y, i + j, n, incy);
	for (long t = tail % 4; t > 0; t--, i++)
		s[0] += AT(x, i, n, incx) * AT(y, i, n, incy);
end:
	return (s[0] + s[1]) + (s[2] + s[3]);
}

/* gemv_row64 is f64.GemvN's sum of one row a (n long) times x; single: the row is the last
 * of an odd count, which the kernel does alone. */
static double gemv_row64(const double *a, long n, const double *x, int incx, int single) {
	double l0 = 0, l1 = 0;
	long c = 0;
	for (; c + 4 <= n; c += 4) {
		l0 += a[c] * AT(x, c, n, incx);
		l0 += a[c + 2] * AT(x, c + 2, n, incx);
		l1 += a[c + 1] * AT(x, c + 1, n, incx);
		l1 += a[c + 3] * AT(x, c + 3, n, incx);
	}
	if (n & 2) {
		l0 += a[c] * AT(x, c, n, incx);
		l1 += a[c + 1] * AT(x, c + 1, n, incx);
		c += 2;
	}
	if (!(n & 1))
		return l0 + l1;
	double p = a[c] * AT(x, c, n, incx);
	if (single) {
		l0 += p;
		return l0 + l1;
	}
	return (l0 + l1) + p;
}

static double gemv_out64(const double *a, long n, const double *x, int incx, int single, double alpha, double beta,
                         double y) {
	double s = gemv_row64(a, n, x, incx, single);
	return (beta == 0 ? 0 : beta * y) + alpha * s;
}

static float gemv_out32(const float *a, long n, const float *x, int incx, int single, float alpha, float beta, float y) {
	(void)single;
	float s = dot32(n, a, 1, x, incx);
	return beta == 0 ? alpha * s : y * beta + alpha * s;
}

/* GEMV: trans 0 (N) is gonum's axpy form, 1 or 2 (T, C: real types) its dot form. */
#define GEMV(NAME, T, OUT, SCALE1)                                                                 \
	int NAME(handle_t *h, int trans, int m, int n, const T *alpha, const T *A, int lda, const T *x, \
	         int incx, const T *beta, T *y, int incy) {                                              \
		if (!h)                                                                                     \
			return NOT_INITIALIZED;                                                                 \
		if (trans < 0 || trans > 2 || m < 0 || n < 0 || lda < max1(m) || incx == 0 || incy == 0 ||  \
		    !on_side(h, alpha, sizeof(T)) || !on_side(h, beta, sizeof(T)))                          \
			return INVALID_VALUE;                                                                   \
		if (m == 0 || n == 0)                                                                       \
			return OK;                                                                              \
		int st = start(h);                                                                          \
		if (st != OK)                                                                               \
			return st;                                                                              \
		T al = *alpha, be = *beta;                                                                  \
		long ny = trans ? n : m, nx = trans ? m : n;                                                \
		if (al == 0) {                                                                              \
			if (be != 1)                                                                            \
				for (long i = 0; i < ny; i++)                                                       \
					AT(y, i, ny, incy) = be == 0 ? 0 : be * AT(y, i, ny, incy);                     \
			return OK;                                                                              \
		}                                                                                           \
		if (trans) {                                                                                \
			for (long j = 0; j < n; j++)                                                            \
				AT(y, j, ny, incy) = OUT(A + j * (long)lda, m, x, incx, (n & 1) && j == n - 1, al, be, \
				                         AT(y, j, ny, incy));                                       \
			return OK;                                                                              \
		}                                                                                           \
		for (long i = 0; i < m; i++) {                                                              \
			T *yi = &AT(y, i, ny, incy);                                                            \
			*yi = be == 0 ? 0 : (be == 1 && SCALE1 ? *yi : *yi * be);                               \
		}                                                                                           \
		for (long j = 0; j < n; j++) {                                                              \
			T ax = al * AT(x, j, nx, incx);                                                         \
			const T *a = A + j * (long)lda;                                                         \
			for (long i = 0; i < m; i++)                                                            \
				AT(y, i, ny, incy) = ax * a[i] + AT(y, i, ny, incy);                                \
		}                                                                                           \
		return OK;                                                                                  \
	}

/* gonum's float64 GemvT leaves y alone for beta 1; its float32 one multiplies by 1. */
GEMV(cublasDgemv_v2, double, gemv_out64, 1)
GEMV(cublasSgemv_v2, float, gemv_out32, 0)

#define GER(NAME, T)                                                                               \
	int NAME(handle_t *h, int m, int n, const T *alpha, const T *x, int incx, const T *y, int incy, \
	         T *A, int lda) {                                                                        \
		if (!h)                                                                                     \
			return NOT_INITIALIZED;                                                                 \
		if (m < 0 || n < 0 || incx == 0 || incy == 0 || lda < max1(m) || !on_side(h, alpha, sizeof(T))) \
			return INVALID_VALUE;                                                                   \
		if (m == 0 || n == 0)                                                                       \
			return OK;                                                                              \
		int st = start(h);                                                                          \
		if (st != OK)                                                                               \
			return st;                                                                              \
		T al = *alpha;                                                                              \
		if (al == 0)                                                                                \
			return OK;                                                                              \
		for (long j = 0; j < n; j++) {                                                              \
			T ay = al * AT(y, j, n, incy);                                                          \
			for (long i = 0; i < m; i++)                                                            \
				A[i + j * (long)lda] = ay * AT(x, i, m, incx) + A[i + j * (long)lda];               \
		}                                                                                           \
		return OK;                                                                                  \
	}

GER(cublasDger_v2, double)
GER(cublasSger_v2, float)

/* DOT: the result through the pointer mode (a device address in DEVICE mode: the call
 * then returns without the host waiting, as a real one does; the fake computes at once,
 * after draining the stream, as its GEMM does). n <= 0 gives 0, as BLAS. */
#define DOT(NAME, T, SUM)                                                                          \
	int NAME(handle_t *h, int n, const T *x, int incx, const T *y, int incy, T *result) {           \
		if (!h)                                                                                     \
			return NOT_INITIALIZED;                                                                 \
		if (!on_side(h, result, sizeof(T)))                                                         \
			return INVALID_VALUE;                                                                   \
		int st = start(h);                                                                          \
		if (st != OK)                                                                               \
			return st;                                                                              \
		*result = n > 0 ? SUM(n, x, incx, y, incy) : 0;                                             \
		return OK;                                                                                  \
	}

DOT(cublasDdot_v2, double, dot64)
DOT(cublasSdot_v2, float, dot32)
