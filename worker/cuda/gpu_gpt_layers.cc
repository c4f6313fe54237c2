// GpuGpt's forward and backward, step for step as worker/gpt.cc with tp = cp = 1 (same operation
// order, same buffers kept), on the model's stream.
#include <string>
#include <vector>

#include "core/cuda/attention_gemm.h"
#include "core/cuda/cross_entropy.h"
#include "core/cuda/kernels.h"
#include "core/cuda/train_kernels.h"
#include "model/layout.h"
#include "worker/cuda/gpu_gpt.h"
#include "worker/cuda/gpu_gpt_buffers.h"

namespace loom {

Result<double> GpuGpt::ForwardBackward(const int32_t* tokens, const int32_t* targets, int64_t b,
                                       int64_t t, float dloss) {
  if (b <= 0 || t <= 0 || b > rt_.micro_batch || t > rt_.seq) {
    return InvalidArgument("GpuGpt: micro-batch [" + std::to_string(b) + ", " + std::to_string(t) +
                           "] outside the planned [1.." + std::to_string(rt_.micro_batch) +
                           ", 1.." + std::to_string(rt_.seq) + "]");
  }
  const int64_t n = b * t;
  // The kernels would read out of bounds for an id outside the vocabulary: refuse it here.
  for (int64_t i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= config_.vocab || targets[i] < 0 ||
        targets[i] >= config_.vocab) {
      return InvalidArgument("GpuGpt: token or target id outside [0, " +
                             std::to_string(config_.vocab) + ") at position " + std::to_string(i));
    }
  }
  b_ = b;
  t_ = t;
  const size_t ids = static_cast<size_t>(n) * sizeof(int32_t);
  LOOM_RETURN_IF_ERROR(cuda::CopyToDevice(buf_->tokens.as<void>(), tokens, ids, stream()));
  LOOM_RETURN_IF_ERROR(cuda::CopyToDevice(buf_->targets.as<void>(), targets, ids, stream()));
  LOOM_RETURN_IF_ERROR(Forward());
  LOOM_RETURN_IF_ERROR(Backward(dloss));
  // The per-token losses are not touched by the backward: read them once everything is done, so
  // the device never waits for the host in between.
  std::vector<float> loss(static_cast<size_t>(n));
  LOOM_RETURN_IF_ERROR(
      cuda::CopyToHost(loss.data(), buf_->ce_loss.as<void>(), loss.size() * 4, stream()));
  double total = 0;
  for (float v : loss) total += v;
  return total;
}

Status GpuGpt::LinearForward(int w, const void* x, float* y, int64_t in, int64_t out) {
  const int64_t n = b_ * t_;
  if (bf16()) {
    return cuda::GemmBf16(gemm_, false, true, n, out, in, static_cast<const uint16_t*>(x), in,
                          W16(w), in, 0.0f, y, out, stream());
  }
  return cuda::GemmF32(gemm_, false, true, n, out, in, 1.0f, static_cast<const float*>(x), in, P(w),
                       in, 0.0f, y, out, stream());
}

Status GpuGpt::LinearBackward(int w, const float* dy, const void* x, float* dx, int64_t in,
                              int64_t out) {
  const int64_t n = b_ * t_;
  if (bf16()) {
    // As LinearBackwardBf16 on the CPU: dy cast once, both GEMMs in bf16, the bias from fp32 dy.
    uint16_t* dy16 = buf_->dy16.as<uint16_t>();
    LOOM_RETURN_IF_ERROR(cuda::CastToBf16(dy, dy16, n * out, stream()));
    if (dx != nullptr) {
      LOOM_RETURN_IF_ERROR(cuda::GemmBf16(gemm_, false, false, n, in, out, dy16, out, W16(w), in,
                                          0.0f, dx, in, stream()));
    }
    LOOM_RETURN_IF_ERROR(cuda::GemmBf16(gemm_, true, false, out, in, n, dy16, out,
                                        static_cast<const uint16_t*>(x), in, 1.0f, G(w), in,
                                        stream()));
  } else {
    if (dx != nullptr) {
      LOOM_RETURN_IF_ERROR(cuda::GemmF32(gemm_, false, false, n, in, out, 1.0f, dy, out, P(w), in,
                                         0.0f, dx, in, stream()));
    }
    LOOM_RETURN_IF_ERROR(cuda::GemmF32(gemm_, true, false, out, in, n, 1.0f, dy, out,
                                       static_cast<const float*>(x), in, 1.0f, G(w), in, stream()));
  }
  return cuda::BiasBackward(G(w + 1), dy, n, out, stream());
}

