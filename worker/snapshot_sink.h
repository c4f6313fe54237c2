// In-memory snapshots as a save sink (checkpoint/save_sink.h): the save engine copies the rank's
// state straight into the slot of its shared-memory segment (fault/snapshot/segment.h) that does
// not hold the previous snapshot; Seal checksums the pieces; Replicate erasure-codes them over
// the rank's stripe group (fault/snapshot/replicator.h; nothing without erasure coding); every
// rank commits its own slot once the vote says every rank replicated.
//
// Thread-safety: as SaveSink. Begin and Commit share a mutex: a commit never marks a slot that a
// newer save has begun to overwrite. The segment and replicator must outlive the sink.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "checkpoint/save_sink.h"
#include "fault/snapshot/replicator.h"
#include "fault/snapshot/segment.h"

namespace loom {

class SnapshotSink : public SaveSink {
 public:
  // `replicator`: null when snapshots are node-local only.
  SnapshotSink(Segment* segment, Replicator* replicator, int world_rank);

  Status CanSave() const override { return Status::Ok(); }
  Result<char*> Begin(const proto::CheckpointMetadata& meta) override;
  Status Store(const FillImage& fill) override;
  Result<uint64_t> Seal() override;
  Status Replicate() override;
  bool CommitsHere() const override { return true; }
  Status Commit(const proto::CheckpointMetadata& meta) override;
  void Discard(int64_t) override {}  // the slot stays "writing": never restored
  std::string PartName(int64_t step) const override;
  std::string CommitName() const override { return "in-memory snapshots"; }
  std::string SaveNoun() const override { return "snapshot"; }

  int64_t committed_step() const { return committed_step_.load(); }  // 0: none yet
  uint64_t image_bytes() const { return segment_->geometry().image_bytes; }

 private:
  Segment* segment_;
  Replicator* replicator_;
  const int rank_;
  std::mutex mu_;
  int64_t saves_ = 0;  // GUARDED_BY(mu_): saves begun (the slot of save c is c mod 2)
  // The save being written (writer thread).
  int slot_ = 0;
  int64_t step_ = 0, count_ = 0;
  std::vector<uint32_t> crcs_;
  std::atomic<int64_t> committed_step_{0};
};

}  // namespace loom
