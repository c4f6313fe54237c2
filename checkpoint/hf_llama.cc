// Hugging Face Llama names and config.json, both ways.
#include "checkpoint/hf_llama.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace loom {
namespace {

using Json = nlohmann::json;

// A required or defaulted positive integer field.
Result<int64_t> PositiveInt(const Json& j, const char* key, int64_t fallback,
                            const std::string& where) {
  if (!j.contains(key)) {
    if (fallback > 0) return fallback;
    return InvalidArgument(where + ": field '" + key +
                           "': missing (a Llama config must give it: expected a positive integer)");
  }
  const Json& v = j[key];
  if (!v.is_number_integer() || v.get<int64_t>() <= 0) {
    return InvalidArgument(where + ": field '" + key + "': expected a positive integer, got " +
                           v.dump());
  }
  return v.get<int64_t>();
}

Result<double> PositiveNumber(const Json& j, const char* key, double fallback,
                              const std::string& where) {
  if (!j.contains(key)) return fallback;
  const Json& v = j[key];
  if (!v.is_number() || !(v.get<double>() > 0)) {
    return InvalidArgument(where + ": field '" + key + "': expected a positive number, got " +
                           v.dump());
  }
  return v.get<double>();
}

// A field Loom computes one way only: absent (LlamaConfig's default is that way), or `want`.
Status Only(const Json& j, const char* key, const Json& want, const std::string& what,
            const std::string& where) {
  if (!j.contains(key) || j[key] == want) return Status::Ok();
  return InvalidArgument(where + ": field '" + key + "': expected " + want.dump() + " (" + what +
                         "), got " + j[key].dump());
}

// config.json's rope_scaling: null, or Llama 3.1's {"rope_type": "llama3", "factor",
// "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"} ("type" is the
// older name of "rope_type"). Other kinds (linear, dynamic, yarn, ...) are refused by name.
Result<RopeScaling> ParseRopeScaling(const Json& j, const std::string& where) {
  RopeScaling r;
  if (j.is_null()) return r;
  if (!j.is_object()) {
    return InvalidArgument(where + ": field 'rope_scaling': expected null or an object, got " +
                           j.dump());
  }
  const char* type_key = j.contains("rope_type") ? "rope_type" : "type";
  const Json type = j.contains(type_key) ? j[type_key] : Json();
  if (type != "llama3") {
    return InvalidArgument(where + ": field 'rope_scaling." + type_key +
                           "': expected \"llama3\" (Llama 3.1's frequency scaling; Loom implements "
                           "no other), got " +
                           type.dump());
  }
  for (const auto& [key, value] : j.items()) {
    if (key != "rope_type" && key != "type" && key != "factor" && key != "low_freq_factor" &&
        key != "high_freq_factor" && key != "original_max_position_embeddings") {
      return InvalidArgument(where + ": field 'rope_scaling." + key +
                             "': not a field of llama3 scaling (factor, low_freq_factor, "
                             "high_freq_factor, original_max_position_embeddings)");
    }
  }
  const std::string at = where + " rope_scaling";
  if (!j.contains("factor")) {
    return InvalidArgument(where + ": field 'rope_scaling.factor': missing (llama3 needs it)");
  }
  LOOM_ASSIGN_OR_RETURN(r.factor, PositiveNumber(j, "factor", 0, at));
  LOOM_ASSIGN_OR_RETURN(r.low_freq_factor, PositiveNumber(j, "low_freq_factor", 1, at));
  LOOM_ASSIGN_OR_RETURN(r.high_freq_factor, PositiveNumber(j, "high_freq_factor", 4, at));
  LOOM_ASSIGN_OR_RETURN(r.original_max_seq,
                        PositiveInt(j, "original_max_position_embeddings", 8192, at));
  LOOM_RETURN_IF_ERROR(r.Validate().WithContext(where));
  return r;
}

nlohmann::ordered_json RopeScalingJson(const RopeScaling& r) {
  if (!r.on()) return nullptr;
  return nlohmann::ordered_json{{"rope_type", "llama3"},
                                {"factor", r.factor},
                                {"low_freq_factor", r.low_freq_factor},
                                {"high_freq_factor", r.high_freq_factor},
                                {"original_max_position_embeddings", r.original_max_seq}};
}

}  // namespace

