// Gradient buckets of the three ZeRO reduction schemes.
#include "parallel/zero/grad_buckets.h"

#include <cstring>
#include <string>

#include "core/kernels/elementwise.h"
#include "core/tensor.h"

namespace loom {

GradBuckets::GradBuckets(const BucketGeometry& geo, Communicator* dp)
    : geo_(geo), dp_(dp), pending_(static_cast<size_t>(geo.num_buckets())) {}

Status GradBuckets::StartGradSync(int b) {
  float* g = Grads(b);
  if (g == nullptr) return Internal("out of memory for the gradient bucket " + std::to_string(b));
  LOOM_ASSIGN_OR_RETURN(pending_[b], Reduce(b, g));
  return Status::Ok();
}

Status GradBuckets::FinishGradSync(int b) {
  if (!pending_[b]) return Status::Ok();
  Status st = pending_[b]->Wait(dp_->DefaultDeadline());
  pending_[b].reset();
  LOOM_RETURN_IF_ERROR(st);
  Fold(b);
  return Status::Ok();
}

Status GradBuckets::CopyGrads(float*) {
  return FailedPrecondition("CopyGrads needs ZeRO stage 0");
}

void GradBuckets::Drain(Deadline deadline) {
  for (HandlePtr& h : pending_) {
    if (h && !dp_->Abandoned()) (void)h->Wait(deadline);  // abandoned: kept by the destructor
  }
}

namespace {

Result<Tensor> GradBuffer(int64_t n, MemTag tag) {
  return Tensor::Zeros({n}, DType::kF32, tag);
}

// Stage 0: one full gradient buffer, all-reduced in place.
class AllReducedGrads final : public GradBuckets {
 public:
  AllReducedGrads(const BucketGeometry& geo, Communicator* dp, Tensor grads)
      : GradBuckets(geo, dp), grads_(std::move(grads)) {}
  ~AllReducedGrads() override {
    KeepIfAbandoned keep(dp_);
    keep(grads_);
  }
  float* Grads(int b) override { return grads_.data<float>() + geo_.full_base(b); }
  void BeginStep() override { std::memset(grads_.raw(), 0, grads_.nbytes()); }
  float* Reduced(int b) override { return Grads(b); }
  Status CopyGrads(float* out) override {
    const ParamLayout& layout = geo_.layout();
    for (int b = 0; b < geo_.num_buckets(); ++b) {
      std::memcpy(out + layout.buckets[b].first, Grads(b), static_cast<size_t>(geo_.size(b)) * 4);
    }
    return Status::Ok();
  }

 private:
  Result<HandlePtr> Reduce(int b, float* grads) override {
    return dp_->AllReduceAsync(grads, geo_.padded(b), ReduceOp::kSum);
  }

  Tensor grads_;
};

// Stage 1: a full gradient buffer accumulated over the step, reduce-scattered into this rank's
// chunks.
class ReduceScatteredGrads final : public GradBuckets {
 public:
  ReduceScatteredGrads(const BucketGeometry& geo, Communicator* dp, Tensor grads, Tensor shard)
      : GradBuckets(geo, dp), grads_(std::move(grads)), shard_(std::move(shard)) {}
  ~ReduceScatteredGrads() override {
    KeepIfAbandoned keep(dp_);
    keep(grads_);
    keep(shard_);
  }
  float* Grads(int b) override { return grads_.data<float>() + geo_.full_base(b); }
  void BeginStep() override {
    std::memset(grads_.raw(), 0, grads_.nbytes());
    std::memset(shard_.raw(), 0, shard_.nbytes());
  }
  float* Reduced(int b) override { return shard_.data<float>() + geo_.shard_base(b); }

 private:
  Result<HandlePtr> Reduce(int b, float* grads) override {
    return dp_->ReduceScatterAsync(grads, Reduced(b), geo_.chunk(b));
  }

  Tensor grads_, shard_;
};

// Stages 2-3: per micro-batch temporaries, reduce-scattered and added to this rank's chunks.
class PerMicroBatchGrads final : public GradBuckets {
 public:
  PerMicroBatchGrads(const BucketGeometry& geo, Communicator* dp, Tensor shard)
      : GradBuckets(geo, dp),
        shard_(std::move(shard)),
        temp_(static_cast<size_t>(geo.num_buckets())),
        reduced_(static_cast<size_t>(geo.num_buckets())) {}
  ~PerMicroBatchGrads() override {
    KeepIfAbandoned keep(dp_);
    keep(shard_);
    keep(temp_);
    keep(reduced_);
  }
  float* Grads(int b) override {
    if (pending_[b]) {
      // The previous micro-batch's buffer is still being reduce-scattered: finish that first so
      // this micro-batch starts from a fresh, zeroed buffer. Errors surface at GradsReady/Step.
      Status st = FinishGradSync(b);
      if (!st.ok() && deferred_.ok()) deferred_ = st;
    }
    if (!temp_[b].defined()) {
      auto t = GradBuffer(geo_.padded(b), MemTag::kComm);
      if (!t.ok()) return nullptr;
      temp_[b] = std::move(*t);
    }
    return temp_[b].data<float>();
  }
  void BeginStep() override { std::memset(shard_.raw(), 0, shard_.nbytes()); }
  bool SyncEveryMicroBatch() const override { return true; }
  float* Reduced(int b) override { return shard_.data<float>() + geo_.shard_base(b); }

 private:
  Result<HandlePtr> Reduce(int b, float* grads) override {
    LOOM_ASSIGN_OR_RETURN(reduced_[b], GradBuffer(geo_.chunk(b), MemTag::kComm));
    return dp_->ReduceScatterAsync(grads, reduced_[b].data<float>(), geo_.chunk(b));
  }
  void Fold(int b) override {
    Axpy(Reduced(b), reduced_[b].data<float>(), 1.0f, geo_.chunk(b));
    reduced_[b] = Tensor();
    temp_[b] = Tensor();
  }

  Tensor shard_;
  std::vector<Tensor> temp_, reduced_;  // per bucket: this micro-batch's gradient, its reduction
};

}  // namespace

Result<std::unique_ptr<GradBuckets>> MakeAllReducedGrads(const BucketGeometry& geo,
                                                         Communicator* dp) {
  LOOM_ASSIGN_OR_RETURN(Tensor grads, GradBuffer(geo.full_size(), MemTag::kGrads));
  return std::unique_ptr<GradBuckets>(new AllReducedGrads(geo, dp, std::move(grads)));
}

Result<std::unique_ptr<GradBuckets>> MakeReduceScatteredGrads(const BucketGeometry& geo,
                                                              Communicator* dp) {
  LOOM_ASSIGN_OR_RETURN(Tensor grads, GradBuffer(geo.full_size(), MemTag::kGrads));
  LOOM_ASSIGN_OR_RETURN(Tensor shard, GradBuffer(geo.shard_size(), MemTag::kGrads));
  return std::unique_ptr<GradBuckets>(
      new ReduceScatteredGrads(geo, dp, std::move(grads), std::move(shard)));
}

Result<std::unique_ptr<GradBuckets>> MakePerMicroBatchGrads(const BucketGeometry& geo,
                                                            Communicator* dp) {
  LOOM_ASSIGN_OR_RETURN(Tensor shard, GradBuffer(geo.shard_size(), MemTag::kGrads));
  return std::unique_ptr<GradBuckets>(new PerMicroBatchGrads(geo, dp, std::move(shard)));
}

}  // namespace loom
