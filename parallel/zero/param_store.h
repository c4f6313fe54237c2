// Where a model's parameters and gradients live, bucket by bucket (bucket 0: embeddings,
// 1..layers: one per layer, last: final norm). The model asks the store for a bucket's pointers
// and tells it when a bucket's gradients are complete, so the store can run data-parallel
// reductions in the background (ZeRO 0/1/2), gather sharded parameters just in time (ZeRO 3),
// and apply the optimizer to what it owns.
//
// Call order for one optimizer step:
//   BeginStep()
//   per micro-batch: forward (AcquireParams/ReleaseParams around each layer),
//                    backward (AcquireParams, Grads, ..., GradsReady per bucket)
//   Step(lr) — finishes outstanding reductions, clips, updates, re-gathers parameters.
//
// The implementation (zero_store.cc) is composed of parts, one folder-local header each: the
// bucket math (buckets.h), a parameter scheme (param_gatherer.h), a gradient reduction scheme
// (grad_buckets.h) and the sharded optimizer (sharded_optimizer.h). The ZeRO stage picks the
// schemes:
//   stage  parameters                          gradients                        optimizer state
//   0      replicated                          all-reduced after the step       replicated
//   1      replicated, chunks re-gathered      reduce-scattered after the step  sharded
//   2      replicated, chunks re-gathered      reduce-scattered per micro-batch sharded
//   3      sharded, gathered per bucket        reduce-scattered per micro-batch sharded
#pragma once

#include <cstdint>
#include <memory>

#include "comm/communicator.h"
#include "core/status.h"
#include "parallel/param_layout.h"
#include "parallel/state_kind.h"

namespace loom {

class ParamStore {
 public:
  virtual ~ParamStore() = default;

  // Full (TP-local) parameters of the bucket; valid from AcquireParams until ReleaseParams.
  virtual float* Params(int bucket) = 0;
  // Gradient accumulator of the bucket for the current micro-batch (zeroed when first asked for
  // in a backward pass where the store does not keep gradients across micro-batches).
  virtual float* Grads(int bucket) = 0;

  // Makes Params(bucket) valid; `next` (or -1) is the bucket that will be needed after it, which
  // a sharding store starts gathering now.
  virtual Status AcquireParams(int bucket, int next) = 0;
  virtual Status ReleaseParams(int bucket) = 0;

  virtual Status BeginStep() = 0;
  // The bucket's gradients for this micro-batch are complete (`last`: the step's last micro-batch).
  virtual Status GradsReady(int bucket, bool last) = 0;
  // Waits for all reductions, computes the global gradient norm, clips, applies AdamW and makes
  // the parameters consistent again. Returns the norm before clipping.
  virtual Result<double> Step(double lr) = 0;

  // Copies this rank's complete TP-local parameters into `out` (layout.total floats), gathering
  // shards if needed. Collective over the data-parallel group for sharded stores.
  virtual Status CopyParams(float* out) = 0;
  // Sets the parameters from a complete TP-local buffer (layout.total floats; each rank keeps
  // what it owns) and resets nothing else.
  virtual Status LoadParams(const float* in) = 0;
  // Copies the gradients of the last step (after reduction, before clipping) for parameters
  // this rank holds completely (stage 0 only; others return FailedPrecondition).
  virtual Status CopyGrads(float* out) = 0;

  // Checkpoint access (parallel/state_kind.h names the states; checkpoint/shard_plan.h the split).
  // For bucket `bucket`, returns a pointer to element *lo of `state` and sets [*lo, *hi) to the
  // bucket-relative elements this rank holds (the padded bucket: zero beyond the bucket's real
  // size):
  //   stage 0: everything; stages 1-2: all parameters, the moments of its shard; stage 3: its
  //   shard of everything. A shard is [r * chunk, (r + 1) * chunk) for data(-context) rank r,
  //   chunk = padded bucket size / group size -- the split checkpoint/shard_plan.h writes.
  // Right after Step(), under stages 1-2, only the shard's parameters are current until the
  // background gather lands: a reader of other parameters calls Quiesce() first.
  virtual float* StateData(StateKind state, int bucket, int64_t* lo, int64_t* hi) = 0;
  // Waits for background parameter gathers.
  virtual Status Quiesce() = 0;
  // From any thread (a save copying the shard beside compute): waits until no background
  // operation writes the held elements of `state` in `bucket`. Under stages 1-2 a parameter
  // gather runs in place after Step(), and an all-gather may pass other ranks' chunks through
  // this rank's own chunk while it runs (Open MPI's Bruck algorithm for a group whose size is
  // not a power of two rotates the whole buffer): even the shard is not stable until it lands.
  virtual Status Settled(StateKind /*state*/, int /*bucket*/) { return Status::Ok(); }
  // After states were written through StateData: drops gathered copies built from old values.
  virtual void StateLoaded() = 0;
  // A number that changes whenever the parameters may have (Step, LoadParams, StateLoaded): a
  // model keeping derived copies of them (bf16 weights) rebuilds those when it differs.
  virtual int64_t params_version() const = 0;
  // AdamW updates applied so far (bias correction); restored with the moments.
  virtual int64_t optimizer_steps() const = 0;
  virtual void set_optimizer_steps(int64_t steps) = 0;
};

struct AdamWConfig {
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double weight_decay = 0.1;
  double grad_clip = 1.0;  // 0: no clipping
};

struct ParamStoreOptions {
  int zero = 0;                // ZeRO stage 0..3 (with a dp group of one rank: stage 0)
  Communicator* dp = nullptr;  // data-parallel group (null: one rank)
  Communicator* tp = nullptr;  // tensor-parallel group (null: one rank)
  bool sp = false;             // sequence parallelism: replicated params' grads are partial sums
  bool overlap = true;         // start reductions as buckets complete (off: wait for each)
  Communicator* pp = nullptr;  // pipeline group: the gradient norm sums over its stages
};

// The store for every layout: flat buffers padded per bucket to a multiple of the dp size; stage 0
// all-reduces gradients, 1 reduce-scatters them and shards the optimizer state (the updated
// chunks are all-gathered in the background and waited for bucket by bucket as the next forward
// reaches them), 2 also shards the gradients (reduce-scattered per micro-batch from per-bucket
// buffers), 3 also shards the parameters (all-gathered per bucket on AcquireParams, the next
// bucket prefetched, freed on ReleaseParams; buckets without layers — embeddings, final norm —
// stay gathered for the whole step). The gradient norm counts tensor-parallel replicated
// parameters once. The communicators must outlive the store: its destructor waits for (or, once
// communication is abandoned, keeps the buffers of) every transfer still running.
Result<std::unique_ptr<ParamStore>> MakeParamStore(const ParamLayout& layout,
                                                   const AdamWConfig& cfg,
                                                   const ParamStoreOptions& opt);

}  // namespace loom
