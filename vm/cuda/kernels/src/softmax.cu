/* softmax.cu: gorgonia's softmaxOp/softmaxDiffOp (LogSoftMax and SoftMax
 * along an axis) and the zoo's loss, softmax cross-entropy, fused.
 *
 * Layout (outer, k, inner), softmax over k; one thread per (outer, inner)
 * row, serial over k in tensor's order (max, then the sum of exponentials in
 * the tensor's type, then the outputs). That is tensor's inner-axis code.
 * Its last-axis code (softMaxLastDimF32/F64 in tensor v0.9.24) differs in
 * the maximum it subtracts: it starts from the tensor's first element x[0]
 * and then takes the row's elements 1..k-1, so row r's maximum is
 * max(x[0], x[r][1:]), which leaves out the row's own first element (except
 * in row 0, where it is x[0]). A row far below x[0] underflows (log of 0
 * gives +Inf), a row whose first element is far above the rest overflows,
 * and a NaN at x[0] poisons every row.
 *
 * mode bit 0 is LogSoftMax; bit 1 (the dispatch sets it when the axis is the
 * last) asks for tensor's last-axis maximum m where that is safe: when it is
 * within OOC_SOFTMAX_SHIFT of the row's own maximum r, every shifted element
 * is at most e^16 and the largest at least e^-16, so nothing overflows or
 * underflows that would not with r, and the result differs from r's only by
 * rounding; softmax is shift-invariant. Then the kernel gives the CPU op's
 * bits. Further apart (or with a NaN at x[0]), the kernel uses r and is
 * right where the CPU op is not (TestSoftmaxLastAxisBug). */
#include "ooc.h"
#include "oocmath.h"

#define OOC_SOFTMAX_SHIFT 16

template <typename T> OOC_FN T ooc_exp_t(T x) {
  return sizeof(T) == 4 ? (T)ooc_expf((float)x) : (T)ooc_exp((double)x);
}
template <typename T> OOC_FN T ooc_log_t(T x) { return (T)ooc_log((double)x); }

template <typename T>
OOC_FN void ooc_softmax(int mode, T *y, const T *x, i64 outer, i64 k, i64 inner) {
  int lg = mode & 1;
  OOC_FOR(i, outer * inner) {
    i64 base = (i / inner) * k * inner + i % inner;
    const T *xp = x + base;
    T *yp = y + base;
    T mx = xp[0];
    for (i64 j = 1; j < k; j++)
      if (xp[j * inner] > mx)
        mx = xp[j * inner];
    if (mode & 2) {
      T m = x[0];
      for (i64 j = 1; j < k; j++)
        if (xp[j * inner] > m)
          m = xp[j * inner];
      if (m - mx <= (T)OOC_SOFTMAX_SHIFT && mx - m <= (T)OOC_SOFTMAX_SHIFT)
        mx = m;
    }
    T sum = 0;
    for (i64 j = 0; j < k; j++) {
      T e = ooc_exp_t<T>(xp[j * inner] - mx);
      if (!lg)
        yp[j * inner] = e;
      sum += e;
    }
    if (lg) {
      T ls = ooc_log_t<T>(sum);
      for (i64 j = 0; j < k; j++)
        yp[j * inner] = xp[j * inner] - mx - ls;
    } else {
      T inv = (T)1 / sum;
      for (i64 j = 0; j < k; j++)
        yp[j * inner] *= inv;
    }
  }
}

/* dx from y (the op's output) and dy: log: dy - exp(y)*Σdy; plain:
 * y*(dy - Σ y*dy). */
template <typename T>
OOC_FN void ooc_softmax_grad(int lg, T *dx, const T *y, const T *dy, i64 outer,
                             i64 k, i64 inner) {
  OOC_FOR(i, outer * inner) {
    i64 base = (i / inner) * k * inner + i % inner;
    const T *yp = y + base, *gp = dy + base;
    T *dp = dx + base;
    T sum = 0;
    for (i64 j = 0; j < k; j++)
      sum += lg ? gp[j * inner] : gp[j * inner] * yp[j * inner];
    for (i64 j = 0; j < k; j++) {
      i64 q = j * inner;
      dp[q] = lg ? gp[q] - ooc_exp_t<T>(yp[q]) * sum : yp[q] * (gp[q] - sum);
    }
  }
}

