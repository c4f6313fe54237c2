// Token + position embedding: out[n,:] = wte[tokens[n] - vocab_begin, :] + wpe[positions[n], :].
// `wte` may be a vocabulary shard [vocab_begin, vocab_begin + vocab_rows) (vocab-parallel
// embedding): tokens outside the shard contribute zero there and are summed across shards by the
// caller. `positions` gives each token's global position (null: position = n % seq), so a context
// parallel split can hold non-contiguous positions. Tokens must be in [0, vocab) (checked by the
// data loader, not here). Backward accumulates (+=) into dwte/dwpe.
#pragma once

#include <cstdint>

namespace loom {

struct EmbeddingShape {
  int64_t n = 0;            // tokens (batch * seq)
  int64_t seq = 0;          // used when positions == nullptr
  int64_t channels = 0;     // C
  int64_t vocab_begin = 0;  // first vocabulary row held in wte
  int64_t vocab_rows = 0;   // rows of wte
};

template <typename T>
void EmbeddingForward(T* out, const int32_t* tokens, const int32_t* positions, const T* wte,
                      const T* wpe, const EmbeddingShape& s);

// dwpe may be null (positions are added only on one shard under vocab parallelism).
template <typename T>
void EmbeddingBackward(T* dwte, T* dwpe, const T* dout, const int32_t* tokens,
                       const int32_t* positions, const EmbeddingShape& s);

}  // namespace loom
