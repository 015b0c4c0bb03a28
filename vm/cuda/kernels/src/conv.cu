/* conv.cu: the kernels around cuBLAS for models/layers' convOp (Conv2D, its
 * data and filter gradients, ConvTranspose2D, which is the data gradient):
 * im2col, col2im, the per-channel bias and the bias gradient. The products
 * themselves are GEMMs the VM runs in cuBLAS, as the CPU op runs package blas's:
 *   forward  y_i  = W (O x K) · col(x_i) (K x P)              + bias
 *   data     dx_i = col2im(Wᵀ (K x O) · dy_i (O x P))          (+ bias: transposed conv)
 *   filter   dW  += dy_i (O x P) · col(x_i)ᵀ                   (images in order)
 * with K = C·KH·KW and P = OH·OW. col holds nb images side by side: image i
 * owns columns [i·P, (i+1)·P) of rows with leading dimension ld (nb·P for a
 * chunk laid out for one GEMM), exactly the CPU op's workspace layout. */
#include "ooc.h"

struct ooc_conv_geom {
  i64 C, H, W, KH, KW, OH, OW;
  i64 sh, sw, ph, pw, dh, dw;
};

/* col[r][i·P + p] for r = (c, ki, kj), p = (oh, ow): the input pixel the
 * kernel tap reads, or 0 in the padding. One thread per column entry; the
 * index runs fastest along p so writes are coalesced. */
template <typename T>
OOC_FN void ooc_im2col(T *col, const T *x, i64 nb, const ooc_conv_geom &g, i64 ld) {
  i64 P = g.OH * g.OW, rows = g.C * g.KH * g.KW;
  OOC_FOR(idx, rows * nb * P) {
    i64 p = idx % P, t = idx / P;
    i64 i = t % nb, r = t / nb;
    i64 kj = r % g.KW, ki = (r / g.KW) % g.KH, c = r / (g.KW * g.KH);
    i64 oh = p / g.OW, ow = p % g.OW;
    i64 ih = oh * g.sh - g.ph + ki * g.dh, iw = ow * g.sw - g.pw + kj * g.dw;
    T v = 0;
    if (ih >= 0 && ih < g.H && iw >= 0 && iw < g.W)
      v = x[((i * g.C + c) * g.H + ih) * g.W + iw];
    col[r * ld + i * P + p] = v;
  }
}

/* acc plus the column entries copied from pixel (c, h, w) whose output
 * pixel p lies in [lo, hi), at col[r·ld + p - lo], taps in (ki, kj) order:
 * the order the CPU op's scatter adds them. */
template <typename T>
OOC_FN T ooc_col2im_taps(T acc, const T *col, const ooc_conv_geom &g, i64 c,
                         i64 h, i64 w, i64 ld, i64 lo, i64 hi) {
  for (i64 ki = 0; ki < g.KH; ki++) {
    i64 th = h + g.ph - ki * g.dh;
    if (th < 0 || th % g.sh != 0 || th / g.sh >= g.OH)
      continue;
    i64 oh = th / g.sh;
    for (i64 kj = 0; kj < g.KW; kj++) {
      i64 tw = w + g.pw - kj * g.dw;
      if (tw < 0 || tw % g.sw != 0 || tw / g.sw >= g.OW)
        continue;
      i64 p = oh * g.OW + tw / g.sw;
      if (p < lo || p >= hi)
        continue;
      acc += col[((c * g.KH + ki) * g.KW + kj) * ld + p - lo];
    }
  }
  return acc;
}

/* col2im gathers instead of scattering: one thread per image pixel sums the
 * column entries copied from it from 0, so the sums are the CPU op's bits. No
 * atomics, no races. */
template <typename T>
OOC_FN void ooc_col2im(T *x, const T *col, i64 nb, const ooc_conv_geom &g, i64 ld) {
  i64 P = g.OH * g.OW;
  OOC_FOR(idx, nb * g.C * g.H * g.W) {
    i64 w = idx % g.W, h = (idx / g.W) % g.H;
    i64 c = (idx / (g.W * g.H)) % g.C, i = idx / (g.W * g.H * g.C);
    x[idx] = ooc_col2im_taps<T>((T)0, col + i * P, g, c, h, w, ld, 0, P);
  }
}

/* One tile of one image: output pixels [p0, p0+t), col row stride ld (the CPU
 * op's tiles when its workspace is smaller than the image's matrix). */
