// Writing a universal checkpoint: each rank writes its pieces (checkpoint/shard_plan.h) into one
// data file in the safetensors layout plus an index fragment, both fsynced, in a temporary step
// directory; one process then commits: merges the fragments into metadata.json (written last),
// renames the directory into place, replaces `latest` and applies retention.
//
// Fault injection for the crash-safety test: LOOM_FAULT_CKPT_KILL=RANK:N makes world rank RANK
// kill itself (SIGKILL) at the N-th crash point it reaches while saving (points are inside data
// writes, after fsyncs, before and after each rename).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/format.h"
#include "checkpoint/shard_plan.h"
#include "core/status.h"

namespace loom {

// Supplies the elements of plan.writes[piece] for `state`: returns a pointer to region.size()
// floats (into its own storage or into `scratch`).
using PieceSource =
    std::function<Result<const float*>(StateKind state, size_t piece, std::vector<float>* scratch)>;

// The temporary directory a save of `step` writes into.
std::string TempStepDir(const std::string& root, int64_t step);

// Writes world rank `rank`'s data file and index fragment into `tmp_dir` (created if needed) and
// fsyncs them. Returns the bytes of tensor data written.
Result<uint64_t> WriteRankFiles(const std::string& tmp_dir, int rank, const RankShardPlan& plan,
                                const PieceSource& source);

// Merges the fragments of ranks 0..world-1 into `base` (which carries everything but tensors and
// files), writes metadata.json, renames tmp_dir to <root>/step_<N>, replaces `latest`, removes
// stale temporary directories and keeps the newest `keep` checkpoints (0: all).
Status CommitCheckpoint(const std::string& root, const std::string& tmp_dir, int world,
                        const ModelConfig& model, proto::CheckpointMetadata base, int keep);

// Kills this process if the fault-injection variable selects this crash point.
void CheckpointCrashPoint(int world_rank, const char* where);

// One background thread running tasks in order. Thread-safe.
class BackgroundWriter {
 public:
  BackgroundWriter();
  ~BackgroundWriter();  // finishes queued tasks
  void Submit(std::function<Status()> task);
  bool Idle();
  // Waits until idle; DeadlineExceeded after `timeout_ms`.
  Status WaitIdle(int64_t timeout_ms);
  // The first failure since the last call (OK if none), and clears it.
  Status TakeStatus();

 private:
  void Loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<Status()>> queue_;
  bool busy_ = false, stop_ = false;
  Status status_;
  std::thread thread_;
};

}  // namespace loom
