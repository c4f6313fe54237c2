// Hugging Face's Llama (LlamaForCausalLM) and Loom's llama family, both ways: which Hugging Face
// tensor is which rows of which Loom tensor, and the config.json (or safetensors metadata) that
// describes the model. Used by the export (checkpoint/export.h) and the import
// (checkpoint/import.h); docs/CHECKPOINT.md has the table.
//
// Loom fuses k|v (h.{l}.attn.kv.weight) and gate|up (h.{l}.mlp.c_fc.weight) into one matrix each
// (model/layout.h) so that a tensor-parallel rank's rows of both are one block; Hugging Face keeps
// them apart, so each is two row slices. Everything else is one tensor under another name, in the
// same [out, in] layout (nn.Linear's on both sides). Both apply rotary positions in the
// rotate-half form (HF's apply_rotary_pos_emb), so q_proj and k_proj rows need no permutation.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"  // DType
#include "model/config.h"

namespace loom {

// One tensor of a Hugging Face Llama checkpoint: rows [row0, row0 + shape[0]) of Loom's tensor
// `loom` (all of it when the shapes agree).
struct HfLlamaTensor {
  std::string name;            // Hugging Face's, e.g. "model.layers.0.self_attn.k_proj.weight"
  std::string loom;            // Loom's canonical tensor holding it, e.g. "h.0.attn.kv.weight"
  int64_t row0 = 0;            // its first row in `loom`
  std::vector<int64_t> shape;  // [rows, cols], or [C] for a norm's weight
};

// Every tensor of `model` (a llama) under Hugging Face's names, in the order save_pretrained
// writes them: model.embed_tokens.weight; per layer input_layernorm, self_attn.{q,k,v,o}_proj,
// post_attention_layernorm, mlp.{gate,up,down}_proj; model.norm.weight; lm_head.weight only when
// untied. The slices of one Loom tensor are adjacent and in row order, and together cover it.
std::vector<HfLlamaTensor> HuggingFaceLlamaTensors(const ModelConfig& model);

// config.json for `model` (a llama), for LlamaForCausalLM.from_pretrained: architectures,
// model_type, the sizes, max_position_embeddings (max_seq), rope_theta, rms_norm_eps,
// tie_word_embeddings, hidden_act "silu", no biases or dropout, rope_scaling (null, or Llama 3.1's
// "llama3" with its four figures), torch_dtype from `dtype`. Two-space indented JSON, with a final
// newline.
std::string HuggingFaceLlamaConfigJson(const ModelConfig& model, DType dtype);

// Whether config.json text says LlamaForCausalLM (model_type "llama", or "LlamaForCausalLM" among
// its architectures). Text that is not a JSON object is not.
bool DescribesLlama(const std::string& config_text);

// The model a Llama config.json describes, read as LlamaConfig reads it: vocab_size, hidden_size,
// intermediate_size, num_hidden_layers and num_attention_heads are required; absent, the others
// take LlamaConfig's defaults (num_key_value_heads = num_attention_heads, max_position_embeddings
// 2048, rope_theta 10000, rms_norm_eps 1e-6, tie_word_embeddings false). What Loom does not compute
// is refused rather than trained differently: a hidden_act other than silu, rope_scaling of a
// kind other than Llama 3.1's "llama3" (linear, dynamic, yarn, ...), attention or MLP biases, a
// head_dim other than hidden_size / num_attention_heads. Errors name `where` (the file) and the
// field, and say what was expected.
Result<ModelConfig> ParseHuggingFaceLlamaConfig(const std::string& config_text,
                                                const std::string& where);

// The same fields as safetensors metadata (strings; "model_type": "llama" among them), so that
// one exported file describes its model without a config.json beside it, and back. A metadata map
// without num_attention_heads has no config: NotFound.
std::map<std::string, std::string> HuggingFaceLlamaMetadata(const ModelConfig& model);
Result<ModelConfig> LlamaConfigFromMetadata(const std::map<std::string, std::string>& metadata,
                                            const std::string& where);

}  // namespace loom