template <typename T>
OOC_FN void ooc_im2col_tile(T *col, const T *x, const ooc_conv_geom &g, i64 ld,
                            i64 p0, i64 t) {
  i64 rows = g.C * g.KH * g.KW;
  OOC_FOR(idx, rows * t) {
    i64 q = idx % t, r = idx / t, p = p0 + q;
    i64 kj = r % g.KW, ki = (r / g.KW) % g.KH, c = r / (g.KW * g.KH);
    i64 oh = p / g.OW, ow = p % g.OW;
    i64 ih = oh * g.sh - g.ph + ki * g.dh, iw = ow * g.sw - g.pw + kj * g.dw;
    T v = 0;
    if (ih >= 0 && ih < g.H && iw >= 0 && iw < g.W)
      v = x[(c * g.H + ih) * g.W + iw];
    col[r * ld + q] = v;
  }
}

/* col2im of one tile, added onto x: each pixel adds, to what x holds, its
 * taps whose output pixel lies in the tile. The CPU op adds a pixel's terms
 * in tap order and runs its tiles from the last, so tiles run from the last
 * give its bits. */
template <typename T>
OOC_FN void ooc_col2im_tile(T *x, const T *col, const ooc_conv_geom &g, i64 ld,
                            i64 p0, i64 t) {
  OOC_FOR(idx, g.C * g.H * g.W) {
    i64 w = idx % g.W, h = (idx / g.W) % g.H, c = idx / (g.W * g.H);
    x[idx] = ooc_col2im_taps<T>(x[idx], col, g, c, h, w, ld, p0, p0 + t);
  }
}

#define CONV(T, S)                                                             \
  extern "C" __global__ void im2col_##S(T *col, const T *x, i64 nb,            \
                                        ooc_conv_geom g, i64 ld) {             \
    ooc_im2col<T>(col, x, nb, g, ld);                                          \
  }                                                                            \
  extern "C" __global__ void col2im_##S(T *x, const T *col, i64 nb,            \
                                        ooc_conv_geom g, i64 ld) {             \
    ooc_col2im<T>(x, col, nb, g, ld);                                          \
  }                                                                            \
  extern "C" __global__ void im2col_tile_##S(T *col, const T *x,               \
                                             ooc_conv_geom g, i64 ld, i64 p0,  \
                                             i64 t) {                          \
    ooc_im2col_tile<T>(col, x, g, ld, p0, t);                                  \
  }                                                                            \
  extern "C" __global__ void col2im_tile_##S(T *x, const T *col,               \
                                             ooc_conv_geom g, i64 ld, i64 p0,  \
                                             i64 t) {                          \
    ooc_col2im_tile<T>(x, col, g, ld, p0, t);                                  \
  }
OOC_F32_F64(CONV)

/* y[n][c][·] += bias[c]: the bias of Conv2D (on y) and of ConvTranspose2D
 * (on its output), added after the GEMM as the CPU op adds it. */
#define CHANNEL_BIAS(T, S)                                                     \
  extern "C" __global__ void channel_bias_##S(T *y, const T *bias, i64 N,      \
                                              i64 C, i64 plane) {              \
    OOC_FOR(i, N * C * plane) { y[i] += bias[(i / plane) % C]; }               \
  }
OOC_F32_F64(CHANNEL_BIAS)

/* channelSumOp: out[c] = Σ_{n,p} x[n][c][p] (the gradient of a conv bias or a
 * BN shift), in double as the CPU op, one block per channel: 256 interleaved
 * partial sums added in a tree, the order of models/layers' lanes, so the
 * sums are the CPU op's bits. */
template <typename T>
OOC_FN void ooc_channel_sum(T *out, const T *x, i64 N, i64 C, i64 plane) {
  __shared__ double buf[OOC_BLOCK];
  OOC_REQUIRE(blockDim.x == OOC_BLOCK);
  for (i64 c = blockIdx.x; c < C; c += gridDim.x) {
    double acc = 0;
    for (i64 j = threadIdx.x; j < N * plane; j += OOC_BLOCK)
      acc += (double)x[((j / plane) * C + c) * plane + j % plane];
    double s = ooc_block_sum(acc, buf);
    if (threadIdx.x == 0)
      out[c] = (T)s;
  }
}

#define CHANNEL_SUM(T, S)                                                      \
  extern "C" __global__ void channel_sum_##S(T *out, const T *x, i64 N, i64 C, \
                                             i64 plane) {                      \
    ooc_channel_sum<T>(out, x, N, C, plane);                                   \
  }
OOC_F32_F64(CHANNEL_SUM)
