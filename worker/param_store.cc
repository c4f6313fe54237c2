// ShardedParamStore: ZeRO stages 0-3 over per-bucket padded flat buffers.
//
// Invariants: bucket b occupies `padded[b]` = ceil(size / D) * D elements (D = dp size) starting
// at `pbase[b]` of the full buffers; dp rank R owns the chunk [R*chunk[b], (R+1)*chunk[b]) of
// every bucket, stored at `sbase[b]` of the shard buffers. Padding elements are zero and never
// updated.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/kernels/elementwise.h"
#include "core/kernels/optimizer.h"
#include "core/tensor.h"
#include "worker/param_store.h"

namespace loom {
namespace {

// Part of one parameter inside a rank's chunk of a bucket.
struct Segment {
  int param;            // index into layout.params
  int64_t param_begin;  // first element of the parameter covered
  int64_t length;
  int64_t chunk_offset;  // offset inside the rank's chunk of the bucket
};

class ShardedParamStore : public ParamStore {
 public:
  ShardedParamStore(const ParamLayout& layout, const AdamWConfig& cfg, const ParamStoreOptions& o)
      : layout_(layout), cfg_(cfg), opt_(o) {
    dp_size_ = o.dp ? o.dp->size() : 1;
    dp_rank_ = o.dp ? o.dp->rank() : 0;
    tp_rank_ = o.tp ? o.tp->rank() : 0;
    if (dp_size_ == 1) opt_.zero = 0;  // nothing to shard
  }

  // Buffers must outlive every transfer that reads or writes them.
  // One deadline for all of them: after a failure every outstanding transfer may be stuck, and
  // waiting for each in turn would multiply the communicator's timeout by their number.
  ~ShardedParamStore() override {
    if (opt_.dp == nullptr) return;
    const Deadline deadline = opt_.dp->DefaultDeadline();
    for (auto* list : {&pending_, &gather_pending_}) {
      for (HandlePtr& h : *list) {
        if (h && !opt_.dp->Abandoned()) (void)h->Wait(deadline);  // abandoned: kept below
      }
    }
    // A transfer that timed out (here or before) may still write into the buffers: keep them.
    KeepIfAbandoned keep(opt_.dp);
    for (Tensor* t : {&params_, &pshard_, &grads_, &gshard_}) keep(*t);
    for (std::vector<Tensor>* list : {&gathered_, &gtemp_, &rs_out_}) keep(*list);
  }

  Status Init() {
    const int nb = layout_.num_buckets();
    int64_t full = 0, shard = 0;
    for (int b = 0; b < nb; ++b) {
      const int64_t size = layout_.buckets[b].second - layout_.buckets[b].first;
      const int64_t padded = (size + dp_size_ - 1) / dp_size_ * dp_size_;
      pbase_.push_back(full);
      padded_.push_back(padded);
      chunk_.push_back(padded / dp_size_);
      sbase_.push_back(shard);
      full += padded;
      shard += padded / dp_size_;
    }
    const int zero = opt_.zero;
    if (zero < 3) {
      LOOM_ASSIGN_OR_RETURN(params_, Tensor::Zeros({full}, DType::kF32, MemTag::kParams));
    } else {
      LOOM_ASSIGN_OR_RETURN(pshard_, Tensor::Zeros({shard}, DType::kF32, MemTag::kParams));
    }
    if (zero < 2) {
      LOOM_ASSIGN_OR_RETURN(grads_, Tensor::Zeros({full}, DType::kF32, MemTag::kGrads));
    }
    if (zero >= 1) {
      LOOM_ASSIGN_OR_RETURN(gshard_, Tensor::Zeros({shard}, DType::kF32, MemTag::kGrads));
    }
    const int64_t opt_n = zero == 0 ? full : shard;
    LOOM_ASSIGN_OR_RETURN(m_, Tensor::Zeros({opt_n}, DType::kF32, MemTag::kOptimizer));
    LOOM_ASSIGN_OR_RETURN(v_, Tensor::Zeros({opt_n}, DType::kF32, MemTag::kOptimizer));
    // Embedding and final-norm buckets (no layer parameters) stay gathered for the whole step.
    persistent_.assign(nb, true);
    for (const ParamInfo& p : layout_.params) {
      if (p.layer >= 0) persistent_[p.bucket] = false;
    }
    gathered_.resize(nb);
    gather_pending_.resize(nb);
    gtemp_.resize(nb);
    rs_out_.resize(nb);
    pending_.resize(nb);
    // Segments of the optimizer's domain: the whole bucket (stage 0) or this rank's chunk.
    segments_.resize(nb);
    for (size_t k = 0; k < layout_.params.size(); ++k) {
      const ParamInfo& p = layout_.params[k];
      const int b = p.bucket;
      const int64_t lo = zero == 0 ? 0 : dp_rank_ * chunk_[b];
      const int64_t hi = zero == 0 ? padded_[b] : lo + chunk_[b];
      const int64_t begin = std::max(lo, p.bucket_offset);
      const int64_t end = std::min(hi, p.bucket_offset + p.numel());
      if (begin < end) {
        segments_[b].push_back(
            {static_cast<int>(k), begin - p.bucket_offset, end - begin, begin - lo});
      }
    }
    return Status::Ok();
  }

