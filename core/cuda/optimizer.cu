// AdamW, one thread per parameter, in the CPU kernel's order of operations (optimizer.cc).
#include <cuda_runtime.h>

#include <cmath>

#include "core/cuda/check.h"
#include "core/cuda/kernels.h"

namespace loom::cuda {
namespace {

// ---------------------------------------------------------------- kernels
__global__ void adamw_kernel(float* p, const float* g, float* m, float* v, int64_t n, float b1,
                             float b2, float eps, float decay, float step_size, float bc2_sqrt) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float gi = g[i];
  const float w = p[i] * decay;
  const float mi = m[i] * b1 + (1.0f - b1) * gi;
  const float vi = v[i] * b2 + (1.0f - b2) * gi * gi;
  m[i] = mi;
  v[i] = vi;
  const float denom = sqrtf(vi) / bc2_sqrt + eps;
  p[i] = w - step_size * mi / denom;
}

// ---------------------------------------------------------------- launchers
Status LaunchAdamW(float* param, const float* grad, float* m, float* v, int64_t n,
                   const AdamWParams& p, Stream stream) {
  LOOM_RETURN_IF_ERROR(internal::CheckElementCount(n, "AdamWUpdate"));
  if (p.step < 1) return InvalidArgument("AdamWUpdate: step must be >= 1 (1-based)");
  if (n == 0) return Status::Ok();
  // The bias corrections in double then rounded, exactly as the CPU kernel computes them.
  const float bc1 = 1.0f - static_cast<float>(std::pow(double(p.beta1), double(p.step)));
  const float bc2_sqrt =
      static_cast<float>(std::sqrt(1.0 - std::pow(double(p.beta2), double(p.step))));
  const float decay = 1.0f - p.lr * p.weight_decay;
  adamw_kernel<<<internal::GridFor(n), internal::kBlock, 0, stream>>>(
      param, grad, m, v, n, p.beta1, p.beta2, p.eps, decay, p.lr / bc1, bc2_sqrt);
  return internal::CheckLaunch("adamw_kernel");
}

}  // namespace

Status AdamWUpdate(float* param, const float* grad, float* m, float* v, int64_t n, float lr,
                   float beta1, float beta2, float eps, float weight_decay, int64_t step,
                   Stream stream) {
  AdamWParams p;
  p.lr = lr;
  p.beta1 = beta1;
  p.beta2 = beta2;
  p.eps = eps;
  p.weight_decay = weight_decay;
  p.step = step;
  LOOM_RETURN_IF_ERROR(LaunchAdamW(param, grad, m, v, n, p, stream));
  return internal::Check(cudaStreamSynchronize(stream), "adamw_kernel");
}

Status AdamWUpdate(float* param, const float* grad, float* m, float* v, int64_t n,
                   const AdamWParams& p, Stream stream) {
  return LaunchAdamW(param, grad, m, v, n, p, stream);
}

}  // namespace loom::cuda
