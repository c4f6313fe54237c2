// The save engine: copy beside compute, the per-step vote, commit on a thread of its own.
#include "checkpoint/save_engine.h"

#include <chrono>
#include <cstring>
#include <string>

#include "checkpoint/io_activity.h"

namespace loom {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Flags exchanged while a save is in flight (the maximum over ranks wins; kFailed + rank names
// a failing rank).
constexpr int kWritten = 0, kWriting = 1, kFailed = 2;

}  // namespace

uint64_t ImageBytes(const RankShardPlan& plan) {
  uint64_t floats = 0;
  for (const Piece& p : plan.writes) floats += static_cast<uint64_t>(p.region.size());
  return floats * kNumStates * sizeof(float);
}

SaveEngine::SaveEngine(const RankShardPlan& plan, const ParamLayout& params, RankState* state,
                       SaveSink* sink, const SaveEngineOptions& options)
    : plan_(plan),
      params_(params),
      state_(state),
      sink_(sink),
      opt_(options),
      vote_(std::make_unique<WorldVote>(options.world)) {
  int64_t at = 0;
  for (int s = 0; s < kNumStates; ++s) {
    for (const Piece& p : plan_.writes) {
      image_offset_.push_back(at);
      at += p.region.size();
    }
  }
  image_bytes_ = static_cast<uint64_t>(at) * sizeof(float);
}

SaveEngine::~SaveEngine() {
  vote_.reset();  // the vote in flight first (kept if abandoned: checkpoint/vote.h)
  const bool idle = writer_.WaitIdle(CheckpointTimeoutMs()).ok();
  (void)committer_.WaitIdle(CheckpointTimeoutMs());
  // A save the ranks agreed failed (often a full disk): its part goes now, not at the next run.
  if (idle && failed_step_ >= 0) sink_->Discard(failed_step_);
}

Status SaveEngine::CopyState(char* image, size_t* next, uint64_t end) {
  // The image is, in order, each state of each piece: copy pieces until bytes [0, end) of it
  // hold them.
  const size_t pieces = plan_.writes.size();
  for (; *next < image_offset_.size() &&
         static_cast<uint64_t>(image_offset_[*next]) * sizeof(float) < end;
       ++*next) {
    const StateKind state = static_cast<StateKind>(*next / pieces);
    const Piece& p = plan_.writes[*next % pieces];
    LOOM_RETURN_IF_ERROR(state_->Settled(state, p.bucket));  // a gather may still pass through
    int64_t lo = 0, hi = 0;
    const float* base = state_->StateData(state, p.bucket, &lo, &hi);
    const int64_t off = p.local - params_.buckets[p.bucket].first;
    if (off < lo || off + p.region.size() > hi) {
      return Internal(sink_->SaveNoun() + ": rank " + std::to_string(opt_.world_rank) +
                      " does not hold " + StateName(state) + " elements [" + std::to_string(off) +
                      ", " + std::to_string(off + p.region.size()) + ") of bucket " +
                      std::to_string(p.bucket));
    }
    std::memcpy(image + image_offset_[*next] * sizeof(float), base + (off - lo),
                static_cast<size_t>(p.region.size()) * sizeof(float));
  }
  return Status::Ok();
}

void SaveEngine::MarkCopied() {
  {
    std::lock_guard<std::mutex> lock(copy_mu_);
    copied_ = true;
  }
  copy_cv_.notify_all();
}

Status SaveEngine::Write(const proto::CheckpointMetadata& meta) {
  const auto w0 = std::chrono::steady_clock::now();
  Result<char*> image = sink_->Begin(meta);
  if (!image.ok()) {
    MarkCopied();  // nothing will be copied: never block the update
    return image.status();
  }
  // Copy part by part; the sink stores each part while the next is copied. Training may change
  // the state once the last piece is copied.
  size_t next = 0;
  Status st = sink_->Store([&](uint64_t end) {
    Status copied = CopyState(*image, &next, end);
    if (!copied.ok() || end == image_bytes_) MarkCopied();
    return copied;
  });
  if (image_bytes_ == 0) MarkCopied();
  if (!st.ok()) {
    MarkCopied();
    return st;
  }
  LOOM_ASSIGN_OR_RETURN(uint64_t bytes, sink_->Seal());
  stats_.write_s += SecondsSince(w0);
  stats_.bytes += bytes;
  return sink_->Replicate();
}

Status SaveEngine::Save(int64_t step, const Describe& describe) {
  LOOM_RETURN_IF_ERROR(sink_->CanSave());
  const auto t0 = std::chrono::steady_clock::now();
  {
    const CheckpointIoScope io;                     // the previous save may still be writing
    LOOM_RETURN_IF_ERROR(Complete(/*wait=*/true));  // one save in flight at a time
  }
  pending_meta_ = describe();
  pending_meta_.set_step(step);  // what the sink and the commit are told
  pending_step_ = step;
  pending_start_ = t0;
  ++stats_.saves;
  {
    std::lock_guard<std::mutex> lock(copy_mu_);
    copied_ = false;
  }
  // The writer thread copies the state into the sink first (the next optimizer update waits for
  // that copy in BeforeUpdate), then stores it while training continues.
  writer_.Submit([this, meta = pending_meta_] { return Write(meta); });
  if (!opt_.async) LOOM_RETURN_IF_ERROR(Complete(/*wait=*/true));
  stats_.save_s += SecondsSince(t0);
  stats_.stall_s += SecondsSince(t0);
  return Status::Ok();
}

Status SaveEngine::BeforeUpdate() {
  const CheckpointIoScope io;  // waiting for the state copy of a save
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(copy_mu_);
  const bool copied = copy_cv_.wait_for(lock, std::chrono::milliseconds(CheckpointTimeoutMs()),
                                        [&] { return copied_; });
  stats_.copy_wait_s += SecondsSince(t0);
  stats_.stall_s += SecondsSince(t0);
  if (!copied) {
    return DeadlineExceeded(sink_->SaveNoun() + " step " + std::to_string(pending_step_) +
                            ": the state was not copied within " +
                            std::to_string(CheckpointTimeoutMs()) + " ms (LOOM_CKPT_TIMEOUT_MS)");
  }
  return Status::Ok();
}

int SaveEngine::LocalFlag() {
  if (!writer_.Idle()) return kWriting;
  for (BackgroundWriter* w : {&writer_, &committer_}) {  // a failed commit fails the next save
    Status st = w->TakeStatus();
    if (!st.ok() && write_error_.ok()) write_error_ = st;
  }
  return write_error_.ok() ? kWritten : kFailed + opt_.world_rank;  // the maximum names a rank
}

Status SaveEngine::Resolve(int all) {
  if (all == kWriting) return Status::Ok();  // vote again after the next step
  const int64_t step = pending_step_;
  pending_step_ = -1;
  if (all >= kFailed) {
    failed_step_ = step;  // the job ends: see the destructor
    Status mine = write_error_;
    write_error_ = Status::Ok();
    if (!mine.ok()) return mine.WithContext(sink_->SaveNoun() + " step " + std::to_string(step));
    return Internal(sink_->SaveNoun() + " step " + std::to_string(step) + ": rank " +
                    std::to_string(all - kFailed) + " failed to write its part (see its error)");
  }
  stats_.stored_step = step;
  stats_.stored_s = SecondsSince(pending_start_);
  if (sink_->CommitsHere()) {  // every part is stored: commit in the background
    committer_.Submit([this, meta = pending_meta_] { return sink_->Commit(meta); });
  }
  return Status::Ok();
}

Status SaveEngine::Complete(bool wait) {
  if (pending_step_ < 0) return Status::Ok();
  // The vote started after the previous step: every rank has passed that point by now (each
  // step ends with collectives that connect all ranks), so this wait returns at once. Every
  // rank takes the same decision from the same result, at the same step.
  if (vote_->started()) {
    LOOM_ASSIGN_OR_RETURN(int all, vote_->Take());  // on failure the destructor waits again
    LOOM_RETURN_IF_ERROR(Resolve(all));
    if (pending_step_ < 0) return Status::Ok();
  }
  if (wait) {  // every rank waits for its writer, so the vote can only be written or failed
    Status st = writer_.WaitIdle(CheckpointTimeoutMs())
                    .WithContext("rank " + std::to_string(opt_.world_rank) + " writing " +
                                 sink_->PartName(pending_step_) + " (LOOM_CKPT_TIMEOUT_MS)");
    if (!st.ok() && write_error_.ok()) write_error_ = st;  // still vote: the others wait for it
    LOOM_ASSIGN_OR_RETURN(int all, vote_->Max(st.ok() ? LocalFlag() : kFailed + opt_.world_rank));
    return Resolve(all);
  }
  if (opt_.world == nullptr) return Resolve(LocalFlag());
  vote_->Start(LocalFlag());
  return Status::Ok();
}

Status SaveEngine::Poll() {
  const auto t0 = std::chrono::steady_clock::now();
  Status st = Complete(/*wait=*/false);
  stats_.poll_s += SecondsSince(t0);
  stats_.stall_s += SecondsSince(t0);
  return st;
}

Status SaveEngine::Finish() {
  const CheckpointIoScope io;
  const auto t0 = std::chrono::steady_clock::now();
  LOOM_RETURN_IF_ERROR(Complete(/*wait=*/true));
  // The commits run on the committer: wait for them and tell every rank how they went.
  Status committed = committer_.WaitIdle(CheckpointTimeoutMs())
                         .WithContext("rank " + std::to_string(opt_.world_rank) + " committing " +
                                      sink_->CommitName() + " (LOOM_CKPT_TIMEOUT_MS)");
  if (committed.ok()) committed = committer_.TakeStatus();
  LOOM_ASSIGN_OR_RETURN(int all, vote_->Max(committed.ok() ? kWritten : kFailed + opt_.world_rank));
  stats_.stall_s += SecondsSince(t0);
  if (!committed.ok()) return committed.WithContext(sink_->SaveNoun() + " commit");
  if (all != kWritten) {
    return Internal(sink_->SaveNoun() + ": rank " + std::to_string(all - kFailed) +
                    " failed to commit (see its error)");
  }
  return Status::Ok();
}

}  // namespace loom