  float* Params(int b) override {
    if (opt_.zero == 3) return gathered_[b].data<float>();
    return params_.data<float>() + pbase_[b];
  }

  float* Grads(int b) override {
    if (opt_.zero < 2) return grads_.data<float>() + pbase_[b];
    if (pending_[b]) {
      // The previous micro-batch's buffer is still being reduce-scattered: finish that first so
      // this micro-batch starts from a fresh, zeroed buffer. Errors surface at GradsReady/Step.
      Status st = FinishReduction(b);
      if (!st.ok() && deferred_.ok()) deferred_ = st;
    }
    if (!gtemp_[b].defined()) {
      auto t = Tensor::Zeros({padded_[b]}, DType::kF32, MemTag::kComm);
      if (!t.ok()) return nullptr;
      gtemp_[b] = std::move(*t);
    }
    return gtemp_[b].data<float>();
  }

  Status AcquireParams(int b, int next) override {
    if (opt_.zero == 1 || opt_.zero == 2) return WaitGather(b);  // overlapped with the forward
    if (opt_.zero != 3) return Status::Ok();
    LOOM_RETURN_IF_ERROR(StartGather(b));
    if (gather_pending_[b]) {
      Status st = gather_pending_[b]->Wait(opt_.dp->DefaultDeadline());
      gather_pending_[b].reset();
      LOOM_RETURN_IF_ERROR(st);
    }
    if (next >= 0) LOOM_RETURN_IF_ERROR(StartGather(next));
    return Status::Ok();
  }

  Status ReleaseParams(int b) override {
    if (opt_.zero != 3 || persistent_[b]) return Status::Ok();
    if (gather_pending_[b]) {  // never free memory a transfer is still writing
      LOOM_RETURN_IF_ERROR(gather_pending_[b]->Wait(opt_.dp->DefaultDeadline()));
      gather_pending_[b].reset();
    }
    gathered_[b] = Tensor();
    return Status::Ok();
  }

  Status BeginStep() override {
    if (grads_.defined()) std::memset(grads_.raw(), 0, grads_.nbytes());
    if (gshard_.defined()) std::memset(gshard_.raw(), 0, gshard_.nbytes());
    return Status::Ok();
  }

