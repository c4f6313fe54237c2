// GPT forward/backward over the core kernels, with Megatron tensor and sequence parallelism.
#include "worker/gpt.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/kernels/attention.h"
#include "core/kernels/cross_entropy.h"
#include "core/kernels/elementwise.h"
#include "core/kernels/embedding.h"
#include "core/kernels/layernorm.h"
#include "core/kernels/linear.h"
#include "parallel/ring_attention.h"

namespace loom {
namespace {

// Indices into a layer's 12 parameters (ParamLayout order).
enum LayerParamSlot {
  kLn1W,
  kLn1B,
  kQkvW,
  kQkvB,
  kProjW,
  kProjB,
  kLn2W,
  kLn2B,
  kFcW,
  kFcB,
  kFcProjW,
  kFcProjB,
  kNumLayerParams
};

// out[i, :] += bias + resid[i, :]
void AddBiasResidual(float* out, const float* bias, const float* resid, int64_t rows, int64_t c) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < rows; ++i) {
    float* o = out + i * c;
    const float* r = resid + i * c;
    for (int64_t j = 0; j < c; ++j) o[j] += bias[j] + r[j];
  }
}

}  // namespace

struct Gpt::LayerActs {
  Tensor ln1, ln1_mean, ln1_rstd, qkv, att, lse, res2, ln2, ln2_mean, ln2_rstd, fc, gelu;
};

// Everything one in-flight micro-batch keeps between its forward and its backward.
struct Gpt::Slot {
  std::vector<Tensor> resid;  // num_layers + 1 residual-stream tensors [Nl, C]; 0 is the input
  std::vector<std::unique_ptr<LayerActs>> acts;  // per layer, or one shared when recomputing
  Tensor lnf, lnf_mean, lnf_rstd, ce_lse;
  std::vector<int32_t> tokens, targets;
  int64_t b = 0, t = 0;
};

Gpt::Gpt(const ModelConfig& config, const ModelRuntime& rt, const ParamLayout& layout,
         ParamStore* store, TensorParallel tp, ChunkSpec chunk, ContextParallel cp)
    : config_(config), rt_(rt), layout_(layout), store_(store), tp_(tp), chunk_(chunk), cp_(cp) {
  const int t = tp_.size();
  cl_ = config_.hidden / t;
  fl_ = config_.ffn() / t;
  hl_ = config_.heads / t;
  vl_ = layout_.padded_vocab / t;
}

Gpt::~Gpt() = default;

Result<std::unique_ptr<Gpt>> Gpt::Create(const ModelConfig& config, const ModelRuntime& rt,
                                         const ParamLayout& layout, ParamStore* store,
                                         TensorParallel tp, ChunkSpec chunk, ContextParallel cp) {
  LOOM_RETURN_IF_ERROR(config.Validate());
  ModelRuntime r = rt;
  if (r.seq == 0) r.seq = config.max_seq;
  if (r.seq > config.max_seq || r.micro_batch <= 0 || r.attn_block_q <= 0 || r.attn_block_k <= 0 ||
      r.vocab_chunk <= 0) {
    return InvalidArgument(
        "runtime: need 0 < seq <= max_seq, micro_batch > 0, attention blocks "
        "> 0, vocab_chunk > 0");
  }
  if (layout.tp != tp.size()) return InvalidArgument("parameter layout built for another tp size");
  if (config.heads % tp.size() != 0) {
    return InvalidArgument("model.heads (" + std::to_string(config.heads) +
                           ") must be divisible by tp (" + std::to_string(tp.size()) + ")");
  }
  if (tp.sp && (r.micro_batch * r.seq) % tp.size() != 0) {
    return InvalidArgument("sequence parallelism needs micro_batch*seq divisible by tp");
  }
  if (chunk.first_layer < 0) chunk = {0, static_cast<int>(config.layers), true, true};
  std::unique_ptr<Gpt> g(new Gpt(config, r, layout, store, tp, chunk, cp));
  if (chunk.embedding) {
    g->wte_ = layout.IndexOf("wte");
    g->wpe_ = layout.IndexOf("wpe");
  }
  if (chunk.head) g->lnf_ = layout.IndexOf("ln_f.weight");
  for (int l = chunk.first_layer; l < chunk.first_layer + chunk.num_layers; ++l) {
    g->layer_base_.push_back(layout.IndexOf("h." + std::to_string(l) + ".ln_1.weight"));
    if (g->layer_base_.back() < 0)
      return InvalidArgument("layout lacks layer " + std::to_string(l));
  }
  if ((chunk.embedding && (g->wte_ < 0 || g->wpe_ < 0)) || (chunk.head && g->lnf_ < 0)) {
    return InvalidArgument("layout lacks the chunk's embedding or final norm");
  }
  LOOM_RETURN_IF_ERROR(g->Allocate());
  return g;
}

