// Planning the import of GPT-2 weights: Hugging Face GPT-2's names (optionally under
// `transformer.`, Conv1D [in, out] linear weights) or Loom's (an export with --names loom).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "checkpoint/export.h"
#include "checkpoint/import_plan.h"
#include "core/file_util.h"
#include "model/layout.h"

namespace loom {
namespace {

// The head count given (--heads, or the job's model.heads) or from a directory's config.json,
// and where it came from, for a contradiction with the file's metadata.
struct HeadsGiven {
  int64_t heads = 0;  // 0: the file's metadata must say
  std::string from;
};

// n_head of a Hugging Face config.json (0: absent).
Result<int64_t> ConfigHeads(const std::string& config) {
  LOOM_ASSIGN_OR_RETURN(std::string text, ReadRegularFile(config, 1 << 20));
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument(config + ": not a JSON object");
  if (!j.contains("n_head")) return int64_t{0};
  const nlohmann::json& n = j["n_head"];
  if (!n.is_number_integer() || n.get<int64_t>() <= 0) {
    return InvalidArgument(config + ": field 'n_head': expected a positive integer, got " +
                           n.dump());
  }
  return n.get<int64_t>();
}

// How the file names GPT-2's tensors: Hugging Face's names (optionally under `transformer.`) or
// Loom's (metadata naming=loom, or `wte` without `.weight`).
struct FileNaming {
  bool loom = false;
  std::string prefix;
  explicit FileNaming(const WeightFiles& ix) {
    const auto& entries = ix.tensors();
    auto it = ix.metadata().find("naming");
    loom = (it != ix.metadata().end() && it->second == "loom") ||
           (entries.count("wte") && !entries.count("wte.weight"));
    prefix = !loom && entries.count("transformer.wte.weight") ? "transformer." : "";
  }
  const SafetensorsEntry* Find(const WeightFiles& ix, const std::string& name) const {
    auto it = ix.tensors().find(prefix + name);
    return it == ix.tensors().end() ? nullptr : &it->second;
  }
  std::string Wte() const { return loom ? "wte" : "wte.weight"; }
  std::string Wpe() const { return loom ? "wpe" : "wpe.weight"; }
};

// vocab, hidden and max_seq from wte and wpe, layers from the h.<l>. names.
Result<ModelConfig> ModelShape(const WeightFiles& ix, const FileNaming& n,
                               const std::string& file) {
  const SafetensorsEntry* wte = n.Find(ix, n.Wte());
  const SafetensorsEntry* wpe = n.Find(ix, n.Wpe());
  if (wte == nullptr || wpe == nullptr || wte->shape.size() != 2 || wpe->shape.size() != 2) {
    return InvalidArgument(file + ": expected GPT-2 weights: tensors '" + n.prefix +
                           (n.loom ? "wte' and 'wpe'" : "wte.weight' and 'wpe.weight'") +
                           " of two dimensions");
  }
  ModelConfig model;
  model.vocab = wte->shape[0];
  model.hidden = wte->shape[1];
  model.max_seq = wpe->shape[0];
  std::set<int64_t> layer_ids;
  for (const auto& [name, e] : ix.tensors()) {
    long long l = -1;
    if (name.rfind(n.prefix + "h.", 0) == 0 &&
        std::sscanf(name.c_str() + n.prefix.size(), "h.%lld.", &l) == 1) {
      layer_ids.insert(l);
    }
  }
  model.layers = static_cast<int64_t>(layer_ids.size());
  if (model.vocab <= 0 || model.hidden <= 0 || model.max_seq <= 0) {
    return InvalidArgument(file + ": tensors '" + n.prefix + n.Wte() + "' " +
                           ShapeToString(wte->shape) + " and '" + n.prefix + n.Wpe() + "' " +
                           ShapeToString(wpe->shape) +
                           ": expected [vocab, hidden] and [max_seq, hidden], all above zero");
  }
  return model;
}

// The head count: the file's metadata n_head (which must agree with one given), else the given.
Result<int64_t> Heads(const WeightFiles& ix, const HeadsGiven& in) {
  const auto n_head = ix.metadata().find("n_head");
  if (n_head == ix.metadata().end()) {
    if (in.heads != 0) return in.heads;
    return InvalidArgument(ix.path() +
                           ": the number of attention heads is not in the file's "
                           "metadata (n_head): give it with --heads");
  }
  const std::string& v = n_head->second;
  char* end = nullptr;
  const long long in_file = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || in_file <= 0) {
    return InvalidArgument(
        ix.path() + ": metadata field 'n_head': expected a positive integer, got '" + v + "'");
  }
  if (in.heads != 0 && in.heads != in_file) {
    return InvalidArgument(ix.path() + ": " + in.from + " contradicts the file's metadata n_head " +
                           v);
  }
  return static_cast<int64_t>(in_file);
}

// The model the file holds: its shape and head count, checked.
Result<ModelConfig> ImportedModel(const WeightFiles& ix, const FileNaming& n,
                                  const HeadsGiven& given) {
  LOOM_ASSIGN_OR_RETURN(ModelConfig model, ModelShape(ix, n, ix.path()));
  LOOM_ASSIGN_OR_RETURN(model.heads, Heads(ix, given));
  if (model.layers == 0 || model.heads <= 0 || model.hidden % model.heads != 0) {
    return InvalidArgument(ix.path() + ": a GPT-2 of " + std::to_string(model.layers) +
                           " layers, hidden " + std::to_string(model.hidden) + " and " +
                           std::to_string(model.heads) + " heads: expected at least one layer " +
                           "and a hidden size divisible by the heads");
  }
  return model;
}

// Every tensor of `model`, by the file's name and layout, with its shape checked.
Status MapTensors(const WeightFiles& ix, const FileNaming& n, ImportPlan* plan) {
  for (const ParamInfo& p : ModelLayout(plan->model, 1).params) {
    bool transposed = false;
    const std::string name = n.loom ? p.name : HuggingFaceGpt2Name(p.name, &transposed);
    const SafetensorsEntry* e = n.Find(ix, name);
    std::vector<int64_t> want(p.global_shape.begin(), p.global_shape.end());
    if (transposed) std::swap(want[0], want[1]);
    if (e == nullptr) {
      return DataLoss(ix.path() + ": tensor '" + n.prefix + name + "' " + ShapeToString(want) +
                      " is missing (a GPT-2 of " + std::to_string(plan->model.layers) + " layers)");
    }
    if (e->shape != want) {
      return DataLoss(ix.FileOf(n.prefix + name) + ": tensor '" + n.prefix + name +
                      "': field 'shape' is " + ShapeToString(e->shape) + ", expected " +
                      ShapeToString(want));
    }
    plan->parts[p.name] = {ImportPart{n.prefix + name, transposed}};
  }
  return Status::Ok();
}

// The file's tensors that are not the model's: attention-mask buffers and a tied head are
// skipped (counted in plan->skipped); anything else is refused.
Status CheckOthers(const WeightFiles& ix, const FileNaming& n, ImportPlan* plan) {
  std::set<std::string> used;
  for (const auto& [canonical, parts] : plan->parts) used.insert(parts.front().name);
  for (const auto& [name, e] : ix.tensors()) {
    if (used.count(name)) continue;
    long long l = -1;
    char tail[32] = {};
    const bool buffer =
        !n.loom && std::sscanf(name.c_str() + n.prefix.size(), "h.%lld.attn.%31s", &l, tail) == 2 &&
        (std::strcmp(tail, "bias") == 0 || std::strcmp(tail, "masked_bias") == 0);
    if (!buffer && !(name == "lm_head.weight" && !n.loom)) {
      return InvalidArgument(ix.FileOf(name) + ": tensor '" + name +
                             "' is not part of a GPT-2 of " + std::to_string(plan->model.layers) +
                             " layers (" + (n.loom ? "Loom" : "Hugging Face") + " names)");
    }
    if (!buffer) {
      LOOM_RETURN_IF_ERROR(CheckTiedHead(ix, name, n.prefix + "wte.weight",
                                         "Loom's GPT-2 ties the head to the embedding"));
    }
    ++plan->skipped;
  }
  return Status::Ok();
}

}  // namespace