  Status GradsReady(int b, bool last) override {
    LOOM_RETURN_IF_ERROR(deferred_);
    const bool per_micro = opt_.zero >= 2;
    if (!per_micro && !last) return Status::Ok();  // accumulate locally, reduce once
    LOOM_RETURN_IF_ERROR(SumSequenceParallelGrads(b));
    if (dp_size_ == 1) return Status::Ok();
    LOOM_RETURN_IF_ERROR(FinishReduction(b));  // the previous micro-batch's, if any
    float* g = Grads(b);
    if (g == nullptr) return Internal("out of memory for the gradient bucket " + std::to_string(b));
    if (opt_.zero == 0) {
      pending_[b] = opt_.dp->AllReduceAsync(g, padded_[b], ReduceOp::kSum);
    } else if (opt_.zero == 1) {
      pending_[b] = opt_.dp->ReduceScatterAsync(g, gshard_.data<float>() + sbase_[b], chunk_[b]);
    } else {
      LOOM_ASSIGN_OR_RETURN(rs_out_[b], Tensor::Zeros({chunk_[b]}, DType::kF32, MemTag::kComm));
      pending_[b] = opt_.dp->ReduceScatterAsync(g, rs_out_[b].data<float>(), chunk_[b]);
    }
    if (!opt_.overlap) return FinishReduction(b);
    return Status::Ok();
  }

  Result<double> Step(double lr) override {
    LOOM_RETURN_IF_ERROR(deferred_);
    if (opt_.zero == 1 || opt_.zero == 2) LOOM_RETURN_IF_ERROR(WaitAllGathers());
    for (int b = 0; b < layout_.num_buckets(); ++b) LOOM_RETURN_IF_ERROR(FinishReduction(b));
    double sumsq = 0;
    ForEachSegment([&](const ParamInfo& p, float*, float* g, float*, float*, int64_t n) {
      if (p.shard == ShardKind::kReplicated && tp_rank_ != 0) return;  // counted by tp rank 0
      sumsq += SumSquares(g, n);
    });
    float partial = static_cast<float>(sumsq);
    if (opt_.zero >= 1 && opt_.dp) LOOM_RETURN_IF_ERROR(opt_.dp->AllReduce(&partial, 1));
    if (opt_.tp && opt_.tp->size() > 1) LOOM_RETURN_IF_ERROR(opt_.tp->AllReduce(&partial, 1));
    if (opt_.pp && opt_.pp->size() > 1) LOOM_RETURN_IF_ERROR(opt_.pp->AllReduce(&partial, 1));
    const double norm = std::sqrt(static_cast<double>(partial));
    const double clip = ClipScale(norm, cfg_.grad_clip);
    ++step_;
    ForEachSegment([&](const ParamInfo& p, float* w, float* g, float* m, float* v, int64_t n) {
      if (clip < 1.0) Scale(g, static_cast<float>(clip), n);
      AdamWParams ap{static_cast<float>(lr),
                     static_cast<float>(cfg_.beta1),
                     static_cast<float>(cfg_.beta2),
                     static_cast<float>(cfg_.eps),
                     p.decay ? static_cast<float>(cfg_.weight_decay) : 0.0f,
                     step_};
      AdamWUpdate(w, g, m, v, n, ap);
    });
    if (opt_.zero == 1 || opt_.zero == 2) {
      // Every rank updated its chunk in place; gather the chunks back into full buckets in the
      // background: AcquireParams waits for each bucket just before the next forward uses it.
      for (int b = 0; b < layout_.num_buckets(); ++b) {
        float* base = params_.data<float>() + pbase_[b];
        gather_pending_[b] = opt_.dp->AllGatherAsync(base + dp_rank_ * chunk_[b], base, chunk_[b]);
        if (!opt_.overlap) LOOM_RETURN_IF_ERROR(WaitGather(b));
      }
    } else if (opt_.zero == 3) {
      for (int b = 0; b < layout_.num_buckets(); ++b) {
        if (persistent_[b]) gathered_[b] = Tensor();  // stale: re-gathered by the next forward
      }
    }
    return norm;
  }

