// Planning the import of Llama weights: Hugging Face LlamaForCausalLM's names (one file or
// shards) with the model from config.json or Loom's export metadata, or Loom's own names (an
// export with --names loom).
#include <cstdio>
#include <map>
#include <set>

#include "checkpoint/hf_llama.h"
#include "checkpoint/import_plan.h"
#include "core/file_util.h"
#include "model/layout.h"

namespace loom {
namespace {

constexpr char kEmbedding[] = "model.embed_tokens.weight";

bool LoomNames(const WeightFiles& ix) {
  const auto it = ix.metadata().find("naming");
  return (it != ix.metadata().end() && it->second == "loom") ||
         (ix.tensors().count("wte") && !ix.tensors().count(kEmbedding));
}

// The model: config.json (a directory's, or the one beside a file) when it describes a Llama,
// else the file's metadata (Loom's export writes the config there too).
Result<ModelConfig> LlamaModel(const WeightFiles& ix, const ImportInput& in, std::string* from) {
  if (!in.config.empty()) {
    LOOM_ASSIGN_OR_RETURN(const std::string text, ReadRegularFile(in.config, 1 << 20));
    if (DescribesLlama(text)) {
      *from = in.config;
      return ParseHuggingFaceLlamaConfig(text, in.config);
    }
  }
  *from = ix.path() + " metadata";
  Result<ModelConfig> m = LlamaConfigFromMetadata(ix.metadata(), ix.path());
  if (m.status().code() != StatusCode::kNotFound) return m;
  return InvalidArgument(
      ix.path() +
      ": Llama weights without a config: expected a config.json (model_type \"llama\") " +
      (in.directory ? "in the directory" : "beside the file") +
      ", or the metadata Loom's export writes (num_attention_heads, ...)" +
      (in.config.empty() ? "" : "; " + in.config + " describes no Llama"));
}

// The input's tensors of `model`, by name, shape and place in Loom's tensors.
std::vector<HfLlamaTensor> Expected(const ModelConfig& model, bool loom) {
  if (!loom) return HuggingFaceLlamaTensors(model);
  std::vector<HfLlamaTensor> out;
  for (const ParamInfo& p : ModelLayout(model, 1).params) {
    out.push_back({p.name, p.name, 0, {p.global_shape.begin(), p.global_shape.end()}});
  }
  return out;
}

std::string Describe(const ModelConfig& m) {
  return "a Llama of " + std::to_string(m.layers) + " layers with " +
         (m.tie_embeddings ? "a tied head: tie_word_embeddings true"
                           : "a head of its own: tie_word_embeddings false");
}

// Every tensor of the model, with its shape checked, into plan->parts (k|v and gate|up as two
// parts each, in row order).
Status MapTensors(const WeightFiles& ix, bool loom, ImportPlan* plan) {
  std::map<std::string, int64_t> rows_read;
  for (const HfLlamaTensor& t : Expected(plan->model, loom)) {
    const auto it = ix.tensors().find(t.name);
    if (it == ix.tensors().end()) {
      return DataLoss(ix.path() + ": tensor '" + t.name + "' " + ShapeToString(t.shape) +
                      " is missing (" + Describe(plan->model) + ")");
    }
    if (it->second.shape != t.shape) {
      return DataLoss(ix.FileOf(t.name) + ": tensor '" + t.name + "': field 'shape' is " +
                      ShapeToString(it->second.shape) + ", expected " + ShapeToString(t.shape) +
                      " (" + Describe(plan->model) + ")");
    }
    // The parts are read one after another: each must start where the last ended.
    int64_t& rows = rows_read[t.loom];
    if (t.row0 != rows) {
      return Internal("import: '" + t.name + "' starts at row " + std::to_string(t.row0) + " of '" +
                      t.loom + "', expected " + std::to_string(rows));
    }
    rows += t.shape[0];
    plan->parts[t.loom].push_back({t.name, false});
  }
  return Status::Ok();
}

// The input's tensors that are not the model's: the rotary inverse frequencies older
// transformers saved, and a tied head equal to the embedding, are skipped (counted in
// plan->skipped); anything else is refused.
Status CheckOthers(const WeightFiles& ix, bool loom, ImportPlan* plan) {
  std::set<std::string> used;
  for (const auto& [canonical, parts] : plan->parts) {
    for (const ImportPart& p : parts) used.insert(p.name);
  }
  for (const auto& [name, e] : ix.tensors()) {
    if (used.count(name)) continue;
    long long l = -1;
    int end = 0;
    const bool inv_freq =
        !loom &&
        std::sscanf(name.c_str(), "model.layers.%lld.self_attn.rotary_emb.inv_freq%n", &l, &end) ==
            1 &&
        static_cast<size_t>(end) == name.size();
    if (!inv_freq && !(name == "lm_head.weight" && !loom && plan->model.tie_embeddings)) {
      return InvalidArgument(ix.FileOf(name) + ": tensor '" + name +
                             "' is not part of a Llama of " + std::to_string(plan->model.layers) +
                             " layers (" + (loom ? "Loom" : "Hugging Face") + " names)");
    }
    if (!inv_freq) {
      LOOM_RETURN_IF_ERROR(CheckTiedHead(
          ix, name, kEmbedding, "the config ties the head to the embedding (tie_word_embeddings)"));
    }
    ++plan->skipped;
  }
  return Status::Ok();
}

}  // namespace

bool HoldsLlama(const WeightFiles& ix, const ImportInput& in) {
  if (ix.tensors().count(kEmbedding)) return true;
  const auto type = ix.metadata().find("model_type");
  if (type != ix.metadata().end()) return type->second == "llama";
  if (!in.directory || in.config.empty()) return false;
  Result<std::string> text = ReadRegularFile(in.config, 1 << 20);
  return text.ok() && DescribesLlama(*text);
}

Result<ImportPlan> PlanLlamaImport(const WeightFiles& ix, const ImportInput& in, int64_t heads,
                                   const std::string& heads_name) {
  ImportPlan plan;
  std::string from;
  LOOM_ASSIGN_OR_RETURN(plan.model, LlamaModel(ix, in, &from));
  if (heads != 0 && heads != plan.model.heads) {
    return InvalidArgument(from + ": " + heads_name + " " + std::to_string(heads) +
                           " contradicts field 'num_attention_heads' " +
                           std::to_string(plan.model.heads));
  }
  const bool loom = LoomNames(ix);
  LOOM_RETURN_IF_ERROR(MapTensors(ix, loom, &plan));
  LOOM_RETURN_IF_ERROR(CheckOthers(ix, loom, &plan));
  return plan;
}

}  // namespace loom