Status Gpt::Allocate() {
  const int64_t before = GetMemUsage(MemTag::kActivations).current;
  LOOM_RETURN_IF_ERROR(AllocateScratch());
  scratch_bytes_ = GetMemUsage(MemTag::kActivations).current - before;
  return Status::Ok();
}

Status Gpt::AllocateScratch() {
  const int64_t n = rt_.micro_batch * rt_.seq, c = config_.hidden, t = tp_.size();
  const int64_t nl = tp_.sp ? n / t : n;
  auto act = [](Shape s) { return Tensor::Zeros(std::move(s), DType::kF32, MemTag::kActivations); };
  if (chunk_.head) {
    LOOM_ASSIGN_OR_RETURN(ce_stats_, act({3 * n}));
    LOOM_ASSIGN_OR_RETURN(ce_dloss_, act({n}));
    LOOM_ASSIGN_OR_RETURN(ce_chunk_, act({n, std::min(rt_.vocab_chunk, vl_)}));
  }
  LOOM_ASSIGN_OR_RETURN(dresid_, act({nl, c}));
  LOOM_ASSIGN_OR_RETURN(dln_, act({n, c}));
  LOOM_ASSIGN_OR_RETURN(datt_, act({n, cl_}));
  LOOM_ASSIGN_OR_RETURN(dqkv_, act({n, 3 * cl_}));
  LOOM_ASSIGN_OR_RETURN(dfc_, act({n, fl_}));
  LOOM_ASSIGN_OR_RETURN(emb_full_, act({n, c}));
  if (t > 1) {
    LOOM_ASSIGN_OR_RETURN(rowpar_, act({n, c}));
    LOOM_ASSIGN_OR_RETURN(dln_local_, act({nl, c}));
  }
  if (tp_.sp && t > 1) {
    LOOM_ASSIGN_OR_RETURN(ln_local_, act({nl, c}));
    LOOM_ASSIGN_OR_RETURN(dfull_, act({n, c}));
  }
  return Status::Ok();
}

Result<Gpt::Slot*> Gpt::GetSlot(int id) {
  auto it = slots_.find(id);
  if (it != slots_.end()) return it->second.get();
  const int64_t n = rt_.micro_batch * rt_.seq, c = config_.hidden, t = tp_.size();
  const int64_t nl = tp_.sp ? n / t : n;
  const int64_t lse_n = rt_.micro_batch * hl_ * rt_.seq;
  auto act = [](Shape s) { return Tensor::Zeros(std::move(s), DType::kF32, MemTag::kActivations); };
  const int64_t before = GetMemUsage(MemTag::kActivations).current;
  auto slot = std::make_unique<Slot>();
  for (int l = 0; l <= chunk_.num_layers; ++l) {
    LOOM_ASSIGN_OR_RETURN(Tensor r, act({nl, c}));
    slot->resid.push_back(std::move(r));
  }
  const int sets = rt_.recompute == Recompute::kFull ? 1 : chunk_.num_layers;
  for (int i = 0; i < sets; ++i) {
    auto a = std::make_unique<LayerActs>();
    LOOM_ASSIGN_OR_RETURN(a->ln1, act({n, c}));
    LOOM_ASSIGN_OR_RETURN(a->ln1_mean, act({nl}));
    LOOM_ASSIGN_OR_RETURN(a->ln1_rstd, act({nl}));
    LOOM_ASSIGN_OR_RETURN(a->qkv, act({n, 3 * cl_}));
    LOOM_ASSIGN_OR_RETURN(a->att, act({n, cl_}));
    LOOM_ASSIGN_OR_RETURN(a->lse, act({lse_n}));
    LOOM_ASSIGN_OR_RETURN(a->res2, act({nl, c}));
    LOOM_ASSIGN_OR_RETURN(a->ln2, act({n, c}));
    LOOM_ASSIGN_OR_RETURN(a->ln2_mean, act({nl}));
    LOOM_ASSIGN_OR_RETURN(a->ln2_rstd, act({nl}));
    LOOM_ASSIGN_OR_RETURN(a->fc, act({n, fl_}));
    LOOM_ASSIGN_OR_RETURN(a->gelu, act({n, fl_}));
    slot->acts.push_back(std::move(a));
  }
  if (chunk_.head) {
    LOOM_ASSIGN_OR_RETURN(slot->lnf, act({n, c}));
    LOOM_ASSIGN_OR_RETURN(slot->lnf_mean, act({nl}));
    LOOM_ASSIGN_OR_RETURN(slot->lnf_rstd, act({nl}));
    LOOM_ASSIGN_OR_RETURN(slot->ce_lse, act({n}));
  }
  slot->tokens.resize(static_cast<size_t>(n));
  slot->targets.resize(static_cast<size_t>(n));
  slot_bytes_ = GetMemUsage(MemTag::kActivations).current - before;
  Slot* raw = slot.get();
  slots_.emplace(id, std::move(slot));
  return raw;
}

