// Weights in safetensors read a tensor at a time, each widened to fp32: one file, or a Hugging
// Face sharded set (model.safetensors.index.json naming each tensor's file, checkpoint/
// hf_shards.h) read as if it were one. What checkpoint/import.h reads.
//
// Every file's header is read and checked when opened (core/safetensors.h: ranges, sizes,
// overlaps); F32, F16 and BF16 are accepted, anything else is refused naming the file and tensor.
// For an index, every shard it names must exist and hold exactly the tensors it assigns to it:
// a missing shard, a tensor missing from its shard and a shard's tensor the index does not list
// are errors naming the index or the shard.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/safetensors.h"
#include "core/status.h"

namespace loom {

class WeightFiles {
 public:
  // `path`: a .safetensors file, or an index (its shards beside it, by the names it gives).
  static Result<std::unique_ptr<WeightFiles>> Open(const std::string& path);
  ~WeightFiles();
  WeightFiles(const WeightFiles&) = delete;
  WeightFiles& operator=(const WeightFiles&) = delete;

  // What Open was given (the file, or the index): errors about the set as a whole name it.
  const std::string& path() const { return path_; }
  bool sharded() const { return sharded_; }
  // Every tensor of every file (each entry's offset is within its own file).
  const std::map<std::string, SafetensorsEntry>& tensors() const { return tensors_; }
  // The file's metadata; of a sharded set, the first shard's (save_pretrained writes format=pt
  // on each; Loom's export writes its config on each).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // The file that holds tensor `name` (one of tensors()), for errors about that tensor.
  const std::string& FileOf(const std::string& name) const;
  // Tensor `name` (one of tensors()) widened exactly to fp32.
  Status Read(const std::string& name, std::vector<float>* out) const;

 private:
  struct File {
    std::string path;
    int fd = -1;
  };
  WeightFiles() = default;
  Status Add(const std::string& path, SafetensorsHeader header,
             const std::vector<std::string>* expected, const std::string& index);

  std::string path_;
  bool sharded_ = false;
  std::vector<File> files_;
  std::map<std::string, SafetensorsEntry> tensors_;
  std::map<std::string, size_t> file_of_;  // tensor -> files_ index
  std::map<std::string, std::string> metadata_;
};

}  // namespace loom
