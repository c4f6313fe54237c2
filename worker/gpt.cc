// GPT forward/backward: each layer over the core kernels and the parallel building blocks
// (tensor_parallel/: column/row-parallel linears, vocab-parallel embedding and loss, SP gathers;
// context/: ring attention).
#include "worker/gpt.h"

#include <algorithm>
#include <cstring>

#include "core/kernels/attention.h"
#include "core/kernels/cross_entropy.h"
#include "core/kernels/elementwise.h"
#include "core/kernels/embedding.h"
#include "core/kernels/layernorm.h"
#include "core/kernels/linear.h"
#include "core/kernels/rmsnorm.h"
#include "model/config.h"
#include "parallel/context/ring_attention.h"
#include "parallel/message_tags.h"
#include "parallel/tensor_parallel/linear.h"
#include "parallel/tensor_parallel/sequence_parallel.h"
#include "parallel/tensor_parallel/vocab_parallel.h"
#include "worker/gpt_activations.h"

namespace loom {
namespace {}  // namespace

// out[i, :] += bias + resid[i, :] (bias may be null)
void AddBiasResidual(float* out, const float* bias, const float* resid, int64_t rows, int64_t c) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < rows; ++i) {
    float* o = out + i * c;
    const float* r = resid + i * c;
    if (bias == nullptr) {
      for (int64_t j = 0; j < c; ++j) o[j] += r[j];
    } else {
      for (int64_t j = 0; j < c; ++j) o[j] += bias[j] + r[j];
    }
  }
}

