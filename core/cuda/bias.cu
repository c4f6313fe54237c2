// The bias of a linear layer: added to the GEMM's output (with the residual stream where the
// layer feeds it), and its gradient as column sums. Kernels first, launchers second.
#include <cuda_runtime.h>

#include <string>

#include "core/cuda/check.h"
#include "core/cuda/train_kernels.h"

namespace loom::cuda {
namespace {

constexpr int kColTile = 32;   // columns per block of the column-sum kernel (one warp wide)
constexpr int kColLanes = 16;  // row lanes per column: 512 threads per block

// ---------------------------------------------------------------- kernels
// One thread per element; the column of element i is i % c.
__global__ void add_bias_residual_kernel(float* out, const float* bias, const float* resid,
                                         int64_t n, int64_t c) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n * c) return;
  const float b = bias[i % c];
  out[i] += resid != nullptr ? b + resid[i] : b;
}

// blockDim (kColTile, kColLanes): thread (tx, ty) sums column col0 + tx over rows ty,
// ty + kColLanes, ... (a warp reads 32 consecutive floats of a row: coalesced); the partial sums
// are then added in a fixed order by the first row of threads.
__global__ void bias_backward_kernel(float* dbias, const float* dout, int64_t n, int64_t c) {
  __shared__ float partial[kColLanes][kColTile];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t col = blockIdx.x * static_cast<int64_t>(kColTile) + tx;
  float sum = 0.0f;
  if (col < c) {
    for (int64_t row = ty; row < n; row += kColLanes) sum += dout[row * c + col];
  }
  partial[ty][tx] = sum;
  __syncthreads();
  if (ty != 0 || col >= c) return;
  float total = 0.0f;
  for (int k = 0; k < kColLanes; ++k) total += partial[k][tx];
  dbias[col] += total;
}

Status CheckShape(int64_t n, int64_t c, const char* what) {
  if (n < 0 || c <= 0) {
    return InvalidArgument(std::string(what) + ": bad shape n=" + std::to_string(n) +
                           " c=" + std::to_string(c));
  }
  return Status::Ok();
}

}  // namespace

// ---------------------------------------------------------------- launchers
Status AddBiasResidual(float* out, const float* bias, const float* resid, int64_t n, int64_t c,
                       Stream stream) {
  LOOM_RETURN_IF_ERROR(CheckShape(n, c, "AddBiasResidual"));
  LOOM_RETURN_IF_ERROR(internal::CheckElementCount(n * c, "AddBiasResidual"));
  if (n == 0) return Status::Ok();
  add_bias_residual_kernel<<<internal::GridFor(n * c), internal::kBlock, 0, stream>>>(out, bias,
                                                                                      resid, n, c);
  return internal::CheckLaunch("add_bias_residual_kernel");
}

Status BiasBackward(float* dbias, const float* dout, int64_t n, int64_t c, Stream stream) {
  LOOM_RETURN_IF_ERROR(CheckShape(n, c, "BiasBackward"));
  if (n == 0) return Status::Ok();
  const unsigned blocks = static_cast<unsigned>((c + kColTile - 1) / kColTile);
  bias_backward_kernel<<<blocks, dim3(kColTile, kColLanes), 0, stream>>>(dbias, dout, n, c);
  return internal::CheckLaunch("bias_backward_kernel");
}

}  // namespace loom::cuda
