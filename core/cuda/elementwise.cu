// GELU (tanh form) and the residual add: one thread per element. Kernels first, launchers second.
#include <cuda_runtime.h>

#include "core/cuda/bf16.cuh"
#include "core/cuda/check.h"
#include "core/cuda/kernels.h"

namespace loom::cuda {
namespace {

using internal::CheckElementCount;
using internal::CheckLaunch;
using internal::GridFor;
using internal::kBlock;

// ---------------------------------------------------------------- kernels
__device__ __forceinline__ float Gelu(float x) {
  const float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.0f + tanhf(u));
}

__global__ void gelu_forward_kernel(float* out, const float* inp, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  out[i] = Gelu(inp[i]);
}

__global__ void gelu_forward_bf16_kernel(uint16_t* out, const float* inp, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  out[i] = internal::FloatToBf16Bits(Gelu(inp[i]));
}

__global__ void gelu_backward_kernel(float* dinp, const float* inp, const float* dout, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float x = inp[i];
  const float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
  const float th = tanhf(u);
  const float du = 0.7978845608028654f * (1.0f + 3.0f * 0.044715f * x * x);
  dinp[i] = (0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du) * dout[i];
}

__global__ void residual_forward_kernel(float* out, const float* a, const float* b, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  out[i] = a[i] + b[i];
}

__global__ void residual_backward_kernel(float* da, float* db, const float* dout, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float g = dout[i];
  if (da != nullptr) da[i] += g;
  if (db != nullptr) db[i] += g;
}

// ---------------------------------------------------------------- launchers
// The existing synchronous launchers wait for their kernel (their callers rely on it).
Status WaitFor(Stream stream, const char* what) {
  return internal::Check(cudaStreamSynchronize(stream), what);
}

}  // namespace

Status GeluForward(float* out, const float* inp, int64_t n, Stream stream) {
  LOOM_RETURN_IF_ERROR(CheckElementCount(n, "GeluForward"));
  if (n == 0) return Status::Ok();
  gelu_forward_kernel<<<GridFor(n), kBlock, 0, stream>>>(out, inp, n);
  LOOM_RETURN_IF_ERROR(CheckLaunch("gelu_forward_kernel"));
  return WaitFor(stream, "gelu_forward_kernel");
}

Status GeluForwardBf16(uint16_t* out, const float* inp, int64_t n, Stream stream) {
  LOOM_RETURN_IF_ERROR(CheckElementCount(n, "GeluForwardBf16"));
  if (n == 0) return Status::Ok();
  gelu_forward_bf16_kernel<<<GridFor(n), kBlock, 0, stream>>>(out, inp, n);
  return CheckLaunch("gelu_forward_bf16_kernel");
}

Status GeluBackward(float* dinp, const float* inp, const float* dout, int64_t n, Stream stream) {
  LOOM_RETURN_IF_ERROR(CheckElementCount(n, "GeluBackward"));
  if (n == 0) return Status::Ok();
  gelu_backward_kernel<<<GridFor(n), kBlock, 0, stream>>>(dinp, inp, dout, n);
  LOOM_RETURN_IF_ERROR(CheckLaunch("gelu_backward_kernel"));
  return WaitFor(stream, "gelu_backward_kernel");
}

Status ResidualForward(float* out, const float* a, const float* b, int64_t n, Stream stream) {
  LOOM_RETURN_IF_ERROR(CheckElementCount(n, "ResidualForward"));
  if (n == 0) return Status::Ok();
  residual_forward_kernel<<<GridFor(n), kBlock, 0, stream>>>(out, a, b, n);
  return CheckLaunch("residual_forward_kernel");
}

Status ResidualBackward(float* da, float* db, const float* dout, int64_t n, Stream stream) {
  LOOM_RETURN_IF_ERROR(CheckElementCount(n, "ResidualBackward"));
  if (n == 0 || (da == nullptr && db == nullptr)) return Status::Ok();
  residual_backward_kernel<<<GridFor(n), kBlock, 0, stream>>>(da, db, dout, n);
  return CheckLaunch("residual_backward_kernel");
}

Status GeluForwardHost(float* out, const float* inp, int64_t n) {
  LOOM_RETURN_IF_ERROR(CheckElementCount(n, "GeluForwardHost"));
  float* d = nullptr;
  const size_t bytes = static_cast<size_t>(n) * 2 * sizeof(float);
  LOOM_RETURN_IF_ERROR(internal::Check(cudaMalloc(&d, bytes), "cudaMalloc"));
  Status st =
      internal::Check(cudaMemcpy(d, inp, bytes / 2, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
  if (st.ok()) st = GeluForward(d + n, d, n);
  if (st.ok()) {
    st = internal::Check(cudaMemcpy(out, d + n, bytes / 2, cudaMemcpyDeviceToHost),
                         "cudaMemcpy D2H");
  }
  const Status freed = internal::Check(cudaFree(d), "cudaFree");
  return st.ok() ? freed : st;
}

}  // namespace loom::cuda
