// The GPT model of one process: flat parameter and gradient buffers, explicit forward and backward
// per layer (no autograd, as in llm.c), and an activation plan that says what each layer keeps
// for its backward.
//
// Activation plan, per layer and micro-batch of N = B*T tokens (floats):
//   kept (recompute = none): ln_1 out N*C, LN stats 2N (x2 norms), qkv 3NC, attention out NC,
//     attention lse B*H*T, residual after attention NC, ln_2 out NC, fc 4NC, gelu 4NC   (~16NC)
//   kept (recompute = full): only the layer input (NC); the rest is recomputed in the backward.
// The layer inputs (residual stream) are kept in both cases.
//
// Usage: ForwardLoss on a micro-batch, then Backward(dloss) accumulates into grads(); repeat for
// every micro-batch, then the optimizer consumes grads(). Not thread-safe (one caller).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "worker/model_config.h"

namespace loom {

enum class Recompute { kNone, kFull };

struct ModelRuntime {
  int64_t micro_batch = 1;  // sequences per forward/backward
  int64_t seq = 0;          // tokens per sequence (<= max_seq); 0 means max_seq
  Recompute recompute = Recompute::kNone;
  int64_t vocab_chunk = 4096;  // vocabulary rows per cross-entropy chunk
  int64_t attn_block_q = 64;   // query rows per attention block
  int64_t attn_block_k = 256;  // key/value rows per attention block
};

class Gpt {
 public:
  static Result<std::unique_ptr<Gpt>> Create(const ModelConfig& config, const ModelRuntime& rt);
  ~Gpt();

  const ModelConfig& config() const { return config_; }
  const ModelRuntime& runtime() const { return rt_; }
  const ParamLayout& layout() const { return layout_; }
  float* params() { return params_.data<float>(); }
  float* grads() { return grads_.data<float>(); }
  int64_t num_params() const { return layout_.total; }

  void InitWeights(uint64_t seed) { InitParams(layout_, seed, params()); }
  void ZeroGrads();

  // Forward over tokens/targets [b, t] (b <= micro_batch, t <= seq), keeping activations for
  // Backward. Returns the sum of the per-token losses (not the mean).
  double ForwardLoss(const int32_t* tokens, const int32_t* targets, int64_t b, int64_t t);
  // Backward of the last ForwardLoss; every token's loss has weight `dloss` (1/total tokens of the
  // global batch for a mean). Accumulates into grads().
  void Backward(float dloss);
  // Logits [vocab] of the last position of a single sequence of length t (for sampling).
  void ForwardLastLogits(const int32_t* tokens, int64_t t, float* logits);

  // Bytes of activations kept per layer for one micro-batch under the current plan.
  int64_t ActivationBytesPerLayer() const;

 private:
  struct LayerActs;
  Gpt(const ModelConfig& config, const ModelRuntime& rt);
  Status Allocate();
  void Forward(const int32_t* tokens, int64_t b, int64_t t);
  void LayerForward(int layer, const float* x, float* out, LayerActs& a);
  void LayerBackward(int layer, const float* x, LayerActs& a, float* dresid);

  ModelConfig config_;
  ModelRuntime rt_;
  ParamLayout layout_;
  Tensor params_, grads_;
  std::vector<Tensor> resid_;  // layers + 1 residual-stream tensors [N, C]
  std::vector<std::unique_ptr<LayerActs>> acts_;  // per layer, or one shared when recomputing
  Tensor lnf_, lnf_mean_, lnf_rstd_, ce_max_, ce_sum_, ce_target_, ce_lse_, ce_chunk_, ce_dloss_;
  Tensor dresid_, dln_, datt_, dqkv_, dfc_;
  std::vector<int32_t> tokens_, targets_;
  int64_t cur_b_ = 0, cur_t_ = 0;
};

}  // namespace loom