void Gpt::ReleaseSlot(int slot) {
  slots_.erase(slot);
}

int64_t Gpt::ActivationRows(int64_t b, int64_t t) const {
  return tp_.sp ? b * t / tp_.size() : b * t;
}

int64_t Gpt::ActivationBytesPerLayer() const {
  const int64_t n = rt_.micro_batch * rt_.seq, c = config_.hidden;
  const int64_t nl = tp_.sp ? n / tp_.size() : n;
  if (rt_.recompute == Recompute::kFull) return nl * c * 4;
  const int64_t floats = n * c * 2 + 4 * nl + 3 * n * cl_ + n * cl_ +
                         rt_.micro_batch * hl_ * rt_.seq + nl * c + 2 * n * fl_ +
                         nl * c;  // + the layer input
  return floats * 4;
}

const float* Gpt::P(int index) const {
  const ParamInfo& p = layout_.params[static_cast<size_t>(index)];
  return store_->Params(p.bucket) + p.bucket_offset;
}
float* Gpt::G(int index) {
  const ParamInfo& p = layout_.params[static_cast<size_t>(index)];
  return store_->Grads(p.bucket) + p.bucket_offset;
}
const float* Gpt::Wte() const {
  return wte_ >= 0 ? P(wte_) : tied_wte_;
}
float* Gpt::DWte() {
  return wte_ >= 0 ? G(wte_) : tied_dwte_;
}

Status Gpt::GatherTokens(const float* local, float* full, int64_t width) {
  if (tp_.size() == 1 || !tp_.sp) {
    if (local != full) std::memcpy(full, local, static_cast<size_t>(n_ * width) * 4);
    return Status::Ok();
  }
  return tp_.comm->AllGather(local, full, nl_ * width);
}

Status Gpt::ReduceTokens(float* partial, float* local, int64_t width) {
  if (tp_.size() > 1) {
    if (tp_.sp) return tp_.comm->ReduceScatter(partial, local, nl_ * width);
    LOOM_RETURN_IF_ERROR(tp_.comm->AllReduce(partial, n_ * width));
  }
  if (partial != local) std::memcpy(local, partial, static_cast<size_t>(nl_ * width) * 4);
  return Status::Ok();
}

