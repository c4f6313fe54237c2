// The training loop of one rank: data (this rank's slice of every global batch), model (its
// tensor-parallel part), parameter store (ZeRO stage), LR schedule, gradient accumulation over
// micro-batches, periodic evaluation and sampling. What happens is published to observers
// (worker/step_observer.h): the console, the coordinator reporter, the checkpointer.
// One optimizer step = global_batch sequences; the loss is the mean over every token of the
// global batch, whatever the layout.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/status.h"
#include "job/job_config.h"
#include "parallel/layout.h"
#include "parallel/pipeline/executor.h"
#include "parallel/pipeline/schedule.h"
#include "parallel/process_groups.h"
#include "parallel/zero/param_store.h"
#include "worker/checkpointer.h"
#include "worker/data/sampler.h"
#include "worker/gpt.h"
#include "worker/gpt_pipeline.h"
#include "worker/snapshot_restore.h"
#include "worker/snapshotter.h"
#include "worker/step_observer.h"

namespace loom {

// Where this rank sits: its layout, world rank and communicators. Default: one process. The
// trainer keeps a copy, which shares ownership of the communicators (parallel/process_groups.h),
// so they outlive the parameter store and the checkpointer that use them.
using Placement = ProcessGroups;

class Trainer {
 public:
  // Loads the data, builds and initialises this rank's model part (seeded) and its store, then
  // resumes (collective over the world): with `snapshots` whose plan names an incarnation to
  // restore, from its in-memory snapshots; then from the newest valid checkpoint when the job's
  // `checkpoint` section says so and it is newer. With `snapshots`, the run takes in-memory
  // snapshots (snapshotter(), which must then be among Run's observers).
  static Result<std::unique_ptr<Trainer>> Create(const JobConfig& job, const Placement& place = {},
                                                 const SnapshotSetup* snapshots = nullptr);

  // Runs steps start_step()+1 .. job.steps and publishes every event to `observers`, in order
  // (null entries are skipped). When the job saves checkpoints, checkpointer() must be among them
  // (it saves as an observer). An observer's error stops training with that error. Stops early
  // after a step every rank agrees to stop after (StepObserver::StopReason).
  Result<TrainSummary> Run(const std::vector<StepObserver*>& observers);

  // One optimizer step on an explicit global batch [global_batch, seq] (every rank passes the
  // whole batch and uses its data-parallel slice) with learning rate lr.
  Result<StepStats> StepOnBatch(const int32_t* inputs, const int32_t* targets, double lr);
  // Forward+backward over this rank's slice of the global batch; returns the global mean loss.
  Result<double> ComputeGradients(const int32_t* inputs, const int32_t* targets);
  // Finishes reductions, clips and applies AdamW; returns the norm before clipping.
  // Waits for a checkpoint copy of the state in flight first.
  Result<double> ApplyUpdate(double lr);
  Result<StepStats> Step(int64_t step);
  // Mean loss over eval.batches fixed batches of the validation split, the same in every layout
  // (NaN without one).
  Result<double> Evaluate();
  // Generates `tokens` tokens after `prompt`. With tp = pp = cp = 1 every rank samples with its
  // own model; otherwise it is collective (the weights are gathered) and world rank 0 samples,
  // the others return "".
  Result<std::string> Sample(const std::string& prompt, int64_t tokens, double temperature,
                             int64_t top_k, uint64_t seed);
  // The whole model in single-process layout (canonical order), on every rank.
  Status GatherFullParams(std::vector<float>* out);

  Gpt& model() { return *models_[0]; }  // the first local chunk (the whole model when pp = 1)
  ParamStore& store() { return *store_; }
  const ParamLayout& layout() const { return layout_; }
  const JobConfig& job() const { return job_; }
  const Placement& placement() const { return place_; }
  bool is_root() const { return place_.world_rank == 0; }
  int64_t start_step() const { return start_step_; }
  Checkpointer* checkpointer() { return ckpt_.get(); }  // null without a checkpoint section
  Snapshotter* snapshotter() { return snap_.get(); }    // null without snapshots
  // What the in-memory snapshot restore did (restored false: none, or it fell back).
  const SnapshotRestore& snapshot_restore() const { return restored_; }
  const Schedule& schedule() const { return schedule_; }
  PipelineTimings& pipeline_timings() { return timings_; }

 private:
  Trainer(const JobConfig& job, const Placement& place) : job_(job), place_(place) {}
  Status Setup(const SnapshotSetup* snapshots);  // Create's work: Init, then the restores
  // The snapshot restore (when the plan asks for one) and this run's snapshotter.
  Status SetupSnapshots(const SnapshotSetup& snapshots);
  Status Init();
  Status InitModel();  // Init's part after the data: store, chunk models, pipeline
  Result<std::string> SampleWith(Gpt& model, const std::string& prompt, int64_t tokens,
                                 double temperature, int64_t top_k, uint64_t seed);
  // Context parallelism: this rank's tokens of every sequence of [count, seq] (load-balanced
  // split) into [count, seq / cp]; a plain copy when cp = 1.
  void LocalRows(const int32_t* full, int64_t count, std::vector<int32_t>* out) const;
  int64_t local_seq() const { return job_.data.seq / place_.layout.cp; }
  // Pipeline parallelism: Init's schedule, stage and executor; forward-only evaluation.
  Status InitPipeline();
  Result<double> EvaluatePipeline();
  // Run's parts: what observers are told at the start; evaluation when due; the stop vote; the
  // final evaluation and sample; the activation memory against the plan.
  RunStart Start() const;
  // For messages: what the run restored from when it restarted (a snapshot, else the
  // checkpoint it fell back to and why).
  std::string RestoredFrom() const;
  Status EvaluateIfDue(int64_t step, TrainSummary* summary);
  Result<int> StopAfter(int64_t step);
  Status Conclude(double total_s, TrainSummary* summary);
  Result<ActivationReport> Activations() const;
  Result<TrainSummary> RunLoop();

  std::vector<StepObserver*> observers_;  // Run's, for its parts
  JobConfig job_;
  // Before every member that uses its communicators (store_, models_, ckpt_): they die first.
  Placement place_;
  ParamLayout layout_;
  std::unique_ptr<ParamStore> store_;
  std::vector<std::unique_ptr<Gpt>> models_;  // one per local pipeline chunk
  Schedule schedule_;
  std::unique_ptr<GptPipelineStage> stage_;     // pp > 1: the chunks as a pipeline stage
  std::unique_ptr<PipelineExecutor> executor_;  // pp > 1
  PipelineTimings timings_;
  std::vector<int32_t> train_tokens_, val_tokens_;
  std::unique_ptr<WindowSampler> train_sampler_, eval_sampler_;
  std::vector<int32_t> batch_in_, batch_tgt_;
  std::unique_ptr<Checkpointer> ckpt_;
  std::unique_ptr<Snapshotter> snap_;
  SnapshotRestore restored_;
  CheckpointStats ckpt_stats_;  // RunStart's and RunEnd's view of ckpt_->stats()
  int64_t start_step_ = 0;      // optimizer steps already applied (restored from a checkpoint)
  int64_t eval_rows_ = 0;       // sequences per evaluation batch (Init), whatever the layout
};

}  // namespace loom
