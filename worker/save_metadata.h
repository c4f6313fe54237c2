// What a training save records besides the tensors — provenance (Loom version, time, job file,
// overrides, loss), model, saved layout, AdamW settings and step count, data position and
// identity, RNG — and the identity of the training data that a resume compares with the
// checkpoint's (docs/CHECKPOINT.md, "Layout on disk").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "parallel/layout.h"
#include "proto/checkpoint.pb.h"
#include "job/job_config.h"

namespace loom {

// The training data as checkpoints record it.
struct TrainData {
  std::string source;  // data.text or data.train, absolute (non-UTF-8 bytes marked)
  int64_t tokens = 0;  // the training split's size (0: not known)
  uint32_t crc = 0;    // CRC-32C of its first and last 2^18 tokens
};

// The source of the job's training data; tokens and crc not known yet.
TrainData TrainDataOf(const JobConfig& job);
// Sets data->tokens and data->crc from the training split (the first and last 2^18 tokens:
// enough to tell other data apart, cheap at any size).
void IdentifyTokens(const std::vector<int32_t>& tokens, TrainData* data);

// Where a save is in the run.
struct SavePoint {
  int64_t step = 0;
  int64_t optimizer_steps = 0;   // AdamW updates applied (bias correction)
  int64_t consumed_samples = 0;  // training samples drawn up to `step`
  double loss = 0;               // the loss of `step` (NaN: not known)
};

// The metadata of a save of `at` by a run of `job` in `layout`, everything but tensors and files.
proto::CheckpointMetadata SaveMetadata(const JobConfig& job, const Layout& layout,
                                       const SavePoint& at, const TrainData& data);

}  // namespace loom
