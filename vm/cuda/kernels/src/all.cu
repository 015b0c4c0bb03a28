/* all.cu: the one translation unit both builds compile (one PTX module; one
 * host library). */
#include "elementwise.cu"
#include "reduce.cu"
#include "softmax.cu"
#include "conv.cu"
#include "bn.cu"
#include "pool.cu"
#include "relu.cu"
#include "optim.cu"
#include "resize.cu"
#include "gan.cu"
#include "lstm.cu"
#include "gnn.cu"
