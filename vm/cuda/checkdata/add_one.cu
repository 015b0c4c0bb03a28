// add_one: the kernel of the device checks (ordering of copies and compute).
// add_one.ptx is generated from this file, without a CUDA toolkit, by clang 14:
//
//   clang --cuda-device-only --cuda-gpu-arch=sm_60 -nocudainc -nocudalib -O3 -S add_one.cu -o add_one.ptx
//
// sm_60 PTX runs on Pascal and every later GPU (the driver compiles it forward).
// The fake driver's tests build a host version of it (ooc_host_add_one) instead.
#define __global__ __attribute__((global))
#include <__clang_cuda_builtin_vars.h>

extern "C" __global__ void add_one(float *x, unsigned int n) {
  unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}
