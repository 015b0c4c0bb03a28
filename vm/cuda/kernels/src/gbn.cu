/* gbn.cu: gorgonia's own BatchNormOp and batchnormDiffOp (v0.9.18), as the
 * CPU device runs them: every statistic in the element type, summed serially
 * per channel in the CPU op's order, so one thread per channel gives its
 * bits. The running statistics live on the device as float64 (the element
 * type's values, widened exactly) and are updated there as the op updates
 * its own. */
#include "ooc.h"

OOC_FN float ooc_gbn_sqrt(float x) { return __builtin_sqrtf(x); }
OOC_FN double ooc_gbn_sqrt(double x) { return __builtin_sqrt(x); }

/* Channel c's batch mean and sum of squared deviations (saveMean and
 * saveVariance: the op divides the latter by n only where it uses it). */
template <typename T>
OOC_FN void ooc_gbn_stats(const T *x, i64 N, i64 C, i64 S, i64 c, T *mean, T *ssd) {
  T m = 0;
  for (i64 s = 0; s < N; s++)
    for (i64 d = 0; d < S; d++)
      m += x[(s * C + c) * S + d];
  m /= (T)(N * S);
  T v = 0;
  for (i64 s = 0; s < N; s++)
    for (i64 d = 0; d < S; d++) {
      T dx = x[(s * C + c) * S + d] - m;
      v += dx * dx;
    }
  *mean = m;
  *ssd = v;
}

/* Training: batch statistics, the running ones advanced by momentum (the
 * new batch's weight); inference: the running ones. y = x·α + β with
 * α = 1/√(var+ε), β = -(mean·α). saved is the op's saveVariance, which its
 * gradient reads: set by a training forward, zeroed by a float64 inference
 * one, left as it was by a float32 inference one (the CPU op's behaviour). */
template <typename T>
OOC_FN void ooc_gbn(T *y, const T *x, double *runMean, double *runVar,
                    double *saved, i64 N, i64 C, i64 S, double momentum,
                    double eps, i64 training) {
  OOC_FOR(c, C) {
    T mean, inv;
    if (training) {
      T m, v;
      ooc_gbn_stats(x, N, C, S, c, &m, &v);
      T mom = (T)momentum;
      runMean[c] = (double)(mom * m + ((T)1 - mom) * (T)runMean[c]);
      T unbiased = v / (T)(N * S - 1);
      runVar[c] = (double)(mom * unbiased + ((T)1 - mom) * (T)runVar[c]);
      mean = m;
      inv = (T)1 / ooc_gbn_sqrt(v / (T)(N * S) + (T)eps);
      saved[c] = (double)v;
    } else {
      if (sizeof(T) == 8)
        saved[c] = 0;
      mean = (T)runMean[c];
      inv = (T)1 / ooc_gbn_sqrt((T)runVar[c] + (T)eps);
    }
    T beta = -(mean * inv);
    for (i64 s = 0; s < N; s++)
      for (i64 d = 0; d < S; d++) {
        i64 i = (s * C + c) * S + d;
        y[i] = x[i] * inv + beta;
      }
  }
}

/* The x gradient, with the CPU op's two code paths: one element per
 * channel and image (S == 1: its inference branch takes the running
 * variance for the mean too, as the op reads it) and the rest (whose
 * inference branch reads the saved variance of the last forward). */
template <typename T>
OOC_FN void ooc_gbn_grad(T *dx, const T *x, const T *dy, const double *runVar,
                         const double *saved, i64 N, i64 C, i64 S, double eps,
                         i64 training) {
  OOC_FOR(c, C) {
    i64 n = N * S;
    T mean = 0, ssd = (T)saved[c], inv, sum = 0, dotp = 0;
    if (training)
      ooc_gbn_stats(x, N, C, S, c, &mean, &ssd);
    if (S == 1) {
      if (training) {
        inv = (T)1 / ooc_gbn_sqrt(ssd / (T)n + (T)eps);
      } else {
        mean = (T)runVar[c];
        inv = (T)1 / ooc_gbn_sqrt((T)runVar[c] + (T)eps);
      }
      for (i64 s = 0; s < n; s++) {
        i64 i = s * C + c;
        sum += dy[i];
        dotp += (x[i] - mean) * dy[i];
      }
    } else {
      for (i64 s = 0; s < N; s++)
        for (i64 d = 0; d < S; d++) {
          i64 i = (s * C + c) * S + d;
          sum += dy[i];
          dotp += x[i] * dy[i] - mean * dy[i];
        }
      inv = (T)1 / ooc_gbn_sqrt(ssd / (T)n + (T)eps);
    }
    T k = dotp * inv * inv / (T)n;
    T gradMean = sum / (T)n;
    for (i64 s = 0; s < N; s++)
      for (i64 d = 0; d < S; d++) {
        i64 i = (s * C + c) * S + d;
        if (!training) {
          dx[i] = dy[i] * inv;
          continue;
        }
        T g = (x[i] - mean) * k;
        dx[i] = S == 1 ? (dy[i] - g - gradMean) * inv : (dy[i] - gradMean - g) * inv;
      }
  }
}

#define GBN(T, S)                                                              \
  extern "C" __global__ void g_batchnorm_##S(                                  \
      T *y, const T *x, double *runMean, double *runVar, double *saved, i64 N, \
      i64 C, i64 plane, double momentum, double eps, i64 training) {           \
    ooc_gbn<T>(y, x, runMean, runVar, saved, N, C, plane, momentum, eps,       \
               training);                                                      \
  }                                                                            \
  extern "C" __global__ void g_batchnorm_grad_##S(                             \
      T *dx, const T *x, const T *dy, const double *runVar,                    \
      const double *saved, i64 N, i64 C, i64 plane, double eps,                \
      i64 training) {                                                          \
    ooc_gbn_grad<T>(dx, x, dy, runVar, saved, N, C, plane, eps, training);     \
  }
OOC_F32_F64(GBN)
