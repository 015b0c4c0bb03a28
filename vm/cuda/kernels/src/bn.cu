/* bn.cu: models/layers' BatchNormOp (training and inference) and its
 * gradients (bnGradOp for x and gamma; beta's is channel_sum). The CPU op
 * keeps per-channel mean and 1/std in a float64 workspace; so do these:
 *
 *   training forward : bn_stats  -> mean, invstd, var   then bn_apply
 *                      (bn_running updates running stats, as the op's forward)
 *   inference forward: bn_infer_stats -> mean, invstd   then bn_apply
 *   backward         : the same stats kernel, then bn_grad_sums (which also
 *                      writes dgamma), then bn_grad_x.
 *
 * Statistics are two-pass in double like the CPU op, one block per channel,
 * whose 256 threads sum interleaved elements and add their sums in a fixed
 * tree: the order models/layers' lanes sum a channel in, so the statistics
 * are the CPU op's bits. Everything elementwise is the CPU op's arithmetic,
 * operation for operation, so the outputs are its bits too. */
#include "ooc.h"

template <typename T>
OOC_FN void ooc_bn_stats(double *mean, double *invstd, double *var, const T *x,
                         i64 N, i64 C, i64 plane, double eps) {
  __shared__ double buf[OOC_BLOCK];
  OOC_REQUIRE(blockDim.x == OOC_BLOCK);
  i64 m = N * plane;
  for (i64 c = blockIdx.x; c < C; c += gridDim.x) {
    double s = 0;
    for (i64 j = threadIdx.x; j < m; j += OOC_BLOCK)
      s += (double)x[((j / plane) * C + c) * plane + j % plane];
    double mu = ooc_block_sum(s, buf) / (double)m;
    double q = 0;
    for (i64 j = threadIdx.x; j < m; j += OOC_BLOCK) {
      double d = (double)x[((j / plane) * C + c) * plane + j % plane] - mu;
      q += d * d;
    }
    double v = ooc_block_sum(q, buf) / (double)m;
    if (threadIdx.x == 0) {
      mean[c] = mu;
      var[c] = v;
      invstd[c] = 1 / __builtin_sqrt(v + eps);
    }
  }
}

template <typename T>
OOC_FN void ooc_bn_apply(T *y, const T *x, const T *gamma, const T *beta,
                         const double *mean, const double *invstd, i64 N, i64 C,
                         i64 plane) {
  OOC_FOR(i, N * C * plane) {
    i64 c = (i / plane) % C;
    T m = (T)mean[c], a = (T)((double)gamma[c] * invstd[c]), b = beta[c];
    y[i] = (x[i] - m) * a + b;
  }
}

/* Per channel: sdy = Σdy, sdxh = Σ dy·(x-mean)·invstd; dgamma = sdxh. */
template <typename T>
OOC_FN void ooc_bn_grad_sums(T *dgamma, double *sdy, double *sdxh, const T *x,
                             const T *dy, const double *mean,
                             const double *invstd, i64 N, i64 C, i64 plane) {
  __shared__ double buf[OOC_BLOCK];
  OOC_REQUIRE(blockDim.x == OOC_BLOCK);
  i64 m = N * plane;
  for (i64 c = blockIdx.x; c < C; c += gridDim.x) {
    double mu = mean[c], a = 0, b = 0;
    for (i64 j = threadIdx.x; j < m; j += OOC_BLOCK) {
      i64 o = ((j / plane) * C + c) * plane + j % plane;
      double g = (double)dy[o];
      a += g;
      b += g * ((double)x[o] - mu);
    }
    double s1 = ooc_block_sum(a, buf);
    double s2 = ooc_block_sum(b, buf) * invstd[c];
    if (threadIdx.x == 0) {
      sdy[c] = s1;
      sdxh[c] = s2;
      dgamma[c] = (T)s2;
    }
  }
}

/* dx = gamma/std·(dy - Σdy/M - x̂·Σ(dy·x̂)/M) in training; gamma/std·dy with
 * running statistics (training == 0). */
template <typename T>
OOC_FN void ooc_bn_grad_x(T *dx, const T *x, const T *dy, const T *gamma,
                          const double *mean, const double *invstd,
                          const double *sdy, const double *sdxh, i64 N, i64 C,
                          i64 plane, int training) {
  double cnt = (double)(N * plane);
  OOC_FOR(i, N * C * plane) {
    i64 c = (i / plane) % C;
    double is = invstd[c];
    T at = (T)((double)gamma[c] * is);
    if (!training) {
      dx[i] = dy[i] * at;
      continue;
    }
    T mdy = (T)(sdy[c] / cnt), k = (T)(sdxh[c] / cnt * is), mt = (T)mean[c];
    dx[i] = at * (dy[i] - mdy - (x[i] - mt) * k);
  }
}

#define BN(T, S)                                                               \
  extern "C" __global__ void bn_stats_##S(double *mean, double *invstd,        \
                                          double *var, const T *x, i64 N,      \
                                          i64 C, i64 plane, double eps) {      \
    ooc_bn_stats<T>(mean, invstd, var, x, N, C, plane, eps);                   \
  }                                                                            \
  extern "C" __global__ void bn_apply_##S(                                     \
      T *y, const T *x, const T *gamma, const T *beta, const double *mean,     \
      const double *invstd, i64 N, i64 C, i64 plane) {                         \
    ooc_bn_apply<T>(y, x, gamma, beta, mean, invstd, N, C, plane);             \
  }                                                                            \
  extern "C" __global__ void bn_grad_sums_##S(                                 \
      T *dgamma, double *sdy, double *sdxh, const T *x, const T *dy,           \
      const double *mean, const double *invstd, i64 N, i64 C, i64 plane) {     \
    ooc_bn_grad_sums<T>(dgamma, sdy, sdxh, x, dy, mean, invstd, N, C, plane);  \
  }                                                                            \
  extern "C" __global__ void bn_grad_x_##S(                                    \
      T *dx, const T *x, const T *dy, const T *gamma, const double *mean,      \
      const double *invstd, const double *sdy, const double *sdxh, i64 N,      \
      i64 C, i64 plane, int training) {                                        \
    ooc_bn_grad_x<T>(dx, x, dy, gamma, mean, invstd, sdy, sdxh, N, C, plane,   \
                     training);                                                \
  }
OOC_F32_F64(BN)

/* Inference statistics from the running ones: invstd = 1/sqrt(var + eps). */
extern "C" __global__ void bn_infer_stats(double *mean, double *invstd,
                                          const double *runMean,
                                          const double *runVar, i64 C,
                                          double eps) {
  OOC_FOR(c, C) {
    mean[c] = runMean[c];
    invstd[c] = 1 / __builtin_sqrt(runVar[c] + eps);
  }
}

/* The running statistics update of a training forward, as the CPU op:
 * running = (1-momentum)·running + momentum·batch, the variance unbiased by
 * unbias = M/(M-1) (1 when M == 1). */
extern "C" __global__ void bn_running(double *runMean, double *runVar,
                                      const double *mean, const double *var,
                                      i64 C, double momentum, double unbias) {
  OOC_FOR(c, C) {
    runMean[c] = (1 - momentum) * runMean[c] + momentum * mean[c];
    runVar[c] = (1 - momentum) * runVar[c] + momentum * var[c] * unbias;
  }
}
