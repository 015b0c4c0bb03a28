/* gan.cu: models/layers' ops for the image-to-image models (Pix2PixHD):
 * LeakyReLU and Tanh with their gradients, InstanceNorm and its gradient,
 * ReflectionPad2D and its adjoint, and the mean losses MSEToConstant and
 * L1Loss with their gradients. StopGradient is the copy kernel.
 *
 * Every result is the CPU op's bits: elementwise arithmetic is its
 * arithmetic in its type; InstanceNorm's per-plane sums use one block per
 * plane and the lane order layers sums a plane in; the pad's adjoint gathers
 * the (at most 3x3) padded pixels that reflect onto an input pixel in the
 * CPU scatter's row-major order; a loss sums chunks of 16384 elements
 * serially, a thread each, and adds the chunk sums in order, as the CPU op. */
#include "ooc.h"
#include "oocmath.h"

/* The CPU op's loss chunk (layers' lossChunk). */
#define OOC_LOSS_CHUNK 16384

#define ACT(T, S)                                                              \
  extern "C" __global__ void leaky_relu_##S(T *y, const T *x, i64 n,           \
                                            double slope) {                    \
    T a = (T)slope;                                                            \
    OOC_FOR(i, n) {                                                            \
      T v = x[i];                                                              \
      y[i] = v > 0 ? v : a * v;                                                \
    }                                                                          \
  }                                                                            \
  extern "C" __global__ void leaky_relu_grad_##S(T *dx, const T *y,            \
                                                 const T *dy, i64 n,           \
                                                 double slope) {               \
    T a = (T)slope;                                                            \
    OOC_FOR(i, n) { dx[i] = y[i] > 0 ? dy[i] : a * dy[i]; }                    \
  }                                                                            \
  extern "C" __global__ void tanh_##S(T *y, const T *x, i64 n) {               \
    OOC_FOR(i, n) { y[i] = (T)ooc_tanh((double)x[i]); }                        \
  }                                                                            \
  extern "C" __global__ void tanh_grad_##S(T *dx, const T *y, const T *dy,     \
                                           i64 n) {                            \
    OOC_FOR(i, n) {                                                            \
      T v = y[i];                                                              \
      dx[i] = dy[i] * (1 - v * v);                                             \
    }                                                                          \
  }
OOC_F32_F64(ACT)

/* Instance norm over planes of `plane` pixels; with dy, its gradient. out may
 * be x or dy (the op is in place): each thread reads its elements before it
 * writes them, and the sums are complete before any write. */
template <typename T>
OOC_FN void ooc_instnorm(T *out, const T *x, const T *dy, i64 planes,
                         i64 plane, double eps) {
  __shared__ double buf[OOC_BLOCK];
  OOC_REQUIRE(blockDim.x == OOC_BLOCK);
  double cnt = (double)plane;
  for (i64 p = blockIdx.x; p < planes; p += gridDim.x) {
    const T *xr = x + p * plane;
    T *rr = out + p * plane;
    double s = 0;
    for (i64 j = threadIdx.x; j < plane; j += OOC_BLOCK)
      s += (double)xr[j];
    double mean = ooc_block_sum(s, buf) / cnt;
    double q = 0;
    for (i64 j = threadIdx.x; j < plane; j += OOC_BLOCK) {
      double d = (double)xr[j] - mean;
      q += d * d;
    }
    double is = 1 / __builtin_sqrt(ooc_block_sum(q, buf) / cnt + eps);
    if (!dy) {
      T m = (T)mean, a = (T)is;
      for (i64 j = threadIdx.x; j < plane; j += OOC_BLOCK)
        rr[j] = (xr[j] - m) * a;
      OOC_BARRIER(); /* in place: the next plane's sums read after all writes */
      continue;
    }
    const T *dr = dy + p * plane;
    double a1 = 0, b1 = 0;
    for (i64 j = threadIdx.x; j < plane; j += OOC_BLOCK) {
      double g = (double)dr[j];
      a1 += g;
      b1 += g * ((double)xr[j] - mean);
    }
    double sdy = ooc_block_sum(a1, buf);
    double sdxh = ooc_block_sum(b1, buf) * is;
    T mdy = (T)(sdy / cnt), k = (T)(sdxh / cnt * is), m = (T)mean, a = (T)is;
    for (i64 j = threadIdx.x; j < plane; j += OOC_BLOCK) {
      T g = dr[j];
      rr[j] = a * (g - mdy - (xr[j] - m) * k);
    }
    OOC_BARRIER();
  }
}

OOC_FN i64 ooc_reflect(i64 i, i64 n) {
  if (i < 0)
    return -i;
  if (i >= n)
    return 2 * (n - 1) - i;
  return i;
}

/* The padded coordinates that reflect onto r (of n), ascending: p-r (the
 * low reflection), r+p (itself), 2(n-1)-r+p (the high reflection); 0 to 3 of
 * them lie in the padded axis of n+2p and reflect back onto r. */
OOC_FN int ooc_reflected(i64 r, i64 n, i64 p, i64 *at) {
  i64 cand[3] = {p - r, r + p, 2 * (n - 1) - r + p};
  int k = 0;
  for (int c = 0; c < 3; c++) {
    i64 i = cand[c];
    if (i >= 0 && i < n + 2 * p && ooc_reflect(i - p, n) == r &&
        (k == 0 || at[k - 1] != i))
      at[k++] = i;
  }
  return k;
}

