/* elementwise.cu: gorgonia's elemUnaryOp and elemBinOp, one kernel per dtype
 * with the operator as an argument (codes in ops.h, generated from the Go
 * tables). The switch is uniform across a launch, so it costs no divergence.
 * Arithmetic is done in the tensor's own type, exactly as tensor's kernels do
 * it; transcendental functions in double and rounded (oocmath.h). */
#include "ooc.h"
#include "oocmath.h"
#include "ops.h"

template <typename T> OOC_FN T ooc_sqrt_t(T x) {
  return (T)__builtin_sqrt((double)x); /* exact rounding for float too */
}

/* tensor's Sign keeps zeros and NaN as they are. */
template <typename T> OOC_FN T ooc_sign(T x) {
  return x < 0 ? (T)-1 : x > 0 ? (T)1 : x;
}

template <typename T> OOC_FN T ooc_unary(int op, T x) {
  const bool f32 = sizeof(T) == 4;
  double d = (double)x;
  switch (op) {
  case OOC_UNARY_ABS:
    return (T)__builtin_fabs(d);
  case OOC_UNARY_SIGN:
    return ooc_sign(x);
  case OOC_UNARY_CEIL:
    return (T)__builtin_ceil(d);
  case OOC_UNARY_FLOOR:
    return (T)__builtin_floor(d);
  case OOC_UNARY_SIN:
    return f32 ? (T)ooc_sinf((float)x) : (T)ooc_sin(d);
  case OOC_UNARY_COS:
    return f32 ? (T)ooc_cosf((float)x) : (T)ooc_cos(d);
  case OOC_UNARY_EXP:
    return f32 ? (T)ooc_expf((float)x) : (T)ooc_exp(d);
  case OOC_UNARY_LN:
    return (T)ooc_log(d);
  case OOC_UNARY_LOG2:
    return (T)ooc_log2(d);
  case OOC_UNARY_NEG:
    return -x;
  case OOC_UNARY_SQUARE:
    return x * x;
  case OOC_UNARY_SQRT:
    return ooc_sqrt_t(x);
  case OOC_UNARY_INV:
    return (T)1 / x;
  case OOC_UNARY_INV_SQRT:
    return (T)1 / ooc_sqrt_t(x);
  case OOC_UNARY_CUBE:
    return x * x * x;
  case OOC_UNARY_TANH:
    return (T)ooc_tanh(d);
  case OOC_UNARY_SIGMOID: /* gorgonia's _sigmoidf32/_sigmoidf64 */
    if (f32 ? d < -88 : d < -709)
      return 0;
    if (f32 ? d > 15 : d > 19)
      return 1;
    return (T)(1.0 / (1.0 + ooc_exp(-d)));
  case OOC_UNARY_LOG1P:
    return (T)ooc_log1p(d);
  case OOC_UNARY_EXPM1:
    return f32 ? (T)ooc_expm1f((float)x) : (T)ooc_expm1(d);
  case OOC_UNARY_SOFTPLUS: /* gorgonia's _softplusf32/_softplusf64 */
    if (f32 ? d < -103 : d < -708)
      return 0;
    if (f32 ? d > 14 : d > 16)
      return x;
    return (T)ooc_log1p(ooc_exp(d));
  }
  return x;
}

template <typename T> OOC_FN T ooc_pow_t(T a, T b) {
  return (T)ooc_pow((double)a, (double)b);
}