  Status CopyParams(float* out) override {
    if (opt_.zero == 1 || opt_.zero == 2) LOOM_RETURN_IF_ERROR(WaitAllGathers());
    for (int b = 0; b < layout_.num_buckets(); ++b) {
      const int64_t size = layout_.buckets[b].second - layout_.buckets[b].first;
      const float* src = nullptr;
      Tensor tmp;
      KeepIfAbandoned keep(opt_.dp);
      keep(tmp);
      if (opt_.zero == 3) {
        LOOM_ASSIGN_OR_RETURN(tmp, Tensor::Zeros({padded_[b]}, DType::kF32, MemTag::kComm));
        LOOM_RETURN_IF_ERROR(
            opt_.dp->AllGather(pshard_.data<float>() + sbase_[b], tmp.data<float>(), chunk_[b]));
        src = tmp.data<float>();
      } else {
        src = params_.data<float>() + pbase_[b];
      }
      std::memcpy(out + layout_.buckets[b].first, src, static_cast<size_t>(size) * 4);
    }
    return Status::Ok();
  }

  Status LoadParams(const float* in) override {
    if (opt_.zero == 1 || opt_.zero == 2) LOOM_RETURN_IF_ERROR(WaitAllGathers());
    for (int b = 0; b < layout_.num_buckets(); ++b) {
      const int64_t begin = layout_.buckets[b].first;
      const int64_t size = layout_.buckets[b].second - begin;
      if (opt_.zero == 3) {
        float* dst = pshard_.data<float>() + sbase_[b];
        const int64_t lo = dp_rank_ * chunk_[b];
        for (int64_t i = 0; i < chunk_[b]; ++i) dst[i] = lo + i < size ? in[begin + lo + i] : 0.0f;
        gathered_[b] = Tensor();
      } else {
        std::memcpy(params_.data<float>() + pbase_[b], in + begin, static_cast<size_t>(size) * 4);
      }
    }
    return Status::Ok();
  }

  float* StateData(StateKind state, int b, int64_t* lo, int64_t* hi) override {
    const bool sharded = state == StateKind::kParam ? opt_.zero == 3 : opt_.zero >= 1;
    *lo = sharded ? dp_rank_ * chunk_[b] : 0;
    *hi = sharded ? *lo + chunk_[b] : padded_[b];
    if (state == StateKind::kParam) {
      return sharded ? pshard_.data<float>() + sbase_[b] : params_.data<float>() + pbase_[b];
    }
    Tensor& t = state == StateKind::kExpAvg ? m_ : v_;
    return t.data<float>() + (sharded ? sbase_[b] : pbase_[b]);
  }

  Status Quiesce() override {
    if (opt_.zero == 1 || opt_.zero == 2) return WaitAllGathers();
    return Status::Ok();
  }

  void StateLoaded() override {
    for (Tensor& g : gathered_) g = Tensor();
  }

  int64_t optimizer_steps() const override { return step_; }
  void set_optimizer_steps(int64_t steps) override { step_ = steps; }

  Status CopyGrads(float* out) override {
    if (opt_.zero != 0) return FailedPrecondition("CopyGrads needs ZeRO stage 0");
    for (int b = 0; b < layout_.num_buckets(); ++b) {
      const int64_t size = layout_.buckets[b].second - layout_.buckets[b].first;
      std::memcpy(out + layout_.buckets[b].first, grads_.data<float>() + pbase_[b],
                  static_cast<size_t>(size) * 4);
    }
    return Status::Ok();
  }

 private:
  Status WaitGather(int b) {
    if (!gather_pending_[b]) return Status::Ok();
    Status st = gather_pending_[b]->Wait(opt_.dp->DefaultDeadline());
    gather_pending_[b].reset();
    return st;
  }

  Status WaitAllGathers() {
    for (int b = 0; b < layout_.num_buckets(); ++b) LOOM_RETURN_IF_ERROR(WaitGather(b));
    return Status::Ok();
  }

  Status StartGather(int b) {
    if (b < 0 || gathered_[b].defined()) return Status::Ok();
    LOOM_ASSIGN_OR_RETURN(gathered_[b], Tensor::Zeros({padded_[b]}, DType::kF32, MemTag::kComm));
    gather_pending_[b] = opt_.dp->AllGatherAsync(pshard_.data<float>() + sbase_[b],
                                                 gathered_[b].data<float>(), chunk_[b]);
    return Status::Ok();
  }

