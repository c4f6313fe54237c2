// CUDA kernels (first section) and their launchers (second section), as in llm.c.
#include <cuda_runtime.h>

#include <cmath>
#include <string>

#include "core/cuda/device.h"

namespace loom::cuda {
namespace {

// ---------------------------------------------------------------- kernels
__global__ void gelu_forward_kernel(float* out, const float* inp, int64_t n) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  float x = inp[i];
  float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
  out[i] = 0.5f * x * (1.0f + tanhf(u));
}

__global__ void gelu_backward_kernel(float* dinp, const float* inp, const float* dout, int64_t n) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  float x = inp[i];
  float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
  float th = tanhf(u);
  float du = 0.7978845608028654f * (1.0f + 3.0f * 0.044715f * x * x);
  dinp[i] = (0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du) * dout[i];
}

__global__ void adamw_kernel(float* p, const float* g, float* m, float* v, int64_t n, float lr,
                             float b1, float b2, float eps, float decay, float step_size,
                             float bc2_sqrt) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  float gi = g[i];
  float mi = b1 * m[i] + (1.0f - b1) * gi;
  float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
  m[i] = mi;
  v[i] = vi;
  p[i] = p[i] * decay - step_size * mi / (sqrtf(vi) / bc2_sqrt + eps);
}

// ---------------------------------------------------------------- launchers
constexpr int kBlock = 256;
unsigned Grid(int64_t n) {
  return static_cast<unsigned>((n + kBlock - 1) / kBlock);
}

Status Check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::Ok();
  return Internal(std::string("CUDA ") + what + ": " + cudaGetErrorString(err));
}

Status CheckLaunch(const char* what) {
  LOOM_RETURN_IF_ERROR(Check(cudaGetLastError(), what));
  return Check(cudaDeviceSynchronize(), what);
}

}  // namespace

int DeviceCount() {
  int count = 0;  // stays 0 when the driver is missing (cudaErrorInsufficientDriver)
  if (cudaGetDeviceCount(&count) != cudaSuccess) return 0;
  return count;
}

Status GeluForward(float* out, const float* inp, int64_t n) {
  if (n == 0) return Status::Ok();
  gelu_forward_kernel<<<Grid(n), kBlock>>>(out, inp, n);
  return CheckLaunch("gelu_forward_kernel");
}

Status GeluBackward(float* dinp, const float* inp, const float* dout, int64_t n) {
  if (n == 0) return Status::Ok();
  gelu_backward_kernel<<<Grid(n), kBlock>>>(dinp, inp, dout, n);
  return CheckLaunch("gelu_backward_kernel");
}

Status AdamWUpdate(float* param, const float* grad, float* m, float* v, int64_t n, float lr,
                   float beta1, float beta2, float eps, float weight_decay, int64_t step) {
  if (n == 0) return Status::Ok();
  const float bc1 = 1.0f - static_cast<float>(std::pow(double(beta1), double(step)));
  const float bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(double(beta2), double(step))));
  adamw_kernel<<<Grid(n), kBlock>>>(param, grad, m, v, n, lr, beta1, beta2, eps,
                                    1.0f - lr * weight_decay, lr / bc1, bc2_sqrt);
  return CheckLaunch("adamw_kernel");
}

Status GeluForwardHost(float* out, const float* inp, int64_t n) {
  float* d = nullptr;
  const size_t bytes = static_cast<size_t>(n) * 2 * sizeof(float);
  LOOM_RETURN_IF_ERROR(Check(cudaMalloc(&d, bytes), "cudaMalloc"));
  Status st = Check(cudaMemcpy(d, inp, bytes / 2, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
  if (st.ok()) st = GeluForward(d + n, d, n);
  if (st.ok())
    st = Check(cudaMemcpy(out, d + n, bytes / 2, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
  cudaFree(d);
  return st;
}

}  // namespace loom::cuda
