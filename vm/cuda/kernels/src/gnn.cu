/* gnn.cu: gorgonia's own convolution and pooling ops (v0.9.18), computed
 * as the CPU device computes them (gorgonia's Do), not as models/layers':
 *   g_im2col / g_col2im      im2colOp / col2imOp: gorgonia's column layout is
 *                            (N, OH, OW, C·KH·KW), a row per output pixel, the
 *                            transpose of conv.cu's per-image (K, P) matrix;
 *   g_maxpool(_grad)         maxPoolOp / maxPoolDiffOp: the window's maximum
 *                            starts at -MaxFloat and takes only strictly larger
 *                            values (a NaN never wins; a window of -Inf gives
 *                            -MaxFloat and routes no gradient);
 *   g_gap                    globalAveragePoolOp (GlobalAveragePool2D);
 *   g_avgpool(_grad)         avgPoolOp / avgPoolDiffOp, with their arithmetic
 *                            as it is: the window sum divided by the input
 *                            width, and the gradient scattered to each window's
 *                            last pixel, then box-summed in place, in row-major
 *                            order, and divided by the input width.
 * The gradients gather in the order the CPU op scatters, from 0, so every
 * result is the CPU device's bits without atomics. */
#include "ooc.h"

/* The largest finite value of the argument's type (math.MaxFloat32/64). */
OOC_FN float ooc_max_finite(float) { return 3.40282346638528859811704183484516925440e+38f; }
OOC_FN double ooc_max_finite(double) { return 1.797693134862315708145274237317043567981e+308; }

/* col[((i·OH + oh)·OW + ow)·K + (c·KH + ki)·KW + kj]: one thread per entry,
 * the index fastest along the row (the tap), as gorgonia writes it. */
template <typename T>
OOC_FN void ooc_g_im2col(T *col, const T *x, i64 N, const ooc_conv_geom &g) {
  i64 K = g.C * g.KH * g.KW, P = g.OH * g.OW;
  OOC_FOR(idx, N * P * K) {
    i64 r = idx % K, t = idx / K;
    i64 p = t % P, i = t / P;
    i64 kj = r % g.KW, ki = (r / g.KW) % g.KH, c = r / (g.KW * g.KH);
    i64 oh = p / g.OW, ow = p % g.OW;
    i64 ih = oh * g.sh - g.ph + ki * g.dh, iw = ow * g.sw - g.pw + kj * g.dw;
    T v = 0;
    if (ih >= 0 && ih < g.H && iw >= 0 && iw < g.W)
      v = x[((i * g.C + c) * g.H + ih) * g.W + iw];
    col[idx] = v;
  }
}

/* One thread per image pixel adds the column entries copied from it in the
 * CPU op's scatter order: output pixels in row-major order, so taps from the
 * last (oh grows as ki falls). */
template <typename T>
OOC_FN void ooc_g_col2im(T *x, const T *col, i64 N, const ooc_conv_geom &g) {
  i64 K = g.C * g.KH * g.KW, P = g.OH * g.OW;
  OOC_FOR(idx, N * g.C * g.H * g.W) {
    i64 w = idx % g.W, h = (idx / g.W) % g.H;
    i64 c = (idx / (g.W * g.H)) % g.C, i = idx / (g.W * g.H * g.C);
    const T *ci = col + i * P * K;
    T acc = 0;
    for (i64 ki = g.KH - 1; ki >= 0; ki--) {
      i64 th = h + g.ph - ki * g.dh;
      if (th < 0 || th % g.sh != 0 || th / g.sh >= g.OH)
        continue;
      i64 oh = th / g.sh;
      for (i64 kj = g.KW - 1; kj >= 0; kj--) {
        i64 tw = w + g.pw - kj * g.dw;
        if (tw < 0 || tw % g.sw != 0 || tw / g.sw >= g.OW)
          continue;
        acc += ci[(oh * g.OW + tw / g.sw) * K + (c * g.KH + ki) * g.KW + kj];
      }
    }
    x[idx] = acc;
  }
}