  Status FinishReduction(int b) {
    if (!pending_[b]) return Status::Ok();
    Status st = pending_[b]->Wait(opt_.dp->DefaultDeadline());
    pending_[b].reset();
    LOOM_RETURN_IF_ERROR(st);
    if (opt_.zero >= 2) {
      Axpy(gshard_.data<float>() + sbase_[b], rs_out_[b].data<float>(), 1.0f, chunk_[b]);
      rs_out_[b] = Tensor();
      gtemp_[b] = Tensor();
    }
    return Status::Ok();
  }

  // Under sequence parallelism each TP rank saw only its tokens in the replicated (LayerNorm,
  // bias, position) parameters' regions: their gradients are partial sums across tp.
  Status SumSequenceParallelGrads(int b) {
    if (!opt_.sp || !opt_.tp || opt_.tp->size() == 1) return Status::Ok();
    float* g = Grads(b);
    std::vector<float> packed;
    KeepIfAbandoned keep(opt_.tp);
    keep(packed);
    for (const ParamInfo& p : layout_.params) {
      if (p.bucket == b && p.shard == ShardKind::kReplicated) {
        packed.insert(packed.end(), g + p.bucket_offset, g + p.bucket_offset + p.numel());
      }
    }
    if (packed.empty()) return Status::Ok();
    LOOM_RETURN_IF_ERROR(opt_.tp->AllReduce(packed.data(), static_cast<int64_t>(packed.size())));
    size_t at = 0;
    for (const ParamInfo& p : layout_.params) {
      if (p.bucket == b && p.shard == ShardKind::kReplicated) {
        std::copy(packed.begin() + at, packed.begin() + at + p.numel(), g + p.bucket_offset);
        at += p.numel();
      }
    }
    return Status::Ok();
  }

  // fn(param, weights, grads, m, v, n) over every segment this rank updates.
  template <typename Fn>
  void ForEachSegment(Fn fn) {
    for (int b = 0; b < layout_.num_buckets(); ++b) {
      for (const Segment& s : segments_[b]) {
        const ParamInfo& p = layout_.params[s.param];
        float *w, *g, *m, *v;
        if (opt_.zero == 0) {
          const int64_t at = pbase_[b] + s.chunk_offset;
          w = params_.data<float>() + at;
          g = grads_.data<float>() + at;
          m = m_.data<float>() + at;
          v = v_.data<float>() + at;
        } else {
          const int64_t at = sbase_[b] + s.chunk_offset;
          w = opt_.zero == 3
                  ? pshard_.data<float>() + at
                  : params_.data<float>() + pbase_[b] + dp_rank_ * chunk_[b] + s.chunk_offset;
          g = gshard_.data<float>() + at;
          m = m_.data<float>() + at;
          v = v_.data<float>() + at;
        }
        fn(p, w, g, m, v, s.length);
      }
    }
  }

  const ParamLayout& layout_;
  AdamWConfig cfg_;
  ParamStoreOptions opt_;
  int dp_size_ = 1, dp_rank_ = 0, tp_rank_ = 0;
  int64_t step_ = 0;
  Status deferred_;  // a failed reduction noticed where no Status could be returned
  std::vector<int64_t> pbase_, padded_, chunk_, sbase_;
  std::vector<bool> persistent_;
  std::vector<std::vector<Segment>> segments_;
  Tensor params_, pshard_, grads_, gshard_, m_, v_;
  std::vector<Tensor> gathered_, gtemp_, rs_out_;
  std::vector<HandlePtr> gather_pending_, pending_;
};

}  // namespace

Result<std::unique_ptr<ParamStore>> MakeParamStore(const ParamLayout& layout,
                                                   const AdamWConfig& cfg,
                                                   const ParamStoreOptions& opt) {
  if (opt.zero < 0 || opt.zero > 3) return InvalidArgument("ZeRO stage must be 0..3");
  auto store = std::make_unique<ShardedParamStore>(layout, cfg, opt);
  LOOM_RETURN_IF_ERROR(store->Init());
  return std::unique_ptr<ParamStore>(std::move(store));
}

}  // namespace loom
