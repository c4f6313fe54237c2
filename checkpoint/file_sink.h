// The universal checkpoint as a save sink (checkpoint/save_sink.h): what the save engine copies
// is written as this rank's data file of <root>/step_<N>.tmp/ (checkpoint/writer.h: streamed
// part by part with O_DIRECT where possible, fsynced, with its index fragment); world rank 0
// commits (metadata last, rename to step_<N>, `latest`, then retention); a failed save's files
// of this rank are removed.
//
// The image is copied into a host buffer the sink owns (aligned for O_DIRECT), allocated once.
// Thread-safety: as SaveSink; RecordOrigin may be called from the training thread at any time.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>

#include "checkpoint/save_sink.h"
#include "checkpoint/shard_plan.h"
#include "checkpoint/writer.h"
#include "model/config.h"
#include "parallel/param_layout.h"

namespace loom {

struct FileSinkOptions {
  std::string root;  // the checkpoint root: <root>/step_<N>/, <root>/latest
  int world_rank = 0;
  int world_size = 1;
  ModelConfig model;       // checked against every rank's index fragment at the commit
  int keep = 0;            // retention: the newest `keep` checkpoints (0: all) ...
  int64_t keep_every = 0;  // ... and every one whose step is a multiple of this (0: none)
};

class FileSink : public SaveSink {
 public:
  // `plan`: what this rank writes; must outlive the sink.
  FileSink(const FileSinkOptions& options, const RankShardPlan& plan);

  // World rank 0: before the next commit, <root>/load_origin is written with `origin` (the
  // checkpoint.load the run started from), once per sink, so that every committed checkpoint of
  // the run comes with the record. Empty: nothing is recorded.
  void RecordOrigin(const std::string& origin);

  Status CanSave() const override;
  Result<char*> Begin(const proto::CheckpointMetadata& meta) override;
  Status Store(const FillImage& fill) override;
  Result<uint64_t> Seal() override;
  bool CommitsHere() const override { return opt_.world_rank == 0; }
  Status Commit(const proto::CheckpointMetadata& meta) override;
  void Discard(int64_t step) override;
  std::string PartName(int64_t step) const override;
  std::string CommitName() const override { return "checkpoints under " + opt_.root; }

 private:
  // Commit without retention: load_origin (once), then CommitCheckpoint.
  Status CommitStep(const proto::CheckpointMetadata& meta);

  const FileSinkOptions opt_;
  const RankShardPlan& plan_;
  struct FreeDeleter {
    void operator()(char* p) const { std::free(p); }
  };
  std::unique_ptr<char, FreeDeleter> image_;  // null: out of memory
  size_t image_alloc_ = 0;                    // its size, whole kDataAlignment blocks
  // The save being written (writer thread).
  std::unique_ptr<RankFileWriter> file_;
  std::string tmp_;
  std::chrono::steady_clock::time_point begun_;
  double streamed_s_ = 0;  // Begin to the end of Store
  std::mutex origin_mu_;
  std::string origin_;         // GUARDED_BY(origin_mu_)
  bool origin_taken_ = false;  // GUARDED_BY(origin_mu_): the first commit took origin_
};

}  // namespace loom
