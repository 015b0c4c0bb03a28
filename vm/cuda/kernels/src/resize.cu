/* resize.cu: models/layers' ResizeBilinear (PyTorch's bilinear interpolate,
 * with or without align_corners) and its adjoint, the gradient. Planes are
 * (ih, iw) on the small side of the forward, (oh, ow) on the resized side,
 * whichever is larger.
 *
 * The adjoint gathers where the CPU op scatters: one thread per input pixel
 * adds, for the output pixels in row-major order and each one's four taps in
 * the CPU's order, the terms that land on it, from 0, so the sums are the CPU
 * op's bits, without atomics. The output rows (columns) that can touch input
 * row r are those whose first tap is r-1 or r, a contiguous run found by a
 * binary search because the taps do not decrease. */
#include "ooc.h"

struct ooc_tap {
  i64 i0, i1;
  double w1;
};

/* layers' bilinearTaps for output coordinate o of an axis of `in` input and
 * `out` output pixels: the source o·(in-1)/(out-1) with align_corners, else
 * (o+0.5)·in/out - 0.5 clamped at 0, in double, in Go's order. */
OOC_FN ooc_tap ooc_bilinear_tap(i64 o, i64 in, i64 out, int align) {
  double src;
  if (align && out > 1)
    src = (double)o * (double)(in - 1) / (double)(out - 1);
  else if (align)
    src = 0;
  else {
    src = ((double)o + 0.5) * (double)in / (double)out - 0.5;
    if (!(src > 0))
      src = 0;
  }
  ooc_tap t;
  t.i0 = (i64)src;
  if (t.i0 > in - 1)
    t.i0 = in - 1;
  t.i1 = t.i0 + 1 < in - 1 ? t.i0 + 1 : in - 1;
  t.w1 = src - (double)t.i0;
  return t;
}

/* The first output coordinate whose first tap is at least r-1. */
OOC_FN i64 ooc_first_tap(i64 r, i64 in, i64 out, int align) {
  i64 lo = 0, hi = out;
  while (lo < hi) {
    i64 mid = lo + (hi - lo) / 2;
    if (ooc_bilinear_tap(mid, in, out, align).i0 < r - 1)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

template <typename T>
OOC_FN void ooc_resize(T *y, const T *x, i64 planes, i64 ih, i64 iw, i64 oh,
                       i64 ow, int align) {
  OOC_FOR(i, planes * oh * ow) {
    i64 q = i % ow, o = (i / ow) % oh, p = i / (ow * oh);
    ooc_tap th = ooc_bilinear_tap(o, ih, oh, align);
    ooc_tap tw = ooc_bilinear_tap(q, iw, ow, align);
    const T *r0 = x + (p * ih + th.i0) * iw, *r1 = x + (p * ih + th.i1) * iw;
    T a = (T)tw.w1, b = (T)th.w1;
    T top = r0[tw.i0] + (r0[tw.i1] - r0[tw.i0]) * a;
    T bot = r1[tw.i0] + (r1[tw.i1] - r1[tw.i0]) * a;
    y[i] = top + (bot - top) * b;
  }
}

template <typename T>
OOC_FN void ooc_resize_adjoint(T *dx, const T *dy, i64 planes, i64 ih, i64 iw,
                               i64 oh, i64 ow, int align) {
  OOC_FOR(i, planes * ih * iw) {
    i64 c = i % iw, r = (i / iw) % ih, p = i / (iw * ih);
    const T *g = dy + p * oh * ow;
    i64 q0 = ooc_first_tap(c, iw, ow, align);
    T acc = 0;
    for (i64 o = ooc_first_tap(r, ih, oh, align); o < oh; o++) {
      ooc_tap th = ooc_bilinear_tap(o, ih, oh, align);
      if (th.i0 > r)
        break;
      if (th.i0 != r && th.i1 != r)
        continue;
      T b = (T)th.w1;
      for (i64 q = q0; q < ow; q++) {
        ooc_tap tw = ooc_bilinear_tap(q, iw, ow, align);
        if (tw.i0 > c)
          break;
        if (tw.i0 != c && tw.i1 != c)
          continue;
        T a = (T)tw.w1, v = g[o * ow + q];
        T top = v * (1 - b), bot = v * b;
        if (th.i0 == r && tw.i0 == c)
          acc += top * (1 - a);
        if (th.i0 == r && tw.i1 == c)
          acc += top * a;
        if (th.i1 == r && tw.i0 == c)
          acc += bot * (1 - a);
        if (th.i1 == r && tw.i1 == c)
          acc += bot * a;
      }
    }
    dx[i] = acc;
  }
}

#define RESIZE(T, S)                                                           \
  extern "C" __global__ void resize_bilinear_##S(                              \
      T *y, const T *x, i64 planes, i64 ih, i64 iw, i64 oh, i64 ow,            \
      int align) {                                                             \
    ooc_resize<T>(y, x, planes, ih, iw, oh, ow, align);                        \
  }                                                                            \
  extern "C" __global__ void resize_bilinear_grad_##S(                         \
      T *dx, const T *dy, i64 planes, i64 ih, i64 iw, i64 oh, i64 ow,          \
      int align) {                                                             \
    ooc_resize_adjoint<T>(dx, dy, planes, ih, iw, oh, ow, align);              \
  }
OOC_F32_F64(RESIZE)