Gpt::Gpt(const ModelConfig& config, const ModelRuntime& rt, const ParamLayout& layout,
         ParamStore* store, TensorParallel tp, ChunkSpec chunk, ContextParallel cp)
    : config_(config),
      rt_(rt),
      layout_(layout),
      store_(store),
      tp_(tp),
      chunk_(chunk),
      cp_(cp),
      ring_(cp) {
  const int t = tp_.size();
  cl_ = config_.hidden / t;
  fl_ = config_.ffn() / t;
  hl_ = config_.heads / t;
  vl_ = layout_.padded_vocab / t;
  llama_ = config_.llama();
  if (llama_) {
    const int64_t kv = config_.kv();
    kvl_ = kv % t == 0 ? kv / t : kv;  // fewer KV heads than tp: all of them, replicated
    kv_first_ = kv % t == 0 ? tp_.rank() * kvl_ : 0;
    qw_ = cl_ + 2 * kvl_ * config_.head_dim();
    const RopeScaling& rs = config_.rope_scaling;
    rope_ = RopeTable::Make(config_.max_seq, config_.head_dim(), config_.rope_theta,
                            {rs.on() ? rs.factor : 0, rs.low_freq_factor, rs.high_freq_factor,
                             static_cast<double>(rs.original_max_seq)});
  }
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
  if (config.llama()) {
    const int64_t kv = config.kv(), t = tp.size();
    if (kv % t != 0 && t % kv != 0) {
      return InvalidArgument(
          "model.kv_heads (" + std::to_string(kv) + ") and tp (" + std::to_string(t) +
          ") must divide one another (KV heads split, or replicated when fewer)");
    }
    if (config.ffn() % t != 0) {
      return InvalidArgument("model.ffn_hidden (" + std::to_string(config.ffn()) +
                             ") must be divisible by tp (" + std::to_string(t) + ")");
    }
    if (config.head_dim() % 2 != 0) {
      return InvalidArgument("llama: hidden / heads (" + std::to_string(config.head_dim()) +
                             ") must be even (rotary positions rotate pairs)");
    }
  }
  LOOM_RETURN_IF_ERROR(CheckRingTags(cp.size()));
  if (r.precision == Precision::kBf16 && !HaveBf16Gemm()) {
    return Unimplemented(
        "precision bf16: this build has no bf16 GEMM (it needs oneDNN, Debian's libdnnl-dev; "
        "deploy/install-deps.sh installs it)");
  }
  if (chunk.first_layer < 0) chunk = {0, static_cast<int>(config.layers), true, true};
  std::unique_ptr<Gpt> g(new Gpt(config, r, layout, store, tp, chunk, cp));
  if (chunk.embedding) {
    g->wte_ = layout.IndexOf("wte");
    g->wpe_ = layout.IndexOf("wpe");
  }
  if (chunk.head) {
    g->lnf_ = layout.IndexOf("ln_f.weight");
    if (!config.tie_embeddings) {
      g->head_ = layout.IndexOf("lm_head.weight");
      if (g->head_ < 0) return InvalidArgument("layout lacks lm_head.weight (untied head)");
    }
  }
  for (int l = chunk.first_layer; l < chunk.first_layer + chunk.num_layers; ++l) {
    g->layer_base_.push_back(layout.IndexOf("h." + std::to_string(l) + ".ln_1.weight"));
    if (g->layer_base_.back() < 0)
      return InvalidArgument("layout lacks layer " + std::to_string(l));
  }
  if ((chunk.embedding && (g->wte_ < 0 || (g->wpe_ < 0 && !config.llama()))) ||
      (chunk.head && g->lnf_ < 0)) {
    return InvalidArgument("layout lacks the chunk's embedding or final norm");
  }
  LOOM_RETURN_IF_ERROR(g->Allocate());
  return g;
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
float* Gpt::NormOut(Tensor& full) {
  return tp_.sequence_parallel() ? ln_local_.data<float>() : full.data<float>();
}
VocabShard Gpt::Shard() const {
  return {rows_.full, config_.hidden, tp_.rank() * vl_, vl_, config_.vocab, rt_.vocab_chunk};
}

void Gpt::NormForward(float* out, Tensor& mean, Tensor& rstd, const float* x, int w, int64_t rows) {
  const int64_t c = config_.hidden;
  if (llama_) {
    RmsNormForward(out, rstd.data<float>(), x, P(w), rows, c, static_cast<float>(config_.norm_eps));
  } else {
    LayerNormForward(out, mean.data<float>(), rstd.data<float>(), x, P(w), P(w + 1), rows, c);
  }
}

void Gpt::NormBackward(float* dx, const float* dy, const float* x, int w, const Tensor& mean,
                       const Tensor& rstd, int64_t rows) {
  const int64_t c = config_.hidden;
  if (llama_) {
    RmsNormBackward(dx, G(w), dy, x, P(w), rstd.data<float>(), rows, c);
  } else {
    LayerNormBackward(dx, G(w), G(w + 1), dy, x, P(w), mean.data<float>(), rstd.data<float>(), rows,
                      c);
  }
}

Status Gpt::LayerForward(int layer, const float* x, float* out, LayerActs& a) {
  if (llama_) return LlamaLayerForward(layer, x, out, a);
  const int64_t c = config_.hidden, nl = rows_.local;
  auto w = [&](int k) { return P(LayerParam(layer, k)); };
  // Attention: res2 = x + c_proj(attn(c_attn(ln_1(x)))) + bias
  LOOM_RETURN_IF_ERROR(NormColumnForward(layer, kLn1W, x, a.ln1, a.ln1_mean, a.ln1_rstd, kQkvW,
                                         a.qkv.data<float>(), 3 * cl_));
  LOOM_RETURN_IF_ERROR(Attend(a));
  LOOM_RETURN_IF_ERROR(RowForward(layer, kProjW, a.att, a.res2.data<float>(), cl_));
  AddBiasResidual(a.res2.data<float>(), w(kProjB), x, nl, c);
  // MLP: out = res2 + c_proj(gelu(c_fc(ln_2(res2)))) + bias
  LOOM_RETURN_IF_ERROR(NormColumnForward(layer, kLn2W, a.res2.data<float>(), a.ln2, a.ln2_mean,
                                         a.ln2_rstd, kFcW, a.fc.data<float>(), fl_));
  if (bf16()) {
    GeluForward(a.gelu.data<Bf16>(), a.fc.data<float>(), rows_.full * fl_);
  } else {
    GeluForward(a.gelu.data<float>(), a.fc.data<float>(), rows_.full * fl_);
  }
  LOOM_RETURN_IF_ERROR(RowForward(layer, kFcProjW, a.gelu, out, fl_));
  AddBiasResidual(out, w(kFcProjB), a.res2.data<float>(), nl, c);
  return Status::Ok();
}

// dresid holds d(out) on entry and d(x) on return (local rows).
Status Gpt::LayerBackward(int layer, const float* x, LayerActs& a, float* dresid) {
  if (llama_) return LlamaLayerBackward(layer, x, a, dresid);
  const int64_t c = config_.hidden, nl = rows_.local;
  auto w = [&](int k) { return P(LayerParam(layer, k)); };
  auto g = [&](int k) { return G(LayerParam(layer, k)); };
  float* dfc = dfc_.data<float>();
  float* dln_local = tp_.size() > 1 ? dln_local_.data<float>() : dln_.data<float>();
  // MLP: out = res2 + c_proj(gelu(c_fc(ln_2(res2)))) + bias
  LOOM_RETURN_IF_ERROR(RowBackward(layer, kFcProjW, dresid, a.gelu, dfc, fl_));
  GeluBackward(dfc, a.fc.data<float>(), dfc, rows_.full * fl_);
  LOOM_RETURN_IF_ERROR(ColumnBackward(layer, kFcW, dfc, a.ln2, fl_, dln_local));
  LayerNormBackward(dresid, g(kLn2W), g(kLn2B), dln_local, a.res2.data<float>(), w(kLn2W),
                    a.ln2_mean.data<float>(), a.ln2_rstd.data<float>(), nl, c);
  // Attention: res2 = x + c_proj(attn(c_attn(ln_1(x)))) + bias
  float* datt = datt_.data<float>();
  LOOM_RETURN_IF_ERROR(RowBackward(layer, kProjW, dresid, a.att, datt, cl_));
  LOOM_RETURN_IF_ERROR(AttendBackward(a, datt));
  LOOM_RETURN_IF_ERROR(
      ColumnBackward(layer, kQkvW, dqkv_.data<float>(), a.ln1, 3 * cl_, dln_local));
  LayerNormBackward(dresid, g(kLn1W), g(kLn1B), dln_local, x, w(kLn1W), a.ln1_mean.data<float>(),
                    a.ln1_rstd.data<float>(), nl, c);
  return Status::Ok();
}

Status Gpt::NormColumnForward(int layer, int norm, const float* x, Tensor& ln, Tensor& mean,
                              Tensor& rstd, int wk, float* y, int64_t out_local) {
  const int64_t c = config_.hidden, nl = rows_.local;
  auto w = [&](int k) { return P(LayerParam(layer, k)); };
  if (!bf16()) {
    float* ln_out = NormOut(ln);
    NormForward(ln_out, mean, rstd, x, LayerParam(layer, norm), nl);
    return ColumnParallelForward(tp_, rows_, ln_out, ln.data<float>(), w(wk), Bias(layer, wk + 1),
                                 y, c, out_local);
  }
  NormForward(ln32_.data<float>(), mean, rstd, x, LayerParam(layer, norm), nl);
  Bf16* local16 = tp_.sequence_parallel() ? ln16_local_.data<Bf16>() : ln.data<Bf16>();
  CastToBf16(ln32_.data<float>(), local16, nl * c);
  LOOM_ASSIGN_OR_RETURN(const Bf16* w16, W16(LayerParam(layer, wk)));
  return ColumnParallelForward(tp_, rows_, local16, ln.data<Bf16>(), w16, Bias(layer, wk + 1), y, c,
                               out_local);
}

const Bf16* Gpt::RowInput16(const Tensor& x, int64_t in_local) {
  if (x.dtype() != DType::kF32) return x.data<Bf16>();  // GELU output, kept in bf16
  // The attention output, kept in fp32 for the attention backward: cast for the GEMM.
  CastToBf16(x.data<float>(), att16_.data<Bf16>(), rows_.full * in_local);
  return att16_.data<Bf16>();
}

Status Gpt::RowForward(int layer, int wk, const Tensor& x, float* y_local, int64_t in_local) {
  const int64_t c = config_.hidden;
  if (!bf16()) {
    return RowParallelForward(tp_, rows_, x.data<float>(), P(LayerParam(layer, wk)),
                              rowpar_.data<float>(), y_local, in_local, c);
  }
  const Bf16* x16 = RowInput16(x, in_local);
  LOOM_ASSIGN_OR_RETURN(const Bf16* w16, W16(LayerParam(layer, wk)));
  return RowParallelForward(tp_, rows_, x16, w16, rowpar_.data<float>(), y_local, in_local, c);
}

Status Gpt::ColumnBackward(int layer, int wk, const float* dy, const Tensor& ln, int64_t out_local,
                           float* dln_local) {
  const int64_t c = config_.hidden;
  auto g = [&](int k) { return G(LayerParam(layer, k)); };
  float* dln = dln_.data<float>();
  if (!bf16()) {
    return ColumnParallelBackward(tp_, rows_, dy, ln.data<float>(), P(LayerParam(layer, wk)), dln,
                                  dln_local, g(wk), BiasGrad(layer, wk + 1), c, out_local);
  }
  LOOM_ASSIGN_OR_RETURN(const Bf16* w16, W16(LayerParam(layer, wk)));
  return ColumnParallelBackward(tp_, rows_, dy, dy16_.data<Bf16>(), ln.data<Bf16>(), w16, dln,
                                dln_local, g(wk), BiasGrad(layer, wk + 1), c, out_local);
}

Status Gpt::RowBackward(int layer, int wk, const float* dy_local, const Tensor& x, float* dx,
                        int64_t in_local) {
  const int64_t c = config_.hidden;
  auto g = [&](int k) { return G(LayerParam(layer, k)); };
  if (!bf16()) {
    return RowParallelBackward(tp_, rows_, dy_local, dfull_.data<float>(), x.data<float>(),
                               P(LayerParam(layer, wk)), dx, g(wk), BiasGrad(layer, wk + 1),
                               in_local, c);
  }
  const Bf16* x16 = RowInput16(x, in_local);
  LOOM_ASSIGN_OR_RETURN(const Bf16* w16, W16(LayerParam(layer, wk)));
  return RowParallelBackward(tp_, rows_, dy_local, dy16_.data<Bf16>(), x16, w16, dx, g(wk),
                             BiasGrad(layer, wk + 1), in_local, c);
}

Result<const Bf16*> Gpt::W16(int index) {
  if (w16_.empty()) {
    w16_.resize(layout_.params.size());
    w16_version_.assign(layout_.params.size(), -1);
  }
  Tensor& t = w16_[static_cast<size_t>(index)];
  const int64_t version = store_->params_version();
  if (!t.defined()) {
    // Llama's q|k|v GEMM spans attn.q and the attn.kv after it (adjacent in the buffer): one copy.
    int64_t numel = layout_.params[static_cast<size_t>(index)].numel();
    if (llama_ && FusedWithNext(index)) {
      numel += layout_.params[static_cast<size_t>(index) + 1].numel();
    }
    LOOM_ASSIGN_OR_RETURN(t, Tensor::Zeros({numel}, DType::kBF16, MemTag::kParams));
    w16_version_[static_cast<size_t>(index)] = -1;
  }
  const int64_t numel = t.numel();
  if (w16_version_[static_cast<size_t>(index)] != version) {
    CastToBf16(P(index), t.data<Bf16>(), numel);
    w16_version_[static_cast<size_t>(index)] = version;
  }
  return t.data<Bf16>();
}

Result<const Bf16*> Gpt::Wte16() {
  if (head_ >= 0) return W16(head_);  // an untied lm_head
  if (wte_ >= 0) return W16(wte_);
  // A head chunk without the embedding: the first chunk's wte copy changes every step and is
  // cast at each use (vocab/tp x hidden elements, next to the head's GEMMs).
  const int64_t numel = vl_ * config_.hidden;
  if (!tied_w16_.defined()) {
    LOOM_ASSIGN_OR_RETURN(tied_w16_, Tensor::Zeros({numel}, DType::kBF16, MemTag::kParams));
  }
  CastToBf16(tied_wte_, tied_w16_.data<Bf16>(), numel);
  return tied_w16_.data<Bf16>();
}

bool Gpt::FusedWithNext(int index) const {
  const std::string& name = layout_.params[static_cast<size_t>(index)].name;
  return name.size() > 13 && name.compare(name.size() - 13, 13, "attn.q.weight") == 0;
}

void Gpt::DropLayerW16(int layer) {
  if (!bf16() || rt_.keep_bf16_weights || w16_.empty()) return;
  if (llama_) {
    for (int k : {kLlamaQW, kLlamaProjW, kLlamaFcW, kLlamaFcProjW})
      w16_[static_cast<size_t>(LayerParam(layer, k))] = {};
    return;
  }
  for (int k : {kQkvW, kProjW, kFcW, kFcProjW})
    w16_[static_cast<size_t>(LayerParam(layer, k))] = {};
}

RingShape Gpt::Ring() const {
  RingShape rs{cur_b_, cur_t_, hl_, config_.head_dim(), rt_.attn_block_q, rt_.attn_block_k};
  if (llama_) rs.kv_heads = RingKvHeads();
  return rs;
}

Status Gpt::Attend(LayerActs& a) {
  if (cp_.size() > 1) {
    return ring_.Forward(Ring(), a.qkv.data<float>(), a.att.data<float>(), a.lse.data<float>());
  }
  AttentionShape as{cur_b_, cur_t_, hl_, config_.head_dim(), rt_.attn_block_q, rt_.attn_block_k};
  AttentionForward(a.att.data<float>(), a.lse.data<float>(), a.qkv.data<float>(), as);
  return Status::Ok();
}

Status Gpt::AttendBackward(LayerActs& a, const float* datt) {
  if (cp_.size() > 1) {
    return ring_.Backward(Ring(), a.qkv.data<float>(), a.att.data<float>(), a.lse.data<float>(),
                          datt, dqkv_.data<float>());
  }
  AttentionShape as{cur_b_, cur_t_, hl_, config_.head_dim(), rt_.attn_block_q, rt_.attn_block_k};
  AttentionBackward(dqkv_.data<float>(), datt, a.qkv.data<float>(), a.att.data<float>(),
                    a.lse.data<float>(), as);
  return Status::Ok();
}

int64_t Gpt::Position(int64_t i) const {
  const int64_t row = i % cur_t_;
  if (cp_.size() == 1) return row;
  return ContextSplit{cur_t_ * cp_.size(), cp_.size()}.Position(cp_.rank(), row);
}

std::vector<int32_t> Gpt::Positions(int64_t first, int64_t n) const {
  std::vector<int32_t> pos(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) pos[i] = static_cast<int32_t>(Position(first + i));
  return pos;
}

Status Gpt::SetMicroBatch(int64_t b, int64_t t) {
  if (b > rt_.micro_batch || t > rt_.seq) return InvalidArgument("micro-batch larger than planned");
  cur_b_ = b;
  cur_t_ = t;
  rows_ = TokenRows::Of(tp_, b * t);
  if (tp_.sp && rows_.full % tp_.size() != 0) {
    return InvalidArgument("sequence parallelism needs batch*seq divisible by tp");
  }
  if (llama_) pos_ = Positions(0, rows_.full);
  return Status::Ok();
}

Result<double> Gpt::ForwardChunk(int slot_id, const int32_t* tokens, const int32_t* targets,
                                 const float* input, int64_t b, int64_t t) {
  LOOM_RETURN_IF_ERROR(SetMicroBatch(b, t));
  LOOM_ASSIGN_OR_RETURN(Slot * slot, GetSlot(slot_id));
  cur_ = slot;
  slot->b = b;
  slot->t = t;
  if (chunk_.embedding) {
    std::copy(tokens, tokens + rows_.full, slot->tokens.begin());
    LOOM_RETURN_IF_ERROR(Embed(*slot));
  } else {
    std::memcpy(slot->resid[0].data<float>(), input,
                static_cast<size_t>(rows_.local * config_.hidden) * 4);
  }
  for (int k = 0; k < chunk_.num_layers; ++k) {
    const int l = chunk_.first_layer + k;
    const int next = k + 1 < chunk_.num_layers ? Bucket(LayerParam(l + 1, 0)) : -1;
    LOOM_RETURN_IF_ERROR(store_->AcquireParams(Bucket(LayerParam(l, 0)), next));
    LayerActs& a = *slot->acts[rt_.recompute == Recompute::kFull ? 0 : k];
    LOOM_RETURN_IF_ERROR(
        LayerForward(l, slot->resid[k].data<float>(), slot->resid[k + 1].data<float>(), a));
    LOOM_RETURN_IF_ERROR(store_->ReleaseParams(Bucket(LayerParam(l, 0))));
    DropLayerW16(l);
  }
  if (!chunk_.head) return 0.0;
  return HeadForward(*slot, targets);
}

// Token and position embedding into the residual stream's first tensor.
Status Gpt::Embed(Slot& slot) {
  LOOM_RETURN_IF_ERROR(store_->AcquireParams(Bucket(wte_), -1));
  const int64_t c = config_.hidden;
  float* r = slot.resid[0].data<float>();
  if (tp_.size() == 1) {
    const std::vector<int32_t> pos =
        cp_.size() > 1 ? Positions(0, rows_.full) : std::vector<int32_t>();
    EmbeddingShape es{rows_.full, cur_t_, c, 0, vl_};
    EmbeddingForward(r, slot.tokens.data(), pos.empty() ? nullptr : pos.data(), P(wte_),
                     wpe_ >= 0 ? P(wpe_) : nullptr, es);
    return Status::Ok();
  }
  LOOM_RETURN_IF_ERROR(VocabParallelEmbeddingForward(tp_, rows_, slot.tokens.data(), P(wte_), vl_,
                                                     c, emb_full_.data<float>(), r));
  if (wpe_ < 0) return Status::Ok();  // rotary positions (Llama) live in the attention
  // Positions are replicated: each rank adds those of its rows.
  const int64_t first = rows_.first;
  const float* wpe = P(wpe_);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < rows_.local; ++i) {
    const float* p = wpe + Position(first + i) * c;
    for (int64_t j = 0; j < c; ++j) r[i * c + j] += p[j];
  }
  return Status::Ok();
}

