// The training loop of one rank: data (this rank's slice of every global batch), model (its
// tensor-parallel part), parameter store (ZeRO stage), LR schedule, gradient accumulation over
// micro-batches, periodic evaluation, progress line (world rank 0) and sampling.
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
#include "parallel/layout.h"
#include "parallel/pipeline/executor.h"
#include "parallel/pipeline/schedule.h"
#include "job/job_config.h"
#include "parallel/process_groups.h"
#include "parallel/zero/param_store.h"
#include "worker/checkpointer.h"
#include "worker/data/sampler.h"
#include "worker/gpt.h"
#include "worker/gpt_pipeline.h"

namespace loom {

// Where this rank sits: its layout, world rank and communicators. Default: one process. The
// trainer keeps a copy, which shares ownership of the communicators (parallel/process_groups.h),
// so they outlive the parameter store and the checkpointer that use them.
using Placement = ProcessGroups;

struct StepStats {
  double loss = 0;       // mean over the global batch's tokens (before the update)
  double grad_norm = 0;  // global L2 norm before clipping
  double lr = 0;
};

struct TrainSummary {
  int64_t first_step = 0;                         // steps done before this run (resumed)
  std::vector<double> losses;                     // per step run: steps first_step+1, ...
  std::vector<std::pair<int64_t, double>> evals;  // (step, val loss)
  double tokens_per_second = 0;
  double train_loss = 0;  // mean of the last (up to 10) steps
  std::string sample;
  // Set when the run stopped before job.steps on checkpoint.signal, after saving step
  // stopped_at (no final evaluation or sample then).
  int stopped_by_signal = 0;
  int64_t stopped_at = 0;
};

class Trainer {
 public:
  // Loads the data, builds and initialises this rank's model part (seeded) and its store, then
  // resumes from the newest valid checkpoint when the job's `checkpoint` section says so
  // (collective over the world).
  static Result<std::unique_ptr<Trainer>> Create(const JobConfig& job, const Placement& place = {});

  // Runs steps start_step()+1 .. job.steps, saving checkpoints as configured; progress on stdout
  // from world rank 0. `on_step` sees every step.
  // An error from `on_step` stops training with that error. `print`: false keeps stdout quiet
  // (a launcher shows progress instead).
  Result<TrainSummary> Run(const std::function<Status(int64_t, const StepStats&)>& on_step = {},
                           bool print = true);

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
  const Schedule& schedule() const { return schedule_; }
  PipelineTimings& pipeline_timings() { return timings_; }

 private:
  Trainer(const JobConfig& job, const Placement& place) : job_(job), place_(place) {}
  Status Setup();  // Create's work: Init, then the checkpoint restore
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
  int64_t start_step_ = 0;  // optimizer steps already applied (restored from a checkpoint)
  int64_t eval_rows_ = 0;   // sequences per evaluation batch (Init), whatever the layout
};

}  // namespace loom
