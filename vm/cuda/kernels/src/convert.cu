/* convert.cu: gorgonia's dtConvOp (ConvType), which converts between a float
 * type and Int (Go's int: int64 here), as Go on amd64 converts: float to int
 * truncates toward zero, and NaN, ±Inf and values outside the int64 range
 * give the minimum int64 (CVTTSD2SQ's answer; spelled out, since the C cast is
 * undefined there); int to float rounds once to nearest even. */
#include "ooc.h"

OOC_FN i64 ooc_f2i(double x) {
  if (x >= -9223372036854775808.0 && x < 9223372036854775808.0)
    return (i64)x;
  return (i64)(-9223372036854775807LL - 1);
}

#define CONVERT(T, S)                                                          \
  extern "C" __global__ void convert_##S##_i64(i64 *y, const T *x, i64 n) {    \
    OOC_FOR(i, n) { y[i] = ooc_f2i((double)x[i]); }                            \
  }                                                                            \
  extern "C" __global__ void convert_i64_##S(T *y, const i64 *x, i64 n) {      \
    OOC_FOR(i, n) { y[i] = (T)x[i]; }                                          \
  }
OOC_F32_F64(CONVERT)
