/* ctc.cu: gorgonia's ctcLossOp and ctcLossDiffOp (CTCLoss), as their f64s
 * and f32s compute: log-space alpha (forward) and beta (backward) recursions
 * per batch element, log-sum-exp with the running maximum, exp and log in
 * the tensor's type (Go's math, math32's exp; log in double, rounded). The
 * CPU op keeps the forward's alpha table inside the op for its gradient; here
 * the gradient launch recomputes it (same inputs, same arithmetic, same
 * bits) into the runner's scratch. logProbs is (T, B, C); targets are Int,
 * (B, S) or the B sequences concatenated (tdims 1); blank is label 0. One
 * thread per batch element walks its sequence serially; a second launch
 * reduces the per-element losses in index order as the CPU op does. Inputs
 * the CPU op rejects or indexes out of range with (lengths, labels outside
 * [0, C)) give NaN. */
#include "ooc.h"
#include "oocmath.h"

template <typename T> OOC_FN T ctc_exp(T x) {
  return sizeof(T) == 4 ? (T)ooc_expf((float)x) : (T)ooc_exp((double)x);
}
template <typename T> OOC_FN T ctc_log(T x) { return (T)ooc_log((double)x); }

/* ctc_prime is the extended target sequence's label at idx (blank between
 * and around the labels). */
OOC_FN i64 ctc_prime(const i64 *targets, i64 off, i64 idx) {
  return idx % 2 == 0 ? 0 : targets[off + idx / 2];
}

/* ctc_geometry: b's target offset, and the alpha table's row width W (from
 * the longest target, as the CPU op sizes it). ok is false for lengths the
 * CPU op rejects or that leave the buffers. */
OOC_FN bool ctc_geometry(const i64 *inLen, const i64 *tgtLen,
                         const i64 *targets, i64 b, i64 Tn, i64 B, i64 C,
                         i64 tdims, i64 S, i64 *off, i64 *W) {
  i64 mx = 0, pos = 0;
  for (i64 i = 0; i < B; i++) {
    if (tgtLen[i] < 0 || tgtLen[i] > S || inLen[i] < 1 || inLen[i] > Tn)
      return false;
    if (i < b)
      pos += tgtLen[i];
    mx = tgtLen[i] > mx ? tgtLen[i] : mx;
  }
  if (tdims == 1 && pos + tgtLen[b] > S)
    return false;
  *off = tdims == 1 ? pos : b * S;
  *W = 2 * mx + 1;
  for (i64 k = 0; k < tgtLen[b]; k++) /* labels index logProbs */
    if (targets[*off + k] < 0 || targets[*off + k] >= C)
      return false;
  return true;
}

/* ctc_alpha_one fills b's alpha section and returns its negative log
 * likelihood. */
template <typename T>
OOC_FN T ctc_alpha_one(T *la, const T *lp, const i64 *targets, i64 off,
                       i64 inL, i64 tl, i64 B, i64 C, i64 W, i64 b) {
  const T ninf = (T)ooc_inf(-1);
  const i64 tw = 2 * tl + 1;
  for (i64 s = 0; s < W; s++)
    la[s] = ninf;
  la[0] = lp[b * C];
  if (tl > 0)
    la[1] = lp[b * C + ctc_prime(targets, off, 1)];
  for (i64 t = 1; t < inL; t++) {
    for (i64 s = 0; s < tw; s++) {
      i64 cur = ctc_prime(targets, off, s);
      i64 i = (t - 1) * tw + s;
      T la1 = la[i], lamax = la1, la2, la3;
      if (s > 0) {
        la2 = la[i - 1];
        if (la2 > lamax)
          lamax = la2;
      } else {
        la2 = ninf;
      }
      if (s > 1 && ctc_prime(targets, off, s - 2) != cur) {
        la3 = la[i - 2];
        if (la3 > lamax)
          lamax = la3;
      } else {
        la3 = ninf;
      }
      if (lamax == ninf)
        lamax = 0;
      la[t * tw + s] = ctc_log<T>(ctc_exp<T>(la1 - lamax) + ctc_exp<T>(la2 - lamax) +
                                  ctc_exp<T>(la3 - lamax)) +
                       lamax + lp[(t * B + b) * C + cur];
    }
  }
  if (tl == 0)
    return la[(inL - 1) * tw];
  T l1 = la[(inL - 1) * tw + tl * 2], l2 = la[(inL - 1) * tw + tl * 2 - 1];
  T mx = l1;
  if (l2 > mx)
    mx = l2;
  if (mx == ninf)
    mx = 0;
  return -(ctc_log<T>(ctc_exp<T>(l1 - mx) + ctc_exp<T>(l2 - mx)) + mx);
}

template <typename T>
OOC_FN void ctc_alpha(T *nll, T *alpha, const T *lp, const i64 *targets,
                      const i64 *inLen, const i64 *tgtLen, i64 Tn, i64 B,
                      i64 C, i64 tdims, i64 S) {
  OOC_FOR(b, B) {
    i64 off, W;
    if (!ctc_geometry(inLen, tgtLen, targets, b, Tn, B, C, tdims, S, &off, &W)) {
      nll[b] = (T)ooc_nan();
      continue;
    }
    nll[b] = ctc_alpha_one<T>(alpha + b * Tn * W, lp, targets, off, inLen[b],
                              tgtLen[b], B, C, W, b);
  }
}

/* ctc_reduce: the loss from the per-element ones, in index order (mean:
 * each divided by its target length, at least 1, then the sum by B). */
