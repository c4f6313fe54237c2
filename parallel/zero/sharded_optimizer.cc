// Global norm, clipping and AdamW over this rank's segments.
#include "parallel/zero/sharded_optimizer.h"

#include <cmath>

#include "core/kernels/optimizer.h"

namespace loom {

Result<std::unique_ptr<ShardedOptimizer>> ShardedOptimizer::Create(const BucketGeometry& geo,
                                                                   const AdamWConfig& cfg,
                                                                   NormGroups groups) {
  const int64_t n = geo.sharded() ? geo.shard_size() : geo.full_size();
  LOOM_ASSIGN_OR_RETURN(Tensor m, Tensor::Zeros({n}, DType::kF32, MemTag::kOptimizer));
  LOOM_ASSIGN_OR_RETURN(Tensor v, Tensor::Zeros({n}, DType::kF32, MemTag::kOptimizer));
  return std::unique_ptr<ShardedOptimizer>(
      new ShardedOptimizer(geo, cfg, groups, std::move(m), std::move(v)));
}

ShardedOptimizer::ShardedOptimizer(const BucketGeometry& geo, const AdamWConfig& cfg,
                                   NormGroups groups, Tensor m, Tensor v)
    : geo_(geo),
      cfg_(cfg),
      groups_(groups),
      tp_rank_(groups.tp ? groups.tp->rank() : 0),
      m_(std::move(m)),
      v_(std::move(v)) {}

int64_t ShardedOptimizer::DomainBase(int b) const {
  return geo_.sharded() ? geo_.shard_base(b) : geo_.full_base(b);
}

float* ShardedOptimizer::State(StateKind state, int b) {
  Tensor& t = state == StateKind::kExpAvg ? m_ : v_;
  return t.data<float>() + DomainBase(b);
}

template <typename Fn>
void ShardedOptimizer::ForEachSegment(ParamBuffers& params, GradBuckets& grads, Fn fn) {
  for (int b = 0; b < geo_.num_buckets(); ++b) {
    float* w = params.Domain(b);
    float* g = grads.Reduced(b);
    float* m = m_.data<float>() + DomainBase(b);
    float* v = v_.data<float>() + DomainBase(b);
    for (const Segment& s : geo_.segments(b)) {
      const int64_t at = s.chunk_offset;
      fn(geo_.layout().params[s.param], w + at, g + at, m + at, v + at, s.length);
    }
  }
}

Result<double> ShardedOptimizer::Step(double lr, ParamBuffers& params, GradBuckets& grads) {
  double sumsq = 0;
  ForEachSegment(params, grads,
                 [&](const ParamInfo& p, float*, float* g, float*, float*, int64_t n) {
                   if (p.shard == ShardKind::kReplicated && tp_rank_ != 0)
                     return;  // counted by tp rank 0
                   sumsq += SumSquares(g, n);
                 });
  float partial = static_cast<float>(sumsq);
  if (geo_.sharded() && groups_.dp) LOOM_RETURN_IF_ERROR(groups_.dp->AllReduce(&partial, 1));
  if (groups_.tp && groups_.tp->size() > 1)
    LOOM_RETURN_IF_ERROR(groups_.tp->AllReduce(&partial, 1));
  if (groups_.pp && groups_.pp->size() > 1)
    LOOM_RETURN_IF_ERROR(groups_.pp->AllReduce(&partial, 1));
  const double norm = std::sqrt(static_cast<double>(partial));
  const double clip = ClipScale(norm, cfg_.grad_clip);
  ++steps_;
  ForEachSegment(params, grads,
                 [&](const ParamInfo& p, float* w, float* g, float* m, float* v, int64_t n) {
                   if (clip < 1.0) Scale(g, static_cast<float>(clip), n);
                   AdamWParams ap{static_cast<float>(lr),
                                  static_cast<float>(cfg_.beta1),
                                  static_cast<float>(cfg_.beta2),
                                  static_cast<float>(cfg_.eps),
                                  p.decay ? static_cast<float>(cfg_.weight_decay) : 0.0f,
                                  steps_};
                   AdamWUpdate(w, g, m, v, n, ap);
                 });
  return norm;
}

}  // namespace loom
