// Gradient buckets: where each bucket's gradient accumulates and how it is reduced over the
// data-parallel group. The reduction of a bucket is started as soon as its backward is complete
// (StartGradSync) and finished when its result is needed (FinishGradSync), as Megatron's
// start_grad_sync / finish_grad_sync, so it runs on the communication thread while the backward
// of the layers before it computes.
//
// One implementation per way of reducing (the ZeRO stage picks one; see param_store.h):
//   all-reduced        stage 0: full gradient buffer, all-reduced in place after the step's last
//                      micro-batch; the optimizer reads the whole bucket.
//   reduce-scattered   stage 1: full gradient buffer, reduce-scattered after the last
//                      micro-batch into a shard buffer holding this rank's chunks.
//   per micro-batch    stages 2-3: no full gradient buffer is kept; each micro-batch's bucket
//                      gradient lives in a temporary buffer that is reduce-scattered at once and
//                      added to the shard buffer when the reduction finishes.
// Memory is tagged kGrads (kept buffers) and kComm (temporaries, gone after the step).
//
// Not thread-safe (one caller). Buffers an unfinished reduction may still write are kept, never
// freed, when communication was abandoned (KeepIfAbandoned); Drain first waits for the rest.
#pragma once

#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "core/status.h"
#include "parallel/zero/buckets.h"

namespace loom {

class GradBuckets {
 public:
  virtual ~GradBuckets() = default;

  // Accumulator of bucket b (padded, bucket-relative) for the current micro-batch; null when out
  // of memory. Per micro-batch: finishes the bucket's previous reduction first, so the new
  // micro-batch starts from a fresh, zeroed buffer (a failure is reported by deferred()).
  virtual float* Grads(int b) = 0;
  // Zeroes what accumulates over an optimizer step.
  virtual void BeginStep() = 0;
  // Whether every micro-batch's gradient is reduced (per micro-batch), rather than only the
  // step's last, after local accumulation.
  virtual bool SyncEveryMicroBatch() const { return false; }
  // Starts the reduction of bucket b's accumulator (its previous one must be finished).
  Status StartGradSync(int b);
  // Waits for bucket b's reduction, if one is running, and folds its result in.
  Status FinishGradSync(int b);
  // The reduced gradient of bucket b's optimizer domain (BucketGeometry), after FinishGradSync.
  virtual float* Reduced(int b) = 0;
  // Copies the reduced gradients (layout.total floats, canonical order); stage 0 only.
  virtual Status CopyGrads(float* out);
  // Waits for running reductions until `deadline`; once communication is abandoned it waits for
  // nothing and the destructor keeps the buffers instead.
  void Drain(Deadline deadline);
  // A failed reduction noticed where no Status could be returned (Grads).
  const Status& deferred() const { return deferred_; }

 protected:
  GradBuckets(const BucketGeometry& geo, Communicator* dp);
  // Starts the collective for bucket b over `grads`.
  virtual Result<HandlePtr> Reduce(int b, float* grads) = 0;
  // After the collective of bucket b completed.
  virtual void Fold(int /*b*/) {}

  const BucketGeometry& geo_;
  Communicator* dp_;
  std::vector<HandlePtr> pending_;  // running reduction per bucket
  Status deferred_;
};

// Stage 0, stage 1 and stages 2-3 (see above). `dp` is the data-parallel group (may be null with
// one rank); `geo` must outlive the buckets.
Result<std::unique_ptr<GradBuckets>> MakeAllReducedGrads(const BucketGeometry& geo,
                                                         Communicator* dp);
Result<std::unique_ptr<GradBuckets>> MakeReduceScatteredGrads(const BucketGeometry& geo,
                                                              Communicator* dp);
Result<std::unique_ptr<GradBuckets>> MakePerMicroBatchGrads(const BucketGeometry& geo,
                                                            Communicator* dp);

}  // namespace loom
