// Universal checkpoints from the training loop: asynchronous distributed saves and resuming into
// any layout (format: docs/CHECKPOINT.md, checkpoint/).
//
// Saving. At a step boundary a background thread copies what this rank writes
// (checkpoint/shard_plan.h: its shard of every bucket, replicated tensors once) from the parameter
// store into a host buffer while the next forward and backward run — the next optimizer update
// waits for that copy (BeforeUpdate) — then writes and fsyncs its data file (O_DIRECT where
// possible) and index fragment into <dir>/step_<N>.tmp/. While a save is in flight, every step ends
// with one small all-reduce of "written / still writing / failed (by which rank)" over the
// world; when every rank has written its part, world rank 0 commits on a thread of its own
// (metadata last, rename to step_<N>, `latest`, retention). A save asked for while the previous one
// is still in flight waits for it. A rank that fails to write fails the job at the next step
// boundary.
//
// Resuming. Every rank computes which saved chunks intersect the states it holds under the
// current layout and reads only those bytes, checking block checksums. The ranks agree (one
// all-reduce) whether the newest checkpoint loaded everywhere; if not, each failing rank says
// why, and all fall back to the previous one. LR schedule and RNG are functions of (seed, step);
// the data position is the checkpoint's consumed samples plus global_batch per step since (so a
// resumed run may change its global batch and still continue the sample stream); the AdamW step
// count is restored with the moments.
//
// Thread-safety: one Checkpointer per rank, called from the training thread only. All public
// calls are collective over the world (every rank calls them at the same steps).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "checkpoint/shard_plan.h"
#include "checkpoint/writer.h"
#include "comm/communicator.h"
#include "core/status.h"
#include "parallel/layout.h"
#include "worker/job_config.h"
#include "parallel/zero/param_store.h"

namespace loom {

struct CheckpointStats {
  int saves = 0;           // saves started
  double stall_s = 0;      // time the step loop was blocked by saving, in total; of which:
  double save_s = 0;       //   starting saves (including waiting for the previous one)
  double copy_wait_s = 0;  //   optimizer updates waiting for the state copy
  double poll_s = 0;       //   per-step completion polls (one small all-reduce)
  double write_s = 0;      // background time spent writing this rank's files
  uint64_t bytes = 0;      // tensor bytes written by this rank
  int64_t resumed_step = 0;
  int64_t resumed_samples = 0;   // training samples the resumed checkpoint had consumed
  std::string resumed_from;      // "" when starting fresh
  std::string resumed_layout;    // the layout it was saved with, as Layout::ToString writes it
  std::string initialized_from;  // checkpoint.init_from's step directory whose weights were loaded
  bool optimizer_fresh = false;  // resumed without its optimizer state (load_optimizer: false)
};

// LOOM_CKPT_TIMEOUT_MS (default 10 minutes, at most 30 days): how long a checkpoint's I/O may
// take before a wait on it fails (writer, commit, load votes). The launcher allows as long
// while a rank's heartbeats say it is loading or finishing a save (CheckpointIoInProgress).
int64_t CheckpointTimeoutMs();
// Whether this process is loading a checkpoint or waiting for a save now (any thread).
bool CheckpointIoInProgress();
// For messages after a job stopped: its newest committed checkpoint, and whether the same
// command resumes from it (or what it starts from instead), as Checkpointer::Restore would.
std::string DescribeRestart(const JobConfig& job);

// Under checkpoint.dir while checkpoint.init_from's weights are imported (removed after).
inline constexpr char kInitImportDir[] = "init_weights.tmp";

class Checkpointer {
 public:
  // `store` and `param_layout` must outlive the checkpointer; `world` is null for one process.
  Checkpointer(const JobConfig& job, const Layout& layout, int world_rank, Communicator* world,
               ParamStore* store, const ParamLayout& param_layout);
  ~Checkpointer();  // lets an in-flight write finish (it never leaves a committed-looking dir)

