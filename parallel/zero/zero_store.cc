// The parameter store of every ZeRO stage, composed of the bucket geometry, a parameter scheme
// (param_gatherer.h), a gradient reduction scheme (grad_buckets.h) and the sharded optimizer; the
// stage only picks the schemes (MakeParamStore). This file orders their calls within a step.
#include <memory>

#include "parallel/tensor_parallel/sequence_parallel.h"
#include "parallel/zero/buckets.h"
#include "parallel/zero/grad_buckets.h"
#include "parallel/zero/param_gatherer.h"
#include "parallel/zero/param_store.h"
#include "parallel/zero/sharded_optimizer.h"

namespace loom {
namespace {

class ZeroStore final : public ParamStore {
 public:
  ZeroStore(const ParamLayout& layout, const ParamStoreOptions& opt, BucketGeometry geo)
      : layout_(layout), opt_(opt), geo_(std::move(geo)) {}

  // Buffers must outlive every transfer that reads or writes them: wait for the running ones
  // with one deadline for all of them (after a failure every outstanding transfer may be stuck,
  // and waiting for each in turn would multiply the communicator's timeout by their number); a
  // transfer that timed out (here or before) may still write, so the components then keep their
  // buffers.
  ~ZeroStore() override {
    if (opt_.dp == nullptr || !grads_ || !params_) return;
    const Deadline deadline = opt_.dp->DefaultDeadline();
    grads_->Drain(deadline);
    params_->Drain(deadline);
  }

  // Picks the schemes of ZeRO stage `stage`.
  Status Init(int stage, const AdamWConfig& cfg);

  float* Params(int b) override { return params_->Params(b); }
  float* Grads(int b) override { return grads_->Grads(b); }
  Status AcquireParams(int b, int next) override { return params_->Acquire(b, next); }
  Status ReleaseParams(int b) override { return params_->Release(b); }
  Status BeginStep() override {
    grads_->BeginStep();
    return Status::Ok();
  }
  Status GradsReady(int b, bool last) override;
  Result<double> Step(double lr) override;
  Status CopyParams(float* out) override { return params_->CopyParams(out); }
  Status LoadParams(const float* in) override {
    ++params_version_;
    return params_->LoadParams(in);
  }
  Status CopyGrads(float* out) override { return grads_->CopyGrads(out); }
  float* StateData(StateKind state, int b, int64_t* lo, int64_t* hi) override;
  Status Quiesce() override { return params_->Quiesce(); }
  Status Settled(StateKind state, int b) override {
    return state == StateKind::kParam ? params_->Settled(b) : Status::Ok();
  }
  void StateLoaded() override {
    ++params_version_;
    params_->StateLoaded();
  }
  int64_t params_version() const override { return params_version_; }
  int64_t optimizer_steps() const override { return optimizer_->steps(); }
  void set_optimizer_steps(int64_t steps) override { optimizer_->set_steps(steps); }

