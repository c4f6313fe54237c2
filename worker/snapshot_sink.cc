// In-memory snapshots through the save engine.
#include "worker/snapshot_sink.h"

#include "core/fault_point.h"
#include "core/logging.h"

namespace loom {

SnapshotSink::SnapshotSink(Segment* segment, Replicator* replicator, int world_rank)
    : segment_(segment), replicator_(replicator), rank_(world_rank) {}

Result<char*> SnapshotSink::Begin(const proto::CheckpointMetadata& meta) {
  proto::CheckpointMetadata kept = meta;
  kept.mutable_provenance()->clear_job_yaml();  // a snapshot is the run's, not a record for users
  std::string bytes;
  if (!kept.SerializeToString(&bytes)) return Internal("snapshot: cannot serialize its description");
  std::lock_guard<std::mutex> lock(mu_);
  count_ = saves_++;
  slot_ = static_cast<int>(count_ % 2);
  step_ = meta.step();
  LOOM_RETURN_IF_ERROR(segment_->Begin(slot_, step_, bytes));
  return segment_->image(slot_);
}

Status SnapshotSink::Store(const FillImage& fill) {
  // In two halves, with a fault point between them: a rank killed while copying leaves a slot
  // that says "writing", never one that looks complete.
  const uint64_t bytes = segment_->geometry().image_bytes;
  LOOM_RETURN_IF_ERROR(fill(bytes / 2));
  FaultPoint({FaultSite::kSnapshotCopy, rank_, step_, "half copied"});
  return fill(bytes);
}

Result<uint64_t> SnapshotSink::Seal() {
  crcs_ = segment_->Seal(slot_, segment_->geometry().image_bytes);
  return segment_->geometry().image_bytes;
}

Status SnapshotSink::Replicate() {
  if (replicator_ != nullptr) {
    LOOM_RETURN_IF_ERROR(replicator_->Replicate(slot_, step_, count_, crcs_));
  }
  segment_->MarkReplicated(slot_);
  return Status::Ok();
}

Status SnapshotSink::Commit(const proto::CheckpointMetadata& meta) {
  FaultPoint({FaultSite::kSnapshotCommitted, rank_, meta.step()});
  std::lock_guard<std::mutex> lock(mu_);
  for (int slot = 0; slot < 2; ++slot) {
    const SlotInfo info = segment_->ReadSlot(slot);
    if (info.valid && info.step == meta.step() && info.state == SlotState::kReplicated) {
      segment_->MarkCommitted(slot);
      committed_step_.store(meta.step());
      LOOM_LOG(DEBUG, SNAP) << "snapshot of step " << meta.step() << " committed";
      return Status::Ok();
    }
  }
  // A newer save took the slot already: this one is superseded, nothing to mark.
  return Status::Ok();
}

std::string SnapshotSink::PartName(int64_t step) const {
  return "snapshot of step " + std::to_string(step) + " in /dev/shm/" + segment_->name();
}

}  // namespace loom
