/* gtype.cu: gorgonia's dtConvOp (ConvType) between Int and the float types,
 * with Go's conversions on amd64: int(f) truncates toward zero, and a NaN or
 * a value out of int64's range gives the "integer indefinite" 1<<63, as
 * CVTTSD2SQ does (the PTX conversion would saturate instead); float(i) rounds
 * to nearest. Int tensors are int64. */
#include "ooc.h"

template <typename T>
OOC_FN void ooc_g_to_int(i64 *y, const T *x, i64 n) {
  OOC_FOR(i, n) {
    T v = x[i];
    /* [-2^63, 2^63) holds every float that truncates into int64 */
    if (v != v || v >= (T)9223372036854775808.0 || v < (T)-9223372036854775808.0)
      y[i] = (i64)(1ULL << 63);
    else
      y[i] = (i64)v;
  }
}

#define GTYPE(T, S)                                                            \
  extern "C" __global__ void g_to_int_##S(i64 *y, const T *x, i64 n) {         \
    ooc_g_to_int<T>(y, x, n);                                                  \
  }                                                                            \
  extern "C" __global__ void g_from_int_##S(T *y, const i64 *x, i64 n) {       \
    OOC_FOR(i, n) { y[i] = (T)x[i]; }                                          \
  }
OOC_F32_F64(GTYPE)
