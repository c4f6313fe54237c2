// The asynchronous save engine: one rank's side of saving its state beside compute, shared by
// universal checkpoints (checkpoint/file_sink.h) and in-memory snapshots (shared-memory and
// erasure-coded sinks, #23; checkpoint/save_sink.h says how they plug in).
//
// One save, from the training loop's point of view:
//   Save(step)      at a step boundary: waits for the previous save to complete (one in flight
//                   at a time), then hands the save to a background writer thread and returns.
//   (writer)        copies what this rank saves (checkpoint/shard_plan.h: its shard of every
//                   bucket, replicated tensors once) from the RankState into the sink's memory,
//                   part by part, while the sink stores each part (files: writes it with
//                   O_DIRECT) and the next forward and backward run; then seals (files: fsync,
//                   index fragment) and replicates (erasure coding).
//   BeforeUpdate()  the next optimizer update waits until the copy is complete.
//   Poll()          after every step while a save is in flight: one non-blocking max all-reduce
//                   over the world of "written / still writing / failed (by which rank)",
//                   started after one step and read after the next, so it never waits. When
//                   every rank has written its part, the ranks the sink names commit on a
//                   committer thread of their own (files: world rank 0: metadata last, rename,
//                   `latest`, retention), so the next save's copy never waits behind a commit.
//                   A rank that failed fails the job at that step boundary, on every rank.
//   Finish()        completes the save in flight and waits for every commit; every rank learns
//                   whether they succeeded.
//
// Thread-safety: one engine per rank and sink, called from the training thread only; every call
// but BeforeUpdate is collective over the world (all ranks call at the same steps). The plan,
// layout, state, sink and world must outlive the engine.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "checkpoint/background_writer.h"
#include "checkpoint/rank_state.h"
#include "checkpoint/save_sink.h"
#include "checkpoint/shard_plan.h"
#include "checkpoint/vote.h"
#include "comm/communicator.h"
#include "core/status.h"
#include "proto/checkpoint.pb.h"

namespace loom {

// Bytes of one rank's image: for each state, each piece of plan.writes in order, as fp32 (the
// data section of its checkpoint file, byte for byte).
uint64_t ImageBytes(const RankShardPlan& plan);

struct SaveStats {
  int saves = 0;           // saves started
  double stall_s = 0;      // time the step loop was blocked by saving, in total; of which:
  double save_s = 0;       //   starting saves (including waiting for the previous one)
  double copy_wait_s = 0;  //   optimizer updates waiting for the state copy
  double poll_s = 0;       //   per-step completion polls (one small all-reduce)
  double write_s = 0;      // background time spent storing this rank's parts
  uint64_t bytes = 0;      // tensor bytes stored by this rank
  // The newest save every rank stored (0: none yet; committed right after by the committing
  // rank) and the seconds from its start until the ranks agreed it was stored.
  int64_t stored_step = 0;
  double stored_s = 0;
};

struct SaveEngineOptions {
  int world_rank = 0;
  Communicator* world = nullptr;  // null: one process
  bool async = true;              // false: Save returns once the save is complete (voted)
};

class SaveEngine {
 public:
  // `plan`: what this rank saves; `params`: its parameter layout (bucket offsets in the state).
  SaveEngine(const RankShardPlan& plan, const ParamLayout& params, RankState* state, SaveSink* sink,
             const SaveEngineOptions& options);
  // Waits for the vote in flight, this rank's writer and committer (LOOM_CKPT_TIMEOUT_MS each);
  // a save the ranks agreed failed has its part discarded (SaveSink::Discard). An uncommitted
  // save is never loaded; the next run removes its leftovers.
  ~SaveEngine();
  SaveEngine(const SaveEngine&) = delete;
  SaveEngine& operator=(const SaveEngine&) = delete;

  // What a save records besides the state (step, model, layout, optimizer, data position, RNG,
  // provenance), taken as the save starts: after the previous save completed, before the copy.
  using Describe = std::function<proto::CheckpointMetadata()>;
  // Collective: waits for the save in flight, then saves step `step`, described by `describe()`
  // (the sink's commit records it).
  Status Save(int64_t step, const Describe& describe);
  // Local, before every optimizer update: returns once the latest save's copy is complete (at
  // once when none is running). DeadlineExceeded after LOOM_CKPT_TIMEOUT_MS.
  Status BeforeUpdate();
  // Collective, after every step: advances the save in flight (see the file comment).
  Status Poll();
  // Collective: completes the save in flight and waits for every commit. An error on every rank
  // if any rank's commit failed.
  Status Finish();

  const SaveStats& stats() const { return stats_; }

 private:
  // Writer thread: Begin, Store (copying the state in), Seal, Replicate of the save `meta`
  // describes.
  Status Write(const proto::CheckpointMetadata& meta);
  // Writer thread: copies pieces from *next on until bytes [0, end) of `image` are filled.
  Status CopyState(char* image, size_t* next, uint64_t end);
  void MarkCopied();
  // Advances the save in flight: acts on the vote started after the previous step and, if the
  // save is still open, starts the next vote (`wait`: waits for this rank's writer and votes at
  // once, so the save always completes).
  Status Complete(bool wait);
  // This rank's part of the vote: written, still writing, or failed (remembered in
  // write_error_).
  int LocalFlag();
  // Acts on the agreed vote: nothing (still writing), an error (failed), or the commit.
  Status Resolve(int all);

  const RankShardPlan& plan_;
  const ParamLayout& params_;
  RankState* state_;
  SaveSink* sink_;
  const SaveEngineOptions opt_;
  std::vector<int64_t> image_offset_;  // per (state, piece): float offset into the image
  uint64_t image_bytes_ = 0;
  std::mutex copy_mu_;
  std::condition_variable copy_cv_;
  bool copied_ = true;         // GUARDED_BY(copy_mu_): the latest save's copy is complete
  int64_t pending_step_ = -1;  // in flight (written, not yet agreed complete)
  std::chrono::steady_clock::time_point pending_start_;  // when its Save began
  proto::CheckpointMetadata pending_meta_;
  Status write_error_;               // this rank's failed write, until reported
  int64_t failed_step_ = -1;         // a save agreed failed: its part is discarded on destruction
  std::unique_ptr<WorldVote> vote_;  // the per-step vote and the blocking ones
  SaveStats stats_;
  BackgroundWriter committer_;  // commits, where the sink commits on this rank
  BackgroundWriter writer_;     // last: joined first on destruction
};

}  // namespace loom
