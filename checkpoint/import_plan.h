// What an import reads, family by family: which of the input's tensors make each of Loom's
// canonical tensors, and the model they make. checkpoint/import.cc finds the input, picks the
// family and writes the checkpoint; import_gpt2.cc and import_llama.cc plan it. Internal to
// checkpoint/import*.cc.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "checkpoint/weight_files.h"
#include "core/status.h"
#include "model/config.h"

namespace loom {

// Where the weights are.
struct ImportInput {
  std::string weights;     // a .safetensors file, or a Hugging Face index of shards
  std::string config;      // config.json: a directory's, or the one beside a file ("": none)
  bool directory = false;  // given a Hugging Face model directory (not a file)
};

// One of the input's tensors: a canonical tensor's rows, in the input's name and layout.
struct ImportPart {
  std::string name;
  bool transposed = false;  // stored [in, out] (GPT-2's Conv1D)
};

struct ImportPlan {
  ModelConfig model;
  // Canonical name -> its parts, in row order (one, or two for Llama's fused k|v and gate|up).
  std::map<std::string, std::vector<ImportPart>> parts;
  int skipped = 0;  // input tensors that are not weights: buffers, a tied head
};

// `heads`: given (0: none), by `heads_name` (for errors that the input contradicts it).
Result<ImportPlan> PlanGpt2Import(const WeightFiles& ix, const ImportInput& in, int64_t heads,
                                  const std::string& heads_name);
// Whether the input holds a Llama: Hugging Face Llama names, metadata model_type "llama" (Loom's
// export), or a directory whose config.json says LlamaForCausalLM.
bool HoldsLlama(const WeightFiles& ix, const ImportInput& in);
Result<ImportPlan> PlanLlamaImport(const WeightFiles& ix, const ImportInput& in, int64_t heads,
                                   const std::string& heads_name);

// A head tensor stored although tied: it must be the embedding itself, bit for bit (after
// widening); otherwise an error naming both and `why` the head is tied.
Status CheckTiedHead(const WeightFiles& ix, const std::string& head, const std::string& embedding,
                     const std::string& why);

}  // namespace loom