  // Collective. Removes leftovers of interrupted saves under checkpoint.dir, then loads the
  // newest checkpoint under checkpoint.load (or .dir) that every rank reads without error,
  // falling back to older ones and saying why. Returns the step to continue from (0: fresh).
  // When there is nothing to resume and checkpoint.init_from is set, loads the master weights
  // of its newest valid checkpoint (in any layout) and returns 0: the moments stay zero and the
  // AdamW step count, data position, LR schedule and RNG start from step 0 (fine-tuning).
  Result<int64_t> Restore();
  // Collective, after `step` optimizer steps: completes an in-flight save once every rank has
  // written its part, and starts a save when `step` is a multiple of checkpoint.every.
  Status AfterStep(int64_t step);
  // Local, before Restore: the training split, identified in checkpoints by the job's data path,
  // its size and the CRC-32C of its first and last 2^18 tokens (compared on a resume).
  void SetTrainData(const std::vector<int32_t>& tokens);
  // Local: the loss of the step AfterStep may save (recorded in its provenance).
  void NoteLoss(double loss) { last_loss_ = loss; }
  // Collective: saves `step` (if checkpoint.final or `save`, and not saved yet) and returns once
  // every save is committed.
  Status Finish(int64_t step, bool save = false);
  // Collective, after Finish(step) of a run that ran every step: world rank 0 exports the
  // committed checkpoint of `step` to checkpoint.export (nothing when unset).
  Status ExportFinal(int64_t step);
  // Collective, after every step's AfterStep: whether to stop on checkpoint.signal or the time
  // limit. `signal` is this rank's reason (PendingStopSignal, kStopTimeLimit, 0: none). The vote
  // started after one step is read after the next, so it never waits; every rank gets the same
  // answer at the same step. Returns the largest reason of any rank (0: go on).
  Result<int> StopVote(int signal);
  // Local: the optimizer must not change the state while a save is copying it. Call before
  // every optimizer update; returns at once unless the copy of the latest save is still running.
  Status BeforeUpdate();

  // Warns (a log line) when checkpoint.dir's file system has less room than the saves from
  // `start_step` on will need at once, retention and the checkpoints already there counted.
  void WarnIfShortOfSpace(int64_t start_step) const;

  const CheckpointStats& stats() const { return stats_; }

 private:
  Status Save(int64_t step);
  // Writer thread: copies pieces from *next on until bytes [0, end) of snapshot_ are filled.
  Status CopyState(size_t* next, uint64_t end);
  // Advances the in-flight save: acts on the vote started after the previous step and, if the
  // save is still open, starts the next vote (`wait`: waits for this rank's writer and votes at
  // once, so the save always completes).
  Status Complete(bool wait);
  // This rank's part of the vote: written, still writing, or failed (remembered in
  // write_error_).
  int LocalFlag();
  // Acts on the agreed vote: nothing (still writing), an error (failed), or the commit.
  Status Resolve(int all);
  // kEverything: every state; kNoOptimizer: the master weights, step and data position, the
  // AdamW moments and step count left as they are (zero); kWeightsOnly: the master weights.
  enum class LoadKind { kEverything, kNoOptimizer, kWeightsOnly };
  // Reads one checkpoint into the store as `kind` says. Sets *step to its step.
  Status LoadFrom(const std::string& dir, LoadKind kind, int64_t* step);
  // Collective: the steps saved under `source` (a root or one step directory), newest first, as
  // world rank 0 lists them. None is an error naming `where` when `required`.
  Result<std::vector<int64_t>> Candidates(const std::string& source, bool required,
                                          const std::string& where);
  // Collective: loads the newest of `steps` under `source` that every rank reads without error,
  // falling back to older ones and saying why. kEverything and kNoOptimizer resume (return its
  // step); kWeightsOnly starts a new run from its weights (returns 0).
  Result<int64_t> LoadNewest(const std::string& source, const std::vector<int64_t>& steps,
                             const std::string& where, LoadKind kind);
  // Collective, for checkpoint.init_from naming weights rather than a checkpoint (a safetensors
  // file or a Hugging Face model directory): world rank 0 imports them (loom ckpt import, the
  // job's heads) into checkpoint.dir's kInitImportDir, every rank loads that, and it is removed.
  Result<int64_t> InitFromWeights(const std::string& where);
  // Maximum of `v` over the world (v itself for one process).
  Result<int> AllMax(int v);
  // Replaces *steps by world rank 0's list (a broadcast). `listed`: whether rank 0 could list
  // them; its error becomes every rank's (so no rank is left waiting in the broadcast).
  Status AgreeOnSteps(std::vector<int64_t>* steps, const Status& listed);
  // Rank 0, after resuming `loaded`: renames newer checkpoints under `root` to
  // step_<N>.refused (those in `refused`) or step_<N>.abandoned and points `latest` at `loaded`.
  // An error if one cannot be moved (it would stay loadable).
  Status SetAsideNewer(const std::string& root, int64_t loaded,
                       const std::vector<int64_t>& refused) const;
  proto::CheckpointMetadata BaseMetadata(int64_t step) const;
  // NoteLoss; before any step, the resumed checkpoint's (NaN: not known).
  double last_loss_ = std::numeric_limits<double>::quiet_NaN();
  // The training data as checkpoints record it: the job's path, and SetTrainData's (0: not known).
  std::string data_source_;
  int64_t train_tokens_ = 0;
  uint32_t train_crc_ = 0;
  std::string imported_from_;  // init_from's weights, imported (its messages name them)
  void RemoveLeftovers() const;
  // Rank 0: makes checkpoint.dir if absent and takes its run lock (kRunLockFile, held until
  // destruction), waiting up to LOOM_CKPT_LOCK_WAIT_MS (10 s) for another holder to end; then an
  // error naming the field. A file system without locks: a warning, no lock.
  Status LockDir();