Status GpuGpt::LayerForward(int layer, LayerActs& a, const float* x, float* out) {
  const int64_t n = b_ * t_, c = config_.hidden, f = config_.ffn();
  auto p = [&](int k) { return P(LayerParam(layer, k)); };
  auto ln_forward = [&](DeviceBlock& ln, DeviceBlock& mean, DeviceBlock& rstd, const float* inp,
                        int k) {
    if (bf16()) {
      return cuda::LayerNormForwardBf16(ln.as<uint16_t>(), mean.as<float>(), rstd.as<float>(), inp,
                                        p(k), p(k + 1), n, c, 1e-5f, stream());
    }
    return cuda::LayerNormForward(ln.as<float>(), mean.as<float>(), rstd.as<float>(), inp, p(k),
                                  p(k + 1), n, c, 1e-5f, stream());
  };
  // Attention: res2 = x + c_proj(attn(c_attn(ln_1(x)))) + bias
  LOOM_RETURN_IF_ERROR(ln_forward(a.ln1, a.ln1_mean, a.ln1_rstd, x, kLn1W));
  LOOM_RETURN_IF_ERROR(
      LinearForward(LayerParam(layer, kQkvW), a.ln1.as<void>(), a.qkv.as<float>(), c, 3 * c));
  LOOM_RETURN_IF_ERROR(
      cuda::AddBiasResidual(a.qkv.as<float>(), p(kQkvB), nullptr, n, 3 * c, stream()));
  const AttentionShape as{
      b_, t_, config_.heads, config_.head_dim(), rt_.attn_block_q, rt_.attn_block_k};
  if (attention_by_gemm()) {
    LOOM_RETURN_IF_ERROR(
        cuda::AttentionForwardGemm(gemm_, a.att.as<float>(), a.lse.as<float>(), a.qkv.as<float>(),
                                   as, buf_->attn_ws.as<float>(), buf_->attn_ws_floats, stream()));
  } else {
    LOOM_RETURN_IF_ERROR(cuda::AttentionForward(a.att.as<float>(), a.lse.as<float>(),
                                                a.qkv.as<float>(), as, stream()));
  }
  const void* att_in = a.att.as<void>();
  if (bf16()) {
    LOOM_RETURN_IF_ERROR(
        cuda::CastToBf16(a.att.as<float>(), buf_->att16.as<uint16_t>(), n * c, stream()));
    att_in = buf_->att16.as<void>();
  }
  LOOM_RETURN_IF_ERROR(LinearForward(LayerParam(layer, kProjW), att_in, a.res2.as<float>(), c, c));
  LOOM_RETURN_IF_ERROR(cuda::AddBiasResidual(a.res2.as<float>(), p(kProjB), x, n, c, stream()));
  // MLP: out = res2 + c_proj(gelu(c_fc(ln_2(res2)))) + bias
  LOOM_RETURN_IF_ERROR(ln_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.res2.as<float>(), kLn2W));
  LOOM_RETURN_IF_ERROR(
      LinearForward(LayerParam(layer, kFcW), a.ln2.as<void>(), a.fc.as<float>(), c, f));
  LOOM_RETURN_IF_ERROR(cuda::AddBiasResidual(a.fc.as<float>(), p(kFcB), nullptr, n, f, stream()));
  if (bf16()) {
    LOOM_RETURN_IF_ERROR(
        cuda::GeluForwardBf16(a.gelu.as<uint16_t>(), a.fc.as<float>(), n * f, stream()));
  } else {
    LOOM_RETURN_IF_ERROR(cuda::GeluForward(a.gelu.as<float>(), a.fc.as<float>(), n * f, stream()));
  }
  LOOM_RETURN_IF_ERROR(LinearForward(LayerParam(layer, kFcProjW), a.gelu.as<void>(), out, f, c));
  return cuda::AddBiasResidual(out, p(kFcProjB), a.res2.as<float>(), n, c, stream());
}

