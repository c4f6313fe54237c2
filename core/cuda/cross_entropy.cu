// Softmax cross-entropy over one chunk of logits: running statistics (a block per token row, block
// reductions for the chunk's max and sum of exponentials), the finish (a thread per token) and the
// in-place dlogits (a thread per logit).
#include <cuda_runtime.h>

#include <string>

#include "core/cuda/check.h"
#include "core/cuda/kernels.h"
#include "core/cuda/reduce.cuh"

namespace loom::cuda {
namespace {

constexpr int kRowBlock = 256;

// ---------------------------------------------------------------- kernels
__global__ void ce_init_kernel(float* max, float* sumexp, float* target_logit, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  max[i] = -INFINITY;
  sumexp[i] = 0.0f;
  target_logit[i] = 0.0f;
}

__global__ void __launch_bounds__(kRowBlock)
    ce_chunk_stats_kernel(float* max, float* sumexp, float* target_logit, const float* logits,
                          int64_t ld, int64_t valid_cols, int64_t col0, const int32_t* targets) {
  __shared__ float scratch[32];
  const int64_t i = blockIdx.x;
  const float* z = logits + i * ld;
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < valid_cols; j += blockDim.x) mx = fmaxf(mx, z[j]);
  const float old_max = max[i];
  mx = fmaxf(old_max, internal::BlockReduce(mx, internal::MaxOp{}, -INFINITY, scratch));
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < valid_cols; j += blockDim.x) sum += expf(z[j] - mx);
  sum = internal::BlockReduce(sum, internal::SumOp{}, 0.0f, scratch);
  if (threadIdx.x != 0) return;
  // old_max == -inf before the first chunk: the old sum is 0 and its factor expf(-inf) = 0.
  sumexp[i] = sumexp[i] * expf(old_max - mx) + sum;
  max[i] = mx;
  const int64_t tgt = static_cast<int64_t>(targets[i]) - col0;
  if (tgt >= 0 && tgt < valid_cols) target_logit[i] = z[tgt];
}

__global__ void ce_finish_kernel(float* lse, float* loss, const float* max, const float* sumexp,
                                 const float* target_logit, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float l = max[i] + logf(sumexp[i]);
  lse[i] = l;
  if (loss != nullptr) loss[i] = l - target_logit[i];
}

__global__ void ce_chunk_grad_kernel(float* logits, int64_t ld, int64_t n, int64_t cols,
                                     int64_t valid_cols, int64_t col0, const int32_t* targets,
                                     const float* lse, const float* dloss) {
  const int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (e >= n * cols) return;
  const int64_t i = e / cols, j = e - i * cols;
  float* z = logits + i * ld + j;
  if (j >= valid_cols) {
    *z = 0.0f;  // vocabulary padding: no probability, no gradient
    return;
  }
  const float gi = dloss[i];
  float d = gi * expf(*z - lse[i]);
  if (j == static_cast<int64_t>(targets[i]) - col0) d -= gi;
  *z = d;
}

// ---------------------------------------------------------------- launchers
Status CheckChunk(int64_t ld, int64_t n, int64_t cols, int64_t valid_cols, const char* what) {
  if (n < 0 || cols < 0 || valid_cols < 0 || valid_cols > cols || ld < cols ||
      n > int64_t{0x7fffffff}) {
    return InvalidArgument(
        std::string(what) + ": bad chunk n=" + std::to_string(n) + " cols=" + std::to_string(cols) +
        " valid_cols=" + std::to_string(valid_cols) + " ld=" + std::to_string(ld));
  }
  return Status::Ok();
}

}  // namespace

Status CrossEntropyStatsInit(float* max, float* sumexp, float* target_logit, int64_t n,
                             Stream stream) {
  LOOM_RETURN_IF_ERROR(internal::CheckElementCount(n, "CrossEntropyStatsInit"));
  if (n == 0) return Status::Ok();
  ce_init_kernel<<<internal::GridFor(n), internal::kBlock, 0, stream>>>(max, sumexp, target_logit,
                                                                        n);
  return internal::CheckLaunch("ce_init_kernel");
}

Status CrossEntropyChunkStats(float* max, float* sumexp, float* target_logit, const float* logits,
                              int64_t ld, int64_t n, int64_t valid_cols, int64_t col0,
                              const int32_t* targets, Stream stream) {
  LOOM_RETURN_IF_ERROR(CheckChunk(ld, n, valid_cols, valid_cols, "CrossEntropyChunkStats"));
  if (n == 0 || valid_cols == 0) return Status::Ok();  // nothing to fold in
  ce_chunk_stats_kernel<<<static_cast<unsigned>(n), kRowBlock, 0, stream>>>(
      max, sumexp, target_logit, logits, ld, valid_cols, col0, targets);
  return internal::CheckLaunch("ce_chunk_stats_kernel");
}

Status CrossEntropyFinish(float* lse, float* loss, const float* max, const float* sumexp,
                          const float* target_logit, int64_t n, Stream stream) {
  LOOM_RETURN_IF_ERROR(internal::CheckElementCount(n, "CrossEntropyFinish"));
  if (n == 0) return Status::Ok();
  ce_finish_kernel<<<internal::GridFor(n), internal::kBlock, 0, stream>>>(lse, loss, max, sumexp,
                                                                          target_logit, n);
  return internal::CheckLaunch("ce_finish_kernel");
}

Status CrossEntropyChunkGrad(float* logits, int64_t ld, int64_t n, int64_t cols, int64_t valid_cols,
                             int64_t col0, const int32_t* targets, const float* lse,
                             const float* dloss, Stream stream) {
  LOOM_RETURN_IF_ERROR(CheckChunk(ld, n, cols, valid_cols, "CrossEntropyChunkGrad"));
  LOOM_RETURN_IF_ERROR(internal::CheckElementCount(n * cols, "CrossEntropyChunkGrad"));
  if (n == 0 || cols == 0) return Status::Ok();
  ce_chunk_grad_kernel<<<internal::GridFor(n * cols), internal::kBlock, 0, stream>>>(
      logits, ld, n, cols, valid_cols, col0, targets, lse, dloss);
  return internal::CheckLaunch("ce_chunk_grad_kernel");
}

}  // namespace loom::cuda
