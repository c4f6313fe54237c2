// A Llama block on the GPT model's building blocks:
//   res2 = x + o_proj(attention(rope(q), rope(k), v)) with q|k|v = [Wq; Wk; Wv] rmsnorm_1(x)
//   out  = res2 + down(silu(gate) * up)               with gate|up = [Wg; Wu] rmsnorm_2(res2)
// The column-parallel q|k|v and gate|up projections, the row-parallel o_proj and down, the
// gathers under SP and ring attention under CP are GPT-2's (worker/gpt.cc); what differs is
// here: RMSNorm, SwiGLU, rotary positions of each token's global index, and grouped-query
// attention, which copies each KV head to the query heads that read it so the local attention
// kernels see GPT-2's q|k|v layout, and sums the copies' gradients in the backward. Under CP the
// ring reads the KV heads themselves (parallel/context/ring_attention.h), so only they travel.
#include <algorithm>
#include <cstring>

#include "core/kernels/rope.h"
#include "core/kernels/swiglu.h"
#include "worker/gpt.h"
#include "worker/gpt_activations.h"

namespace loom {

// The local KV heads the local query heads read: all kvl_ when tp splits them, else the one
// shared by this rank's query heads (tp a multiple of kv_heads: they fall in one group).
int64_t Gpt::RingKvHeads() const {
  return config_.kv() % tp_.size() == 0 ? kvl_ : 1;
}
int64_t Gpt::RingKvFirst() const {
  const int64_t group = config_.heads / config_.kv();
  return tp_.rank() * hl_ / group - kv_first_;
}

void Gpt::ExpandQkv(LayerActs& a) {
  const int64_t n = rows_.full, hd = config_.head_dim();
  const int64_t group = config_.heads / config_.kv();  // query heads per KV head
  const int64_t q0 = tp_.rank() * hl_;                 // global index of the first local q head
  float* c = qkvc_.data<float>();
  RopeApply(c, qw_, n, hl_ + kvl_, pos_.data(), rope_, false);  // q and k heads are adjacent
  float* e = a.qkv.data<float>();
  if (cp_.size() > 1) {  // ring attention reads the KV heads themselves: only they travel
    const int64_t kv0 = RingKvFirst(), kvw = RingKvHeads() * hd, w = cl_ + 2 * kvw;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const float* src = c + i * qw_;
      float* dst = e + i * w;
      std::memcpy(dst, src, static_cast<size_t>(cl_) * 4);
      std::memcpy(dst + cl_, src + cl_ + kv0 * hd, static_cast<size_t>(kvw) * 4);
      std::memcpy(dst + cl_ + kvw, src + cl_ + (kvl_ + kv0) * hd, static_cast<size_t>(kvw) * 4);
    }
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float* src = c + i * qw_;
    float* dst = e + i * 3 * cl_;
    std::memcpy(dst, src, static_cast<size_t>(cl_) * 4);
    for (int64_t j = 0; j < hl_; ++j) {
      const int64_t g = (q0 + j) / group - kv_first_;
      std::memcpy(dst + cl_ + j * hd, src + cl_ + g * hd, static_cast<size_t>(hd) * 4);
      std::memcpy(dst + 2 * cl_ + j * hd, src + cl_ + (kvl_ + g) * hd, static_cast<size_t>(hd) * 4);
    }
  }
}