template <typename T>
OOC_FN void ctc_reduce(T *loss, const T *nll, const i64 *tgtLen, i64 B,
                       int mean) {
  OOC_FOR(i, 1) {
    T acc = 0;
    for (i64 b = 0; b < B; b++) {
      if (!mean) {
        acc += nll[b];
      } else {
        i64 v = tgtLen[b] < 1 ? 1 : tgtLen[b];
        acc += nll[b] / (T)v;
      }
    }
    if (mean)
      acc /= (T)B;
    loss[0] = acc;
  }
}

/* ctc_grad: b's beta recursion and gradient, after ctc_alpha and a fill of
 * grad with -Inf (rows past b's input length keep it, as on the CPU). */
template <typename T>
OOC_FN void ctc_grad(T *grad, T *beta, const T *alpha, const T *nll,
                     const T *lp, const i64 *targets, const i64 *inLen,
                     const i64 *tgtLen, const T *gradOut, i64 Tn, i64 B, i64 C,
                     i64 tdims, i64 S) {
  const T ninf = (T)ooc_inf(-1);
  OOC_FOR(b, B) {
    i64 off, W;
    if (!ctc_geometry(inLen, tgtLen, targets, b, Tn, B, C, tdims, S, &off, &W)) {
      for (i64 t = 0; t < Tn; t++)
        for (i64 c = 0; c < C; c++)
          grad[(t * B + b) * C + c] = (T)ooc_nan();
      continue;
    }
    const i64 inL = inLen[b], tl = tgtLen[b], tw = 2 * tl + 1;
    const T *la = alpha + b * Tn * W;
    T *lb = beta + b * Tn * W;
    for (i64 i = 0; i < Tn * W; i++)
      lb[i] = ninf;
#define G(t, c) grad[((t) * B + b) * C + (c)]
    const T *lpb = lp; /* lp[(t*B + b)*C + c] is b's (t, c) */
#define LP(t, c) lpb[((t) * B + b) * C + (c)]
    i64 last = (inL - 1) * tw;
    lb[last + 2 * tl] = LP(inL - 1, 0);
    G(inL - 1, 0) = la[last + 2 * tl] + lb[last + 2 * tl];
    if (tl > 0) {
      i64 cp = ctc_prime(targets, off, 2 * tl - 1);
      lb[last + 2 * tl - 1] = LP(inL - 1, cp);
      G(inL - 1, cp) = la[last + 2 * tl - 1] + lb[last + 2 * tl - 1];
    }
    for (i64 t = inL - 2; t >= 0; t--) {
      for (i64 s = 2 * tl; s >= 0; s--) {
        i64 base = (t + 1) * tw + s;
        T lb1 = lb[base], lbmax = lb1, lb2, lb3;
        i64 cur = ctc_prime(targets, off, s);
        if (s < 2 * tl) {
          lb2 = lb[base + 1];
          if (lb2 > lbmax)
            lbmax = lb2;
        } else {
          lb2 = ninf;
        }
        if (s < 2 * tl - 1 && ctc_prime(targets, off, s + 2) != cur) {
          lb3 = lb[base + 2];
          if (lb3 > lbmax)
            lbmax = lb3;
        } else {
          lb3 = ninf;
        }
        if (lbmax == ninf)
          lbmax = 0;
        lb[t * tw + s] = ctc_log<T>(ctc_exp<T>(lb1 - lbmax) + ctc_exp<T>(lb2 - lbmax) +
                                    ctc_exp<T>(lb3 - lbmax)) +
                         lbmax + LP(t, cur);
        T lab = la[t * tw + s] + lb[t * tw + s];
        T lcab = G(t, cur);
        if (lcab == ninf) {
          G(t, cur) = lab;
        } else {
          T mx = lcab > lab ? lcab : lab;
          G(t, cur) = ctc_log<T>(ctc_exp<T>(lcab - mx) + ctc_exp<T>(lab - mx)) + mx;
        }
      }
    }
    for (i64 t = 0; t < inL; t++)
      for (i64 c = 0; c < C; c++) {
        T res = G(t, c), l = LP(t, c);
        G(t, c) = (ctc_exp<T>(l) - ctc_exp<T>(res + nll[b] - l)) * gradOut[0];
      }
#undef G
#undef LP
  }
}

#define CTC(T, S)                                                              \
  extern "C" __global__ void ctc_alpha_##S(                                    \
      T *nll, T *alpha, const T *lp, const i64 *targets, const i64 *inLen,     \
      const i64 *tgtLen, i64 Tn, i64 B, i64 C, i64 tdims, i64 S_) {            \
    ctc_alpha<T>(nll, alpha, lp, targets, inLen, tgtLen, Tn, B, C, tdims, S_); \
  }                                                                            \
  extern "C" __global__ void ctc_reduce_##S(T *loss, const T *nll,             \
                                            const i64 *tgtLen, i64 B,          \
                                            int mean) {                        \
    ctc_reduce<T>(loss, nll, tgtLen, B, mean);                                 \
  }                                                                            \
  extern "C" __global__ void ctc_grad_##S(                                     \
      T *grad, T *beta, const T *alpha, const T *nll, const T *lp,             \
      const i64 *targets, const i64 *inLen, const i64 *tgtLen,                 \
      const T *gradOut, i64 Tn, i64 B, i64 C, i64 tdims, i64 S_) {             \
    ctc_grad<T>(grad, beta, alpha, nll, lp, targets, inLen, tgtLen, gradOut,   \
                Tn, B, C, tdims, S_);                                          \
  }
OOC_F32_F64(CTC)
