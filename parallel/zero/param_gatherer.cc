// The three ZeRO parameter schemes: replicated, re-gathered after the step, gathered per bucket.
#include "parallel/zero/param_gatherer.h"

#include <cstring>
#include <mutex>
#include <vector>

#include "core/tensor.h"

namespace loom {
namespace {

// Stage 0 (and the full buffer of stages 1-2): every parameter, bucket by bucket.
class ReplicatedParams : public ParamBuffers {
 public:
  ReplicatedParams(const BucketGeometry& geo, Communicator* dp, Tensor params)
      : geo_(geo), dp_(dp), params_(std::move(params)) {}
  ~ReplicatedParams() override {
    KeepIfAbandoned keep(dp_);
    keep(params_);
  }
  float* Params(int b) override { return params_.data<float>() + geo_.full_base(b); }
  Status Acquire(int, int) override { return Status::Ok(); }
  Status Release(int) override { return Status::Ok(); }
  float* Domain(int b) override { return Params(b); }
  Status CopyParams(float* out) override {
    LOOM_RETURN_IF_ERROR(Quiesce());
    const ParamLayout& layout = geo_.layout();
    for (int b = 0; b < geo_.num_buckets(); ++b) {
      std::memcpy(out + layout.buckets[b].first, Params(b), static_cast<size_t>(geo_.size(b)) * 4);
    }
    return Status::Ok();
  }
  Status LoadParams(const float* in) override {
    LOOM_RETURN_IF_ERROR(Quiesce());
    const ParamLayout& layout = geo_.layout();
    for (int b = 0; b < geo_.num_buckets(); ++b) {
      std::memcpy(Params(b), in + layout.buckets[b].first, static_cast<size_t>(geo_.size(b)) * 4);
    }
    return Status::Ok();
  }
  float* State(int b, int64_t* lo, int64_t* hi) override {
    *lo = 0;
    *hi = geo_.padded(b);
    return Params(b);
  }

 protected:
  const BucketGeometry& geo_;
  Communicator* dp_;
  Tensor params_;
};

// Stages 1-2: full parameters, of which this rank updates its chunks; the chunks are all-gathered
// in the background after the update and waited for bucket by bucket as the next forward reaches
// them.
class RegatheredParams final : public ReplicatedParams {
 public:
  RegatheredParams(const BucketGeometry& geo, Communicator* dp, Tensor params, bool overlap)
      : ReplicatedParams(geo, dp, std::move(params)),
        overlap_(overlap),
        pending_(static_cast<size_t>(geo.num_buckets())) {}
  Status Acquire(int b, int) override { return WaitGather(b); }  // overlapped with the forward
  float* Domain(int b) override { return Params(b) + geo_.owned_begin(b); }
  Status BeforeUpdate() override { return Quiesce(); }
  Status AfterUpdate() override {
    for (int b = 0; b < geo_.num_buckets(); ++b) {
      float* base = Params(b);
      HandlePtr h = dp_->AllGatherAsync(base + geo_.owned_begin(b), base, geo_.chunk(b));
      {
        std::lock_guard<std::mutex> lock(mu_);
        pending_[b] = std::move(h);
      }
      if (!overlap_) LOOM_RETURN_IF_ERROR(WaitGather(b));
    }
    return Status::Ok();
  }
  Status Settled(int b) override {
    HandlePtr h;
    {
      std::lock_guard<std::mutex> lock(mu_);
      h = pending_[b];
    }
    return h ? h->Wait(dp_->DefaultDeadline()) : Status::Ok();
  }
  Status Quiesce() override {
    for (int b = 0; b < geo_.num_buckets(); ++b) LOOM_RETURN_IF_ERROR(WaitGather(b));
    return Status::Ok();
  }
  void Drain(Deadline deadline) override {
    for (HandlePtr& h : pending_) {
      if (h && !dp_->Abandoned()) (void)h->Wait(deadline);  // abandoned: kept by the destructor
    }
  }

 private:
  Status WaitGather(int b) {
    HandlePtr h;
    {
      std::lock_guard<std::mutex> lock(mu_);
      h = pending_[b];
    }
    if (!h) return Status::Ok();
    Status st = h->Wait(dp_->DefaultDeadline());
    std::lock_guard<std::mutex> lock(mu_);
    if (pending_[b] == h) pending_[b].reset();
    return st;
  }

