// Universal checkpoint files as the save engine's sink.
#include "checkpoint/file_sink.h"

#include <algorithm>
#include <chrono>

#include "checkpoint/format.h"
#include "checkpoint/save_engine.h"
#include "core/file_util.h"
#include "core/logging.h"

namespace loom {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

FileSink::FileSink(const FileSinkOptions& options, const RankShardPlan& plan)
    : opt_(options), plan_(plan) {
  // Aligned for O_DIRECT writes of the data section (RankFileWriter::StreamImage).
  image_alloc_ = (ImageBytes(plan) + kDataAlignment - 1) / kDataAlignment * kDataAlignment;
  image_.reset(static_cast<char*>(
      std::aligned_alloc(kDataAlignment, std::max<size_t>(image_alloc_, kDataAlignment))));
}

void FileSink::RecordOrigin(const std::string& origin) {
  std::lock_guard<std::mutex> lock(origin_mu_);
  origin_ = origin;
}

Status FileSink::CanSave() const {
  if (!image_) {
    return Internal("checkpoint: out of memory for the " + std::to_string(image_alloc_) +
                    "-byte host buffer of a save");
  }
  return Status::Ok();
}

Result<char*> FileSink::Begin(const proto::CheckpointMetadata& meta) {
  begun_ = std::chrono::steady_clock::now();
  tmp_ = TempStepDir(opt_.root, meta.step());
  LOOM_ASSIGN_OR_RETURN(file_, RankFileWriter::Open(tmp_, opt_.world_rank, plan_));
  return image_.get();
}

Status FileSink::Store(const FillImage& fill) {
  Status st = file_->StreamImage(image_.get(), fill);
  streamed_s_ = SecondsSince(begun_);
  if (!st.ok()) file_.reset();  // closed now: a full disk gets the space back when it goes
  return st;
}

Result<uint64_t> FileSink::Seal() {
  Result<uint64_t> bytes = file_->Finish();
  file_.reset();
  if (bytes.ok()) {
    LOOM_LOG(DEBUG, CKPT) << "wrote " << *bytes << " bytes of " << tmp_ << ": copy+write "
                          << streamed_s_ * 1e3 << " ms, fsync+index "
                          << (SecondsSince(begun_) - streamed_s_) * 1e3 << " ms";
  }
  return bytes;
}

Status FileSink::CommitStep(const proto::CheckpointMetadata& meta) {
  std::string origin;
  {
    // Before this run's first checkpoint appears, where it started from (checkpoint.load), so
    // that every committed checkpoint of it comes with the record.
    std::lock_guard<std::mutex> lock(origin_mu_);
    if (!origin_taken_) origin = origin_;
    origin_taken_ = true;
  }
  const std::string tmp = TempStepDir(opt_.root, meta.step());
  Status st = origin.empty() ? Status::Ok()
                             : WriteFileAtomic(JoinPath(opt_.root, kLoadOriginFile), origin + "\n");
  if (st.ok()) st = CommitCheckpoint(opt_.root, tmp, opt_.world_size, opt_.model, meta);
  return st;
}

Status FileSink::Commit(const proto::CheckpointMetadata& meta) {
  const auto c0 = std::chrono::steady_clock::now();
  const std::string dir = JoinPath(opt_.root, StepDirName(meta.step()));
  Status st = CommitStep(meta);
  if (!st.ok()) {
    LOOM_LOG(ERROR, CKPT) << "committing " << dir << " failed: " << ForUser(st, LogSubsys::CKPT);
  } else {
    LOOM_LOG(INFO, CKPT) << "saved " << dir;
    LOOM_LOG(DEBUG, CKPT) << "commit took " << SecondsSince(c0) * 1e3 << " ms";
  }
  // After a failed commit too, as before: an old checkpoint left behind is not worth stopping
  // training, so retention only warns.
  Status kept = ApplyRetention(opt_.root, opt_.keep, opt_.keep_every, meta.step());
  if (!kept.ok()) {
    LOOM_LOG(WARN, CKPT) << "retention: " << ForUser(kept, LogSubsys::CKPT);
  }
  return st;
}

void FileSink::Discard(int64_t step) {
  RemoveRankFiles(TempStepDir(opt_.root, step), opt_.world_rank);
}

std::string FileSink::PartName(int64_t step) const {
  return JoinPath(TempStepDir(opt_.root, step), RankFileName(opt_.world_rank));
}

}  // namespace loom
