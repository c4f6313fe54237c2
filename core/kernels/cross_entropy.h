// Fused output projection + softmax + cross-entropy against tied embeddings, processed one
// vocabulary chunk at a time: at most [N, chunk] logits exist at once, and the backward recomputes
// them.
//
// Works on a vocabulary shard (rows [vocab_begin, vocab_begin + rows) of the embedding), so the
// same code serves vocab-parallel cross-entropy: each shard produces partial statistics (row max,
// sum of exp relative to that max, target logit if the target is in the shard) that the caller
// combines across shards (max all-reduce, rescaled sum all-reduce). Rows of the embedding at or
// beyond `vocab_valid` (vocabulary padding) are excluded from the softmax.
#pragma once

#include <cstdint>

#include "core/kernels/bf16.h"
#include "core/status.h"

namespace loom {

struct VocabShard {
  int64_t n = 0;            // tokens
  int64_t channels = 0;     // C
  int64_t vocab_begin = 0;  // global id of the first row of `wte`
  int64_t rows = 0;         // rows of `wte` in this shard
  int64_t vocab_valid = 0;  // ids >= this are padding (usually the true vocab size)
  int64_t chunk = 4096;     // vocabulary rows per chunk (runtime.vocab_chunk)
};

// Per-token partial statistics of this shard: max[i] (-inf if the shard has no valid row),
// sumexp[i] = sum_v exp(z_iv - max[i]), target_logit[i] (0 when the target is not in the shard).
template <typename T>
void CrossEntropyStats(T* max, T* sumexp, T* target_logit, const T* x, const T* wte,
                       const int32_t* targets, const VocabShard& s, T* chunk_buf);

// Combines one shard's statistics into per-token lse and loss (single shard: the whole vocab).
template <typename T>
void CrossEntropyFinish(T* lse, T* loss, const T* max, const T* sumexp, const T* target_logit,
                        int64_t n);

// With dloss[i] = d(objective)/d(loss_i) (1/total_tokens for a mean): dx += dlogits * wte and
// dwte += dlogits^T * x for this shard, dlogits = dloss_i * (softmax - onehot(target)).
// dx or dwte may be null. chunk_buf holds n * chunk elements.
template <typename T>
void CrossEntropyBackward(T* dx, T* dwte, const T* x, const T* wte, const int32_t* targets,
                          const T* lse, const T* dloss, const VocabShard& s, T* chunk_buf);

// bf16 compute (`precision: bf16`): the same with x and the embedding shard in bf16, their
// products accumulated in fp32 (GemmBf16); logits, statistics and gradients stay fp32. The
// backward casts each chunk's dlogits into `chunk16` (n * chunk bf16) for its two GEMMs.
// Errors: Unimplemented where the build has no bf16 GEMM.
Status CrossEntropyStatsBf16(float* max, float* sumexp, float* target_logit, const Bf16* x,
                             const Bf16* wte, const int32_t* targets, const VocabShard& s,
                             float* chunk_buf);
Status CrossEntropyBackwardBf16(float* dx, float* dwte, const Bf16* x, const Bf16* wte,
                                const int32_t* targets, const float* lse, const float* dloss,
                                const VocabShard& s, float* chunk_buf, Bf16* chunk16);

}  // namespace loom
