// Vocab-parallel embedding and cross-entropy (Megatron): each tensor-parallel rank holds a shard of
// the (tied) token embedding, rows [rank * vocab_local, (rank + 1) * vocab_local) of the vocabulary
// padded to a multiple of tp.
//   Embedding: each rank looks up the tokens that fall in its shard (zero for the others) and the
//   partial rows are summed across tp (ReduceTokens: to the SP rows with SP).
//   Cross-entropy: each rank computes its shard's logits chunk by chunk and keeps only per-token
//   statistics (max, sum-exp, target logit); they are combined across tp with a max all-reduce
//   and a rescaled sum all-reduce, so the logits never leave their rank. The backward needs no
//   communication beyond the input gradient's ReduceTokens (the log-sum-exp is already global).
// Positions (learned, replicated) are the model's business and are not added here.
#pragma once

#include <cstdint>

#include "core/kernels/cross_entropy.h"
#include "core/status.h"
#include "parallel/tensor_parallel/context.h"

namespace loom {

// out_local [local, c] = the embedding rows of tokens[0 .. full) (each in [0, vocab)) held by this
// rank's shard wte [vocab_local, c], summed across tp. `scratch` holds [full, c].
Status VocabParallelEmbeddingForward(const TensorParallel& tp, const TokenRows& rows,
                                     const int32_t* tokens, const float* wte, int64_t vocab_local,
                                     int64_t c, float* scratch, float* out_local);
// dwte += the rows of GatherTokens(dout_local) for the tokens in this shard. `dout_full` [full, c]
// receives the gathered gradient with SP (unused otherwise: may be null).
Status VocabParallelEmbeddingBackward(const TensorParallel& tp, const TokenRows& rows,
                                      const int32_t* tokens, const float* dout_local,
                                      float* dout_full, int64_t vocab_local, int64_t c,
                                      float* dwte);

// Buffers of the vocab-parallel loss for `shard.n` tokens.
struct CrossEntropyBuffers {
  float* stats = nullptr;  // [3 * n]: max, sum-exp, target logit
  float* chunk = nullptr;  // [n, min(shard.chunk, shard.rows)]: one chunk of logits
  float* lse = nullptr;    // [n]: per-token log-sum-exp over the whole vocabulary (kept)
  float* loss = nullptr;   // [n]: per-token loss
};

// Per-token loss of x [n, c] against the shard of wte `shard` describes; fills buf.lse (kept for
// the backward) and buf.loss.
Status VocabParallelCrossEntropyForward(const TensorParallel& tp, const VocabShard& shard,
                                        const float* x, const float* wte, const int32_t* targets,
                                        const CrossEntropyBuffers& buf);
// With per-token weights dloss [n]: dx_full [n, c] += this shard's share of dx, dwte += its
// gradient; then dx_local = ReduceTokens(dx_full) (may be dx_full itself with tp = 1).
Status VocabParallelCrossEntropyBackward(const TensorParallel& tp, const TokenRows& rows,
                                         const VocabShard& shard, const float* x, const float* wte,
                                         const int32_t* targets, const float* lse,
                                         const float* dloss, float* chunk, float* dx_full,
                                         float* dwte, float* dx_local);

// bf16 compute (`precision: bf16`): x and the shard of wte in bf16 (core/kernels/cross_entropy.h);
// `chunk16` holds [n, min(shard.chunk, shard.rows)] bf16 for the backward's dlogits.
Status VocabParallelCrossEntropyForward(const TensorParallel& tp, const VocabShard& shard,
                                        const Bf16* x, const Bf16* wte, const int32_t* targets,
                                        const CrossEntropyBuffers& buf);
Status VocabParallelCrossEntropyBackward(const TensorParallel& tp, const TokenRows& rows,
                                         const VocabShard& shard, const Bf16* x, const Bf16* wte,
                                         const int32_t* targets, const float* lse,
                                         const float* dloss, float* chunk, Bf16* chunk16,
                                         float* dx_full, float* dwte, float* dx_local);

}  // namespace loom