// dresid holds d(out) on entry and d(x) on return.
Status GpuGpt::LayerBackward(int layer, LayerActs& a, const float* x, float* dresid) {
  const int64_t n = b_ * t_, c = config_.hidden, f = config_.ffn();
  auto p = [&](int k) { return P(LayerParam(layer, k)); };
  auto g = [&](int k) { return G(LayerParam(layer, k)); };
  float* dfc = buf_->dfc.as<float>();
  float* dln = buf_->dln.as<float>();
  // MLP
  LOOM_RETURN_IF_ERROR(
      LinearBackward(LayerParam(layer, kFcProjW), dresid, a.gelu.as<void>(), dfc, f, c));
  LOOM_RETURN_IF_ERROR(cuda::GeluBackward(dfc, a.fc.as<float>(), dfc, n * f, stream()));
  LOOM_RETURN_IF_ERROR(LinearBackward(LayerParam(layer, kFcW), dfc, a.ln2.as<void>(), dln, c, f));
  LOOM_RETURN_IF_ERROR(cuda::LayerNormBackward(dresid, g(kLn2W), g(kLn2B), dln, a.res2.as<float>(),
                                               p(kLn2W), a.ln2_mean.as<float>(),
                                               a.ln2_rstd.as<float>(), n, c, stream()));
  // Attention
  const void* att_in = a.att.as<void>();
  if (bf16()) {  // cast again, as the CPU model does (one [N, C] bf16 buffer for all layers)
    LOOM_RETURN_IF_ERROR(
        cuda::CastToBf16(a.att.as<float>(), buf_->att16.as<uint16_t>(), n * c, stream()));
    att_in = buf_->att16.as<void>();
  }
  float* datt = buf_->datt.as<float>();
  LOOM_RETURN_IF_ERROR(LinearBackward(LayerParam(layer, kProjW), dresid, att_in, datt, c, c));
  const AttentionShape as{
      b_, t_, config_.heads, config_.head_dim(), rt_.attn_block_q, rt_.attn_block_k};
  float* dqkv = buf_->dqkv.as<float>();
  if (attention_by_gemm()) {
    LOOM_RETURN_IF_ERROR(cuda::AttentionBackwardGemm(
        gemm_, dqkv, datt, a.qkv.as<float>(), a.att.as<float>(), a.lse.as<float>(), as,
        buf_->attn_ws.as<float>(), buf_->attn_ws_floats, stream()));
  } else {
    LOOM_RETURN_IF_ERROR(cuda::AttentionBackward(dqkv, datt, a.qkv.as<float>(), a.att.as<float>(),
                                                 a.lse.as<float>(), as, stream()));
  }
  LOOM_RETURN_IF_ERROR(
      LinearBackward(LayerParam(layer, kQkvW), dqkv, a.ln1.as<void>(), dln, c, 3 * c));
  return cuda::LayerNormBackward(dresid, g(kLn1W), g(kLn1B), dln, x, p(kLn1W),
                                 a.ln1_mean.as<float>(), a.ln1_rstd.as<float>(), n, c, stream());
}

