/* gdropout.cu: gorgonia's dropoutOp and dropoutDiffOp (v0.9.18). The mask
 * is drawn on the host from the op's own generator, one number per element
 * in order as its Do draws them, and uploaded as 1 (kept) or 0 into y, which
 * g_dropout then overwrites with x / keep or 0. The gradient is the CPU op's,
 * its scale included (dy / p where y is not 0). */
#include "ooc.h"

#define GDROPOUT(T, S)                                                         \
  extern "C" __global__ void g_dropout_##S(T *y, const T *x, i64 n,            \
                                           double keep) {                      \
    OOC_FOR(i, n) { y[i] = y[i] != 0 ? x[i] / (T)keep : (T)0; }                \
  }                                                                            \
  extern "C" __global__ void g_dropout_grad_##S(T *dx, const T *y,             \
                                                const T *dy, i64 n,            \
                                                double p) {                    \
    OOC_FOR(i, n) { dx[i] = p != 0 && y[i] != 0 ? dy[i] / (T)p : (T)0; }       \
  }
OOC_F32_F64(GDROPOUT)
