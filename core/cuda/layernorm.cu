// LayerNorm over the last dimension. Forward and the dinp part of the backward: one warp per row
// (the row's statistics are warp reductions, no shared memory). dweight/dbias: column sums over
// all rows, one block per 32 columns summing in a fixed order, so the backward is deterministic.
#include <cuda_runtime.h>

#include <string>

#include "core/cuda/bf16.cuh"
#include "core/cuda/check.h"
#include "core/cuda/kernels.h"
#include "core/cuda/reduce.cuh"

namespace loom::cuda {
namespace {

constexpr int kRowsPerBlock = 8;  // warps per block in the row kernels
constexpr int kColTile = 32;      // columns per block in the column-sum kernel
constexpr int kColLanes = 8;      // row lanes per column in the column-sum kernel

__device__ __forceinline__ void Store(float* p, float v) {
  *p = v;
}
__device__ __forceinline__ void Store(uint16_t* p, float v) {
  *p = internal::FloatToBf16Bits(v);
}

// ---------------------------------------------------------------- kernels
template <typename OutT>
__global__ void layernorm_forward_kernel(OutT* out, float* mean, float* rstd, const float* inp,
                                         const float* weight, const float* bias, int64_t n,
                                         int64_t c, float eps) {
  const int lane = threadIdx.x & 31;
  const int64_t row = blockIdx.x * static_cast<int64_t>(kRowsPerBlock) + (threadIdx.x >> 5);
  if (row >= n) return;  // whole warps leave: no block-level synchronisation below
  const float* x = inp + row * c;
  float sum = 0.0f;
  for (int64_t j = lane; j < c; j += 32) sum += x[j];
  const float m = internal::WarpSum(sum) / static_cast<float>(c);
  float var = 0.0f;  // two passes, as the CPU kernel (no E[x^2] - E[x]^2 cancellation)
  for (int64_t j = lane; j < c; j += 32) {
    const float d = x[j] - m;
    var += d * d;
  }
  const float s = 1.0f / sqrtf(internal::WarpSum(var) / static_cast<float>(c) + eps);
  OutT* o = out + row * c;
  for (int64_t j = lane; j < c; j += 32) Store(o + j, (x[j] - m) * s * weight[j] + bias[j]);
  if (lane == 0) {
    if (mean != nullptr) mean[row] = m;
    if (rstd != nullptr) rstd[row] = s;
  }
}

__global__ void layernorm_backward_input_kernel(float* dinp, const float* dout, const float* inp,
                                                const float* weight, const float* mean,
                                                const float* rstd, int64_t n, int64_t c) {
  const int lane = threadIdx.x & 31;
  const int64_t row = blockIdx.x * static_cast<int64_t>(kRowsPerBlock) + (threadIdx.x >> 5);
  if (row >= n) return;
  const float* g = dout + row * c;
  const float* x = inp + row * c;
  const float m = mean[row], s = rstd[row];
  float dn_sum = 0.0f, dn_xhat_sum = 0.0f;
  for (int64_t j = lane; j < c; j += 32) {
    const float dn = g[j] * weight[j];
    dn_sum += dn;
    dn_xhat_sum += dn * ((x[j] - m) * s);
  }
  const float dn_mean = internal::WarpSum(dn_sum) / static_cast<float>(c);
  const float dn_xhat_mean = internal::WarpSum(dn_xhat_sum) / static_cast<float>(c);
  float* dx = dinp + row * c;
  for (int64_t j = lane; j < c; j += 32) {
    const float xhat = (x[j] - m) * s;
    dx[j] += s * (g[j] * weight[j] - dn_mean - xhat * dn_xhat_mean);
  }
}

// blockDim (kColTile, kColLanes): thread (tx, ty) sums column col0 + tx over rows ty, ty + 8, ...;
// the 8 partial sums are then added in a fixed order.
__global__ void layernorm_backward_params_kernel(float* dweight, float* dbias, const float* dout,
                                                 const float* inp, const float* mean,
                                                 const float* rstd, int64_t n, int64_t c) {
  __shared__ float pw[kColLanes][kColTile];
  __shared__ float pb[kColLanes][kColTile];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t col = blockIdx.x * static_cast<int64_t>(kColTile) + tx;
  float sw = 0.0f, sb = 0.0f;
  if (col < c) {
    for (int64_t row = ty; row < n; row += kColLanes) {
      const float g = dout[row * c + col];
      sb += g;
      sw += g * ((inp[row * c + col] - mean[row]) * rstd[row]);
    }
  }
  pw[ty][tx] = sw;
  pb[ty][tx] = sb;
  __syncthreads();
  if (ty != 0 || col >= c) return;
  float tw = 0.0f, tb = 0.0f;
  for (int k = 0; k < kColLanes; ++k) {
    tw += pw[k][tx];
    tb += pb[k][tx];
  }
  if (dweight != nullptr) dweight[col] += tw;
  if (dbias != nullptr) dbias[col] += tb;
}

// ---------------------------------------------------------------- launchers
Status CheckShape(int64_t n, int64_t c, const char* what) {
  if (n < 0 || c <= 0) {
    return InvalidArgument(std::string(what) + ": bad shape n=" + std::to_string(n) +
                           " c=" + std::to_string(c));
  }
  if ((n + kRowsPerBlock - 1) / kRowsPerBlock > int64_t{0x7fffffff}) {
    return InvalidArgument(std::string(what) + ": too many rows");
  }
  return Status::Ok();
}

unsigned RowBlocks(int64_t n) {
  return static_cast<unsigned>((n + kRowsPerBlock - 1) / kRowsPerBlock);
}

template <typename OutT>
Status LaunchForward(OutT* out, float* mean, float* rstd, const float* inp, const float* weight,
                     const float* bias, int64_t n, int64_t c, float eps, Stream stream) {
  LOOM_RETURN_IF_ERROR(CheckShape(n, c, "LayerNormForward"));
  if (n == 0) return Status::Ok();
  layernorm_forward_kernel<OutT><<<RowBlocks(n), kRowsPerBlock * 32, 0, stream>>>(
      out, mean, rstd, inp, weight, bias, n, c, eps);
  return internal::CheckLaunch("layernorm_forward_kernel");
}

}  // namespace

Status LayerNormForward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                        const float* bias, int64_t n, int64_t c, float eps, Stream stream) {
  return LaunchForward(out, mean, rstd, inp, weight, bias, n, c, eps, stream);
}

