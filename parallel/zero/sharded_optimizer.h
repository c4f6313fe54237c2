// The sharded optimizer step: AdamW over the parameter segments this rank updates (its chunks of
// every bucket under ZeRO 1-3, everything under stage 0), after the global gradient norm and
// clipping (clip_grad_norm_). The norm is summed over the data-parallel group when gradients are
// sharded, over the tensor-parallel group (parameters replicated across tp are counted by tp
// rank 0 only) and over the pipeline group (every stage's parameters). The moments m and v
// (kOptimizer memory) cover the optimizer's domain of each bucket (BucketGeometry).
// Not thread-safe (one caller).
#pragma once

#include <cstdint>
#include <memory>

#include "comm/communicator.h"
#include "core/status.h"
#include "core/tensor.h"
#include "parallel/state_kind.h"
#include "parallel/zero/buckets.h"
#include "parallel/zero/grad_buckets.h"
#include "parallel/zero/param_gatherer.h"
#include "parallel/zero/param_store.h"

namespace loom {

// The groups the gradient norm is summed over (null: one rank).
struct NormGroups {
  Communicator* dp = nullptr;  // used only when the gradients are sharded
  Communicator* tp = nullptr;
  Communicator* pp = nullptr;
};

class ShardedOptimizer {
 public:
  // `geo` must outlive the optimizer.
  static Result<std::unique_ptr<ShardedOptimizer>> Create(const BucketGeometry& geo,
                                                          const AdamWConfig& cfg,
                                                          NormGroups groups);

  // Reads the reduced gradients of every segment, computes the global norm, clips them in place
  // and updates the parameters in place. Returns the norm before clipping.
  Result<double> Step(double lr, ParamBuffers& params, GradBuckets& grads);

  // The first element of bucket b's domain of m (kExpAvg) or v (kExpAvgSq).
  float* State(StateKind state, int b);
  // AdamW updates applied so far (bias correction).
  int64_t steps() const { return steps_; }
  void set_steps(int64_t steps) { steps_ = steps; }

 private:
  ShardedOptimizer(const BucketGeometry& geo, const AdamWConfig& cfg, NormGroups groups, Tensor m,
                   Tensor v);
  // fn(param, weights, grads, m, v, n) over every segment this rank updates.
  template <typename Fn>
  void ForEachSegment(ParamBuffers& params, GradBuckets& grads, Fn fn);
  int64_t DomainBase(int b) const;

  const BucketGeometry& geo_;
  AdamWConfig cfg_;
  NormGroups groups_;
  int tp_rank_ = 0;
  int64_t steps_ = 0;
  Tensor m_, v_;
};

}  // namespace loom
