// Loading one checkpoint into this rank for the run the job describes: the policy over
// checkpoint/load_state.h. Which states to load (LoadKind), that the checkpoint holds the job's
// model, and what the run takes from the metadata — the step, the data position, the loss its
// save recorded — with world rank 0 saying what differs from the job: the optimizer settings and
// LR schedule (the job's apply from the next step on), the data settings, the training data and
// the global batch (the sample stream continues after the consumed samples).
//
// Thread-safety: training thread only. Local: no collective (the restore protocol,
// checkpoint/restore.h, agrees on the outcome).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "checkpoint/rank_state.h"
#include "parallel/param_layout.h"
#include "proto/checkpoint.pb.h"
#include "job/job_config.h"
#include "worker/save_metadata.h"

namespace loom {

// kEverything: every state; kNoOptimizer: the master weights, step and data position, the AdamW
// moments and step count left as they are (zero); kWeightsOnly: the master weights.
enum class LoadKind { kEverything, kNoOptimizer, kWeightsOnly };

struct LoadedCheckpoint {
  int64_t step = 0;
  int64_t consumed_samples = 0;  // training samples drawn up to `step` (0 for kWeightsOnly)
  std::string saved_layout;      // as Layout::ToString writes it
  // The loss its save recorded, when a save of this run before any step must record it.
  std::optional<double> train_loss;
};

class CheckpointLoader {
 public:
  // `params`: this rank's parameter layout; `tp_rank` its tensor-parallel rank. Every argument
  // but `world_rank` and `tp_rank` must outlive the loader (`data` is read at each Load).
  CheckpointLoader(const JobConfig& job, int world_rank, const ParamLayout& params, int tp_rank,
                   RankState* state, const TrainData* data);

  // Reads step directory `dir` into the state as `kind` says.
  Result<LoadedCheckpoint> Load(const std::string& dir, LoadKind kind) const;

 private:
  // What the run takes from the metadata of a resumed checkpoint (step directory `dir`), and
  // rank 0's notes on it.
  Status TakeRunState(const std::string& dir, const proto::CheckpointMetadata& meta,
                      LoadedCheckpoint* loaded) const;
  // Rank 0: a warning naming the optimizer settings and LR schedule that differ from the job's.
  void NoteOptimizerChanges(const std::string& path, const proto::CheckpointMetadata& meta) const;
  // Rank 0: notes on the data settings, the training data and the global batch.
  void NoteDataChanges(const std::string& path, const proto::CheckpointMetadata& meta) const;

  const JobConfig& job_;
  const int rank_;
  const ParamLayout& params_;
  const int tp_rank_;
  RankState* state_;
  const TrainData* data_;
};

}  // namespace loom