Status Gpt::LayerForward(int layer, const float* x, float* out, LayerActs& a) {
  const int64_t c = config_.hidden;
  auto w = [&](int k) { return P(LayerParam(layer, k)); };
  const bool sp = tp_.sp && tp_.size() > 1;
  float* ln_out = sp ? ln_local_.data<float>() : a.ln1.data<float>();
  LayerNormForward(ln_out, a.ln1_mean.data<float>(), a.ln1_rstd.data<float>(), x, w(kLn1W),
                   w(kLn1B), nl_, c);
  if (sp) LOOM_RETURN_IF_ERROR(GatherTokens(ln_out, a.ln1.data<float>(), c));
  LinearForward(a.qkv.data<float>(), a.ln1.data<float>(), w(kQkvW), w(kQkvB), n_, c, 3 * cl_);
  if (cp_.size() > 1) {
    LOOM_RETURN_IF_ERROR(RingForward(a));
  } else {
    AttentionShape as{cur_b_, cur_t_, hl_, config_.head_dim(), rt_.attn_block_q, rt_.attn_block_k};
    AttentionForward(a.att.data<float>(), a.lse.data<float>(), a.qkv.data<float>(), as);
  }
  // Row-parallel projection: partial sums reduced across tp, then bias and residual once.
  float* proj = tp_.size() > 1 ? rowpar_.data<float>() : a.res2.data<float>();
  LinearForward<float>(proj, a.att.data<float>(), w(kProjW), nullptr, n_, cl_, c);
  LOOM_RETURN_IF_ERROR(ReduceTokens(proj, a.res2.data<float>(), c));
  AddBiasResidual(a.res2.data<float>(), w(kProjB), x, nl_, c);

  ln_out = sp ? ln_local_.data<float>() : a.ln2.data<float>();
  LayerNormForward(ln_out, a.ln2_mean.data<float>(), a.ln2_rstd.data<float>(), a.res2.data<float>(),
                   w(kLn2W), w(kLn2B), nl_, c);
  if (sp) LOOM_RETURN_IF_ERROR(GatherTokens(ln_out, a.ln2.data<float>(), c));
  LinearForward(a.fc.data<float>(), a.ln2.data<float>(), w(kFcW), w(kFcB), n_, c, fl_);
  GeluForward(a.gelu.data<float>(), a.fc.data<float>(), n_ * fl_);
  proj = tp_.size() > 1 ? rowpar_.data<float>() : out;
  LinearForward<float>(proj, a.gelu.data<float>(), w(kFcProjW), nullptr, n_, fl_, c);
  LOOM_RETURN_IF_ERROR(ReduceTokens(proj, out, c));
  AddBiasResidual(out, w(kFcProjB), a.res2.data<float>(), nl_, c);
  return Status::Ok();
}

// dresid holds d(out) on entry and d(x) on return (Nl rows).
Status Gpt::LayerBackward(int layer, const float* x, LayerActs& a, float* dresid) {
  const int64_t c = config_.hidden;
  auto w = [&](int k) { return P(LayerParam(layer, k)); };
  auto g = [&](int k) { return G(LayerParam(layer, k)); };
  const bool sp = tp_.sp && tp_.size() > 1;
  float* dfull = sp ? dfull_.data<float>() : dresid;
  float* dfc = dfc_.data<float>();
  float* dln = dln_.data<float>();
  float* dln_local = tp_.size() > 1 ? dln_local_.data<float>() : dln;
  // MLP: out = res2 + c_proj(gelu(c_fc(ln_2(res2)))) + bias
  if (sp) LOOM_RETURN_IF_ERROR(GatherTokens(dresid, dfull, c));
  LinearBackward<float>(dfc, g(kFcProjW), nullptr, dfull, a.gelu.data<float>(), w(kFcProjW), n_,
                        fl_, c);
  LinearBackward<float>(nullptr, nullptr, g(kFcProjB), dresid, nullptr, nullptr, nl_, 0, c);
  GeluBackward(dfc, a.fc.data<float>(), dfc, n_ * fl_);
  LinearBackward(dln, g(kFcW), g(kFcB), dfc, a.ln2.data<float>(), w(kFcW), n_, c, fl_);
  LOOM_RETURN_IF_ERROR(ReduceTokens(dln, dln_local, c));
  LayerNormBackward(dresid, g(kLn2W), g(kLn2B), dln_local, a.res2.data<float>(), w(kLn2W),
                    a.ln2_mean.data<float>(), a.ln2_rstd.data<float>(), nl_, c);
  // Attention: res2 = x + c_proj(attn(c_attn(ln_1(x)))) + bias
  if (sp) LOOM_RETURN_IF_ERROR(GatherTokens(dresid, dfull, c));
  float* datt = datt_.data<float>();
  LinearBackward<float>(datt, g(kProjW), nullptr, dfull, a.att.data<float>(), w(kProjW), n_, cl_,
                        c);
  LinearBackward<float>(nullptr, nullptr, g(kProjB), dresid, nullptr, nullptr, nl_, 0, c);
  if (cp_.size() > 1) {
    LOOM_RETURN_IF_ERROR(RingBackward(a, datt));
  } else {
    AttentionShape as{cur_b_, cur_t_, hl_, config_.head_dim(), rt_.attn_block_q, rt_.attn_block_k};
    AttentionBackward(dqkv_.data<float>(), datt, a.qkv.data<float>(), a.att.data<float>(),
                      a.lse.data<float>(), as);
  }
  LinearBackward(dln, g(kQkvW), g(kQkvB), dqkv_.data<float>(), a.ln1.data<float>(), w(kQkvW), n_, c,
                 3 * cl_);
  LOOM_RETURN_IF_ERROR(ReduceTokens(dln, dln_local, c));
  LayerNormBackward(dresid, g(kLn1W), g(kLn1B), dln_local, x, w(kLn1W), a.ln1_mean.data<float>(),
                    a.ln1_rstd.data<float>(), nl_, c);
  return Status::Ok();
}

