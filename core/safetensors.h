// Reading and writing the safetensors format (the layout Hugging Face tools open):
//   u64 little-endian header length N | N bytes of JSON header | raw little-endian tensor data
// The header maps each name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative
// to the first data byte) plus an optional "__metadata__" map of strings.
// Writing is atomic (see core/file_util.h). Reading validates every field and names the file and
// tensor in its errors.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace loom {

struct NamedTensor {
  std::string name;
  Tensor tensor;  // CPU tensor; only its bytes are written
};

Status WriteSafetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                        const std::map<std::string, std::string>& metadata = {});

struct SafetensorsFile {
  std::map<std::string, Tensor> tensors;  // owned copies
  std::map<std::string, std::string> metadata;
};

Result<SafetensorsFile> ReadSafetensors(const std::string& path);

// One tensor's place in a file: `bytes` bytes from `offset` (counted from the file's start).
struct SafetensorsEntry {
  DType dtype = DType::kF32;
  Shape shape;
  uint64_t offset = 0, bytes = 0;
};
struct SafetensorsHeader {
  std::map<std::string, SafetensorsEntry> tensors;
  std::map<std::string, std::string> metadata;
};

// Reads and checks only the header (the same checks as ReadSafetensors: every range inside the
// file and of its dtype x shape's size), for files read a tensor at a time.
Result<SafetensorsHeader> ReadSafetensorsHeader(const std::string& path);

}  // namespace loom
