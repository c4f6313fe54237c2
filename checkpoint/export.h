// Exporting a checkpoint's model weights (fp32 master weights, consolidated) to one safetensors
// file that common tools open. Names and layouts (docs/CHECKPOINT.md):
//   kHuggingFaceGpt2  the tensor names of Hugging Face's GPT-2 (`wte.weight`, `wpe.weight`,
//                     `h.{l}.attn.c_attn.weight`, ..., `ln_f.bias`); the four linear weights are
//                     stored transposed, [in, out], as GPT-2's Conv1D modules hold them; the LM
//                     head is tied to wte and not stored. Metadata: format=pt plus the config.
//   kLoom             Loom's canonical names and [out, in] layouts (parallel/param_layout.h).
// Tensors are read and written one at a time (memory: about twice the largest tensor); the file
// is written atomically (temporary file, fsync, rename). The weights are written as F32 (exact),
// or rounded to nearest-even as BF16 or F16 (half the size, as checkpoints are usually shared);
// an F16 export refuses weights beyond F16's range (65504) rather than write infinities.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/status.h"
#include "core/tensor.h"  // DType

namespace loom {

enum class ExportNames { kHuggingFaceGpt2, kLoom };
// Round-to-nearest-even conversions of n floats (NaN stays NaN). ToF16 fails on a finite value
// that rounds beyond F16's largest (65504), naming `what` and the element's index.
void ToBf16(const float* in, uint16_t* out, size_t n);
Status ToF16(const float* in, uint16_t* out, size_t n, const std::string& what);

struct ExportResult {
  std::string dir;  // the step directory exported
  int tensors = 0;
  uint64_t bytes = 0;  // tensor bytes written
};

// `src`: a step directory or a root (its newest checkpoint).
Result<ExportResult> ExportSafetensors(const std::string& src, const std::string& file,
                                       ExportNames names, DType dtype = DType::kF32);

// A Hugging Face model directory, as `save_pretrained` writes one for GPT2LMHeadModel:
// `out_dir/model.safetensors` (Hugging Face names, `dtype`) and `out_dir/config.json` (GPT-2's
// config for this model: sizes, tanh GELU "gelu_new", layer-norm epsilon 1e-5, tied head, no
// dropout, `torch_dtype`). Each file is replaced atomically; on failure neither is left new
// (and `out_dir` is removed if this made it and it is empty).
Result<ExportResult> ExportHuggingFaceDir(const std::string& src, const std::string& out_dir,
                                          DType dtype = DType::kF32);

// Removes what an export to `path` (a file, or a Hugging Face directory) cut short by a signal or
// a crash left: `path.tmp.<pid>`, `path/model.safetensors.tmp.<pid>` and `path/config.json.tmp.*`
// (a directory the export made stays, maybe empty). Best effort; nothing else is touched.
void RemoveExportLeftovers(const std::string& path);

// The Hugging Face GPT-2 name of canonical tensor `name`, and whether it is stored transposed.
std::string HuggingFaceGpt2Name(const std::string& name, bool* transposed);

}  // namespace loom
