/* gsparse.cu: gorgonia's sparsemaxOp (along the last axis) and its gradient
 * sparsemaxDiffOp (2-D), as the CPU device runs them: one thread per row,
 * the row's arithmetic in the element type and in Do's order. The forward
 * sorts the row's shifted values (descending) in place in y, which it then
 * overwrites with the result; the order among equal values does not change
 * any sum. ooc_max_finite is gnn.cu's (all.cu includes it first). */
#include "ooc.h"

template <typename T>
OOC_FN void ooc_g_sparsemax(T *y, const T *x, i64 rows, i64 n) {
  OOC_FOR(r, rows) {
    const T *xr = x + r * n;
    T *yr = y + r * n;
    T mx = -ooc_max_finite((T)0);
    for (i64 j = 0; j < n; j++)
      if (xr[j] > mx)
        mx = xr[j];
    for (i64 j = 0; j < n; j++) { /* insertion sort, descending */
      T v = xr[j] - mx;
      i64 k = j;
      for (; k > 0 && yr[k - 1] < v; k--)
        yr[k] = yr[k - 1];
      yr[k] = v;
    }
    T cum = 0, prev = 0;
    i64 kmax = 0;
    for (i64 j = 0; j < n; j++) {
      T k = (T)1 + (T)(j + 1) * yr[j];
      prev += yr[j];
      if (k > prev) {
        kmax = j + 1;
        cum += yr[j];
      }
    }
    T tau = (cum - (T)1) / (T)kmax;
    for (i64 j = 0; j < n; j++) {
      T v = xr[j] - mx;
      yr[j] = v - tau > 0 ? v - tau : (T)0;
    }
  }
}

/* dx = nz ⊙ (dy - Σ(nz ⊙ dy) / Σ nz) per row, nz = (y != 0). */
template <typename T>
OOC_FN void ooc_g_sparsemax_grad(T *dx, const T *y, const T *dy, i64 rows, i64 n) {
  OOC_FOR(r, rows) {
    const T *yr = y + r * n, *gr = dy + r * n;
    T a = 0, b = 0;
    for (i64 j = 0; j < n; j++) {
      T nz = yr[j] != 0 ? (T)1 : (T)0;
      a += nz * gr[j];
      b += nz;
    }
    T s = a / b;
    for (i64 j = 0; j < n; j++) {
      T nz = yr[j] != 0 ? (T)1 : (T)0;
      dx[r * n + j] = nz * (gr[j] - s);
    }
  }
}

#define GSPARSE(T, S)                                                          \
  extern "C" __global__ void g_sparsemax_##S(T *y, const T *x, i64 rows,       \
                                             i64 n) {                          \
    ooc_g_sparsemax<T>(y, x, rows, n);                                         \
  }                                                                            \
  extern "C" __global__ void g_sparsemax_grad_##S(T *dx, const T *y,           \
                                                  const T *dy, i64 rows,       \
                                                  i64 n) {                     \
    ooc_g_sparsemax_grad<T>(dx, y, dy, rows, n);                               \
  }
OOC_F32_F64(GSPARSE)