int64_t Gpt::Position(int64_t i) const {
  const int64_t row = i % cur_t_;
  if (cp_.size() == 1) return row;
  return ContextSplit{cur_t_ * cp_.size(), cp_.size()}.Position(cp_.rank(), row);
}

// K/V blocks go around the ring (to rank+1, from rank-1) while the block just received is
// folded in, so the transfer of step s+1 overlaps the compute of step s.
Status Gpt::RingForward(LayerActs& a) {
  const int cp = cp_.size(), r = cp_.rank();
  const ContextSplit split{cur_t_ * cp, cp};
  const int64_t kvn = cur_b_ * cur_t_ * 2 * cl_;
  kv_a_.resize(static_cast<size_t>(kvn));
  kv_b_.resize(static_cast<size_t>(kvn));
  PackKeyValue(a.qkv.data<float>(), kv_a_.data(), cur_b_, cur_t_, cl_);
  RingAttention<float> ring(split, r, cur_b_, hl_, config_.head_dim(), rt_.attn_block_q,
                            rt_.attn_block_k);
  ring.ForwardBegin();
  float* cur = kv_a_.data();
  float* next = kv_b_.data();
  for (int s = 0; s < cp; ++s) {
    HandlePtr send, recv;
    if (s + 1 < cp) {
      recv = cp_.comm->RecvAsync(next, kvn, (r + cp - 1) % cp, 100 + s);
      send = cp_.comm->SendAsync(cur, kvn, (r + 1) % cp, 100 + s);
    }
    ring.ForwardStep(a.qkv.data<float>(), cur, (r - s + cp) % cp);
    if (send) {
      LOOM_RETURN_IF_ERROR(send->Wait(cp_.comm->DefaultDeadline()));
      LOOM_RETURN_IF_ERROR(recv->Wait(cp_.comm->DefaultDeadline()));
      std::swap(cur, next);
    }
  }
  ring.ForwardEnd(a.att.data<float>(), a.lse.data<float>());
  return Status::Ok();
}

// Backward: K/V and their gradient accumulators travel together; after cp steps each dK/dV has
// visited every rank and the last hop returns it to its owner.
Status Gpt::RingBackward(LayerActs& a, const float* datt) {
  const int cp = cp_.size(), r = cp_.rank();
  const ContextSplit split{cur_t_ * cp, cp};
  const int64_t kvn = cur_b_ * cur_t_ * 2 * cl_;
  for (auto* v : {&kv_a_, &kv_b_, &dkv_a_, &dkv_b_}) v->assign(static_cast<size_t>(kvn), 0.0f);
  PackKeyValue(a.qkv.data<float>(), kv_a_.data(), cur_b_, cur_t_, cl_);
  RingAttention<float> ring(split, r, cur_b_, hl_, config_.head_dim(), rt_.attn_block_q,
                            rt_.attn_block_k);
  float* dqkv = dqkv_.data<float>();
  ring.BackwardBegin(datt, a.att.data<float>(), dqkv);
  float *kv = kv_a_.data(), *kv_next = kv_b_.data();
  float *dkv = dkv_a_.data(), *dkv_next = dkv_b_.data();
  const int prev = (r + cp - 1) % cp, next = (r + 1) % cp;
  auto deadline = [&] { return cp_.comm->DefaultDeadline(); };
  for (int s = 0; s < cp; ++s) {
    HandlePtr kv_recv, kv_send;
    if (s + 1 < cp) {  // the K/V of the next step travel while this step computes
      kv_recv = cp_.comm->RecvAsync(kv_next, kvn, prev, 200 + s);
      kv_send = cp_.comm->SendAsync(kv, kvn, next, 200 + s);
    }
    ring.BackwardStep(a.qkv.data<float>(), kv, (r - s + cp) % cp, datt, a.lse.data<float>(), dqkv,
                      dkv);
    // The accumulated dK/dV follows its K/V (after the last step: one hop home to its owner).
    HandlePtr d_recv = cp_.comm->RecvAsync(dkv_next, kvn, prev, 300 + s);
    HandlePtr d_send = cp_.comm->SendAsync(dkv, kvn, next, 300 + s);
    LOOM_RETURN_IF_ERROR(d_send->Wait(deadline()));
    LOOM_RETURN_IF_ERROR(d_recv->Wait(deadline()));
    std::swap(dkv, dkv_next);
    if (kv_send) {
      LOOM_RETURN_IF_ERROR(kv_send->Wait(deadline()));
      LOOM_RETURN_IF_ERROR(kv_recv->Wait(deadline()));
      std::swap(kv, kv_next);
    }
  }
  // dkv now holds this rank's own dK/dV: the k and v parts of dqkv.
  const int64_t rows = cur_b_ * cur_t_;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < rows; ++i) {
    std::copy(dkv + i * 2 * cl_, dkv + (i + 1) * 2 * cl_, dqkv + i * 3 * cl_ + cl_);
  }
  return Status::Ok();
}

