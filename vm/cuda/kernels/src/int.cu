/* int.cu: gorgonia's ops on Int tensors (Go's int: int64): elemBinOp's + - ⊙
 * with Go's wrap-around (computed unsigned, where C's signed overflow would be
 * undefined), ÷ as the CPU device computes it, the comparisons with same-type
 * (0/1) or bool results; Sum and Max over any axes; a constant fill. */
#include "ooc.h"
#include "ops.h"

OOC_FN i64 ooc_binary_int(int op, i64 a, i64 b) {
  typedef unsigned long long u64;
  switch (op) {
  case OOC_BINARY_ADD:
    return (i64)((u64)a + (u64)b);
  case OOC_BINARY_SUB:
    return (i64)((u64)a - (u64)b);
  case OOC_BINARY_MUL:
    return (i64)((u64)a * (u64)b);
  case OOC_BINARY_DIV:
  case OOC_BINARY_VEC_DIV:
    /* tensor v0.9.24's DivRecv (the CPU device's preallocated path): Go's
     * truncating division, 0 where the divisor is 0 (the error tensor
     * returns there is dropped), and MinInt64 / -1 wraps to MinInt64 as in
     * Go (C's is undefined, hence the negation done unsigned). */
    if (b == 0)
      return 0;
    if (b == -1)
      return (i64)(0ULL - (u64)a);
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

extern "C" __global__ void binary_i64(int op, i64 *out, const i64 *a,
                                      const i64 *b, i64 n, ooc_layout L) {
  OOC_FOR(i, n) {
    i64 o = i, pa = i, pb = i;
    if (L.rank != 0)
      ooc_offsets(L, i, &o, &pa, &pb);
    out[o] = ooc_binary_int(op, a[pa], b[pb]);
  }
}

extern "C" __global__ void compare_i64(int op, u8 *out, const i64 *a,
                                       const i64 *b, i64 n, ooc_layout L) {
  OOC_FOR(i, n) {
    i64 o = i, pa = i, pb = i;
    if (L.rank != 0)
      ooc_offsets(L, i, &o, &pa, &pb);
    out[o] = ooc_binary_int(op, a[pa], b[pb]) != 0;
  }
}

/* Sum and Max over one run of axes ((outer, k, inner), as reduce.cu) or any
 * set (a layout, as reduce_axes.cu): tensor's Int sums wrap, so they add
 * unsigned; order does not matter for wrapping sums. Mean is a Sum and then
 * a ÷ in gorgonia, so it never reaches these. */
OOC_FN i64 ooc_int_fold(int op, i64 acc, i64 v) {
  typedef unsigned long long u64;
  if (op == OOC_REDUCE_MAX)
    return acc > v ? acc : v;
  return (i64)((u64)acc + (u64)v);
}

extern "C" __global__ void reduce_i64(int op, i64 *out, const i64 *x,
                                      i64 outer, i64 k, i64 inner) {
  OOC_FOR(i, outer * inner) {
    i64 o = i / inner, in = i % inner;
    const i64 *p = x + o * k * inner + in;
    i64 acc = op == OOC_REDUCE_MAX ? p[0] : 0;
    for (i64 j = op == OOC_REDUCE_MAX ? 1 : 0; j < k; j++)
      acc = ooc_int_fold(op, acc, p[j * inner]);
    out[i] = acc;
  }
}

extern "C" __global__ void reduce_axes_i64(int op, i64 *out, const i64 *x,
                                           i64 rows, i64 k, i64 kept,
                                           ooc_layout L) {
  OOC_FOR(i, rows) {
    const i64 *p = x + ooc_axes_offset(L, 0, (int)kept, i);
    i64 acc = op == OOC_REDUCE_MAX ? p[0] : 0;
    for (i64 j = op == OOC_REDUCE_MAX ? 1 : 0; j < k; j++)
      acc = ooc_int_fold(op, acc, p[ooc_axes_offset(L, (int)kept, (int)L.rank, j)]);
    out[i] = acc;
  }
}

/* fill_i64: a constant Int (sizeOp's count of an Int operand's axis). */
extern "C" __global__ void fill_i64(i64 *y, i64 v, i64 n) {
  OOC_FOR(i, n) { y[i] = v; }
}
