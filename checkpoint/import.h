// Importing weights trained elsewhere into a Loom checkpoint, so that a run can start from them
// with checkpoint.init_from (fine-tuning a model trained elsewhere). The input is one safetensors
// file, or a Hugging Face model directory: its model.safetensors, or its shards through
// model.safetensors.index.json (checkpoint/hf_shards.h), and its config.json. F32, F16 or BF16,
// widened exactly to fp32. Two families:
//
// GPT-2: Hugging Face GPT-2's names and Conv1D [in, out] linear weights (`wte.weight`,
// `h.{l}.attn.c_attn.weight`, ..., optionally under `transformer.`), as `loom ckpt export` writes
// them and as the Hugging Face hub ships GPT-2; or Loom's own names and [out, in] layouts (an
// export with --names loom: metadata naming=loom). The attention-mask buffers some GPT-2 files
// carry (`attn.bias`, `attn.masked_bias`) are skipped; an `lm_head.weight` must equal `wte` (the
// head is tied). The model's shape comes from the tensors (vocab, max_seq, hidden, layers); heads
// from the metadata (n_head), a directory's config.json (n_head) or `heads`.
//
// Llama (checkpoint/hf_llama.h): Hugging Face LlamaForCausalLM's names
// (`model.embed_tokens.weight`, `model.layers.{l}.self_attn.k_proj.weight`, ...; k|v and gate|up
// concatenated by rows into Loom's fused tensors), or Loom's names (metadata naming=loom). The
// model comes from config.json (the directory's, or the one beside a file) when it says
// LlamaForCausalLM, else from the metadata Loom's export writes. An lm_head.weight under a tied
// config must equal the embedding; older transformers' rotary_emb.inv_freq buffers are skipped.
// Recognised by its tensor names, metadata model_type "llama" or a directory's Llama config.json.
//
// Every tensor of the model must be there with its shape, finite, and nothing else; errors name
// the file (or the index) and tensor. The checkpoint is step 0 of a one-rank layout: the weights as
// fp32 masters, zero AdamW moments, step count 0. It is written and committed like any save
// (atomic; a failure leaves nothing). Memory: one tensor at a time, about twice the largest.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "model/config.h"
#include "parallel/param_layout.h"

namespace loom {

struct ImportResult {
  std::string dir;  // <out_root>/step_00000000
  ModelConfig model;
  int tensors = 0;  // the input's tensors read (Llama's k and v count as two)
  int skipped = 0;  // buffers and a tied head
};

// Whether `path` holds weights from elsewhere rather than a checkpoint: a .safetensors file (or a
// model.safetensors.index.json), or a Hugging Face model directory (model.safetensors or the
// index, no step directories) — what ImportSafetensors takes.
bool HoldsWeights(const std::string& path);

// `source`: a safetensors file, an index of shards, or a Hugging Face model directory (above).
// `heads`: 0 to take the head count from the input (GPT-2: metadata n_head or config.json; Llama:
// its config), else it must agree with the input's; `heads_name` names where a non-zero `heads`
// came from in errors that it contradicts the input. Errors name the file and tensor.
Result<ImportResult> ImportSafetensors(const std::string& source, const std::string& out_root,
                                       int64_t heads, const std::string& heads_name = "--heads");

}  // namespace loom
