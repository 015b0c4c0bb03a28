/* pool.cu: models/layers' max and average pooling with their gradients, and
 * global average pooling. Planes are the (n, c) pairs of an NCHW tensor.
 *
 * Windows are clipped to the image (padding is never a maximum; it counts as
 * zeros in the average, PyTorch's count_include_pad). The gradients gather:
 * one thread per input pixel visits, in row-major output order, the windows
 * that contain it and adds what the CPU op's scatter would add there, in the
 * same order from 0, so every result is the CPU op's bits, without atomics. */
#include "ooc.h"

struct ooc_pool_geom {
  i64 planes, H, W, OH, OW;
  i64 kh, kw, sh, sw, ph, pw;
};

/* The argmax of window (oh, ow) of plane xp: the first maximum in row-major
 * order; a NaN wins and stays (the CPU op's rule). */
template <typename T>
OOC_FN i64 ooc_argmax(const T *xp, const ooc_pool_geom &g, i64 oh, i64 ow) {
  i64 h0 = oh * g.sh - g.ph, w0 = ow * g.sw - g.pw;
  i64 h1 = h0 + g.kh < g.H ? h0 + g.kh : g.H, w1 = w0 + g.kw < g.W ? w0 + g.kw : g.W;
  h0 = h0 > 0 ? h0 : 0;
  w0 = w0 > 0 ? w0 : 0;
  i64 bi = h0 * g.W + w0;
  T best = xp[bi];
  for (i64 h = h0; h < h1; h++)
    for (i64 w = w0; w < w1; w++) {
      T v = xp[h * g.W + w];
      if (v > best || (v != v && best == best)) {
        best = v;
        bi = h * g.W + w;
      }
    }
  return bi;
}

template <typename T>
OOC_FN void ooc_maxpool(T *y, const T *x, const ooc_pool_geom &g) {
  OOC_FOR(o, g.planes * g.OH * g.OW) {
    i64 ow = o % g.OW, oh = (o / g.OW) % g.OH, p = o / (g.OW * g.OH);
    const T *xp = x + p * g.H * g.W;
    y[o] = xp[ooc_argmax(xp, g, oh, ow)];
  }
}

/* The outputs whose windows (before clipping) contain row h: [lo, hi). */
OOC_FN void ooc_windows(i64 h, i64 k, i64 s, i64 pad, i64 out, i64 *lo, i64 *hi) {
  i64 a = h + pad - k + 1; /* oh·s >= a */
  *lo = a <= 0 ? 0 : (a + s - 1) / s;
  i64 b = (h + pad) / s + 1; /* oh·s <= h + pad */
  *hi = b < out ? b : out;
}

template <typename T>
OOC_FN void ooc_maxpool_grad(T *dx, const T *x, const T *dy, const ooc_pool_geom &g) {
  OOC_FOR(idx, g.planes * g.H * g.W) {
    i64 w = idx % g.W, h = (idx / g.W) % g.H, p = idx / (g.W * g.H);
    const T *xp = x + p * g.H * g.W;
    const T *dyp = dy + p * g.OH * g.OW;
    i64 hlo, hhi, wlo, whi;
    ooc_windows(h, g.kh, g.sh, g.ph, g.OH, &hlo, &hhi);
    ooc_windows(w, g.kw, g.sw, g.pw, g.OW, &wlo, &whi);
    T acc = 0;
    for (i64 oh = hlo; oh < hhi; oh++)
      for (i64 ow = wlo; ow < whi; ow++)
        if (ooc_argmax(xp, g, oh, ow) == h * g.W + w)
          acc += dyp[oh * g.OW + ow];
    dx[idx] = acc;
  }
}

/* Average pooling divides by the window's k·k, or with excl
 * (count_include_pad=False) by its pixels inside the image. */
OOC_FN void ooc_window(const ooc_pool_geom &g, i64 oh, i64 ow, i64 *h0, i64 *h1,
                       i64 *w0, i64 *w1) {
  *h0 = oh * g.sh - g.ph;
  *w0 = ow * g.sw - g.pw;
  *h1 = *h0 + g.kh < g.H ? *h0 + g.kh : g.H;
  *w1 = *w0 + g.kw < g.W ? *w0 + g.kw : g.W;
  *h0 = *h0 > 0 ? *h0 : 0;
  *w0 = *w0 > 0 ? *w0 : 0;
}

