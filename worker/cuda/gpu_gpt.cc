// GpuGpt: creation and memory, parameters in and out, the optimizer step. The forward and
// backward are in gpu_gpt_layers.cc.
#include "worker/cuda/gpu_gpt.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "core/cuda/attention_gemm.h"
#include "core/cuda/device.h"
#include "core/cuda/kernels.h"
#include "core/cuda/train_kernels.h"
#include "core/kernels/optimizer.h"  // ClipScale, AdamWParams
#include "worker/cuda/gpu_gpt_buffers.h"

namespace loom {
namespace {

// Offsets of a layer's parameters from h.{l}.ln_1.weight (model/layout.h's order).
constexpr int kQkvW = 2, kProjW = 4, kFcW = 8, kFcProjW = 10;
constexpr int kLayerMatrices[] = {kQkvW, kProjW, kFcW, kFcProjW};

}  // namespace

GpuGpt::GpuGpt(const ModelConfig& config, const ModelRuntime& rt, const AdamWConfig& adamw,
               cuda::OwnedStream stream, cuda::GemmHandle gemm)
    : config_(config),
      rt_(rt),
      adamw_(adamw),
      layout_(ModelLayout(config, 1)),
      stream_(std::move(stream)),
      gemm_(std::move(gemm)) {}

GpuGpt::~GpuGpt() {
  // Queued kernels may still use the blocks about to be returned: wait for them (an error was
  // or will be reported by the caller's own synchronisation; nothing to add in a destructor).
  (void)cuda::Synchronize(stream());
  buf_.reset();
}

Result<std::unique_ptr<GpuGpt>> GpuGpt::Create(const ModelConfig& config, const ModelRuntime& rt,
                                               const AdamWConfig& adamw) {
  LOOM_RETURN_IF_ERROR(config.Validate());
  ModelRuntime r = rt;
  if (r.seq == 0) r.seq = config.max_seq;
  if (r.seq <= 0 || r.seq > config.max_seq || r.micro_batch <= 0 || r.vocab_chunk <= 0) {
    return InvalidArgument("GpuGpt: need 0 < seq <= max_seq, micro_batch > 0, vocab_chunk > 0");
  }
  if (r.recompute != Recompute::kNone) {
    return Unimplemented(std::string("GpuGpt: recompute '") + RecomputeName(r.recompute) +
                         "' (only none: every activation is kept)");
  }
  if (config.head_dim() > cuda::kMaxAttentionHeadDim) {
    return InvalidArgument("GpuGpt: head_dim " + std::to_string(config.head_dim()) +
                           " above the attention kernel's " +
                           std::to_string(cuda::kMaxAttentionHeadDim));
  }
  if (cuda::DeviceCount() == 0) {
    return FailedPrecondition("GpuGpt: no CUDA device (or driver) on this machine");
  }
  LOOM_ASSIGN_OR_RETURN(cuda::OwnedStream stream, cuda::OwnedStream::Create());
  LOOM_ASSIGN_OR_RETURN(cuda::GemmHandle gemm, cuda::GemmHandle::Create());
  std::unique_ptr<GpuGpt> g(new GpuGpt(config, r, adamw, std::move(stream), std::move(gemm)));
  g->set_allow_tf32(r.precision == Precision::kBf16);  // see set_allow_tf32
  LOOM_ASSIGN_OR_RETURN(g->raw_, cuda::DeviceMemory::ForCurrentDevice());
  g->alloc_ = std::make_unique<CachingAllocator>(g->raw_.get());
  LOOM_RETURN_IF_ERROR(g->Allocate());
  return g;
}

Result<DeviceBlock> GpuGpt::Alloc(size_t bytes, MemTag tag) {
  return DeviceBlock::Allocate(alloc_.get(), bytes, tag,
                               reinterpret_cast<CachingAllocator::Stream>(stream()));
}

Status GpuGpt::Allocate() {
  const ParamLayout& L = layout_;
  wte_ = L.IndexOf("wte");
  wpe_ = L.IndexOf("wpe");
  lnf_ = L.IndexOf("ln_f.weight");
  for (int l = 0; l < config_.layers; ++l) {
    layer_base_.push_back(L.IndexOf("h." + std::to_string(l) + ".ln_1.weight"));
    if (layer_base_.back() < 0) return Internal("GpuGpt: layout lacks layer " + std::to_string(l));
  }
  if (wte_ < 0 || wpe_ < 0 || lnf_ < 0) return Internal("GpuGpt: layout lacks wte, wpe or ln_f");
  if (L.padded_vocab != config_.vocab) return Internal("GpuGpt: a tp = 1 layout pads no vocab");

  // AdamW runs: consecutive parameters with the same decay share one launch.
  for (const ParamInfo& p : L.params) {
    if (!opt_runs_.empty() && opt_runs_.back().decay == p.decay &&
        opt_runs_.back().offset + opt_runs_.back().numel == p.offset) {
      opt_runs_.back().numel += p.numel();
    } else {
      opt_runs_.push_back({p.offset, p.numel(), p.decay});
    }
  }

  const size_t total_bytes = static_cast<size_t>(L.total) * sizeof(float);
  LOOM_ASSIGN_OR_RETURN(params_, Alloc(total_bytes, MemTag::kParams));
  LOOM_ASSIGN_OR_RETURN(grads_, Alloc(total_bytes, MemTag::kGrads));
  LOOM_ASSIGN_OR_RETURN(m_, Alloc(total_bytes, MemTag::kOptimizer));
  LOOM_ASSIGN_OR_RETURN(v_, Alloc(total_bytes, MemTag::kOptimizer));
  LOOM_ASSIGN_OR_RETURN(norm_total_, Alloc(sizeof(double), MemTag::kOther));
  for (DeviceBlock* b : {&params_, &grads_, &m_, &v_}) {
    LOOM_RETURN_IF_ERROR(cuda::FillZero(b->as<void>(), b->bytes(), stream()));
  }
  w16_offset_.assign(L.params.size(), -1);
  if (bf16()) {
    // The head's GEMMs multiply by wte in bf16 too (as the CPU model's Wte16).
    w16_offset_[static_cast<size_t>(wte_)] = 0;
    w16_elements_ = L.params[static_cast<size_t>(wte_)].numel();
    for (int l = 0; l < config_.layers; ++l) {
      for (int k : kLayerMatrices) {
        const int index = LayerParam(l, k);
        w16_offset_[static_cast<size_t>(index)] = w16_elements_;
        w16_elements_ += L.params[static_cast<size_t>(index)].numel();
      }
    }
    LOOM_ASSIGN_OR_RETURN(w16_, Alloc(static_cast<size_t>(w16_elements_) * 2, MemTag::kParams));
  }

  const int64_t n = rt_.micro_batch * rt_.seq, c = config_.hidden, f = config_.ffn();
  const int64_t lse_n = rt_.micro_batch * config_.heads * rt_.seq;
  const size_t gemm_in = bf16() ? 2 : 4;  // bytes per element of the GEMM inputs kept
  auto f32 = [&](int64_t elems) {
    return Alloc(static_cast<size_t>(elems) * 4, MemTag::kActivations);
  };
  auto in = [&](int64_t elems) {
    return Alloc(static_cast<size_t>(elems) * gemm_in, MemTag::kActivations);
  };
  buf_ = std::make_unique<Buffers>();
  Buffers& b = *buf_;
  for (int l = 0; l <= config_.layers; ++l) {
    LOOM_ASSIGN_OR_RETURN(DeviceBlock r, f32(n * c));
    b.resid.push_back(std::move(r));
  }
  b.acts.resize(static_cast<size_t>(config_.layers));
  for (LayerActs& a : b.acts) {
    LOOM_ASSIGN_OR_RETURN(a.ln1, in(n * c));
    LOOM_ASSIGN_OR_RETURN(a.ln1_mean, f32(n));
    LOOM_ASSIGN_OR_RETURN(a.ln1_rstd, f32(n));
    LOOM_ASSIGN_OR_RETURN(a.qkv, f32(n * 3 * c));
    LOOM_ASSIGN_OR_RETURN(a.att, f32(n * c));
    LOOM_ASSIGN_OR_RETURN(a.lse, f32(lse_n));
    LOOM_ASSIGN_OR_RETURN(a.res2, f32(n * c));
    LOOM_ASSIGN_OR_RETURN(a.ln2, in(n * c));
    LOOM_ASSIGN_OR_RETURN(a.ln2_mean, f32(n));
    LOOM_ASSIGN_OR_RETURN(a.ln2_rstd, f32(n));
    LOOM_ASSIGN_OR_RETURN(a.fc, f32(n * f));
    LOOM_ASSIGN_OR_RETURN(a.gelu, in(n * f));
  }
  LOOM_ASSIGN_OR_RETURN(b.tokens, Alloc(static_cast<size_t>(n) * 4, MemTag::kActivations));
  LOOM_ASSIGN_OR_RETURN(b.targets, Alloc(static_cast<size_t>(n) * 4, MemTag::kActivations));
  LOOM_ASSIGN_OR_RETURN(b.lnf, in(n * c));
  LOOM_ASSIGN_OR_RETURN(b.lnf_mean, f32(n));
  LOOM_ASSIGN_OR_RETURN(b.lnf_rstd, f32(n));
  for (DeviceBlock* d :
       {&b.ce_max, &b.ce_sumexp, &b.ce_target, &b.ce_lse, &b.ce_loss, &b.ce_dloss}) {
    LOOM_ASSIGN_OR_RETURN(*d, f32(n));
  }
  const int64_t chunk_elems = n * std::min(rt_.vocab_chunk, config_.vocab);
  LOOM_ASSIGN_OR_RETURN(b.ce_chunk, f32(chunk_elems));
  LOOM_ASSIGN_OR_RETURN(b.dresid, f32(n * c));
  LOOM_ASSIGN_OR_RETURN(b.dln, f32(n * c));
  LOOM_ASSIGN_OR_RETURN(b.datt, f32(n * c));
  LOOM_ASSIGN_OR_RETURN(b.dqkv, f32(n * 3 * c));
  LOOM_ASSIGN_OR_RETURN(b.dfc, f32(n * f));
  // The attention's scores: every head of a sequence at once if they fit, else fewer per pass.
  const AttentionShape as{rt_.micro_batch, rt_.seq, config_.heads, config_.head_dim()};
  const int64_t ws_floats =
      std::min<int64_t>(2 * config_.heads * rt_.seq * rt_.seq, kAttentionWorkspaceBytes / 4);
  if (cuda::AttentionGemmHeadsPerPass(as, ws_floats, true) > 0) {
    LOOM_ASSIGN_OR_RETURN(b.attn_ws, f32(ws_floats));
    b.attn_ws_floats = ws_floats;
  }
  if (bf16()) {
    LOOM_ASSIGN_OR_RETURN(b.att16, Alloc(static_cast<size_t>(n * c) * 2, MemTag::kActivations));
    LOOM_ASSIGN_OR_RETURN(
        b.dy16, Alloc(static_cast<size_t>(n * std::max(3 * c, f)) * 2, MemTag::kActivations));
    LOOM_ASSIGN_OR_RETURN(b.ce_chunk16,
                          Alloc(static_cast<size_t>(chunk_elems) * 2, MemTag::kActivations));
  }
  return Synchronize();  // the fills above: report a fault here rather than in the first step
}

bool GpuGpt::attention_by_gemm() const {
  return gemm_attention_ && buf_ != nullptr && buf_->attn_ws_floats > 0;
}

float* GpuGpt::P(int index) const {
  return params_.as<float>() + layout_.params[static_cast<size_t>(index)].offset;
}
float* GpuGpt::G(int index) const {
  return grads_.as<float>() + layout_.params[static_cast<size_t>(index)].offset;
}
const uint16_t* GpuGpt::W16(int index) const {
  return w16_.as<uint16_t>() + w16_offset_[static_cast<size_t>(index)];
}

Status GpuGpt::RefreshW16() {
  if (!bf16()) return Status::Ok();
  for (size_t i = 0; i < w16_offset_.size(); ++i) {
    if (w16_offset_[i] < 0) continue;
    const int index = static_cast<int>(i);
    LOOM_RETURN_IF_ERROR(cuda::CastToBf16(P(index), w16_.as<uint16_t>() + w16_offset_[i],
                                          layout_.params[i].numel(), stream()));
  }
  return Status::Ok();
}

Status GpuGpt::LoadParams(const float* host) {
  LOOM_RETURN_IF_ERROR(cuda::CopyToDevice(params_.as<void>(), host, params_.bytes(), stream()));
  LOOM_RETURN_IF_ERROR(RefreshW16());
  return Synchronize();
}

Status GpuGpt::InitParams(uint64_t seed) {
  std::vector<float> host(static_cast<size_t>(layout_.total));
  loom::InitParams(layout_, seed, host.data());
  return LoadParams(host.data());
}

Status GpuGpt::CopyParams(float* host) {
  return cuda::CopyToHost(host, params_.as<void>(), params_.bytes(), stream());
}

Status GpuGpt::CopyGrads(float* host) {
  return cuda::CopyToHost(host, grads_.as<void>(), grads_.bytes(), stream());
}

Status GpuGpt::ZeroGrads() {
  return cuda::FillZero(grads_.as<void>(), grads_.bytes(), stream());
}

Status GpuGpt::Synchronize() {
  return cuda::Synchronize(stream());
}

Result<double> GpuGpt::Step(double lr) {
  // Global norm over every gradient (one rank: nothing to all-reduce, nothing counted twice).
  double* total = norm_total_.as<double>();
  LOOM_RETURN_IF_ERROR(cuda::FillZero(total, sizeof(double), stream()));
  LOOM_RETURN_IF_ERROR(
      cuda::SumSquaresAccumulate(total, grads_.as<float>(), layout_.total, stream()));
  double sumsq = 0;
  LOOM_RETURN_IF_ERROR(cuda::CopyToHost(&sumsq, total, sizeof(double), stream()));
  // As ShardedOptimizer::Step: the sum is a float (what it all-reduces) before the square root.
  const float partial = static_cast<float>(sumsq);
  const double norm = std::sqrt(static_cast<double>(partial));
  const double clip = ClipScale(norm, adamw_.grad_clip);
  if (clip < 1.0) {
    LOOM_RETURN_IF_ERROR(
        cuda::Scale(grads_.as<float>(), static_cast<float>(clip), layout_.total, stream()));
  }
  ++steps_;
  for (const OptRun& r : opt_runs_) {
    const AdamWParams ap{static_cast<float>(lr),
                         static_cast<float>(adamw_.beta1),
                         static_cast<float>(adamw_.beta2),
                         static_cast<float>(adamw_.eps),
                         r.decay ? static_cast<float>(adamw_.weight_decay) : 0.0f,
                         steps_};
    LOOM_RETURN_IF_ERROR(cuda::AdamWUpdate(params_.as<float>() + r.offset,
                                           grads_.as<float>() + r.offset, m_.as<float>() + r.offset,
                                           v_.as<float>() + r.offset, r.numel, ap, stream()));
  }
  LOOM_RETURN_IF_ERROR(RefreshW16());
  LOOM_RETURN_IF_ERROR(ZeroGrads());
  return norm;
}

}  // namespace loom
