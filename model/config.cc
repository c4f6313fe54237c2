#include "model/config.h"

namespace loom {

Status ModelConfig::Validate() const {
  if (vocab <= 0 || max_seq <= 0 || layers <= 0 || heads <= 0 || hidden <= 0) {
    return InvalidArgument("model sizes must be positive");
  }
  if (hidden % heads != 0) {
    return InvalidArgument("model.hidden (" + std::to_string(hidden) +
                           ") must be a multiple of model.heads (" + std::to_string(heads) + ")");
  }
  if (kv_heads < 0 || heads % kv() != 0) {
    return InvalidArgument("model.heads (" + std::to_string(heads) +
                           ") must be a multiple of model.kv_heads (" + std::to_string(kv_heads) +
                           ")");
  }
  return rope_scaling.Validate();
}

Status RopeScaling::Validate() const {
  if (!on()) return Status::Ok();
  if (!(factor >= 1)) {
    return InvalidArgument("rope_scaling.factor: expected at least 1, got " +
                           std::to_string(factor));
  }
  if (!(low_freq_factor > 0 && high_freq_factor > low_freq_factor)) {
    return InvalidArgument("rope_scaling: expected 0 < low_freq_factor < high_freq_factor, got " +
                           std::to_string(low_freq_factor) + " and " +
                           std::to_string(high_freq_factor));
  }
  if (original_max_seq <= 0) {
    return InvalidArgument("rope_scaling.original_max_seq: expected a positive length, got " +
                           std::to_string(original_max_seq));
  }
  return Status::Ok();
}

const char* ModelFamilyName(ModelFamily f) {
  return f == ModelFamily::kLlama ? "llama" : "gpt2";
}

Result<ModelFamily> ParseModelFamily(const std::string& name) {
  if (name == "gpt2") return ModelFamily::kGpt2;
  if (name == "llama") return ModelFamily::kLlama;
  return InvalidArgument("expected gpt2 or llama, got '" + name + "'");
}

const char* RecomputeName(Recompute r) {
  switch (r) {
    case Recompute::kNone:
      return "none";
    case Recompute::kSelective:
      return "selective";
    case Recompute::kFull:
      return "full";
  }
  return "?";
}

Result<Recompute> ParseRecompute(const std::string& name) {
  if (name == "none") return Recompute::kNone;
  if (name == "selective") return Recompute::kSelective;
  if (name == "full") return Recompute::kFull;
  return InvalidArgument("expected none, selective or full, got '" + name + "'");
}

}  // namespace loom
