// Hugging Face's sharded safetensors layout, as save_pretrained writes a model larger than its
// max_shard_size and from_pretrained reads it:
//   model-00001-of-00003.safetensors ... model-00003-of-00003.safetensors
//   model.safetensors.index.json   {"metadata": {"total_size": N}, "weight_map": {tensor: file}}
// total_size is the tensors' bytes (no headers); weight_map's keys are sorted. A model that fits
// in one shard is one model.safetensors and no index.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace loom {

inline constexpr char kHfSingleFile[] = "model.safetensors";
inline constexpr char kHfIndexFile[] = "model.safetensors.index.json";
// save_pretrained's default max_shard_size, "5GB".
inline constexpr uint64_t kDefaultMaxShardBytes = 5'000'000'000;

// Tensors of `bytes` each, in order, grouped as save_pretrained groups them: the next tensor opens
// a new shard when it would take the current one past `max_bytes` (a tensor larger than that gets
// a shard of its own). Returns each shard's first tensor: {0} for one shard, {} for no tensors.
std::vector<size_t> PlanShards(const std::vector<uint64_t>& bytes, uint64_t max_bytes);

// "model-00002-of-00003.safetensors" for index 1 (0-based) of 3.
std::string ShardFileName(size_t index, size_t count);

// Whether `name` is one of the weight files a Hugging Face export writes: model.safetensors, the
// index, or a shard model-NNNNN-of-NNNNN.safetensors.
bool IsHfWeightsFileName(const std::string& name);

// The index file's text (two-space indented, sorted keys, final newline), for `weight_map`
// (tensor -> file) and `total_size` bytes of tensor data.
std::string ShardIndexJson(uint64_t total_size,
                           const std::map<std::string, std::string>& weight_map);

struct ShardIndex {
  uint64_t total_size = 0;  // 0 when the index does not give it (it is informational)
  std::map<std::string, std::string> weight_map;  // tensor -> file beside the index
};
// Reads an index's text; `path` names it in errors. weight_map is required, non-empty, and names
// plain file names (no directories: the shards lie beside the index).
Result<ShardIndex> ParseShardIndex(const std::string& text, const std::string& path);

// A size as save_pretrained's max_shard_size takes it: bytes ("1000000"), or a number with a unit,
// decimal (KB, MB, GB: 10^3, 10^6, 10^9) or binary (KiB, MiB, GiB: 2^10, 2^20, 2^30), case
// insensitive ("5GB", "200MiB", "1.5GB"). Errors name `what`. Zero is refused.
Result<uint64_t> ParseByteSize(const std::string& text, const std::string& what);

}  // namespace loom
