/* gindex.cu: gorgonia's Upsample2D gradient and ByIndices (v0.9.18, with
 * tensor v0.9.24's selectByIdx / selectByIndicesB), as the CPU device runs
 * them.
 *
 * Upsample2D's forward is a copy with a layout (each pixel repeated); its
 * gradient sums each pixel's (s+1)² copies in float64, in row-major order,
 * as upsampleDiffOp.Do does.
 *
 * ByIndices copies, or (its gradient) adds, one slice of L elements per
 * index i and outer block o, at offsets the tensor package's loops compute
 * (their stride steps reproduced as they are, so every shape gives the CPU
 * device's result): on the side the index selects, idx[i]·idxStride (0 when
 * idx[i] is past idxLimit, as tensor's Ltoi gives it) plus o·idxStep; on the
 * other, i·iStride (0 past iLimit) plus o·iStep. Offsets outside the
 * tensors are skipped (the CPU op panics there). */
#include "ooc.h"

template <typename T>
OOC_FN void ooc_g_upsample_grad(T *dx, const T *dy, i64 planes, i64 H, i64 W,
                                i64 s) {
  i64 f = s + 1, OW = W * f;
  OOC_FOR(idx, planes * H * W) {
    i64 w = idx % W, h = (idx / W) % H, p = idx / (W * H);
    double sum = 0;
    for (i64 a = 0; a < f; a++)
      for (i64 b = 0; b < f; b++)
        sum += (double)dy[(p * H * f + h * f + a) * OW + w * f + b];
    dx[idx] = (T)sum;
  }
}

struct ooc_byidx {
  i64 nidx, outer, L;
  i64 idxStride, idxLimit, idxStep; /* the side idx[i] selects */
  i64 iStride, iLimit, iStep;       /* the side i walks */
  i64 nIdxSide, nISide;             /* element counts, for the bounds */
};

OOC_FN i64 ooc_byidx_sel(const ooc_byidx &b, const i64 *idx, i64 i) {
  i64 v = idx[i];
  return v < b.idxLimit ? v * b.idxStride : 0;
}

/* out (the i side) from x (the idx side): one thread per element. */
template <typename T>
OOC_FN void ooc_g_byindices(T *out, const T *x, const i64 *idx, ooc_byidx b) {
  OOC_FOR(k, b.nidx * b.outer * b.L) {
    i64 j = k % b.L, o = (k / b.L) % b.outer, i = k / (b.L * b.outer);
    i64 src = ooc_byidx_sel(b, idx, i) + o * b.idxStep + j;
    i64 dst = (i < b.iLimit ? i * b.iStride : 0) + o * b.iStep + j;
    if (src >= 0 && src < b.nIdxSide && dst >= 0 && dst < b.nISide)
      out[dst] = x[src];
  }
}

/* dx (the idx side, zeroed before) += g (the i side), in the CPU's (i, o)
 * order for every element: threads split the slices' L columns (or, for
 * single-element slices, the outer blocks), which never alias. */
template <typename T>
OOC_FN void ooc_g_byindices_grad(T *dx, const T *g, const i64 *idx, ooc_byidx b) {
  if (b.L > 1) {
    OOC_FOR(j, b.L) {
      for (i64 i = 0; i < b.nidx; i++)
        for (i64 o = 0; o < b.outer; o++) {
          i64 dst = ooc_byidx_sel(b, idx, i) + o * b.idxStep + j;
          i64 src = (i < b.iLimit ? i * b.iStride : 0) + o * b.iStep + j;
          if (src >= 0 && src < b.nISide && dst >= 0 && dst < b.nIdxSide)
            dx[dst] += g[src];
        }
    }
    return;
  }
  OOC_FOR(o, b.outer) {
    for (i64 i = 0; i < b.nidx; i++) {
      i64 dst = ooc_byidx_sel(b, idx, i) + o * b.idxStep;
      i64 src = (i < b.iLimit ? i * b.iStride : 0) + o * b.iStep;
      if (src >= 0 && src < b.nISide && dst >= 0 && dst < b.nIdxSide)
        dx[dst] += g[src];
    }
  }
}

#define GINDEX(T, S)                                                           \
  extern "C" __global__ void g_upsample_grad_##S(T *dx, const T *dy,           \
                                                 i64 planes, i64 H, i64 W,     \
                                                 i64 s) {                      \
    ooc_g_upsample_grad<T>(dx, dy, planes, H, W, s);                           \
  }                                                                            \
  extern "C" __global__ void g_byindices_##S(                                  \
      T *out, const T *x, const i64 *idx, i64 nidx, i64 outer, i64 L,          \
      i64 idxStride, i64 idxLimit, i64 idxStep, i64 iStride, i64 iLimit,       \
      i64 iStep, i64 nIdxSide, i64 nISide) {                                   \
    ooc_byidx b = {nidx,    outer,  L,     idxStride, idxLimit, idxStep,       \
                   iStride, iLimit, iStep, nIdxSide,  nISide};                 \
    ooc_g_byindices<T>(out, x, idx, b);                                        \
  }                                                                            \
  extern "C" __global__ void g_byindices_grad_##S(                             \
      T *dx, const T *g, const i64 *idx, i64 nidx, i64 outer, i64 L,           \
      i64 idxStride, i64 idxLimit, i64 idxStep, i64 iStride, i64 iLimit,       \
      i64 iStep, i64 nIdxSide, i64 nISide) {                                   \
    ooc_byidx b = {nidx,    outer,  L,     idxStride, idxLimit, idxStep,       \
                   iStride, iLimit, iStep, nIdxSide,  nISide};                 \
    ooc_g_byindices_grad<T>(dx, g, idx, b);                                    \
  }
OOC_F32_F64(GINDEX)
