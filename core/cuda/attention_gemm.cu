// The row kernels of attention_gemm.h: one warp per row of T scores, lanes striding over the
// row's columns (coalesced); row statistics are warp reductions.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "core/cuda/attention_gemm.h"
#include "core/cuda/check.h"
#include "core/cuda/reduce.cuh"

namespace loom::cuda {
namespace {

constexpr int kRowsPerBlock = 8;  // warps per block

__global__ void __launch_bounds__(kRowsPerBlock * 32)
    causal_softmax_rows_kernel(float* scores, float* lse, int64_t rows, int64_t t) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + (threadIdx.x >> 5);
  if (r >= rows) return;  // warp-uniform
  const int lane = threadIdx.x & 31;
  const int64_t i = r % t;  // the query: keys 0..i are visible
  float* row = scores + r * t;
  float m = -INFINITY;
  for (int64_t j = lane; j <= i; j += 32) m = fmaxf(m, row[j]);
  m = internal::WarpMax(m);  // finite: key 0 is visible
  float l = 0.0f;
  for (int64_t j = lane; j <= i; j += 32) l += expf(row[j] - m);
  l = internal::WarpSum(l);
  const float inv = 1.0f / l;  // l >= 1
  for (int64_t j = lane; j < t; j += 32) row[j] = j <= i ? expf(row[j] - m) * inv : 0.0f;
  if (lane == 0) lse[r] = m + logf(l);
}

__global__ void __launch_bounds__(kRowsPerBlock * 32)
    attention_scores_grad_kernel(float* scores, float* dp, const float* lse, const float* dout,
                                 const float* out, int64_t ld, int64_t hd, int64_t rows,
                                 int64_t t) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + (threadIdx.x >> 5);
  if (r >= rows) return;
  const int lane = threadIdx.x & 31;
  const int64_t head = r / t, i = r % t;
  const float* g = dout + i * ld + head * hd;
  const float* o = out + i * ld + head * hd;
  float delta = 0.0f;
  for (int64_t d = lane; d < hd; d += 32) delta += g[d] * o[d];
  delta = internal::WarpSum(delta);
  const float row_lse = lse[r];
  float* s = scores + r * t;
  float* dsr = dp + r * t;
  for (int64_t j = lane; j < t; j += 32) {
    const float p = j <= i ? expf(s[j] - row_lse) : 0.0f;
    s[j] = p;
    dsr[j] = p * (dsr[j] - delta);
  }
}

unsigned RowBlocks(int64_t rows) {
  return static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
}

Status CheckRows(int64_t rows, int64_t t, const char* what) {
  if (rows < 0 || t <= 0 || rows % t != 0 ||
      (rows + kRowsPerBlock - 1) / kRowsPerBlock > INT32_MAX) {
    return InvalidArgument(std::string(what) + ": bad rows " + std::to_string(rows) + " for T " +
                           std::to_string(t));
  }
  return Status::Ok();
}

}  // namespace

Status CausalSoftmaxRows(float* scores, float* lse, int64_t rows, int64_t t, Stream stream) {
  LOOM_RETURN_IF_ERROR(CheckRows(rows, t, "CausalSoftmaxRows"));
  if (rows == 0) return Status::Ok();
  causal_softmax_rows_kernel<<<RowBlocks(rows), kRowsPerBlock * 32, 0, stream>>>(scores, lse, rows,
                                                                                 t);
  return internal::CheckLaunch("causal_softmax_rows_kernel");
}

Status AttentionScoresGrad(float* scores, float* dp, const float* lse, const float* dout,
                           const float* out, int64_t ld, int64_t hd, int64_t rows, int64_t t,
                           Stream stream) {
  LOOM_RETURN_IF_ERROR(CheckRows(rows, t, "AttentionScoresGrad"));
  if (rows == 0) return Status::Ok();
  attention_scores_grad_kernel<<<RowBlocks(rows), kRowsPerBlock * 32, 0, stream>>>(
      scores, dp, lse, dout, out, ld, hd, rows, t);
  return internal::CheckLaunch("attention_scores_grad_kernel");
}

}  // namespace loom::cuda
