/* ooc.h: the prelude every kernel source includes. The same kernel code is
 * compiled twice: to PTX by clang (--cuda-device-only, no CUDA headers, no
 * libdevice), and to a host shared library by g++, where host.h runs each
 * kernel over its grid with blockIdx/threadIdx as loop variables. Kernels use
 * only what both builds provide: the macros below, oocmath.h, plain C++. */
#ifndef OOC_H
#define OOC_H

#if defined(__CUDA__)
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __shared__ __attribute__((shared))
#include <__clang_cuda_builtin_vars.h> /* blockIdx, blockDim, threadIdx, gridDim */
#define OOC_FN __device__ static inline __attribute__((always_inline))
#define OOC_BARRIER() __syncthreads()
#define OOC_REQUIRE(cond)                                                      \
  do {                                                                         \
    if (!(cond))                                                               \
      __builtin_trap();                                                        \
  } while (0)
#else
#include "host.h"
#define OOC_FN static inline
#define OOC_BARRIER() ooc_host_barrier()
#endif

typedef long long i64;
typedef unsigned char u8;

/* Grid-stride loop over [0, n): any grid covers any n, so the launch table can
 * cap the grid without changing results (each index is computed by exactly one
 * thread, whatever the grid). */
#define OOC_FOR(i, n)                                                          \
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < (i64)(n);     \
       i += (i64)blockDim.x * gridDim.x)

/* Kernels written once as templates get one extern "C" entry per dtype. */
#define OOC_F32_F64(M) M(float, f32) M(double, f64)

/* ooc_layout describes an N-d walk over dim[] (row-major, last axis fastest)
 * with a stride per axis for the output and for up to two inputs, in
 * elements. A stride of 0 broadcasts; rep[d] > 1 reads input a at index
 * k/rep[d] along axis d (gorgonia's Repeat of an axis). It is passed by value
 * (248 bytes in the kernel's parameter space). */
#define OOC_MAX_DIMS 6
struct ooc_layout {
  i64 rank;
  i64 dim[OOC_MAX_DIMS];
  i64 out[OOC_MAX_DIMS];
  i64 a[OOC_MAX_DIMS];
  i64 b[OOC_MAX_DIMS];
  i64 rep[OOC_MAX_DIMS];
};

/* ooc_offsets maps the i-th element of the walk to its offsets. */
OOC_FN void ooc_offsets(const ooc_layout &L, i64 i, i64 *po, i64 *pa, i64 *pb) {
  i64 o = 0, a = 0, b = 0;
  for (int d = (int)L.rank - 1; d >= 0; d--) {
    i64 n = L.dim[d];
    i64 k = i % n;
    i /= n;
    o += k * L.out[d];
    a += (k / L.rep[d]) * L.a[d];
    b += k * L.b[d];
  }
  *po = o;
  *pa = a;
  *pb = b;
}

/* OOC_BLOCK is the block size of every kernel that reduces through shared
 * memory: their shared arrays are sized by it, so the launch table fixes it. */
#define OOC_BLOCK 256

/* Block-wide sum of one double per thread, in a fixed tree order (so the
 * result depends on the block size only, never on timing). Every thread of
 * the block must call it; all get the total. buf has OOC_BLOCK entries. */
OOC_FN double ooc_block_sum(double v, double *buf) {
  unsigned t = threadIdx.x;
  buf[t] = v;
  OOC_BARRIER();
  for (unsigned s = OOC_BLOCK / 2; s > 0; s >>= 1) {
    if (t < s)
      buf[t] += buf[t + s];
    OOC_BARRIER();
  }
  double r = buf[0];
  OOC_BARRIER(); /* buf may be reused at once by the caller */
  return r;
}

#endif