template <typename T> OOC_FN T ooc_binary(int op, T a, T b) {
  switch (op) {
  case OOC_BINARY_ADD:
    return a + b;
  case OOC_BINARY_SUB:
    return a - b;
  case OOC_BINARY_MUL:
    return a * b;
  case OOC_BINARY_DIV:
    return a / b;
  case OOC_BINARY_POW:
    return ooc_pow_t(a, b);
  case OOC_BINARY_VEC_DIV: /* vecf32/vecf64.Div: any zero divisor gives +Inf */
    return b == 0 ? (T)ooc_inf(1) : a / b;
  case OOC_BINARY_VEC_POW: /* vecf32/vecf64.Pow: small integer powers by products */
    if (b == 0)
      return 1;
    if (b == 1)
      return a;
    if (b == 2)
      return a * a;
    if (b == 3)
      return a * a * a;
    return ooc_pow_t(a, b);
  case OOC_BINARY_LT:
    return a < b ? 1 : 0;
  case OOC_BINARY_GT:
    return a > b ? 1 : 0;
  case OOC_BINARY_LTE:
    return a <= b ? 1 : 0;
  case OOC_BINARY_GTE:
    return a >= b ? 1 : 0;
  case OOC_BINARY_EQ:
    return a == b ? 1 : 0;
  case OOC_BINARY_NE:
    return a != b ? 1 : 0;
  case OOC_BINARY_MAX_BETWEEN: /* tensor's VecMax: a[i] = b[i] if b[i] > a[i] */
    return b > a ? b : a;
  case OOC_BINARY_MIN_BETWEEN:
    return b < a ? b : a;
  }
  return a;
}

#define UNARY(T, S)                                                            \
  extern "C" __global__ void unary_##S(int op, T *y, const T *x, i64 n) {      \
    OOC_FOR(i, n) { y[i] = ooc_unary<T>(op, x[i]); }                           \
  }
OOC_F32_F64(UNARY)

/* binary: out = a OP b over layout L; L.rank == 0 means all three contiguous
 * with n elements (the common case, without index arithmetic). */
#define BINARY(T, S)                                                           \
  extern "C" __global__ void binary_##S(int op, T *out, const T *a,            \
                                        const T *b, i64 n, ooc_layout L) {     \
    if (L.rank == 0) {                                                         \
      OOC_FOR(i, n) { out[i] = ooc_binary<T>(op, a[i], b[i]); }                \
      return;                                                                  \
    }                                                                          \
    OOC_FOR(i, n) {                                                            \
      i64 o, pa, pb;                                                           \
      ooc_offsets(L, i, &o, &pa, &pb);                                         \
      out[o] = ooc_binary<T>(op, a[pa], b[pb]);                                \
    }                                                                          \
  }
OOC_F32_F64(BINARY)

/* compare: a comparison with gorgonia's bool result (one byte per element). */
#define COMPARE(T, S)                                                          \
  extern "C" __global__ void compare_##S(int op, u8 *out, const T *a,          \
                                         const T *b, i64 n, ooc_layout L) {    \
    OOC_FOR(i, n) {                                                            \
      i64 o = i, pa = i, pb = i;                                               \
      if (L.rank != 0)                                                         \
        ooc_offsets(L, i, &o, &pa, &pb);                                       \
      out[o] = ooc_binary<T>(op, a[pa], b[pb]) != 0;                           \
    }                                                                          \
  }
OOC_F32_F64(COMPARE)

#define FILL(T, S)                                                             \
  extern "C" __global__ void fill_##S(T *y, T v, i64 n) {                      \
    OOC_FOR(i, n) { y[i] = v; }                                                \
  }
OOC_F32_F64(FILL)

/* copy: a strided gather/scatter, out[L.out] = in[L.a with L.rep]. It is
 * every data movement op: transpose (permuted strides), slice (offset base
 * pointer, strides), concat (one launch per input into a strided block of
 * out), Repeat (rep, or stride 0 for a broadcast axis), reshape (rank 0). */
#define COPY(T, S)                                                             \
  extern "C" __global__ void copy_##S(T *out, const T *in, i64 n,              \
                                      ooc_layout L) {                          \
    if (L.rank == 0) {                                                         \
      OOC_FOR(i, n) { out[i] = in[i]; }                                        \
      return;                                                                  \
    }                                                                          \
    OOC_FOR(i, n) {                                                            \
      i64 o, pa, pb;                                                           \
      ooc_offsets(L, i, &o, &pa, &pb);                                         \
      out[o] = in[pa];                                                         \
    }                                                                          \
  }
OOC_F32_F64(COPY)
