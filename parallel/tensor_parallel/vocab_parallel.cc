// Vocab-parallel embedding lookup and cross-entropy.
#include "parallel/tensor_parallel/vocab_parallel.h"

#include <cmath>
#include <limits>
#include <vector>

#include "core/kernels/embedding.h"
#include "parallel/tensor_parallel/sequence_parallel.h"

namespace loom {

Status VocabParallelEmbeddingForward(const TensorParallel& tp, const TokenRows& rows,
                                     const int32_t* tokens, const float* wte, int64_t vocab_local,
                                     int64_t c, float* scratch, float* out_local) {
  // seq only matters for positions, which are not looked up here.
  EmbeddingShape es{rows.full, rows.full, c, tp.rank() * vocab_local, vocab_local};
  EmbeddingForward<float>(scratch, tokens, nullptr, wte, nullptr, es);
  return ReduceTokens(tp, rows, scratch, out_local, c);
}

Status VocabParallelEmbeddingBackward(const TensorParallel& tp, const TokenRows& rows,
                                      const int32_t* tokens, const float* dout_local,
                                      float* dout_full, int64_t vocab_local, int64_t c,
                                      float* dwte) {
  const float* dfull = dout_local;
  if (tp.sp) {
    LOOM_RETURN_IF_ERROR(GatherTokens(tp, rows, dout_local, dout_full, c));
    dfull = dout_full;
  }
  EmbeddingShape es{rows.full, rows.full, c, tp.rank() * vocab_local, vocab_local};
  EmbeddingBackward<float>(dwte, nullptr, dfull, tokens, nullptr, es);
  return Status::Ok();
}

namespace {

// Combines the shards' statistics in buf.stats across tp and finishes lse and loss.
Status CombineShards(const TensorParallel& tp, int64_t n, const CrossEntropyBuffers& buf) {
  float* mx = buf.stats;
  float* sum = mx + n;
  float* zt = sum + n;
  if (tp.size() > 1) {
    // Combine each shard's max and rescaled sum-exp across tp; the target logit lives in one shard.
    std::vector<float> local_max(mx, mx + n);
    LOOM_RETURN_IF_ERROR(tp.comm->AllReduce(mx, n, ReduceOp::kMax));
    for (int64_t i = 0; i < n; ++i) {
      sum[i] = local_max[i] == -std::numeric_limits<float>::infinity()
                   ? 0.0f
                   : sum[i] * std::exp(local_max[i] - mx[i]);
    }
    LOOM_RETURN_IF_ERROR(tp.comm->AllReduce(sum, 2 * n));  // sum-exp and target logit
  }
  CrossEntropyFinish(buf.lse, buf.loss, mx, sum, zt, n);
  return Status::Ok();
}

}  // namespace

Status VocabParallelCrossEntropyForward(const TensorParallel& tp, const VocabShard& shard,
                                        const float* x, const float* wte, const int32_t* targets,
                                        const CrossEntropyBuffers& buf) {
  const int64_t n = shard.n;
  CrossEntropyStats(buf.stats, buf.stats + n, buf.stats + 2 * n, x, wte, targets, shard, buf.chunk);
  return CombineShards(tp, n, buf);
}

Status VocabParallelCrossEntropyForward(const TensorParallel& tp, const VocabShard& shard,
                                        const Bf16* x, const Bf16* wte, const int32_t* targets,
                                        const CrossEntropyBuffers& buf) {
  const int64_t n = shard.n;
  LOOM_RETURN_IF_ERROR(CrossEntropyStatsBf16(buf.stats, buf.stats + n, buf.stats + 2 * n, x, wte,
                                             targets, shard, buf.chunk));
  return CombineShards(tp, n, buf);
}

Status VocabParallelCrossEntropyBackward(const TensorParallel& tp, const TokenRows& rows,
                                         const VocabShard& shard, const Bf16* x, const Bf16* wte,
                                         const int32_t* targets, const float* lse,
                                         const float* dloss, float* chunk, Bf16* chunk16,
                                         float* dx_full, float* dwte, float* dx_local) {
  LOOM_RETURN_IF_ERROR(
      CrossEntropyBackwardBf16(dx_full, dwte, x, wte, targets, lse, dloss, shard, chunk, chunk16));
  return ReduceTokens(tp, rows, dx_full, dx_local, shard.channels);
}

Status VocabParallelCrossEntropyBackward(const TensorParallel& tp, const TokenRows& rows,
                                         const VocabShard& shard, const float* x, const float* wte,
                                         const int32_t* targets, const float* lse,
                                         const float* dloss, float* chunk, float* dx_full,
                                         float* dwte, float* dx_local) {
  CrossEntropyBackward(dx_full, dwte, x, wte, targets, lse, dloss, shard, chunk);
  return ReduceTokens(tp, rows, dx_full, dx_local, shard.channels);
}

}  // namespace loom
