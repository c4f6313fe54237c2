// Hugging Face's shard plan, file names, index and size strings.
#include "checkpoint/hf_shards.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

namespace loom {

std::vector<size_t> PlanShards(const std::vector<uint64_t>& bytes, uint64_t max_bytes) {
  std::vector<size_t> first;
  uint64_t current = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (first.empty() || (current > 0 && current + bytes[i] > max_bytes)) {
      first.push_back(i);
      current = 0;
    }
    current += bytes[i];
  }
  return first;
}

std::string ShardFileName(size_t index, size_t count) {
  char name[64];
  std::snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors", index + 1, count);
  return name;
}

bool IsHfWeightsFileName(const std::string& name) {
  if (name == kHfSingleFile || name == kHfIndexFile) return true;
  unsigned a = 0, b = 0;
  int end = 0;
  return name.size() == std::string("model-00001-of-00001.safetensors").size() &&
         std::sscanf(name.c_str(), "model-%5u-of-%5u.safetensors%n", &a, &b, &end) == 2 &&
         static_cast<size_t>(end) == name.size();
}

std::string ShardIndexJson(uint64_t total_size,
                           const std::map<std::string, std::string>& weight_map) {
  nlohmann::ordered_json index;
  index["metadata"] = {{"total_size", total_size}};
  index["weight_map"] = nlohmann::ordered_json::object();
  for (const auto& [tensor, file] : weight_map) index["weight_map"][tensor] = file;
  return index.dump(2) + "\n";
}

Result<ShardIndex> ParseShardIndex(const std::string& text, const std::string& path) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument(path + ": not a JSON object");
  ShardIndex index;
  if (j.contains("metadata") && j["metadata"].is_object() && j["metadata"].contains("total_size")) {
    const nlohmann::json& t = j["metadata"]["total_size"];
    if (!t.is_number_unsigned()) {
      return InvalidArgument(path + ": field 'metadata.total_size': expected a byte count, got " +
                             t.dump());
    }
    index.total_size = t.get<uint64_t>();
  }
  if (!j.contains("weight_map") || !j["weight_map"].is_object() || j["weight_map"].empty()) {
    return InvalidArgument(path +
                           ": field 'weight_map': expected an object naming each tensor's file");
  }
  for (const auto& [tensor, file] : j["weight_map"].items()) {
    if (!file.is_string() || file.get<std::string>().empty() ||
        file.get<std::string>().find('/') != std::string::npos || file.get<std::string>() == "." ||
        file.get<std::string>() == "..") {
      return InvalidArgument(path + ": field 'weight_map': tensor '" + tensor +
                             "': expected the name of a file beside the index, got " + file.dump());
    }
    index.weight_map[tensor] = file.get<std::string>();
  }
  return index;
}

Result<uint64_t> ParseByteSize(const std::string& text, const std::string& what) {
  const char* s = text.c_str();
  char* end = nullptr;
  const double number = std::strtod(s, &end);
  std::string unit(end);
  for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  static const std::pair<const char*, double> kUnits[] = {{"", 1},
                                                          {"b", 1},
                                                          {"kb", 1e3},
                                                          {"mb", 1e6},
                                                          {"gb", 1e9},
                                                          {"tb", 1e12},
                                                          {"kib", 1024.0},
                                                          {"mib", 1048576.0},
                                                          {"gib", 1073741824.0},
                                                          {"tib", 1099511627776.0}};
  const bool digits = end != s && std::isdigit(static_cast<unsigned char>(s[0]));
  for (const auto& [name, scale] : kUnits) {
    if (!digits || unit != name) continue;
    const double bytes = std::floor(number * scale);
    if (bytes >= 1 && bytes < 1.8e19) return static_cast<uint64_t>(bytes);
    break;
  }
  return InvalidArgument(what + ": expected a size in bytes, e.g. 5GB, 200MiB or 1000000, got '" +
                         text + "'");
}

}  // namespace loom
