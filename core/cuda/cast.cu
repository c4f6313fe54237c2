// bf16 <-> fp32 array casts, one thread per element, bit for bit as core/half.h (bf16.cuh).
#include <cuda_runtime.h>

#include "core/cuda/bf16.cuh"
#include "core/cuda/check.h"
#include "core/cuda/kernels.h"

namespace loom::cuda {
namespace {

// ---------------------------------------------------------------- kernels
__global__ void cast_to_bf16_kernel(const float* in, uint16_t* out, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  out[i] = internal::FloatToBf16Bits(in[i]);
}

__global__ void cast_from_bf16_kernel(const uint16_t* in, float* out, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  out[i] = internal::Bf16BitsToFloat(in[i]);
}

}  // namespace

// ---------------------------------------------------------------- launchers
Status CastToBf16(const float* in, uint16_t* out, int64_t n, Stream stream) {
  LOOM_RETURN_IF_ERROR(internal::CheckElementCount(n, "CastToBf16"));
  if (n == 0) return Status::Ok();
  cast_to_bf16_kernel<<<internal::GridFor(n), internal::kBlock, 0, stream>>>(in, out, n);
  return internal::CheckLaunch("cast_to_bf16_kernel");
}

Status CastFromBf16(const uint16_t* in, float* out, int64_t n, Stream stream) {
  LOOM_RETURN_IF_ERROR(internal::CheckElementCount(n, "CastFromBf16"));
  if (n == 0) return Status::Ok();
  cast_from_bf16_kernel<<<internal::GridFor(n), internal::kBlock, 0, stream>>>(in, out, n);
  return internal::CheckLaunch("cast_from_bf16_kernel");
}

}  // namespace loom::cuda
