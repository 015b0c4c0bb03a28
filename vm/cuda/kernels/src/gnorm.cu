/* gnorm.cu: gorgonia's GroupNormOp and groupNormDiffOp (v0.9.18), as the
 * CPU device runs them: one thread per (image, group) row. The row's mean
 * and variance are the op's rowwiseMoments: Welford over 8 lanes in chunks
 * of 16 vectors, chunk moments merged on a binary stack, the stack folded
 * into its first level (with the op's aliasing as it is: the fold adds into
 * the first level's means twice and leaves its M2 alone), then the tail and
 * the 8 lanes merged serially, all in the element type. The gradient
 * recomputes the moments from x (the op's saved mean and 1/std are those). */
#include "ooc.h"

#define OOC_GN_VEC 8
#define OOC_GN_CHUNK 16
#define OOC_GN_DEPTH 40

OOC_FN float ooc_gn_sqrt(float x) { return __builtin_sqrtf(x); }
OOC_FN double ooc_gn_sqrt(double x) { return __builtin_sqrt(x); }

/* addMomentsVec: (m0, m1, m2) += (m0add, m1add, m2add), lane by lane; m1
 * and m2 may be the same lanes (the op's fold passes them so). */
template <typename T>
OOC_FN void ooc_gn_add_vec(i64 m0add, const T *m1add, const T *m2add, i64 *m0, T *m1, T *m2) {
  i64 n = *m0 + m0add;
  T c = n != 0 ? (T)m0add / (T)n : (T)0;
  T delta[OOC_GN_VEC];
  for (int l = 0; l < OOC_GN_VEC; l++)
    delta[l] = m1add[l] - m1[l];
  for (int l = 0; l < OOC_GN_VEC; l++)
    m1[l] = m1[l] + delta[l] * c;
  for (int l = 0; l < OOC_GN_VEC; l++) {
    T tmp = delta[l] * delta[l];
    tmp = tmp * c;
    tmp = tmp * (T)(*m0);
    tmp = tmp + m2add[l];
    m2[l] = m2[l] + tmp;
  }
  *m0 = n;
}

template <typename T>
OOC_FN void ooc_gn_moments(const T *x, i64 n, T *mean, T *var) {
  i64 nn = n / OOC_GN_VEC;
  i64 m = (nn + OOC_GN_CHUNK - 1) / OOC_GN_CHUNK;
  int depth = 1;
  if (m > 2)
    while (((i64)1 << depth) < m)
      depth++;
  i64 m0stk[OOC_GN_DEPTH];
  T m1stk[OOC_GN_DEPTH][OOC_GN_VEC], m2stk[OOC_GN_DEPTH][OOC_GN_VEC];
  for (int d = 0; d < depth; d++) {
    m0stk[d] = 0;
    for (int l = 0; l < OOC_GN_VEC; l++)
      m1stk[d][l] = m2stk[d][l] = 0;
  }
  for (i64 i = 0; i < m; i++) {
    i64 m0 = nn - i * OOC_GN_CHUNK < OOC_GN_CHUNK ? nn - i * OOC_GN_CHUNK : OOC_GN_CHUNK;
    const T *x1 = x + i * OOC_GN_CHUNK * OOC_GN_VEC;
    T m1v[OOC_GN_VEC], m2v[OOC_GN_VEC];
    for (int l = 0; l < OOC_GN_VEC; l++)
      m1v[l] = m2v[l] = 0;
    for (i64 j = 0; j < m0; j++) {
      const T *x2 = x1 + j * OOC_GN_VEC;
      T c = (T)1 / (T)(j + 1);
      for (int l = 0; l < OOC_GN_VEC; l++) {
        T delta = x2[l] - m1v[l];
        m1v[l] = m1v[l] + delta * c;
        T t2 = x2[l] - m1v[l];
        m2v[l] = m2v[l] + t2 * delta;
      }
    }
    ooc_gn_add_vec<T>(m0, m1v, m2v, &m0stk[0], m1stk[0], m2stk[0]);
    i64 mask = i + 1;
    for (int j = 1; j < depth && (mask & 1) == 0; j++) {
      ooc_gn_add_vec<T>(m0stk[j - 1], m1stk[j - 1], m2stk[j - 1], &m0stk[j], m1stk[j], m2stk[j]);
      m0stk[j - 1] = 0;
      for (int l = 0; l < OOC_GN_VEC; l++)
        m1stk[j - 1][l] = m2stk[j - 1][l] = 0;
      mask >>= 1;
    }
  }
  for (int d = 1; d < depth; d++)
    ooc_gn_add_vec<T>(m0stk[d], m1stk[d], m2stk[d], &m0stk[0], m1stk[0], m1stk[0]);
  i64 m0 = 0;
  T m1 = 0, m2 = 0;
  for (i64 i = nn * OOC_GN_VEC; i < n; i++) {
    T delta = x[i] - m1;
    m0++;
    m1 += delta / (T)m0;
    m2 += delta * (x[i] - m1);
  }
  for (int l = 0; l < OOC_GN_VEC; l++) { /* addMoments, lane l of the stack */
    i64 nt = m0 + nn;
    T c = nt != 0 ? (T)nn / (T)nt : (T)0;
    T delta = m1stk[0][l] - m1;
    m1 += c * delta;
    m2 += m2stk[0][l] + delta * delta * c * (T)m0;
    m0 = nt;
  }
  *mean = m1;
  *var = m2 / (T)n;
}