// Final norm and the loss; returns the loss sum (0 when sampling: logits only, no targets).
Result<double> Gpt::HeadForward(Slot& slot, const int32_t* targets) {
  LOOM_RETURN_IF_ERROR(store_->AcquireParams(Bucket(lnf_), -1));
  const int64_t c = config_.hidden, n = rows_.full;
  float* ln_out = NormOut(slot.lnf);
  NormForward(ln_out, slot.lnf_mean, slot.lnf_rstd, slot.resid[chunk_.num_layers].data<float>(),
              lnf_, rows_.local);
  LOOM_RETURN_IF_ERROR(GatherTokens(tp_, rows_, ln_out, slot.lnf.data<float>(), c));
  if (targets == nullptr) return 0.0;
  std::copy(targets, targets + n, slot.targets.begin());
  float* loss = ce_dloss_.data<float>();  // reused as per-token loss here
  const CrossEntropyBuffers buf{ce_stats_.data<float>(), ce_chunk_.data<float>(),
                                slot.ce_lse.data<float>(), loss};
  if (bf16()) {
    CastToBf16(slot.lnf.data<float>(), lnf16_.data<Bf16>(), n * c);
    LOOM_ASSIGN_OR_RETURN(const Bf16* w16, Wte16());
    LOOM_RETURN_IF_ERROR(VocabParallelCrossEntropyForward(tp_, Shard(), lnf16_.data<Bf16>(), w16,
                                                          slot.targets.data(), buf));
  } else {
    LOOM_RETURN_IF_ERROR(VocabParallelCrossEntropyForward(tp_, Shard(), slot.lnf.data<float>(),
                                                          HeadW(), slot.targets.data(), buf));
  }
  double total = 0;
  for (int64_t i = 0; i < n; ++i) total += loss[i];
  return total;
}

