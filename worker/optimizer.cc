#include "worker/optimizer.h"

#include <cmath>

#include "core/kernels/optimizer.h"

namespace loom {

Result<std::unique_ptr<AdamWOptimizer>> AdamWOptimizer::Create(const ParamLayout& layout,
                                                              const AdamWConfig& config) {
  std::unique_ptr<AdamWOptimizer> opt(new AdamWOptimizer(layout, config));
  LOOM_ASSIGN_OR_RETURN(opt->m_, Tensor::Zeros({layout.total}, DType::kF32, MemTag::kOptimizer));
  LOOM_ASSIGN_OR_RETURN(opt->v_, Tensor::Zeros({layout.total}, DType::kF32, MemTag::kOptimizer));
  return opt;
}

double AdamWOptimizer::Step(float* params, float* grads, double lr) {
  const double norm = std::sqrt(SumSquares(grads, layout_.total));
  const double clip = ClipScale(norm, config_.grad_clip);
  if (clip < 1.0) Scale(grads, static_cast<float>(clip), layout_.total);
  ++step_;
  for (const ParamInfo& p : layout_.params) {
    AdamWParams ap{static_cast<float>(lr), static_cast<float>(config_.beta1),
                   static_cast<float>(config_.beta2), static_cast<float>(config_.eps),
                   p.decay ? static_cast<float>(config_.weight_decay) : 0.0f, step_};
    AdamWUpdate(params + p.offset, grads + p.offset, m() + p.offset, v() + p.offset, p.numel(), ap);
  }
  return norm;
}

}  // namespace loom