template <typename T>
OOC_FN void ooc_avgpool(T *y, const T *x, const ooc_pool_geom &g, int excl) {
  OOC_FOR(o, g.planes * g.OH * g.OW) {
    i64 ow = o % g.OW, oh = (o / g.OW) % g.OH, p = o / (g.OW * g.OH);
    const T *xp = x + p * g.H * g.W;
    i64 h0, h1, w0, w1;
    ooc_window(g, oh, ow, &h0, &h1, &w0, &w1);
    T count = excl ? (T)((h1 - h0) * (w1 - w0)) : (T)(g.kh * g.kw);
    T s = 0;
    for (i64 h = h0; h < h1; h++)
      for (i64 w = w0; w < w1; w++)
        s += xp[h * g.W + w];
    y[o] = s / count;
  }
}

template <typename T>
OOC_FN void ooc_avgpool_grad(T *dx, const T *dy, const ooc_pool_geom &g,
                             int excl) {
  OOC_FOR(idx, g.planes * g.H * g.W) {
    i64 w = idx % g.W, h = (idx / g.W) % g.H, p = idx / (g.W * g.H);
    const T *dyp = dy + p * g.OH * g.OW;
    i64 hlo, hhi, wlo, whi;
    ooc_windows(h, g.kh, g.sh, g.ph, g.OH, &hlo, &hhi);
    ooc_windows(w, g.kw, g.sw, g.pw, g.OW, &wlo, &whi);
    T acc = 0;
    for (i64 oh = hlo; oh < hhi; oh++)
      for (i64 ow = wlo; ow < whi; ow++) {
        i64 h0, h1, w0, w1;
        ooc_window(g, oh, ow, &h0, &h1, &w0, &w1);
        T count = excl ? (T)((h1 - h0) * (w1 - w0)) : (T)(g.kh * g.kw);
        acc += dyp[oh * g.OW + ow] / count;
      }
    dx[idx] = acc;
  }
}

#define POOL(T, S)                                                             \
  extern "C" __global__ void maxpool_##S(T *y, const T *x, ooc_pool_geom g) {  \
    ooc_maxpool<T>(y, x, g);                                                   \
  }                                                                            \
  extern "C" __global__ void maxpool_grad_##S(T *dx, const T *x, const T *dy,  \
                                              ooc_pool_geom g) {               \
    ooc_maxpool_grad<T>(dx, x, dy, g);                                         \
  }                                                                            \
  extern "C" __global__ void avgpool_##S(T *y, const T *x, ooc_pool_geom g) {  \
    ooc_avgpool<T>(y, x, g, 0);                                                \
  }                                                                            \
  extern "C" __global__ void avgpool_grad_##S(T *dx, const T *dy,              \
                                              ooc_pool_geom g) {               \
    ooc_avgpool_grad<T>(dx, dy, g, 0);                                         \
  }                                                                            \
  extern "C" __global__ void avgpool_excl_##S(T *y, const T *x,                \
                                              ooc_pool_geom g) {               \
    ooc_avgpool<T>(y, x, g, 1);                                                \
  }                                                                            \
  extern "C" __global__ void avgpool_excl_grad_##S(T *dx, const T *dy,         \
                                                   ooc_pool_geom g) {          \
    ooc_avgpool_grad<T>(dx, dy, g, 1);                                         \
  }
OOC_F32_F64(POOL)

/* Global average pooling: one thread per plane sums it serially in double,
 * in the CPU op's order, so the means are its bits. */
#define GAP(T, S)                                                              \
  extern "C" __global__ void gap_##S(T *y, const T *x, i64 planes,             \
                                     i64 plane) {                              \
    OOC_FOR(p, planes) {                                                       \
      double s = 0;                                                            \
      for (i64 j = 0; j < plane; j++)                                          \
        s += (double)x[p * plane + j];                                         \
      y[p] = (T)(s / (double)plane);                                           \
    }                                                                          \
  }                                                                            \
  extern "C" __global__ void gap_grad_##S(T *dx, const T *dy, i64 planes,      \
                                          i64 plane) {                         \
    OOC_FOR(i, planes * plane) { dx[i] = dy[i / plane] / (T)plane; }           \
  }
OOC_F32_F64(GAP)
