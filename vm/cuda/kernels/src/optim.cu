/* optim.cu: gorgonia's solvers (solvers.go, v0.9.18) for tensor weights,
 * operation for operation in the tensor's type, so the updates are the CPU
 * solvers' bits. Each thread updates one element: weights, the solver's
 * caches, and zeroes the gradient, as Step does.
 *
 * The caller passes the constants as gorgonia computes them for the dtype
 * (e.g. float32(-eta), float32(1)/float32(batch)) and flags saying which
 * optional steps Step takes (OOC_OPT_* in ops.h): L1 and L2 regularisation,
 * batch scaling (batch > 1), clipping (useClip, and clip > 0 where Step checks
 * it). Quirks kept: Momentum regularises with its velocity cache instead of
 * the weights; RMSProp updates its cache with the unclipped gradient and has
 * no L1 or batch scaling; Adam divides with vecf's Div (a zero divisor gives
 * +Inf). */
#include "ooc.h"
#include "ops.h"

template <typename T> OOC_FN T ooc_clamp(T v, T lo, T hi) {
  /* tensor's Clamp: NaN passes through. */
  if (v < lo || v < -(T)1.7976931348623157e308)
    return lo;
  if (v > hi || v > (T)1.7976931348623157e308)
    return hi;
  return v;
}

/* The shared prologue of SGD, Momentum and Adam: regularise (with r, the
 * weights or Momentum's cache), scale by the batch, clip. */
template <typename T>
OOC_FN T ooc_prep_grad(T g, T r, int flags, T l1reg, T l2reg, T onePerBatch,
                       T negClip, T clip) {
  if (flags & OOC_OPT_L1) {
    T s = r < 0 ? (T)-1 : r > 0 ? (T)1 : r;
    g = g + l1reg * s;
  }
  if (flags & OOC_OPT_L2)
    g = g + r * l2reg;
  if (flags & OOC_OPT_BATCH)
    g = g * onePerBatch;
  if (flags & OOC_OPT_CLIP)
    g = ooc_clamp(g, negClip, clip);
  return g;
}

#define OPTIM(T, S)                                                            \
  extern "C" __global__ void sgd_##S(T *w, T *g, i64 n, int flags, T l1reg,    \
                                     T l2reg, T onePerBatch, T negClip,        \
                                     T clip, T negEta) {                       \
    OOC_FOR(i, n) {                                                            \
      T gv = ooc_prep_grad<T>(g[i], w[i], flags, l1reg, l2reg, onePerBatch,    \
                              negClip, clip);                                  \
      w[i] = w[i] + gv * negEta;                                               \
      g[i] = 0;                                                                \
    }                                                                          \
  }                                                                            \
  extern "C" __global__ void momentum_##S(                                     \
      T *w, T *g, T *cw, i64 n, int flags, T l1reg, T l2reg, T onePerBatch,    \
      T negClip, T clip, T negEta, T momentum) {                               \
    OOC_FOR(i, n) {                                                            \
      T gv = ooc_prep_grad<T>(g[i], cw[i], flags, l1reg, l2reg, onePerBatch,   \
                              negClip, clip);                                  \
      T c = cw[i] * momentum + gv * negEta;                                    \
      cw[i] = c;                                                               \
      w[i] = w[i] + c;                                                         \
      g[i] = 0;                                                                \
    }                                                                          \
  }                                                                            \
  extern "C" __global__ void adam_##S(                                         \
      T *w, T *g, T *m, T *v, i64 n, int flags, T l1reg, T l2reg,              \
      T onePerBatch, T negClip, T clip, T omBeta1, T omBeta2, T beta1,         \
      T beta2, T eps, T negEta, T corr1, T corr2) {                            \
    OOC_FOR(i, n) {                                                            \
      T gv = ooc_prep_grad<T>(g[i], w[i], flags, l1reg, l2reg, onePerBatch,    \
                              negClip, clip);                                  \
      T t1 = gv * omBeta1;                                                     \
      T g2 = gv * gv;                                                          \
      g2 = g2 * omBeta2;                                                       \
      t1 = t1 + m[i] * beta1;                                                  \
      g2 = g2 + v[i] * beta2;                                                  \
      m[i] = t1;                                                               \
      v[i] = g2;                                                               \
      T mh = t1 * corr1, vh = g2 * corr2;                                      \
      vh = (T)__builtin_sqrt((double)vh) + eps;                                \
      mh = mh * negEta;                                                        \
      mh = vh == 0 ? (T)__builtin_inf() : mh / vh;                             \
      w[i] = w[i] + mh;                                                        \
      g[i] = 0;                                                                \
    }                                                                          \
  }                                                                            \
  extern "C" __global__ void rmsprop_##S(T *w, T *g, T *cache, i64 n,          \
                                         int flags, T decay, T omDecay, T eps, \
                                         T l2reg, T negClip, T clip,           \
                                         T negEta) {                           \
    OOC_FOR(i, n) {                                                            \
      T gv = g[i];                                                             \
      T g2 = gv * gv;                                                          \
      T c = cache[i] * decay;                                                  \
      g2 = g2 * omDecay;                                                       \
      c = c + g2;                                                              \
      cache[i] = c;                                                            \
      if (flags & OOC_OPT_CLIP)                                                \
        gv = ooc_clamp(gv, negClip, clip);                                     \
      T upd = c + eps;                                                         \
      upd = (T)1 / (T)__builtin_sqrt((double)upd);                             \
      gv = gv * negEta;                                                        \
      upd = upd * gv;                                                          \
      if (flags & OOC_OPT_L2)                                                  \
        upd = upd - w[i] * l2reg;                                              \
      w[i] = w[i] + upd;                                                       \
      g[i] = 0;                                                                \
    }                                                                          \
  }
OOC_F32_F64(OPTIM)
