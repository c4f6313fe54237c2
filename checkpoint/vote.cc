// Checkpoint votes over the world, with heap buffers kept after an abandoned wait.
#include "checkpoint/vote.h"

#include <chrono>

#include "checkpoint/io_activity.h"

namespace loom {
namespace {

Deadline CheckpointDeadline() {
  return Clock::now() + std::chrono::milliseconds(CheckpointTimeoutMs());
}

}  // namespace

WorldVote::WorldVote(Communicator* world) : world_(world) {}

WorldVote::~WorldVote() {
  if (handle_ && !world_->Abandoned()) (void)handle_->Wait(world_->DefaultDeadline());
  // A vote that timed out (here or before) may still write into its buffer: keep it.
  if (world_ != nullptr && world_->Abandoned()) (void)bufs_.release();
}

Result<int> WorldVote::Max(int v) {
  if (world_ == nullptr) return v;
  bufs_->max = static_cast<float>(v);
  LOOM_RETURN_IF_ERROR(
      world_->AllReduceAsync(&bufs_->max, 1, ReduceOp::kMax)->Wait(CheckpointDeadline()));
  return static_cast<int>(bufs_->max);
}

void WorldVote::Start(int v) {
  bufs_->started = static_cast<float>(v);
  handle_ = world_->AllReduceAsync(&bufs_->started, 1, ReduceOp::kMax);
}

Result<int> WorldVote::Take() {
  LOOM_RETURN_IF_ERROR(handle_->Wait(world_->DefaultDeadline()));  // the handle is kept
  handle_.reset();
  return static_cast<int>(bufs_->started);
}

Status WorldVote::Broadcast(std::vector<float>* data) {
  if (world_ == nullptr) return Status::Ok();
  bufs_->listing.assign(data->begin(), data->end());
  LOOM_RETURN_IF_ERROR(
      world_->BroadcastAsync(bufs_->listing.data(), static_cast<int64_t>(bufs_->listing.size()), 0)
          ->Wait(CheckpointDeadline()));
  data->assign(bufs_->listing.begin(), bufs_->listing.end());
  return Status::Ok();
}

}  // namespace loom
