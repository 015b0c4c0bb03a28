/* reduce.cu: gorgonia's Sum, Mean and Max over one axis. The tensor is seen
 * as (outer, k, inner) with the reduced axis in the middle; one thread per
 * output element walks the axis serially in index order, accumulating in the
 * tensor's type from 0 as tensor's kernels do, so sums over the first or last
 * axis are gorgonia's bits. Several axes: one launch per axis, last axis
 * first (gorgonia's own multi-axis reductions are wrong, see GORGONIA-NOTES).
 * Mean divides the sum by k in the tensor's type, as gorgonia's Mean (a Sum
 * then a division by the axis size). Max folds acc = acc > v ? acc : v from
 * the first element, tensor's last-axis rule: a NaN is taken and then
 * replaced by the next element. (tensor's first-axis rule keeps a NaN in the
 * running maximum; the two agree on NaN-free data.) */
#include "ooc.h"
#include "ops.h"

template <typename T>
OOC_FN void ooc_reduce(int op, T *out, const T *x, i64 outer, i64 k, i64 inner) {
  OOC_FOR(i, outer * inner) {
    i64 o = i / inner, in = i % inner;
    const T *p = x + o * k * inner + in;
    T acc = 0;
    if (op == OOC_REDUCE_MAX) {
      acc = p[0];
      for (i64 j = 1; j < k; j++) {
        T v = p[j * inner];
        acc = acc > v ? acc : v;
      }
    } else {
      for (i64 j = 0; j < k; j++)
        acc += p[j * inner];
      if (op == OOC_REDUCE_MEAN)
        acc = acc / (T)k;
    }
    out[i] = acc;
  }
}

#define REDUCE(T, S)                                                           \
  extern "C" __global__ void reduce_##S(int op, T *out, const T *x, i64 outer, \
                                        i64 k, i64 inner) {                    \
    ooc_reduce<T>(op, out, x, outer, k, inner);                                \
  }
OOC_F32_F64(REDUCE)
