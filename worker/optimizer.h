// AdamW over a model's flat parameters: per-tensor weight decay (matrices and embeddings only),
// global-norm clipping before the update. Moments are fp32, tagged as optimizer memory.
#pragma once

#include <cstdint>
#include <memory>

#include "core/status.h"
#include "core/tensor.h"
#include "worker/model_config.h"

namespace loom {

struct AdamWConfig {
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double weight_decay = 0.1;
  double grad_clip = 1.0;  // 0: no clipping
};

class AdamWOptimizer {
 public:
  static Result<std::unique_ptr<AdamWOptimizer>> Create(const ParamLayout& layout,
                                                        const AdamWConfig& config);

  // Clips `grads` in place to the global norm limit and updates `params`; returns the norm
  // before clipping.
  double Step(float* params, float* grads, double lr);

  int64_t step() const { return step_; }
  float* m() { return m_.data<float>(); }
  float* v() { return v_.data<float>(); }

 private:
  AdamWOptimizer(const ParamLayout& layout, const AdamWConfig& config)
      : layout_(layout), config_(config) {}
  const ParamLayout& layout_;
  AdamWConfig config_;
  Tensor m_, v_;
  int64_t step_ = 0;
};

}  // namespace loom
