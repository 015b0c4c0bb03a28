/* int.cu: gorgonia's ops on Int tensors (Go's int: int64; Int32, Byte): elemBinOp's + - ⊙
 * with Go's wrap-around (computed unsigned, where C's signed overflow would be
 * undefined), ÷ as the CPU device computes it, the comparisons with same-type
 * (0/1) or bool results; Sum and Max over any axes; a constant fill. */
#include "ooc.h"
#include "ops.h"

/* U is T's unsigned type: wrapping arithmetic is done there. */
template <typename T, typename U> OOC_FN T ooc_binary_int(int op, T a, T b) {
  switch (op) {
  case OOC_BINARY_ADD:
    return (T)((U)a + (U)b);
  case OOC_BINARY_SUB:
    return (T)((U)a - (U)b);
  case OOC_BINARY_MUL:
    return (T)((U)a * (U)b);
  case OOC_BINARY_DIV:
  case OOC_BINARY_VEC_DIV:
    /* tensor v0.9.24's DivRecv (the CPU device's preallocated path): Go's
     * truncating division, 0 where the divisor is 0 (the error tensor
     * returns there is dropped), and the minimum ÷ -1 wraps to the minimum
     * as in Go (C's is undefined, hence the negation done unsigned). */
    if (b == 0)
      return 0;
    if (b == -1)
      return (T)((U)0 - (U)a);
    return a / b;
  case OOC_BINARY_LT:
    return a < b;
  case OOC_BINARY_GT:
    return a > b;
  case OOC_BINARY_LTE:
    return a <= b;
  case OOC_BINARY_GTE:
    return a >= b;
  case OOC_BINARY_EQ:
    return a == b;
  case OOC_BINARY_NE:
    return a != b;
  case OOC_BINARY_MAX_BETWEEN:
    return b > a ? b : a;
  case OOC_BINARY_MIN_BETWEEN:
    return b < a ? b : a;
  }
  return a;
}

/* Sum and Max over one run of axes ((outer, k, inner), as reduce.cu) or any
 * set (a layout, as reduce_axes.cu): tensor's integer sums wrap, so they add
 * unsigned; order does not matter for wrapping sums. Mean is a Sum and then
 * a ÷ in gorgonia, so it never reaches these. */
template <typename T, typename U> OOC_FN T ooc_int_fold(int op, T acc, T v) {
  if (op == OOC_REDUCE_MAX)
    return acc > v ? acc : v;
  return (T)((U)acc + (U)v);
}

#define INTOPS(T, U, S)                                                        \
  extern "C" __global__ void binary_##S(int op, T *out, const T *a,            \
                                        const T *b, i64 n, ooc_layout L) {     \
    OOC_FOR(i, n) {                                                            \
      i64 o = i, pa = i, pb = i;                                               \
      if (L.rank != 0)                                                         \
        ooc_offsets(L, i, &o, &pa, &pb);                                       \
      out[o] = ooc_binary_int<T, U>(op, a[pa], b[pb]);                         \
    }                                                                          \
  }                                                                            \
  extern "C" __global__ void compare_##S(int op, u8 *out, const T *a,          \
                                         const T *b, i64 n, ooc_layout L) {    \
    OOC_FOR(i, n) {                                                            \
      i64 o = i, pa = i, pb = i;                                               \
      if (L.rank != 0)                                                         \
        ooc_offsets(L, i, &o, &pa, &pb);                                       \
      out[o] = ooc_binary_int<T, U>(op, a[pa], b[pb]) != 0;                    \
    }                                                                          \
  }                                                                            \
  extern "C" __global__ void reduce_##S(int op, T *out, const T *x, i64 outer, \
                                        i64 k, i64 inner) {                    \
    OOC_FOR(i, outer * inner) {                                                \
      i64 o = i / inner, in = i % inner;                                       \
      const T *p = x + o * k * inner + in;                                     \
      T acc = op == OOC_REDUCE_MAX ? p[0] : 0;                                 \
      for (i64 j = op == OOC_REDUCE_MAX ? 1 : 0; j < k; j++)                   \
        acc = ooc_int_fold<T, U>(op, acc, p[j * inner]);                       \
      out[i] = acc;                                                            \
    }                                                                          \
  }                                                                            \
  extern "C" __global__ void reduce_axes_##S(int op, T *out, const T *x,       \
                                             i64 rows, i64 k, i64 kept,        \
                                             ooc_layout L) {                   \
    OOC_FOR(i, rows) {                                                         \
      const T *p = x + ooc_axes_offset(L, 0, (int)kept, i);                    \
      T acc = op == OOC_REDUCE_MAX ? p[0] : 0;                                 \
      for (i64 j = op == OOC_REDUCE_MAX ? 1 : 0; j < k; j++)                   \
        acc = ooc_int_fold<T, U>(                                              \
            op, acc, p[ooc_axes_offset(L, (int)kept, (int)L.rank, j)]);        \
      out[i] = acc;                                                            \
    }                                                                          \
  }
INTOPS(i64, unsigned long long, i64)
INTOPS(int, unsigned, i32)
INTOPS(u8, unsigned, byte) /* gorgonia's Byte (Uint8): ÷'s -1 case never
                              applies (b == -1 is false for an unsigned char) */

/* fill_i64: a constant Int (sizeOp's count of an Int operand's axis). */
extern "C" __global__ void fill_i64(i64 *y, i64 v, i64 n) {
  OOC_FOR(i, n) { y[i] = v; }
}