template <typename T>
OOC_FN void ooc_reflect_pad(T *y, const T *x, i64 planes, i64 H, i64 W,
                            i64 p) {
  i64 PH = H + 2 * p, PW = W + 2 * p;
  OOC_FOR(o, planes * PH * PW) {
    i64 j = o % PW, i = (o / PW) % PH, q = o / (PW * PH);
    y[o] = x[(q * H + ooc_reflect(i - p, H)) * W + ooc_reflect(j - p, W)];
  }
}

template <typename T>
OOC_FN void ooc_reflect_pad_grad(T *dx, const T *dy, i64 planes, i64 H, i64 W,
                                 i64 p) {
  i64 PH = H + 2 * p, PW = W + 2 * p;
  OOC_FOR(o, planes * H * W) {
    i64 c = o % W, r = (o / W) % H, q = o / (W * H);
    i64 rows[3], cols[3];
    int nr = ooc_reflected(r, H, p, rows), nc = ooc_reflected(c, W, p, cols);
    const T *g = dy + q * PH * PW;
    T acc = 0;
    for (int a = 0; a < nr; a++)
      for (int b = 0; b < nc; b++)
        acc += g[rows[a] * PW + cols[b]];
    dx[o] = acc;
  }
}

/* kind 0: MSEToConstant, scale·mean((a-target)²); kind 1: L1Loss,
 * scale·mean(|a-b|). One block: each round its threads sum one chunk each
 * serially, then thread 0 adds the round's chunk sums in order. */
template <typename T>
OOC_FN void ooc_mean_loss(T *loss, int kind, const T *a, const T *b, i64 n,
                          double target, double scale) {
  __shared__ double buf[OOC_BLOCK];
  OOC_REQUIRE(blockDim.x == OOC_BLOCK && gridDim.x == 1);
  i64 chunks = (n + OOC_LOSS_CHUNK - 1) / OOC_LOSS_CHUNK;
  double sum = 0;
  for (i64 r = 0; r < chunks; r += OOC_BLOCK) {
    i64 c = r + threadIdx.x;
    double acc = 0;
    if (c < chunks) {
      i64 lo = c * OOC_LOSS_CHUNK,
          hi = lo + OOC_LOSS_CHUNK < n ? lo + OOC_LOSS_CHUNK : n;
      for (i64 i = lo; i < hi; i++) {
        if (kind == 0) {
          double d = (double)a[i] - target;
          acc += d * d;
        } else {
          double d = (double)a[i] - (double)b[i];
          acc += __builtin_fabs(d);
        }
      }
    }
    buf[threadIdx.x] = acc;
    OOC_BARRIER();
    if (threadIdx.x == 0)
      for (i64 k = 0; k < OOC_BLOCK && r + k < chunks; k++)
        sum += buf[k];
    OOC_BARRIER();
  }
  if (threadIdx.x == 0)
    loss[0] = (T)(scale * sum / (double)n);
}

/* The gradient of operand wrt (0 or 1) given dloss (a device scalar). */
template <typename T>
OOC_FN void ooc_mean_loss_grad(T *d, int kind, int wrt, const T *a, const T *b,
                               const T *dloss, i64 n, double target,
                               double scale) {
  double k = scale * (double)dloss[0] / (double)n;
  if (kind == 0)
    k *= 2;
  else if (wrt == 1)
    k = -k;
  T kt = (T)k, t = (T)target;
  OOC_FOR(i, n) {
    if (kind == 0) {
      d[i] = kt * (a[i] - t);
      continue;
    }
    T v = a[i] - b[i];
    d[i] = v > 0 ? kt : (v < 0 ? -kt : v * kt);
  }
}

#define GAN(T, S)                                                              \
  extern "C" __global__ void instnorm_##S(T *y, const T *x, i64 planes,        \
                                          i64 plane, double eps) {             \
    ooc_instnorm<T>(y, x, (const T *)0, planes, plane, eps);                   \
  }                                                                            \
  extern "C" __global__ void instnorm_grad_##S(                                \
      T *dx, const T *x, const T *dy, i64 planes, i64 plane, double eps) {     \
    ooc_instnorm<T>(dx, x, dy, planes, plane, eps);                            \
  }                                                                            \
  extern "C" __global__ void reflect_pad_##S(T *y, const T *x, i64 planes,     \
                                             i64 H, i64 W, i64 p) {            \
    ooc_reflect_pad<T>(y, x, planes, H, W, p);                                 \
  }                                                                            \
  extern "C" __global__ void reflect_pad_grad_##S(                             \
      T *dx, const T *dy, i64 planes, i64 H, i64 W, i64 p) {                   \
    ooc_reflect_pad_grad<T>(dx, dy, planes, H, W, p);                          \
  }                                                                            \
  extern "C" __global__ void mean_loss_##S(T *loss, int kind, const T *a,      \
                                           const T *b, i64 n, double target,   \
                                           double scale) {                     \
    ooc_mean_loss<T>(loss, kind, a, b, n, target, scale);                      \
  }                                                                            \
  extern "C" __global__ void mean_loss_grad_##S(                               \
      T *d, int kind, int wrt, const T *a, const T *b, const T *dloss, i64 n,  \
      double target, double scale) {                                           \
    ooc_mean_loss_grad<T>(d, kind, wrt, a, b, dloss, n, target, scale);        \
  }
OOC_F32_F64(GAN)
