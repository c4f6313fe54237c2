// GPT forward/backward over the core kernels.
#include "worker/gpt.h"

#include <algorithm>
#include <cstring>

#include "core/kernels/attention.h"
#include "core/kernels/cross_entropy.h"
#include "core/kernels/elementwise.h"
#include "core/kernels/embedding.h"
#include "core/kernels/layernorm.h"
#include "core/kernels/linear.h"

namespace loom {
namespace {

// Indices into a layer's 12 parameters (ParamLayout order).
enum LayerParam { kLn1W, kLn1B, kQkvW, kQkvB, kProjW, kProjB, kLn2W, kLn2B, kFcW, kFcB, kFcProjW,
                  kFcProjB, kNumLayerParams };
constexpr int kFirstLayerParam = 2;  // after wte, wpe

}  // namespace

struct Gpt::LayerActs {
  Tensor ln1, ln1_mean, ln1_rstd, qkv, att, lse, res2, ln2, ln2_mean, ln2_rstd, fc, gelu;
};

Gpt::Gpt(const ModelConfig& config, const ModelRuntime& rt)
    : config_(config), rt_(rt), layout_(ParamLayout::ForModel(config)) {}

Gpt::~Gpt() = default;

Result<std::unique_ptr<Gpt>> Gpt::Create(const ModelConfig& config, const ModelRuntime& rt) {
  LOOM_RETURN_IF_ERROR(config.Validate());
  ModelRuntime r = rt;
  if (r.seq == 0) r.seq = config.max_seq;
  if (r.seq > config.max_seq || r.micro_batch <= 0 || r.attn_block_q <= 0 || r.attn_block_k <= 0 || r.vocab_chunk <= 0) {
    return InvalidArgument("runtime: need 0 < seq <= max_seq, micro_batch > 0, attention blocks > 0, "
                           "vocab_chunk > 0");
  }
  std::unique_ptr<Gpt> g(new Gpt(config, r));
  LOOM_RETURN_IF_ERROR(g->Allocate());
  return g;
}

Status Gpt::Allocate() {
  const int64_t n = rt_.micro_batch * rt_.seq, c = config_.hidden, f = config_.ffn();
  const int64_t lse_n = rt_.micro_batch * config_.heads * rt_.seq;
  LOOM_ASSIGN_OR_RETURN(params_, Tensor::Zeros({layout_.total}, DType::kF32, MemTag::kParams));
  LOOM_ASSIGN_OR_RETURN(grads_, Tensor::Zeros({layout_.total}, DType::kF32, MemTag::kGrads));
  auto act = [](Shape s) { return Tensor::Zeros(std::move(s), DType::kF32, MemTag::kActivations); };
  for (int l = 0; l <= config_.layers; ++l) {
    LOOM_ASSIGN_OR_RETURN(Tensor t, act({n, c}));
    resid_.push_back(std::move(t));
  }
  const int sets = rt_.recompute == Recompute::kFull ? 1 : static_cast<int>(config_.layers);
  for (int i = 0; i < sets; ++i) {
    auto a = std::make_unique<LayerActs>();
    LOOM_ASSIGN_OR_RETURN(a->ln1, act({n, c}));
    LOOM_ASSIGN_OR_RETURN(a->ln1_mean, act({n}));
    LOOM_ASSIGN_OR_RETURN(a->ln1_rstd, act({n}));
    LOOM_ASSIGN_OR_RETURN(a->qkv, act({n, 3 * c}));
    LOOM_ASSIGN_OR_RETURN(a->att, act({n, c}));
    LOOM_ASSIGN_OR_RETURN(a->lse, act({lse_n}));
    LOOM_ASSIGN_OR_RETURN(a->res2, act({n, c}));
    LOOM_ASSIGN_OR_RETURN(a->ln2, act({n, c}));
    LOOM_ASSIGN_OR_RETURN(a->ln2_mean, act({n}));
    LOOM_ASSIGN_OR_RETURN(a->ln2_rstd, act({n}));
    LOOM_ASSIGN_OR_RETURN(a->fc, act({n, f}));
    LOOM_ASSIGN_OR_RETURN(a->gelu, act({n, f}));
    acts_.push_back(std::move(a));
  }
  const int64_t chunk = std::min(rt_.vocab_chunk, config_.vocab);
  LOOM_ASSIGN_OR_RETURN(lnf_, act({n, c}));
  LOOM_ASSIGN_OR_RETURN(lnf_mean_, act({n}));
  LOOM_ASSIGN_OR_RETURN(lnf_rstd_, act({n}));
  LOOM_ASSIGN_OR_RETURN(ce_max_, act({n}));
  LOOM_ASSIGN_OR_RETURN(ce_sum_, act({n}));
  LOOM_ASSIGN_OR_RETURN(ce_target_, act({n}));
  LOOM_ASSIGN_OR_RETURN(ce_lse_, act({n}));
  LOOM_ASSIGN_OR_RETURN(ce_dloss_, act({n}));
  LOOM_ASSIGN_OR_RETURN(ce_chunk_, act({n, chunk}));
  LOOM_ASSIGN_OR_RETURN(dresid_, act({n, c}));
  LOOM_ASSIGN_OR_RETURN(dln_, act({n, c}));
  LOOM_ASSIGN_OR_RETURN(datt_, act({n, c}));
  LOOM_ASSIGN_OR_RETURN(dqkv_, act({n, 3 * c}));
  LOOM_ASSIGN_OR_RETURN(dfc_, act({n, f}));
  tokens_.resize(static_cast<size_t>(n));
  targets_.resize(static_cast<size_t>(n));
  return Status::Ok();
}

void Gpt::ZeroGrads() { std::memset(grads(), 0, static_cast<size_t>(layout_.total) * 4); }

int64_t Gpt::ActivationBytesPerLayer() const {
  const int64_t n = rt_.micro_batch * rt_.seq, c = config_.hidden;
  if (rt_.recompute == Recompute::kFull) return n * c * 4;
  return (n * c * (1 + 1 + 3 + 1 + 1 + 1 + 4 + 4) + 4 * n + rt_.micro_batch * config_.heads * rt_.seq) * 4;
}

void Gpt::LayerForward(int layer, const float* x, float* out, LayerActs& a) {
  const int64_t n = cur_b_ * cur_t_, c = config_.hidden, f = config_.ffn();
  const ParamInfo* p = &layout_.params[kFirstLayerParam + layer * kNumLayerParams];
  auto w = [&](int i) { return params() + p[i].offset; };
  LayerNormForward(a.ln1.data<float>(), a.ln1_mean.data<float>(), a.ln1_rstd.data<float>(), x,
                   w(kLn1W), w(kLn1B), n, c);
  LinearForward(a.qkv.data<float>(), a.ln1.data<float>(), w(kQkvW), w(kQkvB), n, c, 3 * c);
  AttentionShape as{cur_b_, cur_t_, config_.heads, config_.head_dim(), rt_.attn_block_q,
                    rt_.attn_block_k};
  AttentionForward(a.att.data<float>(), a.lse.data<float>(), a.qkv.data<float>(), as);
  LinearForward(a.res2.data<float>(), a.att.data<float>(), w(kProjW), w(kProjB), n, c, c);
  ResidualForward(a.res2.data<float>(), a.res2.data<float>(), x, n * c);
  LayerNormForward(a.ln2.data<float>(), a.ln2_mean.data<float>(), a.ln2_rstd.data<float>(),
                   a.res2.data<float>(), w(kLn2W), w(kLn2B), n, c);
  LinearForward(a.fc.data<float>(), a.ln2.data<float>(), w(kFcW), w(kFcB), n, c, f);
  GeluForward(a.gelu.data<float>(), a.fc.data<float>(), n * f);
  LinearForward(out, a.gelu.data<float>(), w(kFcProjW), w(kFcProjB), n, f, c);
  ResidualForward(out, out, a.res2.data<float>(), n * c);
}

// dresid holds d(out) on entry and d(x) on return.
void Gpt::LayerBackward(int layer, const float* x, LayerActs& a, float* dresid) {
  const int64_t n = cur_b_ * cur_t_, c = config_.hidden, f = config_.ffn();
  const ParamInfo* p = &layout_.params[kFirstLayerParam + layer * kNumLayerParams];
  auto w = [&](int i) { return params() + p[i].offset; };
  auto g = [&](int i) { return grads() + p[i].offset; };
  float* dfc = dfc_.data<float>();
  float* dln = dln_.data<float>();
  // MLP: out = res2 + c_proj(gelu(c_fc(ln_2(res2))))
  LinearBackward(dfc, g(kFcProjW), g(kFcProjB), dresid, a.gelu.data<float>(), w(kFcProjW), n, f, c);
  GeluBackward(dfc, a.fc.data<float>(), dfc, n * f);
  LinearBackward(dln, g(kFcW), g(kFcB), dfc, a.ln2.data<float>(), w(kFcW), n, c, f);
  LayerNormBackward(dresid, g(kLn2W), g(kLn2B), dln, a.res2.data<float>(), w(kLn2W),
                    a.ln2_mean.data<float>(), a.ln2_rstd.data<float>(), n, c);
  // Attention: res2 = x + c_proj(attn(c_attn(ln_1(x))))
  float* datt = datt_.data<float>();
  LinearBackward(datt, g(kProjW), g(kProjB), dresid, a.att.data<float>(), w(kProjW), n, c, c);
  AttentionShape as{cur_b_, cur_t_, config_.heads, config_.head_dim(), rt_.attn_block_q,
                    rt_.attn_block_k};
  AttentionBackward(dqkv_.data<float>(), datt, a.qkv.data<float>(), a.att.data<float>(),
                    a.lse.data<float>(), as);
  LinearBackward(dln, g(kQkvW), g(kQkvB), dqkv_.data<float>(), a.ln1.data<float>(), w(kQkvW), n, c,
                 3 * c);
  LayerNormBackward(dresid, g(kLn1W), g(kLn1B), dln, x, w(kLn1W), a.ln1_mean.data<float>(),
                    a.ln1_rstd.data<float>(), n, c);
}

void Gpt::Forward(const int32_t* tokens, int64_t b, int64_t t) {
  cur_b_ = b;
  cur_t_ = t;
  const int64_t n = b * t, c = config_.hidden;
  std::copy(tokens, tokens + n, tokens_.begin());
  EmbeddingShape es{n, t, c, 0, config_.vocab};
  EmbeddingForward(resid_[0].data<float>(), tokens_.data(), nullptr, params() + layout_.params[0].offset,
                   params() + layout_.params[1].offset, es);
  for (int l = 0; l < config_.layers; ++l) {
    LayerActs& a = *acts_[rt_.recompute == Recompute::kFull ? 0 : l];
    LayerForward(l, resid_[l].data<float>(), resid_[l + 1].data<float>(), a);
  }
  const ParamInfo* lnf = &layout_.params[layout_.params.size() - 2];
  LayerNormForward(lnf_.data<float>(), lnf_mean_.data<float>(), lnf_rstd_.data<float>(),
                   resid_[config_.layers].data<float>(), params() + lnf[0].offset,
                   params() + lnf[1].offset, n, c);
}

double Gpt::ForwardLoss(const int32_t* tokens, const int32_t* targets, int64_t b, int64_t t) {
  Forward(tokens, b, t);
  const int64_t n = b * t;
  std::copy(targets, targets + n, targets_.begin());
  VocabShard vs{n, config_.hidden, 0, config_.vocab, config_.vocab, rt_.vocab_chunk};
  CrossEntropyStats(ce_max_.data<float>(), ce_sum_.data<float>(), ce_target_.data<float>(),
                    lnf_.data<float>(), params(), targets_.data(), vs, ce_chunk_.data<float>());
  float* loss = ce_dloss_.data<float>();  // reused as per-token loss here
  CrossEntropyFinish(ce_lse_.data<float>(), loss, ce_max_.data<float>(), ce_sum_.data<float>(),
                     ce_target_.data<float>(), n);
  double total = 0;
  for (int64_t i = 0; i < n; ++i) total += loss[i];
  return total;
}

void Gpt::Backward(float dloss) {
  const int64_t n = cur_b_ * cur_t_, c = config_.hidden;
  float* dl = ce_dloss_.data<float>();
  std::fill(dl, dl + n, dloss);
  float* dlnf = dln_.data<float>();
  std::fill(dlnf, dlnf + n * c, 0.0f);
  VocabShard vs{n, c, 0, config_.vocab, config_.vocab, rt_.vocab_chunk};
  CrossEntropyBackward(dlnf, grads(), lnf_.data<float>(), params(), targets_.data(),
                       ce_lse_.data<float>(), dl, vs, ce_chunk_.data<float>());
  float* dresid = dresid_.data<float>();
  std::fill(dresid, dresid + n * c, 0.0f);
  const ParamInfo* lnf = &layout_.params[layout_.params.size() - 2];
  LayerNormBackward(dresid, grads() + lnf[0].offset, grads() + lnf[1].offset, dlnf,
                    resid_[config_.layers].data<float>(), params() + lnf[0].offset,
                    lnf_mean_.data<float>(), lnf_rstd_.data<float>(), n, c);
  for (int l = static_cast<int>(config_.layers) - 1; l >= 0; --l) {
    LayerActs* a = acts_[0].get();
    if (rt_.recompute == Recompute::kFull) {
      // Recompute this layer's activations from its stored input; the output lands in a scratch
      // (dqkv_ is free at this point and large enough: 3NC >= NC).
      LayerForward(l, resid_[l].data<float>(), dqkv_.data<float>(), *a);
    } else {
      a = acts_[l].get();
    }
    LayerBackward(l, resid_[l].data<float>(), *a, dresid);
  }
  EmbeddingShape es{n, cur_t_, c, 0, config_.vocab};
  EmbeddingBackward(grads() + layout_.params[0].offset, grads() + layout_.params[1].offset, dresid,
                    tokens_.data(), nullptr, es);
}

void Gpt::ForwardLastLogits(const int32_t* tokens, int64_t t, float* logits) {
  Forward(tokens, 1, t);
  const int64_t c = config_.hidden;
  const float* h = lnf_.data<float>() + (t - 1) * c;
  LinearForward<float>(logits, h, params() + layout_.params[0].offset, nullptr, 1, c, config_.vocab);
}

}  // namespace loom
