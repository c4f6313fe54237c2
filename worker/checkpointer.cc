// The checkpoint policy of a training run: when to save, where to resume from, and what to say.
#include "worker/checkpointer.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "checkpoint/format.h"
#include "checkpoint/import.h"
#include "core/fault_point.h"
#include "core/file_util.h"
#include "core/logging.h"
#include "core/stop_signal.h"
#include "job/job_overrides.h"
#include "worker/final_export.h"
#include "worker/init_from.h"
#include "worker/space_warning.h"
#include "worker/store_state.h"

namespace loom {
namespace {

namespace fs = std::filesystem;

// When this process started, near enough (static initialisation), for
// checkpoint.exit_after_minutes: the limit covers start-up and loading, as a job's time limit does.
const std::chrono::steady_clock::time_point g_process_start = std::chrono::steady_clock::now();

// Whether `dir` holds checkpoints of a run that started from checkpoint.load `load`: its
// load_origin file names it (as CanonicalPath gives it). Restore continues those.
bool ContinuesLoad(const std::string& dir, const std::string& load) {
  Result<std::string> recorded = ReadRegularFile(JoinPath(dir, kLoadOriginFile), 65536);
  return recorded.ok() && *recorded == CanonicalPath(load) + "\n" && !ListCheckpoints(dir).empty();
}

FileSinkOptions SinkOptions(const JobConfig& job, const Layout& layout, int world_rank) {
  FileSinkOptions o;
  o.root = job.checkpoint.dir;
  o.world_rank = world_rank;
  o.world_size = layout.world();
  o.model = job.model;
  o.keep = static_cast<int>(job.checkpoint.keep);
  o.keep_every = job.checkpoint.keep_every;
  return o;
}

}  // namespace

std::string DescribeRestart(const JobConfig& job) {
  const CheckpointConfig& c = job.checkpoint;
  if (c.dir.empty()) {
    return c.load.empty()
               ? "the job saves no checkpoints"
               : "the job saves no checkpoints; the same command loads " + c.load + " again";
  }
  const auto list = ListCheckpoints(c.dir);
  if (list.empty()) {
    const std::string again = !c.resume         ? ""
                              : !c.load.empty() ? "; the same command loads " + c.load + " again"
                              : !c.init_from.empty() ? "; the same command starts again from the "
                                                       "weights of " +
                                                           c.init_from
                                                     : "";
    return "no checkpoint has been committed under " + c.dir + again;
  }
  // What Restore would do with them: resume (the run's own, or one begun from this load), or
  // refuse them (another run's, or checkpoint.resume false).
  const bool resumes = c.resume && (c.load.empty() || ContinuesLoad(c.dir, c.load));
  return "the newest committed checkpoint is " + list.front().second +
         (resumes ? " (the same command resumes from it)" : "");
}

Checkpointer::Checkpointer(const JobConfig& job, const Layout& layout, int world_rank,
                           Communicator* world, ParamStore* store, const ParamLayout& param_layout)
    : job_(job),
      layout_(layout),
      rank_(world_rank),
      params_(param_layout),
      plan_(PlanRank(job.model, layout, world_rank)),
      state_(std::make_unique<StoreState>(store)),
      data_(TrainDataOf(job)),
      loader_(job_, world_rank, param_layout, plan_.tp_rank, state_.get(), &data_),
      restore_(world_rank, world),
      vote_(world),
      stop_(std::make_unique<loom::StopVote>(job.checkpoint, world)) {
  if (job.checkpoint.dir.empty()) return;  // only a saving run needs the engine and its buffer
  sink_ = std::make_unique<FileSink>(SinkOptions(job, layout, world_rank), plan_);
  SaveEngineOptions options;
  options.world_rank = world_rank;
  options.world = world;
  options.async = job.checkpoint.async;
  engine_ = std::make_unique<SaveEngine>(plan_, params_, state_.get(), sink_.get(), options);
}

Checkpointer::~Checkpointer() {
  // The votes in flight, then this rank's writer and committer (the engine), so that nothing
  // touches the sink's buffer or checkpoint.dir afterwards; the run lock (a member) goes last.
  stop_.reset();
  engine_.reset();
  sink_.reset();
}

CheckpointStats Checkpointer::stats() const {
  CheckpointStats s = resume_;
  if (engine_) static_cast<SaveStats&>(s) = engine_->stats();
  return s;
}

void Checkpointer::WarnIfShortOfSpace(int64_t start_step) const {
  loom::WarnIfShortOfSpace(job_, start_step);
}

Status Checkpointer::ClaimDir() {
  // One run at a time in a directory (worker/run_lock.h); nobody writes before the leftovers are
  // gone; every rank stops if rank 0 could not use the directory.
  const CheckpointConfig& c = job_.checkpoint;
  Status locked;
  if (rank_ == 0) {
    // Not inside a checkpoint (--checkpoint-dir mixed up with --load: the new run's files and
    // lock would land in a step directory, and go when retention deletes it).
    locked = CheckOutsideCheckpoints(c.dir, "", CheckpointSetting(job_, "dir"));
    if (locked.ok() && !c.export_path.empty()) locked = CheckExportDestination(job_);
    if (locked.ok()) locked = lock_.Acquire(c.dir, CheckpointSetting(job_, "dir"));
    if (locked.ok()) RemoveLeftovers(c.dir);
  }
  LOOM_ASSIGN_OR_RETURN(int refused, vote_.Max(locked.ok() ? 0 : 1));
  LOOM_RETURN_IF_ERROR(locked);
  if (refused != 0) {
    return FailedPrecondition(CheckpointSetting(job_, "dir") + ": world rank 0 could not " +
                              "use '" + c.dir + "' (see its error)");
  }
  return Status::Ok();
}

Result<Checkpointer::Source> Checkpointer::ChooseSource() {
  const CheckpointConfig& c = job_.checkpoint;
  Source s;
  s.path = NormalPath(c.load.empty() ? c.dir : c.load);  // "ck/step_6/" as named
  s.explicit_load = !c.load.empty();
  s.origin = s.explicit_load ? CanonicalPath(c.load) : std::string();
  if (s.explicit_load && c.resume && !c.dir.empty()) {
    // Restarted with the same checkpoint.load (a requeue, a preemption, the same command again):
    // checkpoint.dir holds the run that started from it, and is continued; going back to the
    // loaded checkpoint would throw that run's progress away.
    LOOM_ASSIGN_OR_RETURN(int continued,
                          vote_.Max(rank_ == 0 && ContinuesLoad(c.dir, c.load) ? 1 : 0));
    if (continued != 0) {
      if (rank_ == 0) {
        LOOM_LOG(WARN, CKPT) << "checkpoint.load " << c.load << " was resumed before; " << c.dir
                             << " holds that run's checkpoints: continuing from them (to go "
                                "back to the loaded step, move them out of "
                             << c.dir << ")";
      }
      s.path = c.dir;
      s.explicit_load = false;
    }
  }
  s.where = CheckpointSetting(job_, s.explicit_load ? "load" : "dir");
  return s;
}

Status Checkpointer::CheckNotMixing(const Source& source, bool resuming) const {
  // Saving into a directory that already holds other checkpoints would mix two runs.
  const CheckpointConfig& c = job_.checkpoint;
  std::error_code ec;
  auto existing = c.dir.empty() ? decltype(ListCheckpoints(""))() : ListCheckpoints(c.dir);
  const bool same_root = !source.explicit_load || fs::equivalent(RootOf(source.path), c.dir, ec);
  if (existing.empty() || (resuming && same_root)) return Status::Ok();
  return FailedPrecondition(
      CheckpointSetting(job_, "dir") + ": '" + c.dir + "' already holds checkpoints (newest: " +
      existing.front().second + ")" + (c.resume ? " of another run" : "") + "; " +
      (c.resume ? (c.load_from_flag ? "resume from it (drop --load)"
                                    : "resume from it (leave checkpoint.load unset)")
                : (c.resume_from_flag ? "drop --no-resume to continue it"
                                      : "set checkpoint.resume: true to continue it")) +
      ", remove them, or choose another directory");
}

Result<int64_t> Checkpointer::Restore(const ResumePoint* resumed) {
  const CheckpointIoScope io;
  const CheckpointConfig& c = job_.checkpoint;
  // A slow file system, for the tests (LOOM_FAULT_CKPT_SLOW_MS, fault/inject.h).
  if (!c.dir.empty()) FaultPoint({FaultSite::kCheckpointRestore, rank_});
  if (!c.dir.empty()) LOOM_RETURN_IF_ERROR(ClaimDir());
  LOOM_ASSIGN_OR_RETURN(const Source source, ChooseSource());
  std::vector<int64_t> steps;
  if (c.resume && !source.path.empty()) {
    LOOM_ASSIGN_OR_RETURN(steps,
                          restore_.Candidates(source.path, source.explicit_load, source.where));
  }
  LOOM_RETURN_IF_ERROR(CheckNotMixing(source, !steps.empty()));
  // A run that does not continue checkpoint.dir's own checkpoints (a new run, or one loading
  // from checkpoint.load) must not inherit a record of how an earlier run in it started: that
  // would make a later restart with that load continue this run.
  if (rank_ == 0 && !c.dir.empty() && (steps.empty() || source.explicit_load)) {
    std::error_code gone;
    fs::remove(JoinPath(c.dir, kLoadOriginFile), gone);
  }
  if (resumed != nullptr) {  // candidates are newest first
    if (!steps.empty() && steps.front() > resumed->step) {
      if (rank_ == 0) {
        LOOM_LOG(INFO, CKPT) << "checkpoint step " << steps.front() << " is newer than the "
                             << resumed->from << ": resuming from the checkpoint";
      }
      return Resume(source, steps);
    }
    resume_.resumed_step = resumed->step;
    resume_.resumed_samples = resumed->consumed_samples;
    resume_.resumed_from = resumed->from;
    resume_.resumed_layout = layout_.ToString();
    last_started_ = resumed->step;
    return resumed->step;
  }
  if (!steps.empty()) return Resume(source, steps);
  // Nothing to resume: a new run, from a checkpoint's weights where one is named (fine-tuning).
  if (c.init_from.empty()) return int64_t{0};
  return InitFrom();
}

Result<int64_t> Checkpointer::Resume(const Source& source, const std::vector<int64_t>& steps) {
  // Without the optimizer state only for the checkpoint named by checkpoint.load: once this run
  // has saved, a restart continues its own checkpoints whole (explicit_load is false then).
  const LoadKind kind = source.explicit_load && !job_.checkpoint.load_optimizer
                            ? LoadKind::kNoOptimizer
                            : LoadKind::kEverything;
  LOOM_ASSIGN_OR_RETURN(int64_t step, LoadNewest(source.path, steps, source.where, kind));
  // Its first save records where this run started (a restart with the same load continues).
  if (!source.origin.empty() && sink_) sink_->RecordOrigin(source.origin);
  return step;
}

Result<int64_t> Checkpointer::InitFrom() {
  const CheckpointConfig& c = job_.checkpoint;
  const std::string where = CheckpointSetting(job_, "init_from");
  // Weights from elsewhere rather than a checkpoint: imported on the way (rank 0 looks).
  LOOM_ASSIGN_OR_RETURN(int weights, vote_.Max(rank_ == 0 && HoldsWeights(c.init_from) ? 1 : 0));
  if (weights == 0) {
    LOOM_ASSIGN_OR_RETURN(std::vector<int64_t> steps,
                          restore_.Candidates(c.init_from, true, where));
    return LoadNewest(c.init_from, steps, where, LoadKind::kWeightsOnly);
  }
  auto load = [&](const std::string& step_dir) -> Result<int64_t> {
    imported_from_ = c.init_from;
    Result<std::vector<int64_t>> steps = restore_.Candidates(step_dir, true, where);
    Result<int64_t> step = steps.ok() ? LoadNewest(step_dir, *steps, where, LoadKind::kWeightsOnly)
                                      : Result<int64_t>(steps.status());
    resume_.initialized_from = c.init_from;
    return step;
  };
  return InitFromWeights(job_, rank_, &vote_, where, load);
}

Result<int64_t> Checkpointer::LoadNewest(const std::string& source,
                                         const std::vector<int64_t>& steps,
                                         const std::string& where, LoadKind kind) {
  LoadedCheckpoint loaded;  // the last one this rank loaded: the chosen one, once all agree
  auto load = [&](const std::string& dir, int64_t* step) -> Status {
    Result<LoadedCheckpoint> r = loader_.Load(dir, kind);
    if (!r.ok()) return r.status();
    loaded = std::move(*r);
    *step = loaded.step;
    return Status::Ok();
  };
  LOOM_ASSIGN_OR_RETURN(const RestoreChoice choice,
                        restore_.LoadNewest(source, steps, where, load));
  resume_.resumed_layout = loaded.saved_layout;
  if (loaded.train_loss) last_loss_ = *loaded.train_loss;
  if (kind != LoadKind::kWeightsOnly) return Resumed(source, steps, choice, loaded, kind);
  resume_.initialized_from = choice.dir;
  if (rank_ == 0) {
    LOOM_LOG(INFO, CKPT) << "initialised from "
                         << (imported_from_.empty() ? choice.dir : imported_from_) << " (step "
                         << choice.step
                         << "): model weights only; the step, data position, LR schedule "
                            "and optimizer state start fresh";
  }
  return int64_t{0};
}

Result<int64_t> Checkpointer::Resumed(const std::string& source, const std::vector<int64_t>& steps,
                                      const RestoreChoice& choice, const LoadedCheckpoint& loaded,
                                      LoadKind kind) {
  // Resuming the run that saves into checkpoint.dir: its later saves replace what follows.
  std::error_code ec;
  const bool same_root =
      !job_.checkpoint.dir.empty() && fs::equivalent(RootOf(source), job_.checkpoint.dir, ec);
  resume_.resumed_step = choice.step;
  resume_.resumed_samples = loaded.consumed_samples;
  resume_.resumed_from = choice.dir;
  resume_.optimizer_fresh = kind == LoadKind::kNoOptimizer;
  last_started_ = same_root ? choice.step : -1;
  if (rank_ == 0) {
    LOOM_LOG(INFO, CKPT) << "resumed from " << choice.dir << " (step " << choice.step << ")"
                         << (resume_.optimizer_fresh
                                 ? ": without its optimizer state (load_optimizer: false); "
                                   "the AdamW moments and step count start fresh"
                                 : "");
  }
  LOOM_RETURN_IF_ERROR(restore_.Settle(source, steps, choice, same_root));
  return choice.step;
}

Status Checkpointer::Save(int64_t step) {
  last_started_ = step;
  return engine_->Save(step, [&] {
    SavePoint at;
    at.step = step;
    at.optimizer_steps = state_->optimizer_steps();
    at.consumed_samples =
        resume_.resumed_samples + (step - resume_.resumed_step) * job_.data.global_batch;
    at.loss = last_loss_;
    return SaveMetadata(job_, layout_, at, data_);
  });
}

Status Checkpointer::BeforeUpdate() {
  return engine_ ? engine_->BeforeUpdate() : Status::Ok();
}

Status Checkpointer::AfterStep(int64_t step) {
  if (!engine_) return Status::Ok();
  LOOM_RETURN_IF_ERROR(engine_->Poll());
  const int64_t every = job_.checkpoint.every;
  if (every > 0 && step % every == 0 && step != last_started_) return Save(step);
  return Status::Ok();
}

Status Checkpointer::Finish(int64_t step, bool save) {
  if (!engine_) return Status::Ok();
  const CheckpointIoScope io;
  LOOM_RETURN_IF_ERROR(stop_->Drain());  // a stop vote in flight: before the votes below
  if ((job_.checkpoint.final || save) && step != last_started_) LOOM_RETURN_IF_ERROR(Save(step));
  return engine_->Finish();
}

Status Checkpointer::ExportFinal(int64_t step) {
  const CheckpointConfig& c = job_.checkpoint;
  if (c.export_path.empty() || c.dir.empty()) return Status::Ok();
  const CheckpointIoScope io;  // heartbeats say so: the launcher allows the I/O its time
  const Status st = rank_ == 0 ? ExportFinalWeights(job_, step) : Status::Ok();
  LOOM_ASSIGN_OR_RETURN(int failed, vote_.Max(st.ok() ? 0 : 1));
  if (!st.ok()) return st;
  if (failed != 0) return Internal("checkpoint.export: world rank 0 failed (see its error)");
  return Status::Ok();
}

Status Checkpointer::OnStep(const StepEvent& event) {
  NoteLoss(event.stats.loss);
  return AfterStep(event.step);
}

Result<int> Checkpointer::StopReason(int64_t /*step*/) {
  int reason = PendingStopSignal();
  const double limit_s = job_.checkpoint.exit_after_minutes * 60;
  if (reason == 0 && limit_s > 0 &&
      std::chrono::duration<double>(std::chrono::steady_clock::now() - g_process_start).count() >=
          limit_s) {
    reason = kStopTimeLimit;
  }
  return StopVote(reason);
}

Status Checkpointer::OnStop(int64_t step, int /*reason*/) {
  return Finish(step, /*save=*/true);
}

Status Checkpointer::OnFinish(int64_t steps) {
  LOOM_RETURN_IF_ERROR(Finish(steps));
  return ExportFinal(steps);
}

}  // namespace loom