Status Gpt::BackwardChunk(int slot_id, float dloss, const float* dout, bool last_micro_batch) {
  auto it = slots_.find(slot_id);
  if (it == slots_.end()) return Internal("backward of a slot that was never forwarded");
  Slot* slot = it->second.get();
  cur_ = slot;
  LOOM_RETURN_IF_ERROR(SetMicroBatch(slot->b, slot->t));
  float* dresid = dresid_.data<float>();
  if (chunk_.head) {
    LOOM_RETURN_IF_ERROR(HeadBackward(*slot, dloss, dresid, last_micro_batch));
  } else {
    std::memcpy(dresid, dout, static_cast<size_t>(rows_.local * config_.hidden) * 4);
  }
  LOOM_RETURN_IF_ERROR(LayersBackward(*slot, dresid, last_micro_batch));
  if (!chunk_.embedding) return Status::Ok();
  LOOM_RETURN_IF_ERROR(EmbedBackward(*slot, dresid));
  return store_->GradsReady(Bucket(wte_), last_micro_batch);
}

// Loss and final norm backward: dresid receives d(last residual).
Status Gpt::HeadBackward(Slot& slot, float dloss, float* dresid, bool last_micro_batch) {
  const int64_t c = config_.hidden, n = rows_.full, nl = rows_.local;
  float* dl = ce_dloss_.data<float>();
  std::fill(dl, dl + n, dloss);
  float* dlnf = dln_.data<float>();
  std::fill(dlnf, dlnf + n * c, 0.0f);
  float* dlnf_local = tp_.size() > 1 ? dln_local_.data<float>() : dlnf;
  if (bf16()) {
    CastToBf16(slot.lnf.data<float>(), lnf16_.data<Bf16>(), n * c);
    LOOM_ASSIGN_OR_RETURN(const Bf16* w16, Wte16());
    LOOM_RETURN_IF_ERROR(VocabParallelCrossEntropyBackward(
        tp_, rows_, Shard(), lnf16_.data<Bf16>(), w16, slot.targets.data(),
        slot.ce_lse.data<float>(), dl, ce_chunk_.data<float>(), ce_chunk16_.data<Bf16>(), dlnf,
        HeadDW(), dlnf_local));
  } else {
    LOOM_RETURN_IF_ERROR(VocabParallelCrossEntropyBackward(
        tp_, rows_, Shard(), slot.lnf.data<float>(), HeadW(), slot.targets.data(),
        slot.ce_lse.data<float>(), dl, ce_chunk_.data<float>(), dlnf, HeadDW(), dlnf_local));
  }
  std::fill(dresid, dresid + nl * c, 0.0f);
  NormBackward(dresid, dlnf_local, slot.resid[chunk_.num_layers].data<float>(), lnf_, slot.lnf_mean,
               slot.lnf_rstd, nl);
  return store_->GradsReady(Bucket(lnf_), last_micro_batch);
}

