/* relu.cu: models/layers' reluOp and reluGradOp. NaN propagates forward
 * (PyTorch); the gradient at exactly 0 is 0 and reads the op's output. */
#include "ooc.h"

#define RELU(T, S)                                                             \
  extern "C" __global__ void relu_##S(T *y, const T *x, i64 n) {               \
    OOC_FOR(i, n) {                                                            \
      T v = x[i];                                                              \
      y[i] = v > 0 ? v : (v != v ? v : (T)0);                                  \
    }                                                                          \
  }                                                                            \
  extern "C" __global__ void relu_grad_##S(T *dx, const T *y, const T *dy,     \
                                           i64 n) {                            \
    OOC_FOR(i, n) { dx[i] = y[i] > 0 ? dy[i] : (T)0; }                         \
  }
OOC_F32_F64(RELU)