Result<ImportPlan> PlanGpt2Import(const WeightFiles& ix, const ImportInput& in, int64_t heads,
                                  const std::string& heads_name) {
  // The head count: given, or a directory's config.json's n_head (which must agree), else the
  // file's metadata (Heads).
  int64_t config_heads = 0;
  if (in.directory && !in.config.empty()) {
    LOOM_ASSIGN_OR_RETURN(config_heads, ConfigHeads(in.config));
  }
  if (heads != 0 && config_heads != 0 && heads != config_heads) {
    return InvalidArgument(in.config + ": " + heads_name + " " + std::to_string(heads) +
                           " contradicts field 'n_head' " + std::to_string(config_heads));
  }
  const HeadsGiven given{heads != 0 ? heads : config_heads,
                         heads != 0
                             ? heads_name + " " + std::to_string(heads)
                             : in.config + ": field 'n_head' " + std::to_string(config_heads)};
  const FileNaming naming(ix);
  ImportPlan plan;
  LOOM_ASSIGN_OR_RETURN(plan.model, ImportedModel(ix, naming, given));
  LOOM_RETURN_IF_ERROR(MapTensors(ix, naming, &plan));
  LOOM_RETURN_IF_ERROR(CheckOthers(ix, naming, &plan));
  return plan;
}

}  // namespace loom