/* The clipped window of output (oh, ow), as gorgonia clips it. */
OOC_FN void ooc_g_window(const ooc_pool_geom &g, i64 oh, i64 ow, i64 *h0,
                         i64 *h1, i64 *w0, i64 *w1) {
  i64 hs = oh * g.sh - g.ph, ws = ow * g.sw - g.pw;
  *h1 = hs + g.kh < g.H ? hs + g.kh : g.H;
  *w1 = ws + g.kw < g.W ? ws + g.kw : g.W;
  *h0 = hs > 0 ? hs : 0;
  *w0 = ws > 0 ? ws : 0;
}

/* gorgonia's argmax of window (oh, ow) of plane xp, or -1 (its mask). */
template <typename T>
OOC_FN i64 ooc_g_argmax(const T *xp, const ooc_pool_geom &g, i64 oh, i64 ow,
                        T *best) {
  i64 h0, h1, w0, w1;
  ooc_g_window(g, oh, ow, &h0, &h1, &w0, &w1);
  T b = -ooc_max_finite((T)0);
  i64 bi = -1;
  for (i64 h = h0; h < h1; h++)
    for (i64 w = w0; w < w1; w++)
      if (xp[h * g.W + w] > b) {
        b = xp[h * g.W + w];
        bi = h * g.W + w;
      }
  *best = b;
  return bi;
}

template <typename T>
OOC_FN void ooc_g_maxpool(T *y, const T *x, const ooc_pool_geom &g) {
  OOC_FOR(o, g.planes * g.OH * g.OW) {
    i64 ow = o % g.OW, oh = (o / g.OW) % g.OH, p = o / (g.OW * g.OH);
    T b;
    ooc_g_argmax(x + p * g.H * g.W, g, oh, ow, &b);
    y[o] = b;
  }
}

/* The outputs whose (unclipped) windows contain row h: [lo, hi). */
OOC_FN void ooc_g_windows(i64 h, i64 k, i64 s, i64 pad, i64 out, i64 *lo,
                          i64 *hi) {
  i64 a = h + pad - k + 1;
  *lo = a <= 0 ? 0 : (a + s - 1) / s;
  i64 b = (h + pad) / s + 1;
  *hi = b < out ? b : out;
}

template <typename T>
OOC_FN void ooc_g_maxpool_grad(T *dx, const T *x, const T *dy,
                               const ooc_pool_geom &g) {
  OOC_FOR(idx, g.planes * g.H * g.W) {
    i64 w = idx % g.W, h = (idx / g.W) % g.H, p = idx / (g.W * g.H);
    const T *xp = x + p * g.H * g.W;
    const T *dyp = dy + p * g.OH * g.OW;
    i64 hlo, hhi, wlo, whi;
    ooc_g_windows(h, g.kh, g.sh, g.ph, g.OH, &hlo, &hhi);
    ooc_g_windows(w, g.kw, g.sw, g.pw, g.OW, &wlo, &whi);
    T acc = 0, b;
    for (i64 oh = hlo; oh < hhi; oh++)
      for (i64 ow = wlo; ow < whi; ow++)
        if (ooc_g_argmax(xp, g, oh, ow, &b) == h * g.W + w)
          acc += dyp[oh * g.OW + ow];
    dx[idx] = acc;
  }
}

template <typename T>
OOC_FN void ooc_g_avgpool(T *y, const T *x, const ooc_pool_geom &g) {
  OOC_FOR(o, g.planes * g.OH * g.OW) {
    i64 ow = o % g.OW, oh = (o / g.OW) % g.OH, p = o / (g.OW * g.OH);
    const T *xp = x + p * g.H * g.W;
    i64 h0, h1, w0, w1;
    ooc_g_window(g, oh, ow, &h0, &h1, &w0, &w1);
    T s = 0;
    for (i64 h = h0; h < h1; h++)
      for (i64 w = w0; w < w1; w++)
        s += xp[h * g.W + w];
    y[o] = s / (T)g.W;
  }
}