 private:
  const ParamLayout& layout_;
  ParamStoreOptions opt_;
  BucketGeometry geo_;  // before the components, which refer to it
  std::unique_ptr<ParamBuffers> params_;
  std::unique_ptr<GradBuckets> grads_;
  std::unique_ptr<ShardedOptimizer> optimizer_;
  int64_t params_version_ = 0;
};

Status ZeroStore::Init(int stage, const AdamWConfig& cfg) {
  Communicator* dp = opt_.dp;
  switch (stage) {  // each stage is one pair of schemes
    case 0: {       // everything replicated; gradients all-reduced after the last micro-batch
      LOOM_ASSIGN_OR_RETURN(params_, MakeReplicatedParams(geo_, dp));
      LOOM_ASSIGN_OR_RETURN(grads_, MakeAllReducedGrads(geo_, dp));
      break;
    }
    case 1: {  // optimizer state sharded: gradients reduce-scattered, own chunks re-gathered
      LOOM_ASSIGN_OR_RETURN(params_, MakeRegatheredParams(geo_, dp, opt_.overlap));
      LOOM_ASSIGN_OR_RETURN(grads_, MakeReduceScatteredGrads(geo_, dp));
      break;
    }
    case 2: {  // gradients sharded too: reduce-scattered per micro-batch, no full buffer
      LOOM_ASSIGN_OR_RETURN(params_, MakeRegatheredParams(geo_, dp, opt_.overlap));
      LOOM_ASSIGN_OR_RETURN(grads_, MakePerMicroBatchGrads(geo_, dp));
      break;
    }
    default: {  // 3: parameters sharded too, gathered per bucket for use
      LOOM_ASSIGN_OR_RETURN(params_, MakeGatheredParams(geo_, dp));
      LOOM_ASSIGN_OR_RETURN(grads_, MakePerMicroBatchGrads(geo_, dp));
      break;
    }
  }
  LOOM_ASSIGN_OR_RETURN(optimizer_, ShardedOptimizer::Create(geo_, cfg, {dp, opt_.tp, opt_.pp}));
  return Status::Ok();
}

Status ZeroStore::GradsReady(int b, bool last) {
  LOOM_RETURN_IF_ERROR(grads_->deferred());
  if (!grads_->SyncEveryMicroBatch() && !last) return Status::Ok();  // accumulate, reduce once
  const TensorParallel tp{opt_.tp, opt_.sp};
  if (tp.size() > 1)
    LOOM_RETURN_IF_ERROR(SumSequenceParallelGrads(tp, layout_, b, grads_->Grads(b)));
  if (opt_.dp == nullptr || opt_.dp->size() == 1) return Status::Ok();
  LOOM_RETURN_IF_ERROR(grads_->FinishGradSync(b));  // the previous micro-batch's, if any
  LOOM_RETURN_IF_ERROR(grads_->StartGradSync(b));
  if (!opt_.overlap) return grads_->FinishGradSync(b);
  return Status::Ok();
}

Result<double> ZeroStore::Step(double lr) {
  ++params_version_;
  LOOM_RETURN_IF_ERROR(grads_->deferred());
  LOOM_RETURN_IF_ERROR(params_->BeforeUpdate());
  for (int b = 0; b < geo_.num_buckets(); ++b) LOOM_RETURN_IF_ERROR(grads_->FinishGradSync(b));
  LOOM_ASSIGN_OR_RETURN(const double norm, optimizer_->Step(lr, *params_, *grads_));
  // Every rank updated its part in place; make the parameters consistent again (stages 1-2: in
  // the background, waited for bucket by bucket as the next forward reaches it).
  LOOM_RETURN_IF_ERROR(params_->AfterUpdate());
  return norm;
}

float* ZeroStore::StateData(StateKind state, int b, int64_t* lo, int64_t* hi) {
  if (state == StateKind::kParam) return params_->State(b, lo, hi);
  *lo = geo_.sharded() ? geo_.owned_begin(b) : 0;
  *hi = geo_.sharded() ? *lo + geo_.chunk(b) : geo_.padded(b);
  return optimizer_->State(state, b);
}

}  // namespace

Result<std::unique_ptr<ParamStore>> MakeParamStore(const ParamLayout& layout,
                                                   const AdamWConfig& cfg,
                                                   const ParamStoreOptions& opt) {
  if (opt.zero < 0 || opt.zero > 3) return InvalidArgument("ZeRO stage must be 0..3");
  const int dp_size = opt.dp ? opt.dp->size() : 1, dp_rank = opt.dp ? opt.dp->rank() : 0;
  const int stage = dp_size == 1 ? 0 : opt.zero;  // one data-parallel rank: nothing to shard
  auto store =
      std::make_unique<ZeroStore>(layout, opt, BucketGeometry(layout, dp_size, dp_rank, stage > 0));
  LOOM_RETURN_IF_ERROR(store->Init(stage, cfg));
  return std::unique_ptr<ParamStore>(std::move(store));
}

}  // namespace loom