#define SOFTMAX(T, S)                                                          \
  extern "C" __global__ void softmax_##S(int mode, T *y, const T *x,          \
                                         i64 outer, i64 k, i64 inner) {        \
    ooc_softmax<T>(mode, y, x, outer, k, inner);                               \
  }                                                                            \
  extern "C" __global__ void softmax_grad_##S(int lg, T *dx, const T *y,       \
                                              const T *dy, i64 outer, i64 k,   \
                                              i64 inner) {                     \
    ooc_softmax_grad<T>(lg, dx, y, dy, outer, k, inner);                       \
  }
OOC_F32_F64(SOFTMAX)

/* The zoo's loss: -mean over rows of Σ_k t·logsoftmax(x), rows being the
 * (outer, inner) pairs (images, or pixels for U-Net). One block: each thread
 * takes rows in a grid-stride walk, Σ_k per row in the tensor's type as
 * gorgonia's graph does, the mean over rows in double through the block. */
template <typename T>
OOC_FN T ooc_row_xent(const T *xp, const T *tp, i64 k, i64 inner) {
  T mx = xp[0];
  for (i64 j = 1; j < k; j++)
    if (xp[j * inner] > mx)
      mx = xp[j * inner];
  T sum = 0;
  for (i64 j = 0; j < k; j++)
    sum += ooc_exp_t<T>(xp[j * inner] - mx);
  T ls = ooc_log_t<T>(sum), r = 0;
  for (i64 j = 0; j < k; j++)
    r += (xp[j * inner] - mx - ls) * tp[j * inner];
  return r;
}

template <typename T>
OOC_FN void ooc_xent_loss(T *loss, const T *x, const T *t, i64 outer, i64 k,
                          i64 inner) {
  __shared__ double buf[OOC_BLOCK];
  OOC_REQUIRE(blockDim.x == OOC_BLOCK && gridDim.x == 1);
  i64 rows = outer * inner;
  double acc = 0;
  for (i64 i = threadIdx.x; i < rows; i += OOC_BLOCK) {
    i64 base = (i / inner) * k * inner + i % inner;
    acc += (double)ooc_row_xent<T>(x + base, t + base, k, inner);
  }
  double s = ooc_block_sum(acc, buf);
  if (threadIdx.x == 0)
    loss[0] = (T)(-(s / (double)rows));
}

/* dlogits = scale·(softmax(x)·Σ_k t - t), the gradient of the loss times
 * scale (pass dloss/rows). */
template <typename T>
OOC_FN void ooc_xent_grad(T *dx, const T *x, const T *t, i64 outer, i64 k,
                          i64 inner, T scale) {
  OOC_FOR(i, outer * inner) {
    i64 base = (i / inner) * k * inner + i % inner;
    const T *xp = x + base, *tp = t + base;
    T *dp = dx + base;
    T mx = xp[0];
    for (i64 j = 1; j < k; j++)
      if (xp[j * inner] > mx)
        mx = xp[j * inner];
    T sum = 0, st = 0;
    for (i64 j = 0; j < k; j++) {
      sum += ooc_exp_t<T>(xp[j * inner] - mx);
      st += tp[j * inner];
    }
    T inv = (T)1 / sum;
    for (i64 j = 0; j < k; j++) {
      i64 q = j * inner;
      dp[q] = scale * (ooc_exp_t<T>(xp[q] - mx) * inv * st - tp[q]);
    }
  }
}

#define XENT(T, S)                                                             \
  extern "C" __global__ void xent_loss_##S(T *loss, const T *x, const T *t,    \
                                           i64 outer, i64 k, i64 inner) {      \
    ooc_xent_loss<T>(loss, x, t, outer, k, inner);                             \
  }                                                                            \
  extern "C" __global__ void xent_grad_##S(T *dx, const T *x, const T *t,      \
                                           i64 outer, i64 k, i64 inner,        \
                                           T scale) {                          \
    ooc_xent_grad<T>(dx, x, t, outer, k, inner, scale);                        \
  }
OOC_F32_F64(XENT)
