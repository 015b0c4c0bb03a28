/* reduce_axes.cu: gorgonia's sumOp and maxOp (and Mean) over any set of
 * axes in one launch. L walks the input with its kept axes first, then the
 * reduced ones (dim and a: the input's lengths and strides in that order);
 * the first `kept` axes index the output (row-major), the rest are walked by
 * each output element's thread in row-major order from 0, accumulating in the
 * tensor's type (Max: acc = acc > v ? acc : v from the first element, the rule
 * of reduce.cu). Mean divides the sum by k in the tensor's type. */
#include "ooc.h"
#include "ops.h"

/* ooc_axes_offset maps index i over axes [lo, hi) of L to an input offset. */
OOC_FN i64 ooc_axes_offset(const ooc_layout &L, int lo, int hi, i64 i) {
  i64 off = 0;
  for (int d = hi - 1; d >= lo; d--) {
    i64 n = L.dim[d];
    off += (i % n) * L.a[d];
    i /= n;
  }
  return off;
}

template <typename T>
OOC_FN void ooc_reduce_axes(int op, T *out, const T *x, i64 rows, i64 k,
                            i64 kept, const ooc_layout &L) {
  OOC_FOR(i, rows) {
    const T *p = x + ooc_axes_offset(L, 0, (int)kept, i);
    T acc = 0;
    if (op == OOC_REDUCE_MAX) {
      acc = p[0];
      for (i64 j = 1; j < k; j++) {
        T v = p[ooc_axes_offset(L, (int)kept, (int)L.rank, j)];
        acc = acc > v ? acc : v;
      }
    } else {
      for (i64 j = 0; j < k; j++)
        acc += p[ooc_axes_offset(L, (int)kept, (int)L.rank, j)];
      if (op == OOC_REDUCE_MEAN)
        acc = acc / (T)k;
    }
    out[i] = acc;
  }
}

#define REDUCE_AXES(T, S)                                                      \
  extern "C" __global__ void reduce_axes_##S(int op, T *out, const T *x,       \
                                             i64 rows, i64 k, i64 kept,        \
                                             ooc_layout L) {                   \
    ooc_reduce_axes<T>(op, out, x, rows, k, kept, L);                          \
  }
OOC_F32_F64(REDUCE_AXES)