  JobConfig job_;
  Layout layout_;
  int rank_;
  Communicator* world_;
  ParamStore* store_;
  const ParamLayout& params_;
  RankShardPlan plan_;
  std::vector<int64_t> snapshot_offset_;  // per (state, piece): float offset into snapshot_
  struct FreeDeleter {
    void operator()(char* p) const { std::free(p); }
  };
  std::unique_ptr<char, FreeDeleter> snapshot_;  // the data section; owned by the writer thread
                                                 // while a save is in flight
  size_t snapshot_bytes_ = 0;
  std::mutex snapshot_mu_;
  std::condition_variable snapshot_cv_;
  bool snapshot_taken_ = true;  // GUARDED_BY(snapshot_mu_)
  int64_t pending_step_ = -1;   // in flight (written, not yet agreed complete)
  proto::CheckpointMetadata pending_meta_;
  int64_t last_started_ = -1;
  int64_t loaded_samples_ = 0;    // consumed samples of the checkpoint LoadFrom read last
  std::string origin_;            // checkpoint.load this run started from ("": none)
  bool origin_recorded_ = false;  // origin_ written to checkpoint.dir's load_origin
  Status write_error_;            // this rank's failed write, until reported
  std::string failed_tmp_;        // a save agreed failed: its files are removed on destruction
  std::unique_ptr<FileLock> dir_lock_;  // rank 0: checkpoint.dir's run lock, for the run
  bool lock_tried_ = false;             // LockDir ran (once per Checkpointer)
  bool made_dir_ = false;               // rank 0 made checkpoint.dir (removed at the end if empty)
  HandlePtr poll_;                      // the vote in flight (an all-reduce over the world)
  HandlePtr stop_poll_;                 // StopVote's vote in flight
  // The votes' buffers, on the heap: after a timed-out wait the communication thread may still
  // write into them, so the destructor then leaves them allocated.
  struct VoteBuffers {
    float poll = 0;             // poll_'s
    float stop = 0;             // stop_poll_'s
    float vote = 0;             // AllMax's
    std::vector<float> agreed;  // AgreeOnSteps'
  };
  std::unique_ptr<VoteBuffers> bufs_ = std::make_unique<VoteBuffers>();
  CheckpointStats stats_;
  BackgroundWriter committer_;  // rank 0: commits and retention
  BackgroundWriter writer_;     // last: joined first on destruction
};

}  // namespace loom
