// A model's hyper-parameters, as a job file's `model:` section gives them, and how its activations
// are kept for the backward. GPT-2 style today (LayerNorm, GELU, learned positions, tied
// embeddings, ffn = 4 * hidden); the Llama family adds its own fields here (model/layout.h lists
// each family's parameters).
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace loom {

struct ModelConfig {
  int64_t vocab = 256;
  int64_t max_seq = 256;
  int64_t layers = 4;
  int64_t heads = 8;
  int64_t hidden = 256;

  int64_t ffn() const { return 4 * hidden; }
  int64_t head_dim() const { return hidden / heads; }
  // hidden % heads, positive sizes.
  Status Validate() const;
};

// Activation recomputation: none keeps every activation for the backward; full keeps only each
// layer's input and recomputes the rest; selective (Megatron's: the attention core only) is
// priced by the planner but not run by the trainer.
enum class Recompute { kNone, kSelective, kFull };
const char* RecomputeName(Recompute r);                     // "none", "selective", "full"
Result<Recompute> ParseRecompute(const std::string& name);  // none | selective | full

}  // namespace loom