void Gpt::CollapseQkv() {
  const int64_t n = rows_.full, hd = config_.head_dim();
  const int64_t group = config_.heads / config_.kv();
  const int64_t q0 = tp_.rank() * hl_;
  float* c = qkvc_.data<float>();
  const float* e = dqkv_.data<float>();
  if (cp_.size() > 1) {  // the ring summed each group's dK/dV already (compact, as ExpandQkv)
    const int64_t kv0 = RingKvFirst(), kvw = RingKvHeads() * hd, w = cl_ + 2 * kvw;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      float* dst = c + i * qw_;
      const float* src = e + i * w;
      std::memcpy(dst, src, static_cast<size_t>(cl_) * 4);
      std::fill(dst + cl_, dst + qw_, 0.0f);  // KV heads no local query head reads
      std::memcpy(dst + cl_ + kv0 * hd, src + cl_, static_cast<size_t>(kvw) * 4);
      std::memcpy(dst + cl_ + (kvl_ + kv0) * hd, src + cl_ + kvw, static_cast<size_t>(kvw) * 4);
    }
    RopeApply(c, qw_, n, hl_ + kvl_, pos_.data(), rope_, true);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    float* dst = c + i * qw_;
    const float* src = e + i * 3 * cl_;
    std::memcpy(dst, src, static_cast<size_t>(cl_) * 4);
    std::fill(dst + cl_, dst + qw_, 0.0f);
    for (int64_t j = 0; j < hl_; ++j) {
      const int64_t g = (q0 + j) / group - kv_first_;
      float* dk = dst + cl_ + g * hd;
      float* dv = dst + cl_ + (kvl_ + g) * hd;
      const float* sk = src + cl_ + j * hd;
      const float* sv = src + 2 * cl_ + j * hd;
      for (int64_t d = 0; d < hd; ++d) {
        dk[d] += sk[d];
        dv[d] += sv[d];
      }
    }
  }
  RopeApply(c, qw_, n, hl_ + kvl_, pos_.data(), rope_, true);
}

Status Gpt::LlamaLayerForward(int layer, const float* x, float* out, LayerActs& a) {
  const int64_t c = config_.hidden, nl = rows_.local;
  LOOM_RETURN_IF_ERROR(NormColumnForward(layer, kLlamaLn1W, x, a.ln1, a.ln1_mean, a.ln1_rstd,
                                         kLlamaQW, qkvc_.data<float>(), qw_));
  ExpandQkv(a);
  LOOM_RETURN_IF_ERROR(Attend(a));
  LOOM_RETURN_IF_ERROR(RowForward(layer, kLlamaProjW, a.att, a.res2.data<float>(), cl_));
  AddBiasResidual(a.res2.data<float>(), nullptr, x, nl, c);
  LOOM_RETURN_IF_ERROR(NormColumnForward(layer, kLlamaLn2W, a.res2.data<float>(), a.ln2, a.ln2_mean,
                                         a.ln2_rstd, kLlamaFcW, a.fc.data<float>(), 2 * fl_));
  if (bf16()) {
    SwiGluForward(a.gelu.data<Bf16>(), a.fc.data<float>(), rows_.full, fl_);
  } else {
    SwiGluForward(a.gelu.data<float>(), a.fc.data<float>(), rows_.full, fl_);
  }
  LOOM_RETURN_IF_ERROR(RowForward(layer, kLlamaFcProjW, a.gelu, out, fl_));
  AddBiasResidual(out, nullptr, a.res2.data<float>(), nl, c);
  return Status::Ok();
}

// dresid holds d(out) on entry and d(x) on return (local rows).
Status Gpt::LlamaLayerBackward(int layer, const float* x, LayerActs& a, float* dresid) {
  const int64_t nl = rows_.local, n = rows_.full;
  float* dfc = dfc_.data<float>();  // [n, 2Fl] d(gate|up), then [n, Fl] d(silu(gate)*up)
  float* dact = dfc + n * 2 * fl_;
  float* dln_local = tp_.size() > 1 ? dln_local_.data<float>() : dln_.data<float>();
  LOOM_RETURN_IF_ERROR(RowBackward(layer, kLlamaFcProjW, dresid, a.gelu, dact, fl_));
  SwiGluBackward(dfc, a.fc.data<float>(), dact, n, fl_);
  LOOM_RETURN_IF_ERROR(ColumnBackward(layer, kLlamaFcW, dfc, a.ln2, 2 * fl_, dln_local));
  NormBackward(dresid, dln_local, a.res2.data<float>(), LayerParam(layer, kLlamaLn2W), a.ln2_mean,
               a.ln2_rstd, nl);
  float* datt = datt_.data<float>();
  LOOM_RETURN_IF_ERROR(RowBackward(layer, kLlamaProjW, dresid, a.att, datt, cl_));
  LOOM_RETURN_IF_ERROR(AttendBackward(a, datt));
  CollapseQkv();
  LOOM_RETURN_IF_ERROR(ColumnBackward(layer, kLlamaQW, qkvc_.data<float>(), a.ln1, qw_, dln_local));
  NormBackward(dresid, dln_local, x, LayerParam(layer, kLlamaLn1W), a.ln1_mean, a.ln1_rstd, nl);
  return Status::Ok();
}

}  // namespace loom