std::vector<HfLlamaTensor> HuggingFaceLlamaTensors(const ModelConfig& m) {
  const int64_t c = m.hidden, q = m.heads * m.head_dim(), kv = m.kv_width(), f = m.ffn();
  std::vector<HfLlamaTensor> t;
  t.push_back({"model.embed_tokens.weight", "wte", 0, {m.vocab, c}});
  for (int64_t l = 0; l < m.layers; ++l) {
    const std::string hf = "model.layers." + std::to_string(l) + ".";
    const std::string h = "h." + std::to_string(l) + ".";
    t.push_back({hf + "input_layernorm.weight", h + "ln_1.weight", 0, {c}});
    t.push_back({hf + "self_attn.q_proj.weight", h + "attn.q.weight", 0, {q, c}});
    t.push_back({hf + "self_attn.k_proj.weight", h + "attn.kv.weight", 0, {kv, c}});
    t.push_back({hf + "self_attn.v_proj.weight", h + "attn.kv.weight", kv, {kv, c}});
    t.push_back({hf + "self_attn.o_proj.weight", h + "attn.c_proj.weight", 0, {c, q}});
    t.push_back({hf + "post_attention_layernorm.weight", h + "ln_2.weight", 0, {c}});
    t.push_back({hf + "mlp.gate_proj.weight", h + "mlp.c_fc.weight", 0, {f, c}});
    t.push_back({hf + "mlp.up_proj.weight", h + "mlp.c_fc.weight", f, {f, c}});
    t.push_back({hf + "mlp.down_proj.weight", h + "mlp.c_proj.weight", 0, {c, f}});
  }
  t.push_back({"model.norm.weight", "ln_f.weight", 0, {c}});
  if (!m.tie_embeddings) t.push_back({"lm_head.weight", "lm_head.weight", 0, {m.vocab, c}});
  return t;
}

std::string HuggingFaceLlamaConfigJson(const ModelConfig& m, DType dtype) {
  const char* torch_dtype = dtype == DType::kBF16  ? "bfloat16"
                            : dtype == DType::kF16 ? "float16"
                                                   : "float32";
  // The keys LlamaConfig reads; the values are the model Loom trains (docs/CHECKPOINT.md).
  const nlohmann::ordered_json config = {
      {"architectures", {"LlamaForCausalLM"}},
      {"model_type", "llama"},
      {"vocab_size", m.vocab},
      {"hidden_size", m.hidden},
      {"intermediate_size", m.ffn()},
      {"num_hidden_layers", m.layers},
      {"num_attention_heads", m.heads},
      {"num_key_value_heads", m.kv()},
      {"head_dim", m.head_dim()},
      {"max_position_embeddings", m.max_seq},
      {"rope_theta", m.rope_theta},
      {"rope_scaling", RopeScalingJson(m.rope_scaling)},
      {"rms_norm_eps", m.norm_eps},
      {"tie_word_embeddings", m.tie_embeddings},
      {"hidden_act", "silu"},
      {"attention_bias", false},
      {"mlp_bias", false},
      {"attention_dropout", 0.0},
      {"initializer_range", 0.02},
      {"pretraining_tp", 1},
      {"use_cache", true},
      {"torch_dtype", torch_dtype},
  };
  return config.dump(2) + "\n";
}

