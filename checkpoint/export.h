// Exporting a checkpoint's model weights (fp32 master weights, consolidated) to one safetensors
// file that common tools open. Names and layouts (docs/CHECKPOINT.md):
//   kHuggingFaceGpt2  the tensor names of Hugging Face's GPT-2 (`wte.weight`, `wpe.weight`,
//                     `h.{l}.attn.c_attn.weight`, ..., `ln_f.bias`); the four linear weights are
//                     stored transposed, [in, out], as GPT-2's Conv1D modules hold them; the LM
//                     head is tied to wte and not stored. Metadata: format=pt plus the config.
//   kLoom             Loom's canonical names and [out, in] layouts (parallel/param_layout.h).
// Tensors are read and written one at a time (memory: about twice the largest tensor); the file
// is written atomically (temporary file, fsync, rename).
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace loom {

enum class ExportNames { kHuggingFaceGpt2, kLoom };

struct ExportResult {
  int tensors = 0;
  uint64_t bytes = 0;  // tensor bytes written
};

// `src`: a step directory or a root (its newest checkpoint).
Result<ExportResult> ExportSafetensors(const std::string& src, const std::string& file,
                                       ExportNames names);

// The Hugging Face GPT-2 name of canonical tensor `name`, and whether it is stored transposed.
std::string HuggingFaceGpt2Name(const std::string& name, bool* transposed);

}  // namespace loom
