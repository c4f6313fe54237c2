// Universal checkpoints from the training loop: the checkpoint policy of a run (format:
// docs/CHECKPOINT.md; machinery: checkpoint/).
//
// Saving: every checkpoint.every steps and at the end (checkpoint.final, or a stop), through the
// save engine (checkpoint/save_engine.h: the state is copied beside compute, written in the
// background, voted on after every step, committed by world rank 0) with the universal
// checkpoint file sink (checkpoint/file_sink.h) under checkpoint.dir, retention as the job says.
// The checkpointer decides when to save and what each save records (worker/save_metadata.h).
//
// Resuming: from checkpoint.load or checkpoint.dir (a run restarted with the same load continues
// its own checkpoints), with or without the optimizer state (load_optimizer), else from
// checkpoint.init_from's weights (worker/init_from.h imports weights on the way); the restore
// protocol (checkpoint/restore.h) has every rank load the newest checkpoint all of them read,
// falling back and setting newer ones aside; worker/checkpoint_loader.h loads one and says what
// differs from the job. LR schedule and RNG are functions of (seed, step); the data position is
// the checkpoint's consumed samples plus global_batch per step since (so a resumed run may change
// its global batch and still continue the sample stream); the AdamW step count is restored with
// the moments.
//
// Around them: checkpoint.dir's run lock (worker/run_lock.h), the disk-space warning
// (worker/space_warning.h), the stop vote (worker/stop_vote.h; held here because the final save's
// votes must follow it on the world) and the final export (worker/final_export.h).
//
// Thread-safety: one Checkpointer per rank, called from the training thread only. All public
// calls are collective over the world (every rank calls them at the same steps).
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/file_sink.h"
#include "checkpoint/io_activity.h"  // CheckpointTimeoutMs, CheckpointIoInProgress
#include "checkpoint/rank_state.h"
#include "checkpoint/restore.h"
#include "checkpoint/save_engine.h"
#include "checkpoint/shard_plan.h"
#include "checkpoint/vote.h"
#include "comm/communicator.h"
#include "core/status.h"
#include "job/job_config.h"
#include "parallel/layout.h"
#include "parallel/param_layout.h"
#include "worker/checkpoint_loader.h"
#include "worker/run_lock.h"
#include "worker/save_metadata.h"
#include "worker/step_observer.h"
#include "worker/stop_vote.h"

namespace loom {

class ParamStore;  // parallel/zero/param_store.h: read and written through worker/store_state.h

struct CheckpointStats : SaveStats {
  int64_t resumed_step = 0;
  int64_t resumed_samples = 0;   // training samples the resumed checkpoint had consumed
  std::string resumed_from;      // "" when starting fresh
  std::string resumed_layout;    // the layout it was saved with, as Layout::ToString writes it
  std::string initialized_from;  // checkpoint.init_from's step directory whose weights were loaded
  bool optimizer_fresh = false;  // resumed without its optimizer state (load_optimizer: false)
};

// A state the run was restored to before the checkpointer looked (an in-memory snapshot).
struct ResumePoint {
  int64_t step = 0;
  int64_t consumed_samples = 0;
  std::string from;  // for messages: "in-memory snapshot of step 12: ..."
};

// For messages after a job stopped: its newest committed checkpoint, and whether the same
// command resumes from it (or what it starts from instead), as Checkpointer::Restore would.
std::string DescribeRestart(const JobConfig& job);

// The checkpointer observes the training loop (worker/step_observer.h): after every step it
// completes an in-flight save and starts one when due, votes on stopping (the stop signal, the
// time limit), saves the step a stop happens after, and makes the final save and export.
class Checkpointer : public StepObserver {
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
  // With `resumed` (the state already restored from an in-memory snapshot): checkpoint.dir is
  // claimed as always, but a checkpoint is loaded only if one is newer than resumed->step;
  // otherwise the run continues from `resumed`.
  Result<int64_t> Restore(const ResumePoint* resumed = nullptr);
  // Collective, after `step` optimizer steps: completes an in-flight save once every rank has
  // written its part, and starts a save when `step` is a multiple of checkpoint.every.
  Status AfterStep(int64_t step);
  // Local, before Restore: the training split, identified in checkpoints by the job's data path,
  // its size and the CRC-32C of its first and last 2^18 tokens (compared on a resume).
  void SetTrainData(const std::vector<int32_t>& tokens) { IdentifyTokens(tokens, &data_); }
  // Local: the loss of the step AfterStep may save (recorded in its provenance).
  void NoteLoss(double loss) { last_loss_ = loss; }
  // Collective: saves `step` (if checkpoint.final or `save`, and not saved yet) and returns once
  // every save is committed.
  Status Finish(int64_t step, bool save = false);
  // Collective, after Finish(step) of a run that ran every step: world rank 0 exports the
  // committed checkpoint of `step` to checkpoint.export (nothing when unset).
  Status ExportFinal(int64_t step);
  // Collective, after every step's AfterStep: whether to stop on checkpoint.signal or the time
  // limit (worker/stop_vote.h). `signal` is this rank's reason (PendingStopSignal,
  // kStopTimeLimit, 0: none). Returns the largest reason of any rank (0: go on).
  Result<int> StopVote(int signal) { return stop_->Vote(signal); }
  // Local: the optimizer must not change the state while a save is copying it. Call before
  // every optimizer update; returns at once unless the copy of the latest save is still running.
  Status BeforeUpdate();

