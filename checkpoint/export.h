// Exporting a checkpoint's model weights (fp32 master weights, consolidated) to safetensors that
// common tools open. Names and layouts (docs/CHECKPOINT.md):
//   kHuggingFace  Hugging Face's names for the checkpoint's family.
//                 GPT-2 (GPT2LMHeadModel): `wte.weight`, `wpe.weight`, `h.{l}.attn.c_attn.weight`,
//                 ..., `ln_f.bias`; the four linear weights are stored transposed, [in, out], as
//                 GPT-2's Conv1D modules hold them; the LM head is tied to wte and not stored.
//                 Metadata: format=pt plus the config (n_head, ...).
//                 Llama (LlamaForCausalLM, checkpoint/hf_llama.h): `model.embed_tokens.weight`,
//                 `model.layers.{l}.self_attn.{q,k,v,o}_proj.weight`, ...; Loom's fused k|v and
//                 gate|up written as their row slices; `lm_head.weight` when untied. Metadata:
//                 format=pt plus config.json's fields (model_type, num_attention_heads, ...).
//   kLoom         Loom's canonical names and [out, in] layouts (parallel/param_layout.h), with the
//                 same metadata.
// Tensors are read and written one at a time (memory: about twice the largest tensor); each file
// is written atomically (temporary file, fsync, rename). The weights are written as F32 (exact),
// or rounded to nearest-even as BF16 or F16 (half the size, as checkpoints are usually shared);
// an F16 export refuses weights beyond F16's range (65504) rather than write infinities.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/hf_shards.h"
#include "checkpoint/hf_tokenizer.h"
#include "core/status.h"
#include "core/tensor.h"  // DType
#include "model/config.h"

namespace loom {

enum class ExportNames { kHuggingFace, kLoom };

// Round-to-nearest-even conversions of n floats (NaN stays NaN). ToF16 fails on a finite value
// that rounds beyond F16's largest (65504), naming `what` and the element's index.
void ToBf16(const float* in, uint16_t* out, size_t n);
Status ToF16(const float* in, uint16_t* out, size_t n, const std::string& what);

struct ExportResult {
  std::string dir;  // the step directory exported
  ModelFamily family = ModelFamily::kGpt2;
  int tensors = 0;
  uint64_t bytes = 0;              // tensor bytes written
  std::vector<std::string> files;  // the safetensors files written (a directory's: their names)
  bool tokenizer = false;          // a directory's tokenizer.json and tokenizer_config.json
};

// The files of a Hugging Face directory beside the weights and config.json
// (checkpoint/hf_tokenizer.h): generation_config.json always; the byte-level tokenizer's
// tokenizer.json and tokenizer_config.json where the model was trained on Loom's byte tokens.
struct HfExtras {
  bool byte_tokenizer = false;    // needs a vocabulary of at least 256 (ids past 255 unused)
  GenerationDefaults generation;  // max_length 0: the model's max_seq
};

// `src`: a step directory or a root (its newest checkpoint).
Result<ExportResult> ExportSafetensors(const std::string& src, const std::string& file,
                                       ExportNames names, DType dtype = DType::kF32);

// A Hugging Face model directory, as `save_pretrained` writes one for GPT2LMHeadModel or
// LlamaForCausalLM: the weights under Hugging Face names in `dtype`, and `out_dir/config.json` (the
// family's config for this model: GPT-2's sizes, tanh GELU "gelu_new", layer-norm epsilon 1e-5,
// tied head, no dropout; or checkpoint/hf_llama.h's; `torch_dtype`), with `extras`'s files. The
// weights are one
// `model.safetensors` when they fit in `max_shard_bytes`, else save_pretrained's shards
// (checkpoint/hf_shards.h): `model-00001-of-0000N.safetensors` ... and
// `model.safetensors.index.json`. Every file is written under a temporary name first and renamed
// once all are complete (the weights, the index, the extras, config.json last), so a failure on the
// way leaves
// the directory's previous files as they were (and `out_dir` is removed if this made it and it is
// empty); once renamed, weight files of a previous export that this one did not write
// (model.safetensors, an index, other shards) are removed, since from_pretrained would read them.
Result<ExportResult> ExportHuggingFaceDir(const std::string& src, const std::string& out_dir,
                                          DType dtype = DType::kF32,
                                          uint64_t max_shard_bytes = kDefaultMaxShardBytes,
                                          const HfExtras& extras = {});

// Removes what an export to `path` (a file, or a Hugging Face directory) cut short by a signal or
// a crash left: `path.tmp.<pid>`, and in `path/` the `.tmp.<pid>` files of config.json,
// generation_config.json, the tokenizer's files, model.safetensors, the index and the shards (a
// directory the export made stays, maybe empty). Best effort; nothing else is touched.
void RemoveExportLeftovers(const std::string& path);

// The Hugging Face GPT-2 name of canonical tensor `name`, and whether it is stored transposed.
std::string HuggingFaceGpt2Name(const std::string& name, bool* transposed);

}  // namespace loom
