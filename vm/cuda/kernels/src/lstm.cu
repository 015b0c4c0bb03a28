/* lstm.cu: models/layers' ops for the LSTM language model: Embedding and its
 * gradient, and the LSTM cell (LSTMCell, LSTMHidden and their four gradient
 * ops). The sequence ops (SequenceStep, SequencePlace, StackSequence) are
 * copies with a layout.
 *
 * Token ids are the input's values. The CPU op refuses an id that is not an
 * integer in [0, V) with an error; a kernel cannot return one, so the
 * embedding of such an id is NaN and its gradient is dropped (the NaN then
 * shows in the loss).
 *
 * The cell computes the gates in double as the CPU op, sigmoid(x) =
 * 1/(1+exp(-x)) and tanh with Go's portable exp (oocmath.h): where Go runs
 * its amd64 assembly exp the float64 results may differ in the last bit,
 * float32 ones almost never. The gradient of the embedding table is
 * accumulated one column per thread, tokens in order, as the CPU op. */
#include "ooc.h"
#include "oocmath.h"

template <typename T> OOC_FN bool ooc_token(T v, i64 V, i64 *id) {
  double f = (double)v;
  if (f != __builtin_trunc(f) || !(f >= 0) || f >= (double)V)
    return false;
  *id = (i64)f;
  return true;
}

/* out[n][e][0][t] = table[ids[n][t]][e]. */
template <typename T>
OOC_FN void ooc_embedding(T *out, const T *ids, const T *table, i64 N, i64 Tn,
                          i64 V, i64 E) {
  OOC_FOR(i, N * E * Tn) {
    i64 t = i % Tn, e = (i / Tn) % E, n = i / (Tn * E);
    i64 id;
    out[i] = ooc_token(ids[n * Tn + t], V, &id) ? table[id * E + e]
                                                : (T)ooc_nan();
  }
}

template <typename T>
OOC_FN void ooc_embedding_grad(T *dtable, const T *ids, const T *dy, i64 N,
                               i64 Tn, i64 V, i64 E) {
  OOC_FOR(e, E) {
    for (i64 v = 0; v < V; v++)
      dtable[v * E + e] = 0;
    for (i64 n = 0; n < N; n++)
      for (i64 t = 0; t < Tn; t++) {
        i64 id;
        if (ooc_token(ids[n * Tn + t], V, &id))
          dtable[id * E + e] += dy[(n * E + e) * Tn + t];
      }
  }
}

OOC_FN double ooc_sigmoid(double x) { return 1 / (1 + ooc_exp(-x)); }

/* kind (layers' cellKind): 0 c' = f·c + i·g; 1 h' = o·tanh(c');
 * 2 dpre (i, f, g parts) from (pre, c, dc'); 3 dc = dc'·f;
 * 4 dpre (o part) from (pre, c', dh'); 5 dc' from (pre, c', dh').
 * x is c, c' or dc', d the incoming gradient (x for kinds 0 and 3). */
template <typename T>
OOC_FN void ooc_lstm_cell(int kind, T *res, const T *pre, const T *x,
                          const T *d, i64 N, i64 H) {
  OOC_FOR(k, N * H) {
    i64 j = k % H, n = k / H;
    const T *p = pre + n * 4 * H;
    double gi = ooc_sigmoid((double)p[j]), gf = ooc_sigmoid((double)p[H + j]),
           gg = ooc_tanh((double)p[2 * H + j]),
           gO = ooc_sigmoid((double)p[3 * H + j]);
    T *r = res + n * 4 * H;
    switch (kind) {
    case 0:
      res[k] = (T)(gf * (double)x[k] + gi * gg);
      break;
    case 1:
      res[k] = (T)(gO * ooc_tanh((double)x[k]));
      break;
    case 2: {
      double dc = (double)d[k];
      r[j] = (T)(dc * gg * gi * (1 - gi));
      r[H + j] = (T)(dc * (double)x[k] * gf * (1 - gf));
      r[2 * H + j] = (T)(dc * gi * (1 - gg * gg));
      r[3 * H + j] = 0;
      break;
    }
    case 3:
      res[k] = (T)((double)d[k] * gf);
      break;
    case 4: {
      double tc = ooc_tanh((double)x[k]);
      r[j] = 0;
      r[H + j] = 0;
      r[2 * H + j] = 0;
      r[3 * H + j] = (T)((double)d[k] * tc * gO * (1 - gO));
      break;
    }
    default: {
      double tc = ooc_tanh((double)x[k]);
      res[k] = (T)((double)d[k] * gO * (1 - tc * tc));
    }
    }
  }
}

#define LSTM(T, S)                                                             \
  extern "C" __global__ void embedding_##S(T *out, const T *ids,               \
                                           const T *table, i64 N, i64 Tn,      \
                                           i64 V, i64 E) {                     \
    ooc_embedding<T>(out, ids, table, N, Tn, V, E);                            \
  }                                                                            \
  extern "C" __global__ void embedding_grad_##S(T *dtable, const T *ids,       \
                                                const T *dy, i64 N, i64 Tn,    \
                                                i64 V, i64 E) {                \
    ooc_embedding_grad<T>(dtable, ids, dy, N, Tn, V, E);                       \
  }                                                                            \
  extern "C" __global__ void lstm_cell_##S(int kind, T *res, const T *pre,     \
                                           const T *x, const T *d, i64 N,      \
                                           i64 H) {                            \
    ooc_lstm_cell<T>(kind, res, pre, x, d, N, H);                              \
  }
OOC_F32_F64(LSTM)
