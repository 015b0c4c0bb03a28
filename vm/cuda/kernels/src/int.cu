/* int.cu: gorgonia's elemBinOp on Int tensors (Go's int: int64): + - ⊙ with
 * Go's wrap-around (computed unsigned, where C's signed overflow would be
 * undefined) and the comparisons, with same-type (0/1) or bool results. */
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
