// Filling and scaling float vectors, one thread per element. Kernels first, launchers second.
#include <cuda_runtime.h>

#include "core/cuda/check.h"
#include "core/cuda/train_kernels.h"

namespace loom::cuda {
namespace {

// ---------------------------------------------------------------- kernels
__global__ void fill_kernel(float* x, float value, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) x[i] = value;
}

__global__ void scale_kernel(float* x, float factor, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) x[i] *= factor;
}

}  // namespace

// ---------------------------------------------------------------- launchers
Status Fill(float* x, float value, int64_t n, Stream stream) {
  LOOM_RETURN_IF_ERROR(internal::CheckElementCount(n, "Fill"));
  if (n == 0) return Status::Ok();
  fill_kernel<<<internal::GridFor(n), internal::kBlock, 0, stream>>>(x, value, n);
  return internal::CheckLaunch("fill_kernel");
}

Status Scale(float* x, float factor, int64_t n, Stream stream) {
  LOOM_RETURN_IF_ERROR(internal::CheckElementCount(n, "Scale"));
  if (n == 0) return Status::Ok();
  scale_kernel<<<internal::GridFor(n), internal::kBlock, 0, stream>>>(x, factor, n);
  return internal::CheckLaunch("scale_kernel");
}

}  // namespace loom::cuda