  // Warns (a log line) when checkpoint.dir's file system has less room than the saves from
  // `start_step` on will need at once (worker/space_warning.h).
  void WarnIfShortOfSpace(int64_t start_step) const;

  CheckpointStats stats() const;

  // StepObserver.
  Status OnStep(const StepEvent& event) override;  // NoteLoss, AfterStep
  // This rank's reason (PendingStopSignal, or kStopTimeLimit once checkpoint.exit_after_minutes
  // have passed since the process started), agreed over the world by StopVote.
  Result<int> StopReason(int64_t step) override;
  Status OnStop(int64_t step, int reason) override;  // Finish(step, save)
  Status OnFinish(int64_t steps) override;           // Finish, ExportFinal

 private:
  // Where Restore resumes from.
  struct Source {
    std::string path;    // checkpoint.load or .dir, as named
    bool explicit_load;  // checkpoint.load, not continued from .dir
    std::string where;   // the setting, for messages
    std::string origin;  // checkpoint.load's canonical path ("": none), recorded by the saves
  };
  // Rank 0 claims checkpoint.dir (checks, lock, leftovers); every rank stops if it could not.
  Status ClaimDir();
  // checkpoint.load, or .dir (also when a restart with the same load continues .dir).
  Result<Source> ChooseSource();
  // Refuses saving into a checkpoint.dir that holds another run's checkpoints.
  Status CheckNotMixing(const Source& source, bool resuming) const;
  // From the newest valid checkpoint of `source`'s candidates `steps`.
  Result<int64_t> Resume(const Source& source, const std::vector<int64_t>& steps);
  // From checkpoint.init_from's weights (a checkpoint, or weights imported on the way).
  Result<int64_t> InitFrom();
  // The restore protocol's LoadNewest with this run's loader, and what the run keeps of it.
  Result<int64_t> LoadNewest(const std::string& source, const std::vector<int64_t>& steps,
                             const std::string& where, LoadKind kind);
  // After loading `choice` to resume: the run's position, the message, newer ones set aside.
  Result<int64_t> Resumed(const std::string& source, const std::vector<int64_t>& steps,
                          const RestoreChoice& choice, const LoadedCheckpoint& loaded,
                          LoadKind kind);
  Status Save(int64_t step);

  const JobConfig job_;
  const Layout layout_;
  const int rank_;
  const ParamLayout& params_;
  const RankShardPlan plan_;
  std::unique_ptr<RankState> state_;  // the parameter store's states
  TrainData data_;
  CheckpointLoader loader_;
  RestoreProtocol restore_;
  WorldVote vote_;                        // the lock, init_from and export votes
  RunLock lock_;                          // rank 0: checkpoint.dir's, for the run
  std::unique_ptr<loom::StopVote> stop_;  // a unique_ptr: destroyed first
  std::unique_ptr<FileSink> sink_;        // with checkpoint.dir only
  std::unique_ptr<SaveEngine> engine_;    // with checkpoint.dir only; uses sink_
  // NoteLoss; before any step, the resumed checkpoint's (NaN: not known).
  double last_loss_ = std::numeric_limits<double>::quiet_NaN();
  int64_t last_started_ = -1;  // the step of the latest save (or of the checkpoint resumed)
  std::string imported_from_;  // init_from's weights, imported (its messages name them)
  CheckpointStats resume_;     // the resume fields of stats()
};

}  // namespace loom
