// GPT-2 style model hyper-parameters and the canonical list of its parameters.
//
// Canonical parameter names (global layer numbers, never stage-local), in storage order:
//   wte [vocab, C]        token embedding, tied with the output projection
//   wpe [max_seq, C]      learned positions
//   h.{l}.ln_1.weight/bias [C]             h.{l}.attn.c_attn.weight [3C, C], .bias [3C]
//   h.{l}.attn.c_proj.weight [C, C], .bias  h.{l}.ln_2.weight/bias [C]
//   h.{l}.mlp.c_fc.weight [4C, C], .bias [4C]   h.{l}.mlp.c_proj.weight [C, 4C], .bias [C]
//   ln_f.weight/bias [C]
// Linear weights use nn.Linear's [out, in] layout. c_attn's output columns are q | k | v.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

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

struct ParamInfo {
  std::string name;
  Shape shape;
  int64_t offset = 0;   // elements from the start of the flat parameter buffer
  int layer = -1;       // -1 for embeddings and the final norm
  bool decay = false;   // AdamW weight decay applies (matrices and embeddings, not biases/norms)
  float init_std = 0;   // > 0: normal(0, init_std); otherwise constant init_value
  float init_value = 0;
  int64_t numel() const { return NumElements(shape); }
};

// The parameters of a model in storage order; a pure function of the config.
struct ParamLayout {
  std::vector<ParamInfo> params;
  int64_t total = 0;
  // [begin, end) element offsets of each layer's parameters (contiguous per layer).
  std::vector<std::pair<int64_t, int64_t>> layer_ranges;

  static ParamLayout ForModel(const ModelConfig& config);
  const ParamInfo* Find(const std::string& name) const;
};

// Fills `data` (layout.total floats) with the GPT-2 initialisation: normal(0, 0.02) for matrices
// and embeddings, 0.02/sqrt(2*layers) for residual projections (attn.c_proj, mlp.c_proj), zero
// biases, unit LayerNorm weights. Element i of tensor `name` depends only on (seed, name, i).
void InitParams(const ParamLayout& layout, uint64_t seed, float* data);

}  // namespace loom