template <typename T>
OOC_FN void ooc_gn_stats(const T *x, i64 n, double eps, T *mean, T *rstd) {
  T v;
  ooc_gn_moments<T>(x, n, mean, &v);
  *rstd = (T)1 / ooc_gn_sqrt((v > 0 ? v : (T)0) + (T)eps);
}

/* y = rstd·x - rstd·mean per row of d·plane elements. */
template <typename T>
OOC_FN void ooc_g_groupnorm(T *y, const T *x, i64 rows, i64 d, i64 plane, double eps) {
  OOC_FOR(i, rows) {
    i64 n = d * plane;
    T mean, rstd;
    ooc_gn_stats<T>(x + i * n, n, eps, &mean, &rstd);
    T bias = -rstd * mean;
    for (i64 k = 0; k < n; k++)
      y[i * n + k] = rstd * x[i * n + k] + bias;
  }
}

template <typename T>
OOC_FN void ooc_g_groupnorm_grad(T *dx, const T *x, const T *dy, i64 rows, i64 d, i64 plane, double eps) {
  OOC_FOR(i, rows) {
    i64 n = d * plane;
    const T *xr = x + i * n, *gr = dy + i * n;
    T mean, rstd;
    ooc_gn_stats<T>(xr, n, eps, &mean, &rstd);
    T ds = 0, db = 0;
    for (i64 j = 0; j < d; j++) { /* per channel first, as computeInternalGradients */
      T dsc = 0, dbc = 0;
      for (i64 k = 0; k < plane; k++) {
        dsc += gr[j * plane + k] * xr[j * plane + k];
        dbc += gr[j * plane + k];
      }
      ds += dsc;
      db += dbc;
    }
    T s = (T)1 / (T)n;
    T c1 = rstd;
    T c2 = (db * mean - ds) * c1 * c1 * c1 * s;
    T c3 = -c2 * mean - db * c1 * s;
    for (i64 k = 0; k < n; k++)
      dx[i * n + k] = c1 * gr[k] + c2 * xr[k] + c3;
  }
}

#define GNORM(T, S)                                                            \
  extern "C" __global__ void g_groupnorm_##S(T *y, const T *x, i64 rows,       \
                                             i64 d, i64 plane, double eps) {   \
    ooc_g_groupnorm<T>(y, x, rows, d, plane, eps);                             \
  }                                                                            \
  extern "C" __global__ void g_groupnorm_grad_##S(                             \
      T *dx, const T *x, const T *dy, i64 rows, i64 d, i64 plane,              \
      double eps) {                                                            \
    ooc_g_groupnorm_grad<T>(dx, x, dy, rows, d, plane, eps);                   \
  }
OOC_F32_F64(GNORM)
