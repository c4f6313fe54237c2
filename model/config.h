// A model's hyper-parameters, as a job file's `model:` section gives them, and how its activations
// are kept for the backward. Two families: GPT-2 (LayerNorm with biases, GELU, learned positions,
// tied embeddings, biases on every linear, ffn = 4 * hidden), which Loom trains, and Llama
// (RMSNorm, SwiGLU MLP of width ffn_hidden, rotary positions, grouped-query attention with
// kv_heads key/value heads, no biases, untied output by default). Both are trained (worker/gpt.h,
// worker/llama_layer.cc) and priced by the planner.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace loom {

enum class ModelFamily { kGpt2, kLlama };
const char* ModelFamilyName(ModelFamily f);                     // "gpt2", "llama"
Result<ModelFamily> ParseModelFamily(const std::string& name);  // gpt2 | llama

// Llama 3.1's rotary frequency scaling (Hugging Face config.json: "rope_scaling" with
// "rope_type": "llama3"): a frequency whose wavelength exceeds original_max_seq / low_freq_factor
// is divided by `factor`, one shorter than original_max_seq / high_freq_factor is kept, and those
// between are interpolated (core/kernels/rope.h).
struct RopeScaling {
  double factor = 0;  // 0: no scaling
  double low_freq_factor = 1, high_freq_factor = 4;
  int64_t original_max_seq = 8192;
  bool on() const { return factor > 0; }
  bool operator==(const RopeScaling&) const = default;
  // factor >= 1, 0 < low_freq_factor < high_freq_factor, original_max_seq > 0 (when on).
  Status Validate() const;
};

struct ModelConfig {
  int64_t vocab = 256;
  int64_t max_seq = 256;
  int64_t layers = 4;
  int64_t heads = 8;
  int64_t hidden = 256;
  ModelFamily family = ModelFamily::kGpt2;
  int64_t kv_heads = 0;           // key/value heads (llama; 0: = heads)
  int64_t ffn_hidden = 0;         // MLP width (0: 4 * hidden)
  double rope_theta = 10000;      // llama: rotary base
  RopeScaling rope_scaling = {};  // llama: off unless set
  double norm_eps = 1e-5;
  bool tie_embeddings = true;  // the output projection is the token embedding (gpt2: always)

  bool llama() const { return family == ModelFamily::kLlama; }
  int64_t ffn() const { return ffn_hidden > 0 ? ffn_hidden : 4 * hidden; }
  int64_t kv() const { return kv_heads > 0 ? kv_heads : heads; }
  int64_t head_dim() const { return hidden / heads; }
  int64_t kv_width() const { return kv() * head_dim(); }  // of K (and of V)
  // hidden % heads, heads % kv_heads, positive sizes.
  Status Validate() const;
};

// Activation recomputation: none keeps every activation for the backward; full keeps only each
// layer's input and recomputes the rest; selective (Megatron's: the attention core only) is
// priced by the planner but not run by the trainer.
enum class Recompute { kNone, kSelective, kFull };
const char* RecomputeName(Recompute r);                     // "none", "selective", "full"
Result<Recompute> ParseRecompute(const std::string& name);  // none | selective | full

}  // namespace loom