/* avgPoolDiffOp is sequential within a plane (its second pass reads what it
 * has already overwritten), so one thread runs each plane's two passes. */
template <typename T>
OOC_FN void ooc_g_avgpool_grad(T *dx, const T *dy, const ooc_pool_geom &g) {
  OOC_FOR(p, g.planes) {
    T *d = dx + p * g.H * g.W;
    const T *dyp = dy + p * g.OH * g.OW;
    for (i64 i = 0; i < g.H * g.W; i++)
      d[i] = 0;
    for (i64 oh = 0; oh < g.OH; oh++)
      for (i64 ow = 0; ow < g.OW; ow++) {
        i64 h0, h1, w0, w1;
        ooc_g_window(g, oh, ow, &h0, &h1, &w0, &w1);
        if (h1 > h0 && w1 > w0) /* the mask: the window's last pixel */
          d[(h1 - 1) * g.W + (w1 - 1)] += dyp[oh * g.OW + ow];
      }
    for (i64 h = 0; h < g.H; h++)
      for (i64 w = 0; w < g.W; w++) {
        i64 h0, h1, w0, w1;
        ooc_g_window(g, h, w, &h0, &h1, &w0, &w1);
        T s = 0;
        for (i64 a = h0; a < h1; a++)
          for (i64 b = w0; b < w1; b++)
            s += d[a * g.W + b];
        d[h * g.W + w] = s / (T)g.W;
      }
  }
}

/* globalAveragePoolOp: each plane summed serially in the element type in
 * row-major order, then divided by its size (Do's loop; gorgonia gives it no
 * gradient). */
template <typename T>
OOC_FN void ooc_g_gap(T *y, const T *x, i64 planes, i64 plane) {
  OOC_FOR(p, planes) {
    T s = 0;
    for (i64 j = 0; j < plane; j++)
      s += x[p * plane + j];
    y[p] = s / (T)plane;
  }
}

#define GNN(T, S)                                                              \
  extern "C" __global__ void g_im2col_##S(T *col, const T *x, i64 N,           \
                                          ooc_conv_geom g) {                   \
    ooc_g_im2col<T>(col, x, N, g);                                             \
  }                                                                            \
  extern "C" __global__ void g_col2im_##S(T *x, const T *col, i64 N,           \
                                          ooc_conv_geom g) {                   \
    ooc_g_col2im<T>(x, col, N, g);                                             \
  }                                                                            \
  extern "C" __global__ void g_maxpool_##S(T *y, const T *x,                   \
                                           ooc_pool_geom g) {                  \
    ooc_g_maxpool<T>(y, x, g);                                                 \
  }                                                                            \
  extern "C" __global__ void g_maxpool_grad_##S(T *dx, const T *x,             \
                                                const T *dy,                   \
                                                ooc_pool_geom g) {             \
    ooc_g_maxpool_grad<T>(dx, x, dy, g);                                       \
  }                                                                            \
  extern "C" __global__ void g_avgpool_##S(T *y, const T *x,                   \
                                           ooc_pool_geom g) {                  \
    ooc_g_avgpool<T>(y, x, g);                                                 \
  }                                                                            \
  extern "C" __global__ void g_avgpool_grad_##S(T *dx, const T *dy,            \
                                                ooc_pool_geom g) {             \
    ooc_g_avgpool_grad<T>(dx, dy, g);                                          \
  }                                                                            \
  extern "C" __global__ void g_gap_##S(T *y, const T *x, i64 planes,           \
                                       i64 plane) {                            \
    ooc_g_gap<T>(y, x, planes, plane);                                         \
  }
OOC_F32_F64(GNN)