  bool overlap_;
  std::mutex mu_;                   // pending_'s slots: a save's copy reads them (Settled)
  std::vector<HandlePtr> pending_;  // GUARDED_BY(mu_): running all-gather per bucket
};

// Stage 3: this rank's chunks only; buckets are gathered for use and freed after it.
class GatheredParams final : public ParamBuffers {
 public:
  GatheredParams(const BucketGeometry& geo, Communicator* dp, Tensor shard)
      : geo_(geo),
        dp_(dp),
        shard_(std::move(shard)),
        gathered_(static_cast<size_t>(geo.num_buckets())),
        pending_(static_cast<size_t>(geo.num_buckets())) {}
  ~GatheredParams() override {
    KeepIfAbandoned keep(dp_);
    keep(shard_);
    keep(gathered_);
  }
  float* Params(int b) override { return gathered_[b].data<float>(); }
  Status Acquire(int b, int next) override;
  Status Release(int b) override;
  float* Domain(int b) override { return shard_.data<float>() + geo_.shard_base(b); }
  Status AfterUpdate() override {
    for (int b = 0; b < geo_.num_buckets(); ++b) {
      if (geo_.persistent(b)) gathered_[b] = Tensor();  // stale: re-gathered by the next forward
    }
    return Status::Ok();
  }
  Status CopyParams(float* out) override;
  Status LoadParams(const float* in) override;
  float* State(int b, int64_t* lo, int64_t* hi) override {
    *lo = geo_.owned_begin(b);
    *hi = *lo + geo_.chunk(b);
    return Domain(b);
  }
  void StateLoaded() override {
    for (Tensor& g : gathered_) g = Tensor();
  }
  void Drain(Deadline deadline) override {
    for (HandlePtr& h : pending_) {
      if (h && !dp_->Abandoned()) (void)h->Wait(deadline);  // abandoned: kept by the destructor
    }
  }

 private:
  Status StartGather(int b);

  const BucketGeometry& geo_;
  Communicator* dp_;
  Tensor shard_;
  std::vector<Tensor> gathered_;    // per bucket: the full parameters while in use
  std::vector<HandlePtr> pending_;  // running all-gather per bucket
};

Status GatheredParams::Acquire(int b, int next) {
  LOOM_RETURN_IF_ERROR(StartGather(b));
  if (pending_[b]) {
    Status st = pending_[b]->Wait(dp_->DefaultDeadline());
    pending_[b].reset();
    LOOM_RETURN_IF_ERROR(st);
  }
  if (next >= 0) LOOM_RETURN_IF_ERROR(StartGather(next));
  return Status::Ok();
}

Status GatheredParams::Release(int b) {
  if (geo_.persistent(b)) return Status::Ok();
  if (pending_[b]) {  // never free memory a transfer is still writing
    LOOM_RETURN_IF_ERROR(pending_[b]->Wait(dp_->DefaultDeadline()));
    pending_[b].reset();
  }
  gathered_[b] = Tensor();
  return Status::Ok();
}

Status GatheredParams::StartGather(int b) {
  if (b < 0 || gathered_[b].defined()) return Status::Ok();
  LOOM_ASSIGN_OR_RETURN(gathered_[b], Tensor::Zeros({geo_.padded(b)}, DType::kF32, MemTag::kComm));
  pending_[b] = dp_->AllGatherAsync(Domain(b), gathered_[b].data<float>(), geo_.chunk(b));
  return Status::Ok();
}

Status GatheredParams::CopyParams(float* out) {
  const ParamLayout& layout = geo_.layout();
  for (int b = 0; b < geo_.num_buckets(); ++b) {
    Tensor tmp;
    KeepIfAbandoned keep(dp_);
    keep(tmp);
    LOOM_ASSIGN_OR_RETURN(tmp, Tensor::Zeros({geo_.padded(b)}, DType::kF32, MemTag::kComm));
    LOOM_RETURN_IF_ERROR(dp_->AllGather(Domain(b), tmp.data<float>(), geo_.chunk(b)));
    std::memcpy(out + layout.buckets[b].first, tmp.data<float>(),
                static_cast<size_t>(geo_.size(b)) * 4);
  }
  return Status::Ok();
}

Status GatheredParams::LoadParams(const float* in) {
  const ParamLayout& layout = geo_.layout();
  for (int b = 0; b < geo_.num_buckets(); ++b) {
    const int64_t begin = layout.buckets[b].first, size = geo_.size(b);
    float* dst = Domain(b);
    const int64_t lo = geo_.owned_begin(b);
    for (int64_t i = 0; i < geo_.chunk(b); ++i) dst[i] = lo + i < size ? in[begin + lo + i] : 0.0f;
    gathered_[b] = Tensor();
  }
  return Status::Ok();
}

Result<Tensor> ParamBuffer(int64_t n) {
  return Tensor::Zeros({n}, DType::kF32, MemTag::kParams);
}

}  // namespace

Result<std::unique_ptr<ParamBuffers>> MakeReplicatedParams(const BucketGeometry& geo,
                                                           Communicator* dp) {
  LOOM_ASSIGN_OR_RETURN(Tensor params, ParamBuffer(geo.full_size()));
  return std::unique_ptr<ParamBuffers>(new ReplicatedParams(geo, dp, std::move(params)));
}

Result<std::unique_ptr<ParamBuffers>> MakeRegatheredParams(const BucketGeometry& geo,
                                                           Communicator* dp, bool overlap) {
  LOOM_ASSIGN_OR_RETURN(Tensor params, ParamBuffer(geo.full_size()));
  return std::unique_ptr<ParamBuffers>(new RegatheredParams(geo, dp, std::move(params), overlap));
}

Result<std::unique_ptr<ParamBuffers>> MakeGatheredParams(const BucketGeometry& geo,
                                                         Communicator* dp) {
  LOOM_ASSIGN_OR_RETURN(Tensor shard, ParamBuffer(geo.shard_size()));
  return std::unique_ptr<ParamBuffers>(new GatheredParams(geo, dp, std::move(shard)));
}

}  // namespace loom
