// checkpoint.init_from naming weights rather than a checkpoint (docs/CHECKPOINT.md, "Fine-
// tuning"): a safetensors file or a Hugging Face model directory (checkpoint/import.h's
// HoldsWeights) is imported on the way, as `loom ckpt import` would, into checkpoint.dir, loaded
// from there by every rank, and removed.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "checkpoint/vote.h"
#include "core/status.h"
#include "job/job_config.h"

namespace loom {

// Under checkpoint.dir while checkpoint.init_from's weights are imported (a *.tmp name: a crash
// leaves nothing that the next run does not remove).
inline constexpr char kInitImportDir[] = "init_weights.tmp";

// Loads the master weights of the imported checkpoint in step directory `step_dir` on every rank
// (collective); returns the step to start from.
using LoadImported = std::function<Result<int64_t>(const std::string& step_dir)>;

// Collective: world rank 0 imports checkpoint.init_from (with the job's model.heads) into
// checkpoint.dir/kInitImportDir and checks it holds the job's model, every rank loads it with
// `load`, and rank 0 removes it once every rank has read its part, whatever happened. `vote`
// takes the world's votes; `where` names the setting in errors.
Result<int64_t> InitFromWeights(const JobConfig& job, int world_rank, WorldVote* vote,
                                const std::string& where, const LoadImported& load);

}  // namespace loom