Result<double> Gpt::ForwardChunk(int slot_id, const int32_t* tokens, const int32_t* targets,
                                 const float* input, int64_t b, int64_t t) {
  if (b > rt_.micro_batch || t > rt_.seq) return InvalidArgument("micro-batch larger than planned");
  cur_b_ = b;
  cur_t_ = t;
  n_ = b * t;
  nl_ = tp_.sp ? n_ / tp_.size() : n_;
  if (tp_.sp && n_ % tp_.size() != 0) {
    return InvalidArgument("sequence parallelism needs batch*seq divisible by tp");
  }
  LOOM_ASSIGN_OR_RETURN(Slot * slot, GetSlot(slot_id));
  cur_ = slot;
  slot->b = b;
  slot->t = t;
  const int64_t c = config_.hidden;
  if (chunk_.embedding) {
    std::copy(tokens, tokens + n_, slot->tokens.begin());
    LOOM_RETURN_IF_ERROR(store_->AcquireParams(Bucket(wte_), -1));
    if (tp_.size() == 1) {
      EmbeddingShape es{n_, t, c, 0, vl_};
      std::vector<int32_t> pos;
      if (cp_.size() > 1) {
        pos.resize(static_cast<size_t>(n_));
        for (int64_t i = 0; i < n_; ++i) pos[i] = static_cast<int32_t>(Position(i));
      }
      EmbeddingForward(slot->resid[0].data<float>(), slot->tokens.data(),
                       pos.empty() ? nullptr : pos.data(), P(wte_), P(wpe_), es);
    } else {
      // Vocab-parallel lookup: each rank contributes the rows it holds; the sum is the embedding.
      EmbeddingShape es{n_, t, c, tp_.rank() * vl_, vl_};
      EmbeddingForward<float>(emb_full_.data<float>(), slot->tokens.data(), nullptr, P(wte_),
                              nullptr, es);
      LOOM_RETURN_IF_ERROR(ReduceTokens(emb_full_.data<float>(), slot->resid[0].data<float>(), c));
      const int64_t first = tp_.sp ? tp_.rank() * nl_ : 0;
      const float* wpe = P(wpe_);
      float* r = slot->resid[0].data<float>();
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < nl_; ++i) {
        const float* p = wpe + Position(first + i) * c;
        for (int64_t j = 0; j < c; ++j) r[i * c + j] += p[j];
      }
    }
  } else {
    std::memcpy(slot->resid[0].data<float>(), input, static_cast<size_t>(nl_ * c) * 4);
  }
  for (int k = 0; k < chunk_.num_layers; ++k) {
    const int l = chunk_.first_layer + k;
    const int next = k + 1 < chunk_.num_layers ? Bucket(LayerParam(l + 1, 0)) : -1;
    LOOM_RETURN_IF_ERROR(store_->AcquireParams(Bucket(LayerParam(l, 0)), next));
    LayerActs& a = *slot->acts[rt_.recompute == Recompute::kFull ? 0 : k];
    LOOM_RETURN_IF_ERROR(
        LayerForward(l, slot->resid[k].data<float>(), slot->resid[k + 1].data<float>(), a));
    LOOM_RETURN_IF_ERROR(store_->ReleaseParams(Bucket(LayerParam(l, 0))));
  }
  if (!chunk_.head) return 0.0;
  LOOM_RETURN_IF_ERROR(store_->AcquireParams(Bucket(lnf_), -1));
  const bool sp = tp_.sp && tp_.size() > 1;
  float* ln_out = sp ? ln_local_.data<float>() : slot->lnf.data<float>();
  LayerNormForward(ln_out, slot->lnf_mean.data<float>(), slot->lnf_rstd.data<float>(),
                   slot->resid[chunk_.num_layers].data<float>(), P(lnf_), P(lnf_ + 1), nl_, c);
  if (sp) LOOM_RETURN_IF_ERROR(GatherTokens(ln_out, slot->lnf.data<float>(), c));
  if (targets == nullptr) return 0.0;  // sampling: logits only
  std::copy(targets, targets + n_, slot->targets.begin());
  VocabShard vs{n_, c, tp_.rank() * vl_, vl_, config_.vocab, rt_.vocab_chunk};
  float* mx = ce_stats_.data<float>();
  float* sum = mx + n_;
  float* zt = sum + n_;
  CrossEntropyStats(mx, sum, zt, slot->lnf.data<float>(), Wte(), slot->targets.data(), vs,
                    ce_chunk_.data<float>());
  if (tp_.size() > 1) {
    // Logits are never gathered: combine each shard's max and rescaled sum-exp across tp.
    std::vector<float> local_max(mx, mx + n_);
    LOOM_RETURN_IF_ERROR(tp_.comm->AllReduce(mx, n_, ReduceOp::kMax));
    for (int64_t i = 0; i < n_; ++i) {
      sum[i] = local_max[i] == -std::numeric_limits<float>::infinity()
                   ? 0.0f
                   : sum[i] * std::exp(local_max[i] - mx[i]);
    }
    LOOM_RETURN_IF_ERROR(tp_.comm->AllReduce(sum, 2 * n_));  // sum-exp and target logit
  }
  float* loss = ce_dloss_.data<float>();  // reused as per-token loss here
  CrossEntropyFinish(slot->ce_lse.data<float>(), loss, mx, sum, zt, n_);
  double total = 0;
  for (int64_t i = 0; i < n_; ++i) total += loss[i];
  return total;
}

