/* bool.cu: gorgonia's ops on Bool tensors (Go's bool, one byte, 0 or 1):
 * the ops that move elements (transpose, slice, concat, DiagFlat, ByIndices:
 * copies of bytes through a layout, zero fills), and == and != between two
 * Bool tensors (the only comparisons tensor allows on bools; gorgonia's
 * retSame form gives bools too). */
#include "ooc.h"
#include "ops.h"

extern "C" __global__ void copy_u8(u8 *out, const u8 *in, i64 n,
                                   ooc_layout L) {
  OOC_FOR(i, n) {
    i64 o = i, pa = i, pb = i;
    if (L.rank != 0)
      ooc_offsets(L, i, &o, &pa, &pb);
    out[o] = in[pa];
  }
}

/* v is a float, as the other fills take it: 0 is false, anything else true. */
extern "C" __global__ void fill_u8(u8 *y, double v, i64 n) {
  u8 b = v != 0;
  OOC_FOR(i, n) { y[i] = b; }
}

extern "C" __global__ void compare_u8(int op, u8 *out, const u8 *a,
                                      const u8 *b, i64 n, ooc_layout L) {
  OOC_FOR(i, n) {
    i64 o = i, pa = i, pb = i;
    if (L.rank != 0)
      ooc_offsets(L, i, &o, &pa, &pb);
    bool x = a[pa] != 0, y = b[pb] != 0;
    out[o] = op == OOC_BINARY_NE ? x != y : x == y;
  }
}

extern "C" __global__ void g_byindices_u8(u8 *out, const u8 *x, const i64 *idx,
                                          i64 nidx, i64 outer, i64 L,
                                          i64 idxStride, i64 idxLimit,
                                          i64 idxStep, i64 iStride, i64 iLimit,
                                          i64 iStep, i64 nIdxSide,
                                          i64 nISide) {
  ooc_byidx b = {nidx,    outer,  L,     idxStride, idxLimit, idxStep,
                 iStride, iLimit, iStep, nIdxSide,  nISide};
  ooc_g_byindices<u8>(out, x, idx, b);
}