Status GpuGpt::Forward() {
  const int64_t n = b_ * t_, c = config_.hidden;
  Buffers& b = *buf_;
  const EmbeddingShape es{n, t_, c, 0, config_.vocab};
  LOOM_RETURN_IF_ERROR(cuda::EmbeddingForward(b.resid[0].as<float>(), b.tokens.as<int32_t>(),
                                              nullptr, P(wte_), P(wpe_), es, stream()));
  for (int l = 0; l < config_.layers; ++l) {
    const size_t i = static_cast<size_t>(l);
    LOOM_RETURN_IF_ERROR(
        LayerForward(l, b.acts[i], b.resid[i].as<float>(), b.resid[i + 1].as<float>()));
  }
  // Head: final norm, then the loss against the tied embedding, chunk by chunk.
  const float* last = b.resid[static_cast<size_t>(config_.layers)].as<float>();
  const VocabShard shard{n, c, 0, config_.vocab, config_.vocab, rt_.vocab_chunk};
  if (bf16()) {
    // The norm's output is only a GEMM input: written in bf16 directly (the CPU model computes it
    // in fp32 and rounds it the same way).
    LOOM_RETURN_IF_ERROR(cuda::LayerNormForwardBf16(b.lnf.as<uint16_t>(), b.lnf_mean.as<float>(),
                                                    b.lnf_rstd.as<float>(), last, P(lnf_),
                                                    P(lnf_ + 1), n, c, 1e-5f, stream()));
    LOOM_RETURN_IF_ERROR(cuda::CrossEntropyStatsBf16(
        gemm_, b.ce_max.as<float>(), b.ce_sumexp.as<float>(), b.ce_target.as<float>(),
        b.lnf.as<uint16_t>(), W16(wte_), b.targets.as<int32_t>(), shard, b.ce_chunk.as<float>(),
        stream()));
  } else {
    LOOM_RETURN_IF_ERROR(cuda::LayerNormForward(b.lnf.as<float>(), b.lnf_mean.as<float>(),
                                                b.lnf_rstd.as<float>(), last, P(lnf_), P(lnf_ + 1),
                                                n, c, 1e-5f, stream()));
    LOOM_RETURN_IF_ERROR(
        cuda::CrossEntropyStats(gemm_, b.ce_max.as<float>(), b.ce_sumexp.as<float>(),
                                b.ce_target.as<float>(), b.lnf.as<float>(), P(wte_),
                                b.targets.as<int32_t>(), shard, b.ce_chunk.as<float>(), stream()));
  }
  return cuda::CrossEntropyFinish(b.ce_lse.as<float>(), b.ce_loss.as<float>(), b.ce_max.as<float>(),
                                  b.ce_sumexp.as<float>(), b.ce_target.as<float>(), n, stream());
}

Status GpuGpt::Backward(float dloss) {
  const int64_t n = b_ * t_, c = config_.hidden;
  Buffers& b = *buf_;
  float* dln = b.dln.as<float>();
  float* dresid = b.dresid.as<float>();
  const size_t rows_bytes = static_cast<size_t>(n * c) * sizeof(float);
  // Loss and final norm: d(final norm output) accumulates from zero; d(last residual) too.
  LOOM_RETURN_IF_ERROR(cuda::Fill(b.ce_dloss.as<float>(), dloss, n, stream()));
  LOOM_RETURN_IF_ERROR(cuda::FillZero(dln, rows_bytes, stream()));
  const VocabShard shard{n, c, 0, config_.vocab, config_.vocab, rt_.vocab_chunk};
  if (bf16()) {
    LOOM_RETURN_IF_ERROR(cuda::CrossEntropyBackwardBf16(
        gemm_, dln, G(wte_), b.lnf.as<uint16_t>(), W16(wte_), b.targets.as<int32_t>(),
        b.ce_lse.as<float>(), b.ce_dloss.as<float>(), shard, b.ce_chunk.as<float>(),
        b.ce_chunk16.as<uint16_t>(), stream()));
  } else {
    LOOM_RETURN_IF_ERROR(cuda::CrossEntropyBackward(
        gemm_, dln, G(wte_), b.lnf.as<float>(), P(wte_), b.targets.as<int32_t>(),
        b.ce_lse.as<float>(), b.ce_dloss.as<float>(), shard, b.ce_chunk.as<float>(), stream()));
  }
  LOOM_RETURN_IF_ERROR(cuda::FillZero(dresid, rows_bytes, stream()));
  const float* last = b.resid[static_cast<size_t>(config_.layers)].as<float>();
  LOOM_RETURN_IF_ERROR(cuda::LayerNormBackward(dresid, G(lnf_), G(lnf_ + 1), dln, last, P(lnf_),
                                               b.lnf_mean.as<float>(), b.lnf_rstd.as<float>(), n, c,
                                               stream()));
  for (int l = static_cast<int>(config_.layers) - 1; l >= 0; --l) {
    const size_t i = static_cast<size_t>(l);
    LOOM_RETURN_IF_ERROR(LayerBackward(l, b.acts[i], b.resid[i].as<float>(), dresid));
  }
  const EmbeddingShape es{n, t_, c, 0, config_.vocab};
  return cuda::EmbeddingBackward(G(wte_), G(wpe_), dresid, b.tokens.as<int32_t>(), nullptr, es,
                                 stream());
}

}  // namespace loom
