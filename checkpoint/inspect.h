// `loom ckpt inspect` and `loom ckpt verify` as library calls (no cluster, one CPU).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace loom {

// A readable description of the checkpoint at `path` (a step directory, or a root: its newest
// checkpoint): step, model, saved layout, optimizer and data position, files, and a table of
// every tensor (shape, elements, chunks per state, bytes). An error if its metadata cannot be
// read; `*files` is the data files' state as opening them for loading finds it (sizes, presence),
// without reading them.
Result<std::string> DescribeCheckpoint(const std::string& path, Status* files);

struct VerifyReport {
  std::string dir;
  int tensors = 0;  // (name, state) entries checked
  int64_t chunks = 0;
  uint64_t bytes = 0;              // tensor bytes read and checksummed
  std::vector<std::string> extra;  // files in the directory that the metadata does not list
};

// Checks everything: metadata, that every tensor of the model is there with its three states
// and shape, every data file's size, every block checksum, that the chunks of each tensor
// hold every element exactly once, and that each data file's safetensors header lists exactly
// its chunks at their places. The first problem found is returned, naming the file and chunk.
Result<VerifyReport> VerifyCheckpoint(const std::string& path);

}  // namespace loom
