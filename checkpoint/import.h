// Importing GPT-2 weights from one safetensors file into a Loom checkpoint, so that a run can
// start from them with checkpoint.init_from (fine-tuning a model trained elsewhere).
//
// Accepted: Hugging Face GPT-2's names and Conv1D [in, out] linear weights (`wte.weight`,
// `h.{l}.attn.c_attn.weight`, ..., optionally under `transformer.`), as `loom ckpt export` writes
// them and as the Hugging Face hub ships GPT-2; or Loom's own names and [out, in] layouts (an
// export with --names loom: metadata naming=loom). F32, F16 or BF16, widened exactly to fp32.
// The attention-mask buffers some GPT-2 files carry (`attn.bias`, `attn.masked_bias`) are
// skipped; an `lm_head.weight` must equal `wte` (the head is tied). The model's shape comes from
// the tensors (vocab, max_seq, hidden, layers); heads from the metadata (n_head) or `heads`.
//
// The checkpoint is step 0 of a one-rank layout: the weights as fp32 masters, zero AdamW moments,
// step count 0. It is written and committed like any save (atomic; a failure leaves nothing).
// Memory: one tensor at a time, about twice the largest.
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
  int tensors = 0;
  int skipped = 0;  // buffers and a tied head
};

// Whether `path` holds weights from elsewhere rather than a checkpoint: a .safetensors file, or a
// Hugging Face model directory (model.safetensors, no step directories) — what ImportSafetensors
// takes.
bool HoldsWeights(const std::string& path);

// `source`: a safetensors file, or a Hugging Face model directory (its model.safetensors, and
// n_head from its config.json). `heads`: 0 to take n_head from the file's metadata or the
// directory's config.json; `heads_name` names where a non-zero `heads` came from in errors that
// it contradicts the file. Errors name the file and tensor.
Result<ImportResult> ImportSafetensors(const std::string& source, const std::string& out_root,
                                       int64_t heads, const std::string& heads_name = "--heads");

}  // namespace loom