const float* Gpt::OutputActivation(int slot) const {
  return slots_.at(slot)->resid[chunk_.num_layers].data<float>();
}

const float* Gpt::InputGradient() const {
  return dresid_.data<float>();
}

Status Gpt::BackwardChunk(int slot_id, float dloss, const float* dout, bool last_micro_batch) {
  auto it = slots_.find(slot_id);
  if (it == slots_.end()) return Internal("backward of a slot that was never forwarded");
  Slot* slot = it->second.get();
  cur_ = slot;
  cur_b_ = slot->b;
  cur_t_ = slot->t;
  n_ = cur_b_ * cur_t_;
  nl_ = tp_.sp ? n_ / tp_.size() : n_;
  const int64_t c = config_.hidden;
  float* dresid = dresid_.data<float>();
  if (chunk_.head) {
    float* dl = ce_dloss_.data<float>();
    std::fill(dl, dl + n_, dloss);
    float* dlnf = dln_.data<float>();
    std::fill(dlnf, dlnf + n_ * c, 0.0f);
    VocabShard vs{n_, c, tp_.rank() * vl_, vl_, config_.vocab, rt_.vocab_chunk};
    CrossEntropyBackward(dlnf, DWte(), slot->lnf.data<float>(), Wte(), slot->targets.data(),
                         slot->ce_lse.data<float>(), dl, vs, ce_chunk_.data<float>());
    float* dlnf_local = tp_.size() > 1 ? dln_local_.data<float>() : dlnf;
    LOOM_RETURN_IF_ERROR(ReduceTokens(dlnf, dlnf_local, c));
    std::fill(dresid, dresid + nl_ * c, 0.0f);
    LayerNormBackward(dresid, G(lnf_), G(lnf_ + 1), dlnf_local,
                      slot->resid[chunk_.num_layers].data<float>(), P(lnf_),
                      slot->lnf_mean.data<float>(), slot->lnf_rstd.data<float>(), nl_, c);
    LOOM_RETURN_IF_ERROR(store_->GradsReady(Bucket(lnf_), last_micro_batch));
  } else {
    std::memcpy(dresid, dout, static_cast<size_t>(nl_ * c) * 4);
  }
  for (int k = chunk_.num_layers - 1; k >= 0; --k) {
    const int l = chunk_.first_layer + k;
    const int bucket = Bucket(LayerParam(l, 0));
    LOOM_RETURN_IF_ERROR(store_->AcquireParams(bucket, k > 0 ? Bucket(LayerParam(l - 1, 0)) : -1));
    LayerActs* a = slot->acts[0].get();
    if (rt_.recompute == Recompute::kFull) {
      // Recompute this layer's activations from its stored input; emb_full_ is free until the
      // embedding backward and holds the (discarded) output.
      LOOM_RETURN_IF_ERROR(
          LayerForward(l, slot->resid[k].data<float>(), emb_full_.data<float>(), *a));
    } else {
      a = slot->acts[k].get();
    }
    LOOM_RETURN_IF_ERROR(LayerBackward(l, slot->resid[k].data<float>(), *a, dresid));
    LOOM_RETURN_IF_ERROR(store_->GradsReady(bucket, last_micro_batch));
    LOOM_RETURN_IF_ERROR(store_->ReleaseParams(bucket));
  }
  if (!chunk_.embedding) return Status::Ok();
  if (tp_.size() == 1) {
    EmbeddingShape es{n_, cur_t_, c, 0, vl_};
    std::vector<int32_t> pos;
    if (cp_.size() > 1) {
      pos.resize(static_cast<size_t>(n_));
      for (int64_t i = 0; i < n_; ++i) pos[i] = static_cast<int32_t>(Position(i));
    }
    EmbeddingBackward(G(wte_), G(wpe_), dresid, slot->tokens.data(),
                      pos.empty() ? nullptr : pos.data(), es);
  } else {
    // Positions: this rank's rows (all rows without SP); token rows: the whole micro-batch.
    const int64_t first = tp_.sp ? tp_.rank() * nl_ : 0;
    std::vector<int32_t> pos(static_cast<size_t>(nl_));
    for (int64_t i = 0; i < nl_; ++i) pos[i] = static_cast<int32_t>(Position(first + i));
    EmbeddingShape local{nl_, cur_t_, c, 0, 0};
    EmbeddingBackward<float>(nullptr, G(wpe_), dresid, slot->tokens.data() + first, pos.data(),
                             local);
    float* dfull = dresid;
    if (tp_.sp) {
      dfull = dfull_.data<float>();
      LOOM_RETURN_IF_ERROR(GatherTokens(dresid, dfull, c));
    }
    EmbeddingShape es{n_, cur_t_, c, tp_.rank() * vl_, vl_};
    EmbeddingBackward<float>(G(wte_), nullptr, dfull, slot->tokens.data(), nullptr, es);
  }
  return store_->GradsReady(Bucket(wte_), last_micro_batch);
}

Result<double> Gpt::ForwardLoss(const int32_t* tokens, const int32_t* targets, int64_t b,
                                int64_t t) {
  return ForwardChunk(0, tokens, targets, nullptr, b, t);
}

Status Gpt::Backward(float dloss, bool last_micro_batch) {
  return BackwardChunk(0, dloss, nullptr, last_micro_batch);
}

Status Gpt::ForwardLastLogits(const int32_t* tokens, int64_t t, float* logits) {
  if (tp_.size() != 1 || !chunk_.embedding || !chunk_.head) {
    return Unimplemented("sampling needs the whole model on one rank (tp = pp = 1)");
  }
  LOOM_ASSIGN_OR_RETURN(double unused, ForwardChunk(0, tokens, nullptr, nullptr, 1, t));
  (void)unused;
  const int64_t c = config_.hidden;
  const float* h = slots_.at(0)->lnf.data<float>() + (t - 1) * c;
  LinearForward<float>(logits, h, Wte(), nullptr, 1, c, config_.vocab);
  return Status::Ok();
}

}  // namespace loom