bool DescribesLlama(const std::string& config_text) {
  const Json j = Json::parse(config_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return false;
  if (j.contains("model_type") && j["model_type"] == "llama") return true;
  if (!j.contains("architectures") || !j["architectures"].is_array()) return false;
  const Json& a = j["architectures"];
  return std::find(a.begin(), a.end(), Json("LlamaForCausalLM")) != a.end();
}

namespace {

Result<ModelConfig> ParseLlamaJson(const Json& j, const std::string& where) {
  if (!j.is_object()) return InvalidArgument(where + ": not a JSON object");
  if (j.contains("model_type") && j["model_type"] != "llama") {
    return InvalidArgument(where + ": field 'model_type': expected \"llama\", got " +
                           j["model_type"].dump());
  }
  ModelConfig m;
  m.family = ModelFamily::kLlama;
  LOOM_ASSIGN_OR_RETURN(m.vocab, PositiveInt(j, "vocab_size", 0, where));
  LOOM_ASSIGN_OR_RETURN(m.hidden, PositiveInt(j, "hidden_size", 0, where));
  LOOM_ASSIGN_OR_RETURN(m.ffn_hidden, PositiveInt(j, "intermediate_size", 0, where));
  LOOM_ASSIGN_OR_RETURN(m.layers, PositiveInt(j, "num_hidden_layers", 0, where));
  LOOM_ASSIGN_OR_RETURN(m.heads, PositiveInt(j, "num_attention_heads", 0, where));
  LOOM_ASSIGN_OR_RETURN(m.kv_heads, PositiveInt(j, "num_key_value_heads", m.heads, where));
  LOOM_ASSIGN_OR_RETURN(m.max_seq, PositiveInt(j, "max_position_embeddings", 2048, where));
  LOOM_ASSIGN_OR_RETURN(m.rope_theta, PositiveNumber(j, "rope_theta", 10000.0, where));
  LOOM_ASSIGN_OR_RETURN(m.norm_eps, PositiveNumber(j, "rms_norm_eps", 1e-6, where));
  m.tie_embeddings = false;
  if (j.contains("tie_word_embeddings")) {
    if (!j["tie_word_embeddings"].is_boolean()) {
      return InvalidArgument(where + ": field 'tie_word_embeddings': expected true or false, got " +
                             j["tie_word_embeddings"].dump());
    }
    m.tie_embeddings = j["tie_word_embeddings"].get<bool>();
  }
  if (m.hidden % m.heads != 0) {
    return InvalidArgument(where + ": field 'hidden_size': " + std::to_string(m.hidden) +
                           " is not a multiple of num_attention_heads (" + std::to_string(m.heads) +
                           ")");
  }
  if (m.heads % m.kv_heads != 0) {
    return InvalidArgument(where + ": field 'num_key_value_heads': expected a divisor of " +
                           "num_attention_heads (" + std::to_string(m.heads) + "), got " +
                           std::to_string(m.kv_heads));
  }
  if (j.contains("head_dim") && !j["head_dim"].is_null() && j["head_dim"] != m.head_dim()) {
    return InvalidArgument(where + ": field 'head_dim': expected " + std::to_string(m.head_dim()) +
                           " (hidden_size / num_attention_heads, as Loom computes it), got " +
                           j["head_dim"].dump());
  }
  LOOM_RETURN_IF_ERROR(Only(j, "hidden_act", "silu", "SwiGLU's SiLU, as Loom computes it", where));
  if (j.contains("rope_scaling")) {
    LOOM_ASSIGN_OR_RETURN(m.rope_scaling, ParseRopeScaling(j["rope_scaling"], where));
  }
  LOOM_RETURN_IF_ERROR(Only(j, "attention_bias", false, "Loom's Llama has no biases", where));
  LOOM_RETURN_IF_ERROR(Only(j, "mlp_bias", false, "Loom's Llama has no biases", where));
  LOOM_RETURN_IF_ERROR(m.Validate().WithContext(where));
  return m;
}

}  // namespace

Result<ModelConfig> ParseHuggingFaceLlamaConfig(const std::string& config_text,
                                                const std::string& where) {
  const Json j = Json::parse(config_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument(where + ": not valid JSON");
  return ParseLlamaJson(j, where);
}

std::map<std::string, std::string> HuggingFaceLlamaMetadata(const ModelConfig& m) {
  // config.json's fields, each value as its JSON text (10000.0, 1e-05, false): read back exactly.
  const Json config = Json::parse(HuggingFaceLlamaConfigJson(m, DType::kF32));
  std::map<std::string, std::string> out;
  for (const char* key :
       {"model_type", "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
        "num_attention_heads", "num_key_value_heads", "max_position_embeddings", "rope_theta",
        "rope_scaling", "rms_norm_eps", "tie_word_embeddings"}) {
    out[key] = config[key].is_string() ? config[key].get<std::string>() : config[key].dump();
  }
  return out;
}

Result<ModelConfig> LlamaConfigFromMetadata(const std::map<std::string, std::string>& metadata,
                                            const std::string& where) {
  if (!metadata.count("num_attention_heads")) {
    return NotFound(where + ": no Llama config in the metadata (num_attention_heads)");
  }
  // Each value read as JSON where it is JSON (numbers, true/false), else kept as a string, so
  // that a value of the wrong kind is named as config.json's would be.
  Json j = Json::object();
  for (const auto& [key, value] : metadata) {
    const Json v = Json::parse(value, nullptr, /*allow_exceptions=*/false);
    const bool object_field = key == "rope_scaling";  // the one field that is an object
    j[key] = v.is_discarded() || (v.is_object() && !object_field) || v.is_array() ? Json(value) : v;
  }
  return ParseLlamaJson(j, where + " metadata");
}

}  // namespace loom