Status LayerNormForwardBf16(uint16_t* out, float* mean, float* rstd, const float* inp,
                            const float* weight, const float* bias, int64_t n, int64_t c, float eps,
                            Stream stream) {
  return LaunchForward(out, mean, rstd, inp, weight, bias, n, c, eps, stream);
}

Status LayerNormBackward(float* dinp, float* dweight, float* dbias, const float* dout,
                         const float* inp, const float* weight, const float* mean,
                         const float* rstd, int64_t n, int64_t c, Stream stream) {
  LOOM_RETURN_IF_ERROR(CheckShape(n, c, "LayerNormBackward"));
  if (n == 0) return Status::Ok();
  layernorm_backward_input_kernel<<<RowBlocks(n), kRowsPerBlock * 32, 0, stream>>>(
      dinp, dout, inp, weight, mean, rstd, n, c);
  LOOM_RETURN_IF_ERROR(internal::CheckLaunch("layernorm_backward_input_kernel"));
  if (dweight == nullptr && dbias == nullptr) return Status::Ok();
  const unsigned col_blocks = static_cast<unsigned>((c + kColTile - 1) / kColTile);
  layernorm_backward_params_kernel<<<col_blocks, dim3(kColTile, kColLanes), 0, stream>>>(
      dweight, dbias, dout, inp, mean, rstd, n, c);
  return internal::CheckLaunch("layernorm_backward_params_kernel");
}

}  // namespace loom::cuda