// The layers in reverse; each bucket is reported to the store as soon as its gradient is done.
Status Gpt::LayersBackward(Slot& slot, float* dresid, bool last_micro_batch) {
  for (int k = chunk_.num_layers - 1; k >= 0; --k) {
    const int l = chunk_.first_layer + k;
    const int bucket = Bucket(LayerParam(l, 0));
    LOOM_RETURN_IF_ERROR(store_->AcquireParams(bucket, k > 0 ? Bucket(LayerParam(l - 1, 0)) : -1));
    LayerActs* a = slot.acts[0].get();
    if (rt_.recompute == Recompute::kFull) {
      // Recompute this layer's activations from its stored input; emb_full_ is free until the
      // embedding backward and holds the (discarded) output.
      LOOM_RETURN_IF_ERROR(
          LayerForward(l, slot.resid[k].data<float>(), emb_full_.data<float>(), *a));
    } else {
      a = slot.acts[k].get();
    }
    LOOM_RETURN_IF_ERROR(LayerBackward(l, slot.resid[k].data<float>(), *a, dresid));
    LOOM_RETURN_IF_ERROR(store_->GradsReady(bucket, last_micro_batch));
    LOOM_RETURN_IF_ERROR(store_->ReleaseParams(bucket));
    DropLayerW16(l);
  }
  return Status::Ok();
}

