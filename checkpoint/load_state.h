// Loading a checkpoint's states into one rank (checkpoint/rank_state.h), in whatever layout the
// rank has now: for every bucket, the chunks that intersect the elements the rank holds are read
// (checksums checked) straight into its state. What to load (every state, or the master weights
// alone) and what the metadata's other fields mean for the run are the caller's.
#pragma once

#include <string>

#include "checkpoint/rank_state.h"
#include "checkpoint/reader.h"
#include "core/status.h"
#include "model/config.h"
#include "parallel/param_layout.h"

namespace loom {

// Checks that the checkpoint open in `reader` holds `model`: the metadata's model fields, and
// the shapes of the first `states` states (parallel/state_kind.h order) of every tensor.
// DataLoss naming `path` (its metadata file) and the field: "a checkpoint of another model".
Status CheckSameModel(const CheckpointReader& reader, const std::string& path,
                      const ModelConfig& model, int states);

// Reads the first `states` states of every element the rank holds — `params`: its parameter
// layout, `tp_rank`: its tensor-parallel rank — from `reader` into `state`, after
// state->Quiesce(). The optimizer step count and StateLoaded are left to the caller.
Status ReadRankState(CheckpointReader* reader, const ParamLayout& params, int tp_rank, int states,
                     RankState* state);
// The byte ranges ReadRankState would read, in its order, appended to `out` (for a byte source
// that must fetch them first, e.g. from other ranks' memory).
Status PlanRankStateReads(CheckpointReader* reader, const ParamLayout& params, int tp_rank,
                          int states, RankState* state, std::vector<FileRange>* out);

}  // namespace loom
