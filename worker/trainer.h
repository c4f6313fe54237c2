// The single-process training loop: data, model, AdamW with global-norm clipping, LR schedule,
// gradient accumulation over micro-batches, periodic evaluation, progress line and sampling.
// One optimizer step = global_batch sequences = global_batch / micro_batch forward+backward
// passes; the loss is the mean over every token of the global batch.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "worker/data/sampler.h"
#include "worker/gpt.h"
#include "worker/job_config.h"
#include "worker/optimizer.h"

namespace loom {

struct StepStats {
  double loss = 0;       // mean over the global batch's tokens (before the update)
  double grad_norm = 0;  // global L2 norm before clipping
  double lr = 0;
};

struct TrainSummary {
  std::vector<double> losses;  // per step
  std::vector<std::pair<int64_t, double>> evals;  // (step, val loss)
  double tokens_per_second = 0;
  std::string sample;
};

class Trainer {
 public:
  // Loads the data, builds and initialises the model (seeded) and the optimizer.
  static Result<std::unique_ptr<Trainer>> Create(const JobConfig& job);

  // Runs job.steps steps with progress on stdout. `on_step` (optional) sees every step.
  Result<TrainSummary> Run(const std::function<void(int64_t, const StepStats&)>& on_step = {});

  // One optimizer step on an explicit global batch [global_batch, seq] with learning rate lr:
  // ComputeGradients then ApplyUpdate.
  StepStats StepOnBatch(const int32_t* inputs, const int32_t* targets, double lr);
  // Zeroes the gradients, runs forward+backward over every micro-batch of the global batch and
  // returns the mean loss; grads() then hold d(mean loss)/d(params).
  double ComputeGradients(const int32_t* inputs, const int32_t* targets);
  // Clips and applies AdamW; returns the gradient norm before clipping.
  double ApplyUpdate(double lr) { return optimizer_->Step(model_->params(), model_->grads(), lr); }
  // One optimizer step on the samples of global step `step` with the scheduled learning rate.
  StepStats Step(int64_t step);
  // Mean loss over eval.batches fixed micro-batches of the validation split.
  double Evaluate();
  // Generates `tokens` tokens after `prompt` (temperature / top-k sampling, seeded).
  std::string Sample(const std::string& prompt, int64_t tokens, double temperature, int64_t top_k,
                     uint64_t seed);

  Gpt& model() { return *model_; }
  const JobConfig& job() const { return job_; }
  AdamWOptimizer& optimizer() { return *optimizer_; }

 private:
  explicit Trainer(const JobConfig& job) : job_(job) {}
  Status Init();

  JobConfig job_;
  std::unique_ptr<Gpt> model_;
  std::unique_ptr<AdamWOptimizer> optimizer_;
  std::vector<int32_t> train_tokens_, val_tokens_;
  std::unique_ptr<WindowSampler> train_sampler_, eval_sampler_;
  std::vector<int32_t> batch_in_, batch_tgt_;
};

}  // namespace loom