// Embedding gradients from dresid = d(first residual).
Status Gpt::EmbedBackward(Slot& slot, const float* dresid) {
  const int64_t c = config_.hidden;
  if (tp_.size() == 1) {
    const std::vector<int32_t> pos =
        cp_.size() > 1 ? Positions(0, rows_.full) : std::vector<int32_t>();
    EmbeddingShape es{rows_.full, cur_t_, c, 0, vl_};
    EmbeddingBackward(G(wte_), wpe_ >= 0 ? G(wpe_) : nullptr, dresid, slot.tokens.data(),
                      pos.empty() ? nullptr : pos.data(), es);
    return Status::Ok();
  }
  // Positions: this rank's rows (all rows without SP); token rows: the whole micro-batch.
  if (wpe_ >= 0) {
    const std::vector<int32_t> pos = Positions(rows_.first, rows_.local);
    EmbeddingShape local{rows_.local, cur_t_, c, 0, 0};
    EmbeddingBackward<float>(nullptr, G(wpe_), dresid, slot.tokens.data() + rows_.first, pos.data(),
                             local);
  }
  return VocabParallelEmbeddingBackward(tp_, rows_, slot.tokens.data(), dresid,
                                        dfull_.data<float>(), vl_, c, G(wte_));
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
  LinearForward<float>(logits, h, HeadW(), nullptr, 1, c, config_.vocab);
  return Status::Ok();
}

}  // namespace loom
