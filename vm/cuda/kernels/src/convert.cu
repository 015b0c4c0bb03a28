/* convert.cu: gorgonia's dtConvOp (ConvType) between float32 and float64, as
 * Go converts: widening is exact, narrowing rounds to nearest even (the C
 * cast does the same). */
#include "ooc.h"

extern "C" __global__ void convert_f32_f64(double *y, const float *x, i64 n) {
  OOC_FOR(i, n) { y[i] = (double)x[i]; }
}

extern "C" __global__ void convert_f64_f32(float *y, const double *x, i64 n) {
  OOC_FOR(i, n) { y[i] = (float)x[i]; }
}
