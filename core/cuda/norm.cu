// Sum of squares for the global gradient norm: each block squares and sums a grid-strided share of
// the input in double, reduces it across the block, and adds it to the total with one atomicAdd.
#include <cuda_runtime.h>

#include <algorithm>

#include "core/cuda/check.h"
#include "core/cuda/kernels.h"
#include "core/cuda/reduce.cuh"

namespace loom::cuda {
namespace {

constexpr int kNormBlock = 512;
constexpr int64_t kNormMaxBlocks = 1024;  // enough to fill any current GPU, few atomics

// ---------------------------------------------------------------- kernels
__global__ void sum_squares_kernel(double* total, const float* x, int64_t n) {
  __shared__ double scratch[32];
  double acc = 0.0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    const double v = x[i];
    acc += v * v;
  }
  acc = internal::BlockReduce(acc, internal::SumOp{}, 0.0, scratch);
  if (threadIdx.x == 0) atomicAdd(total, acc);
}

}  // namespace

// ---------------------------------------------------------------- launchers
Status SumSquaresAccumulate(double* total, const float* x, int64_t n, Stream stream) {
  if (n < 0) return InvalidArgument("SumSquaresAccumulate: negative element count");
  if (n == 0) return Status::Ok();
  const int64_t blocks = std::min<int64_t>(kNormMaxBlocks, (n + kNormBlock - 1) / kNormBlock);
  sum_squares_kernel<<<static_cast<unsigned>(blocks), kNormBlock, 0, stream>>>(total, x, n);
  return internal::CheckLaunch("sum_squares_kernel");
}

}  // namespace loom::cuda
